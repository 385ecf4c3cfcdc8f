"""Independent readers: an archive written by znippy_sql, read back with no znippy_sql code.

pyarrow alone reads the footer's manifest and every sub-index and the lookup from their byte
ranges (and checks 64-byte alignment); ``ducer`` alone reads the trie; ``openzl`` alone
decodes every compressed blob; BLAKE3 of every decoded chunk matches its checksum.
"""

from __future__ import annotations

import struct
from pathlib import Path

import blake3
import ducer
import openzl.ext as zl
import pyarrow as pa
import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import Entry, ReservedSection, write_archive

BASE = [("relative_path", pa.utf8()), ("chunk_seq", pa.uint32()),
        ("fdata_offset", pa.uint64()), ("compressed", pa.bool_()),
        ("uncompressed_size", pa.uint64()), ("blob_offset", pa.uint64()),
        ("blob_size", pa.uint64()), ("checksum", pa.binary(32))]
MANIFEST = [("pkg_type", pa.int8()), ("repo", pa.utf8()), ("module_name", pa.utf8()),
            ("index_offset", pa.uint64()), ("index_len", pa.uint64()),
            ("row_count", pa.uint64())]


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, dict[str, bytes]]:
    files = {
        "src/main.py": text_bytes(20_000, 1),
        "src/ünïcode.txt": text_bytes(700, 2),
        "empty": b"",
        "blob.bin": random_bytes(9000, 3),
        "lib/x.jar": text_bytes(5000, 4),
    }
    entries = [Entry(p, data=d) for p, d in files.items()]
    entries += [Entry("r2/a.txt", data=text_bytes(3000, 5), repo="r2", pkg_type=6)]
    files["r2/a.txt"] = entries[-1].data  # type: ignore[assignment]
    out = tmp_path_factory.mktemp("ind") / "a.znippy"
    meta = pa.table({"relative_path": pa.array([None], pa.utf8()), "key": ["k"], "value": ["v"]})
    write_archive(out, entries, block_size=4096, workers=1, fsync=False,
                  reserved_sections=[ReservedSection("__meta__", meta)])
    return out.read_bytes(), files


def _stream(data: bytes, offset: int, length: int) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data[offset : offset + length])).read_all()


def _manifest(data: bytes) -> pa.Table:
    magic, manifest_offset = data[-16:-8], struct.unpack("<Q", data[-8:])[0]
    assert magic == b"ZNPYMIDX"
    assert manifest_offset % 64 == 0
    manifest = _stream(data, manifest_offset, len(data) - 16 - manifest_offset)
    assert [(f.name, f.type, f.nullable) for f in manifest.schema] == [
        (n, t, False) for n, t in MANIFEST]
    return manifest


