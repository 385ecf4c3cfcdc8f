"""Compressed index streams (FORMAT §1, docs/format.md "Compressed index streams").

The writer compresses the record batch bodies of the data sub-indexes, ``__lookup__`` (in
batches of bounded rows), ``__meta__`` and the Arrow git sections with ZSTD when it pays,
never the manifest; pyarrow alone reads every such stream; the reader bounds every buffer's
declared length before pyarrow allocates it.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from _fuzz import PACKED_MUTATIONS, _prefixes, mutate_packed, packed_base_archives
from _readpaths import bad, every_read_path
from _splice import manifest, rebuild, sections
from conftest import text_bytes
from znippy_sql import ReservedSection, open_archive, write_archive
from znippy_sql.errors import FormatError
from znippy_sql.format.ipc import LOOKUP_BATCH_ROWS, MAX_EXPANSION, read_table, stream_bytes
from znippy_sql.write import append as ap
from znippy_sql.write.source import Entry


def entries(n: int = 3000, prefix: str = "src") -> list[Entry]:
    return [Entry(f"{prefix}/d{i // 300}/f{i:05d}.txt", data=text_bytes(100 + i % 700, i))
            for i in range(n)]


def graph() -> ReservedSection:
    oid = [bytes([i]) * 20 for i in range(1, 200)]
    return ReservedSection("__gunnar_graph__", pa.table({
        "oid": pa.array(oid, pa.binary(20)),
        "parents": pa.array([[o] for o in oid], pa.list_(pa.binary(20))),
        "tree": pa.array(oid, pa.binary(20)),
        "generation": pa.array(range(len(oid)), pa.uint32()),
        "commit_time": pa.array(range(len(oid)), pa.int64())}))


def _compressed(buf: bytes) -> bool:
    return bool(_prefixes(buf))


def test_streams_compressed_pyarrow_alone_reads_them(tmp_path: Path) -> None:
    es = entries()
    plain = tmp_path / "plain.znippy"
    comp = tmp_path / "comp.znippy"
    meta = pa.table({"relative_path": [e.relative_path for e in es], "key": ["k"] * len(es),
                     "value": ["v"] * len(es)})
    kw = dict(workers=1, reserved_sections=[ReservedSection("__meta__", meta), graph()])
    write_archive(plain, es, index_compression=False, **kw)  # type: ignore[arg-type]
    write_archive(comp, es, **kw)  # type: ignore[arg-type]  # on by default
    assert comp.stat().st_size < plain.stat().st_size
    data = comp.read_bytes()
    secs = sections(data)
    for name in ("0//", "__lookup__", "__meta__", "__gunnar_graph__"):
        assert _compressed(secs[name]), name
        table = pa.ipc.open_stream(pa.py_buffer(secs[name])).read_all()  # pyarrow alone
        assert table.equals(pa.ipc.open_stream(pa.py_buffer(sections(plain.read_bytes())[name]))
                            .read_all())
    lookup = pa.ipc.open_stream(pa.py_buffer(secs["__lookup__"]))
    assert max(b.num_rows for b in lookup) <= LOOKUP_BATCH_ROWS
    assert not _compressed(data[manifest_offset(data):])  # never the manifest
    with open_archive(comp) as a:
        for e in es[::211]:
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok
        assert a.meta.num_rows == len(es)


def manifest_offset(data: bytes) -> int:
    return struct.unpack("<Q", data[-8:])[0]


def test_small_streams_stay_plain_and_off_is_old_bytes(tmp_path: Path) -> None:
    es = entries(20)
    a, b = tmp_path / "a.znippy", tmp_path / "b.znippy"
    write_archive(a, es, workers=1)  # index compression on (the default): nothing pays
    write_archive(b, es, workers=1, index_compression=False)
    on, off = sections(a.read_bytes()), sections(b.read_bytes())
    assert list(on) == list(off)
    for name in on:
        if name != "__trie__":
            assert not _compressed(on[name]), name
            assert pa.ipc.open_stream(on[name]).read_all().equals(
                pa.ipc.open_stream(off[name]).read_all())
    t = pa.table({"x": [1, 2, 3]})
    assert stream_bytes(t, compress=True) == stream_bytes(t)  # under the threshold


def test_append_follows_the_archive_and_equals_one_shot(tmp_path: Path) -> None:
    a, b = entries(500, "a"), entries(500, "b")
    one, grown = tmp_path / "one.znippy", tmp_path / "grown.znippy"
    write_archive(one, a + b, workers=1, index_compression=True, pack=True)
    write_archive(grown, a, workers=1, index_compression=True, pack=True)
    ap.append_archive(grown, b, workers=1)
    assert grown.read_bytes() == one.read_bytes()


def test_compat_rust_uses_neither(tmp_path: Path) -> None:
    es = entries(500)
    out = tmp_path / "r.znippy"
    write_archive(out, es, workers=1, compat="rust-0.8", pack=True, index_compression=True)
    for name, buf in sections(out.read_bytes()).items():
        assert not _compressed(buf), name
    import rust_layout  # the independent read_multi_index replica

    _, batches = rust_layout.read_multi_index(out)
    assert sum(b.num_rows for b in batches) == len(es)


def _lie(data: bytes, name: str, value: int) -> bytes:
    part = bytearray(sections(data)[name])
    at = _prefixes(bytes(part))[0]
    part[at : at + 8] = value.to_bytes(8, "little", signed=value < 0)
    return rebuild(data, {name: bytes(part)})


@pytest.mark.parametrize("lie", [1 << 40, (1 << 63) - 1, -5, "type+8", "expansion"])
def test_a_lying_length_is_refused_before_allocation(tmp_path: Path, lie: object) -> None:
    es = entries()
    path = tmp_path / "c.znippy"
    write_archive(path, es, workers=1, index_compression=True)
    data = path.read_bytes()
    buf = sections(data)["__lookup__"]
    at = _prefixes(buf)[0]
    true = int.from_bytes(buf[at : at + 8], "little")
    if lie == "type+8":
        value = true + 64 * 64  # past what the rows and type allow
    elif lie == "expansion":
        value = MAX_EXPANSION * len(buf)
    else:
        value = int(lie)  # type: ignore[call-overload]
    bad_path = tmp_path / "bad.znippy"
    bad_path.write_bytes(_lie(data, "__lookup__", value))
    with open_archive(bad_path) as a, pytest.raises(FormatError, match="compressed buffer"):
        a.read(es[0].relative_path)
    with pytest.raises(FormatError, match="compressed buffer"):
        read_table(pa.py_buffer(sections(bad_path.read_bytes())["__lookup__"]), "x", None)


@pytest.mark.parametrize("seed", range(12))
def test_fuzz_packed_mutations_every_read_path(tmp_path: Path, seed: int) -> None:
    bases = packed_base_archives(tmp_path / "bases") if seed == 0 or not _BASES else _BASES
    _BASES[:] = bases
    base = bases[0]
    kind = PACKED_MUTATIONS[seed % len(PACKED_MUTATIONS)]
    data, text = mutate_packed(base.data, kind, random.Random(seed))
    path = tmp_path / "fuzz.znippy"
    path.write_bytes(data)
    out = every_read_path(path, base.originals, tmp_path / "w")
    assert not bad(out), f"{text}: {bad(out)[:3]}"


_BASES: list = []


def test_point_reads_decode_one_lookup_batch(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup in batches: ``find`` decodes the batch holding the file, never the whole
    lookup; files at batch edges and multi-chunk files across them read right too."""
    from znippy_sql.write import tail

    monkeypatch.setattr(tail, "LOOKUP_BATCH_ROWS", 64)
    es = entries(700)
    es.append(Entry("src/d0/zz-big.txt", data=text_bytes(9000, 5)))
    es.sort(key=lambda e: e.relative_path)
    path = tmp_path / "b.znippy"
    write_archive(path, es, workers=1, index_compression=True, block_size=1000)
    with open_archive(path) as a:
        for e in es[::7] + es[-3:]:
            assert a.read(e.relative_path) == e.data
        assert "lookup" not in a.__dict__  # the whole lookup was never decoded
        assert len(a.lookup_batches.kept) <= a.lookup_batches.KEEP
        assert a.find("no/such") is None
        assert a.verify().ok


def test_a_lie_in_one_lookup_batch_is_refused_by_find(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql.write import tail

    monkeypatch.setattr(tail, "LOOKUP_BATCH_ROWS", 64)
    es = entries(300)
    path = tmp_path / "b.znippy"
    write_archive(path, es, workers=1, index_compression=True)
    data = path.read_bytes()
    lk = pa.ipc.open_stream(pa.py_buffer(sections(data)["__lookup__"])).read_all()
    rows = lk.to_pylist()
    rows[100]["blob_offset"] = 1 << 62
    from _splice import stream

    bad_lookup = stream(pa.Table.from_pylist(rows, schema=lk.schema).combine_chunks(),
                        compression="zstd")
    # the same batches as the writer's: 64 rows each
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, lk.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        for b in pa.Table.from_pylist(rows, schema=lk.schema).to_batches(max_chunksize=64):
            w.write_batch(b)
    bad_lookup = sink.getvalue().to_pybytes()
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(rebuild(data, {"__lookup__": bad_lookup}))
    with open_archive(bad) as a, pytest.raises(FormatError, match="runs past the blob region"):
        a.read(rows[100]["relative_path"])


def test_compressed_stream_with_dictionary_columns() -> None:
    """Another writer's dictionary columns (docs/format.md §11) in a compressed stream: the
    record batch's indices and the dictionary batch are bounded, so the writer keeps the
    compressed stream and every reader takes it."""
    words = [f"word-{i % 37}" for i in range(20000)]
    table = pa.table({"relative_path": [f"f{i:06d}" for i in range(20000)],
                      "tag": pa.array(words).dictionary_encode()})
    plain, packed = stream_bytes(table), stream_bytes(table, compress=True)
    assert len(packed) < 0.9 * len(plain)
    assert read_table(pa.py_buffer(packed), "x", None).equals(table)


def test_first_find_imports_no_pandas(tmp_path: Path) -> None:
    """``Array.to_numpy`` imports pandas (1-3 s on a loaded machine): a point read turns the
    lookup's columns into numpy from their buffers (``build.numpy_of``) instead."""
    import subprocess
    import sys

    es = entries(300)
    arc = tmp_path / "c.znippy"
    write_archive(arc, es, workers=1)
    code = ("import sys\nfrom znippy_sql import open_archive\n"
            f"a = open_archive({str(arc)!r})\n"
            f"assert a.read({es[7].relative_path!r}) == {es[7].data!r}\n"
            "assert a.find('nope') is None\n"
            "print('pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "False"


def test_numpy_of_matches_to_numpy() -> None:
    import numpy as np

    from znippy_sql.format.build import numpy_of

    rnd = random.Random(3)
    for n in (0, 1, 7, 8, 9, 100):
        bools = pa.array([rnd.random() < 0.5 for _ in range(n)], pa.bool_())
        ints = pa.array([rnd.randrange(1 << 40) for _ in range(n)], pa.uint64())
        for start in range(0, min(n, 11)):
            for arr in (bools.slice(start), ints.slice(start, n // 2)):
                got = numpy_of(arr)
                assert got.dtype == arr.to_numpy(zero_copy_only=False).dtype
                assert np.array_equal(got, arr.to_numpy(zero_copy_only=False))


def test_cli_extract_and_verify_import_no_pandas(tmp_path: Path) -> None:
    """``extract`` and ``verify`` of an archive with packs, POSIX facts and a selection read
    their Arrow columns without pyarrow's pandas shim (``pa.array`` of a list or an ndarray,
    ``to_numpy``): importing pandas costs a CLI run ~0.5-1 s of CPU."""
    import subprocess
    import sys

    from znippy_sql.cli import main as cli_main

    src = tmp_path / "src"
    for i in range(40):
        p = src / f"d{i % 4}" / f"f{i:03d}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(f"line {i}\n".encode() * (i + 1))
    arc = tmp_path / "p.znippy"
    code = ("import sys\nfrom znippy_sql.cli import main\n"
            "assert main(sys.argv[1:]) == 0\n"
            "print('pandas' in sys.modules)\n")
    assert cli_main(["create", str(src), "-o", str(arc)]) == 0
    with open_archive(arc) as a:
        assert a.packed and a.has_section("__meta__")
    for args in (["extract", str(arc), "-o", str(tmp_path / "x1")],
                 ["extract", str(arc), "-o", str(tmp_path / "x2"), "--preserve", "--glob",
                  "d1/*"],
                 ["verify", str(arc)]):
        out = subprocess.run([sys.executable, "-c", code, *args], check=True,
                             capture_output=True, text=True).stdout
        assert out.strip().splitlines()[-1] == "False", args
    assert (tmp_path / "x1" / "d3" / "f039.txt").read_bytes() == b"line 39\n" * 40


def test_arrow_of_matches_pa_array() -> None:
    import numpy as np

    from znippy_sql.format.build import arrow_of

    rnd = random.Random(5)
    for n in (0, 1, 7, 8, 9, 100):
        for dtype in (np.int64, np.uint32, np.int8, np.uint64):
            values = np.array([rnd.randrange(100) for _ in range(n)], dtype=dtype)
            assert arrow_of(values).equals(pa.array(values))
            assert arrow_of(values[::3]).equals(pa.array(values[::3]))
        mask = np.array([rnd.random() < 0.5 for _ in range(n)], dtype=bool)
        assert arrow_of(mask).equals(pa.array(mask))


@pytest.mark.parametrize("name", ["__lookup__", "__trie__"])
def test_first_find_checks_both_digests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        name: str) -> None:
    """The first ``find`` of a lookup in batches searches while the section digests are
    computed (read/firstfind.py), and answers only once both match: a flipped byte in either
    section is the digest's FormatError, at every call, and nothing read from it is kept."""
    from znippy_sql.format.schema import GroupKey
    from znippy_sql.write import tail

    monkeypatch.setattr(tail, "LOOKUP_BATCH_ROWS", 64)
    es = entries(400)
    path = tmp_path / "b.znippy"
    write_archive(path, es, workers=1, index_compression=True)
    with open_archive(path) as a:
        assert a.find(es[250].relative_path).chunks[0].uncompressed_size == len(es[250].data)
        assert "trie" in a.__dict__ and "lookup" not in a.__dict__ and len(a.tail.sound) == 2
        assert a.find("no/such") is None
    data = bytearray(path.read_bytes())
    with open_archive(path) as a:
        row = a.manifest_row(GroupKey(-1, "", name))
    data[row.index_offset + row.index_len // 2] ^= 0x01
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(bytes(data))
    with open_archive(bad) as a:
        for _ in range(2):
            with pytest.raises(FormatError, match=f"{name}: its bytes do not match the BLAKE3"):
                a.find(es[250].relative_path)
            assert "lookup_batches" not in a.__dict__ and "lookup" not in a.__dict__
            assert name != "__trie__" or "trie" not in a.__dict__  # (a sound one may stay)
    with open_archive(bad, verify_sections=False) as a:  # searched unchecked: no digest here
        try:
            a.find(es[250].relative_path)
        except FormatError as exc:  # a damaged row or trie is said, never a crash
            assert str(bad) in str(exc)