def test_pyarrow_alone_reads_manifest_subindexes_lookup(archive) -> None:
    data, files = archive
    rows = _manifest(data).to_pylist()
    names = [r["module_name"] for r in rows if r["pkg_type"] == -1]
    assert names == ["__lookup__", "__trie__", "__meta__"]  # FORMAT §4 order
    prev_end = 0
    union = []
    for r in rows:
        assert r["index_offset"] % 64 == 0 and r["index_offset"] >= prev_end
        assert data[prev_end : r["index_offset"]].strip(b"\0") == b"" or prev_end == 0
        prev_end = r["index_offset"] + r["index_len"]
        if r["module_name"] == "__trie__":
            continue
        t = _stream(data, r["index_offset"], r["index_len"])
        assert t.num_rows == r["row_count"]
        if r["pkg_type"] >= 0:
            assert [(f.name, f.type) for f in t.schema][:8] == BASE
            assert all(not f.nullable for f in list(t.schema)[:8])
            assert (t.schema.metadata or {}).get(b"znippy.openzl.format_version")
            union += t.select([n for n, _ in BASE]).to_pylist()
        elif r["module_name"] == "__lookup__":
            lookup = t
        elif r["module_name"] == "__meta__":
            assert t.column_names == ["relative_path", "key", "value"] and t.num_rows >= 1
    want = sorted(union, key=lambda x: (x["relative_path"].encode(), x["chunk_seq"]))
    assert lookup.to_pylist() == want
    assert {x["relative_path"] for x in want} == set(files)
    # data sub-indexes, then reserved sections, then the manifest (FORMAT §1)
    kinds = [r["pkg_type"] >= 0 for r in rows]
    assert kinds == sorted(kinds, reverse=True)
    blob_end = max(x["blob_offset"] + x["blob_size"] for x in want)
    assert min(r["index_offset"] for r in rows) == -(-blob_end // 64) * 64


def test_ducer_alone_reads_trie(archive) -> None:
    data, files = archive
    rows = _manifest(data).to_pylist()
    by = {r["module_name"]: r for r in rows}
    tr = by["__trie__"]
    trie = ducer.Map(data[tr["index_offset"] : tr["index_offset"] + tr["index_len"]])
    lk = _stream(data, by["__lookup__"]["index_offset"], by["__lookup__"]["index_len"])
    firsts = [(r["relative_path"].encode(), i) for i, r in enumerate(lk.to_pylist())
              if r["chunk_seq"] == 0]
    assert list(trie.items()) == firsts
    assert len(trie) == len(files)


def test_openzl_alone_decodes_blobs_and_blake3_matches(archive) -> None:
    data, files = archive
    by = {r["module_name"]: r for r in _manifest(data).to_pylist()}
    lk = _stream(data, by["__lookup__"]["index_offset"], by["__lookup__"]["index_len"])
    dctx = zl.DCtx()
    rebuilt: dict[str, bytearray] = {}
    compressed = 0
    for r in lk.to_pylist():
        blob = data[r["blob_offset"] : r["blob_offset"] + r["blob_size"]]
        if r["compressed"]:
            outs = dctx.decompress(blob)
            chunk = outs[0].content.as_bytes()
            compressed += 1
        else:
            chunk = blob
        assert len(chunk) == r["uncompressed_size"]
        assert blake3.blake3(chunk).digest() == r["checksum"]
        buf = rebuilt.setdefault(r["relative_path"], bytearray())
        assert len(buf) == r["fdata_offset"]
        buf += chunk
    assert compressed > 5
    assert {p: bytes(b) for p, b in rebuilt.items()} == files


# -- golden archive (tests/data) -------------------------------------------------------------
DATA = Path(__file__).parent / "data"


def _golden_module():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_golden", DATA / "make_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOLDENS = ("golden-v1.znippy", "golden-v3.znippy")  # v1: written before section digests


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_reads_with_znippy(name: str) -> None:
    from znippy_sql import GroupKey, open_archive

    golden = _golden_module()
    files = golden.golden_files()
    with open_archive(DATA / name) as a:
        assert a.groups == [GroupKey(0, "", ""), GroupKey(7, "second", "")]
        for (repo, pkg, path), want in files.items():
            assert a.read(path) == want
            assert a.select(repo=repo, pkg_type=pkg, glob=path) == [path]
        assert a.section("__meta__").equals(golden.golden_meta())
        assert a.verify().ok
        digests = [r.blake3 for r in a.manifest_rows]
        assert all(d is None for d in digests) if name == GOLDENS[0] else all(digests)


@pytest.mark.parametrize("name", GOLDENS)
def test_golden_reads_with_independent_readers(name: str) -> None:
    data = (DATA / name).read_bytes()
    files = {p: d for (_, _, p), d in _golden_module().golden_files().items()}
    for check in (test_pyarrow_alone_reads_manifest_subindexes_lookup,
                  test_ducer_alone_reads_trie, test_openzl_alone_decodes_blobs_and_blake3_matches):
        check((data, files))


def test_section_digests_match_blake3_alone() -> None:
    """``znippy.section_blake3`` on the manifest schema: each row's range, hashed by blake3."""
    data = (DATA / GOLDENS[1]).read_bytes()
    manifest = _manifest(data)
    digests = manifest.schema.metadata[b"znippy.section_blake3"].decode().split(",")
    rows = manifest.to_pylist()
    assert len(digests) == len(rows) == 5
    for row, digest in zip(rows, digests):
        part = data[row["index_offset"] : row["index_offset"] + row["index_len"]]
        assert blake3.blake3(part).hexdigest() == digest


def test_golden_bytes_unchanged(tmp_path: Path) -> None:
    """Format drift guard: today's writer, same inputs → the checked-in bytes."""
    out = tmp_path / "g.znippy"
    _golden_module().write_golden(out)
    assert out.read_bytes() == (DATA / GOLDENS[1]).read_bytes(), (
        "the writer no longer reproduces tests/data/golden-v3.znippy: see tests/data/README.md")
