"""Shared blobs (issue 19): one write, workers, append, the store and its seal, verify,
info, the CLI flag, and readers that know nothing of sharing (pyarrow + openzl alone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import blake3
import pyarrow as pa
import pytest
from conftest import RawArchive, random_bytes, text_bytes
from test_dedup_zipcut import classes, make_zip

import test_independent as independent
from znippy_sql import Entry, ReservedSection, open_archive
from znippy_sql import write_archive as _write_archive
from znippy_sql.store import open_store as _open_store, seal
from znippy_sql.write.append import append_archive

BLOCK = 64 << 10


# These tests pin whole-blob dedup (one blob per distinct content, append and seal equal to
# one-shot writes of batches in one top directory): the layout without packed blobs.
# tests/test_packed.py covers dedup through the slices of packs.
def write_archive(*args, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("pack", False)
    return _write_archive(*args, **kw)


def open_store(*args, **kw):  # type: ignore[no-untyped-def]
    kw.setdefault("pack", False)
    return _open_store(*args, **kw)
DATA = Path(__file__).parent / "data"


def artifacts(version: int) -> list[Entry]:
    """A jar in a new version (most entries the same, new time stamps), a POM, a license
    that every version carries unchanged, and a random blob."""
    members = classes(50, 1)
    members = [(n, d + b"!" * version) if i % 9 == 0 else (n, d)
               for i, (n, d) in enumerate(members)]
    jar = make_zip(members, when=(2020 + version, 1, 1, 0, 0, 0))
    base = f"org/ex/lib/1.{version}"
    return [Entry(f"{base}/lib-1.{version}.jar", data=jar),
            Entry(f"{base}/lib-1.{version}.pom", data=text_bytes(3000 + version, version)),
            Entry(f"{base}/LICENSE", data=text_bytes(20_000, 99)),
            Entry(f"{base}/lib-1.{version}.bin", data=random_bytes(BLOCK + 5, version))]


def rows(path: Path) -> list[dict]:
    with open_archive(path) as a:
        return a.lookup.to_pylist()


def extents(rs: list[dict]) -> dict[tuple[int, int], set[bytes]]:
    out: dict[tuple[int, int], set[bytes]] = {}
    for r in rs:
        if r["blob_size"]:
            out.setdefault((r["blob_offset"], r["blob_size"]), set()).add(r["checksum"])
    return out


def test_one_write_stores_each_chunk_once(tmp_path: Path) -> None:
    entries = artifacts(1) + artifacts(2) + artifacts(3)
    dd, plain = tmp_path / "dd.znippy", tmp_path / "plain.znippy"
    r = write_archive(dd, entries, block_size=BLOCK, workers=2)
    p = write_archive(plain, entries, block_size=BLOCK, workers=2, dedup=False)
    assert r.shared_chunks > 0 and r.bytes_saved > 0
    assert p.shared_chunks == 0 and r.blob_bytes + r.bytes_saved >= p.blob_bytes * 0.9
    assert r.archive_bytes < 0.75 * p.archive_bytes
    rs = rows(dd)
    ext = extents(rs)
    # one blob per distinct content, one content per blob; and every blob byte used
    assert all(len(sums) == 1 for sums in ext.values())
    assert len({next(iter(s)) for s in ext.values()}) == len(ext)
    spans = sorted(ext)
    assert spans[0][0] == 0 and all(a + n == b for (a, n), (b, _) in zip(spans, spans[1:]))
    assert spans[-1][0] + spans[-1][1] == r.blob_bytes
    with open_archive(dd) as a:
        assert a.verify().ok
        for e in entries:
            assert a.read(e.relative_path) == e.data
    # the license is one blob for all three versions
    lic = [x for x in rs if x["relative_path"].endswith("LICENSE")]
    assert len({(x["blob_offset"], x["blob_size"]) for x in lic}) == 1
    # without dedup: today's layout, fixed-size chunks, every chunk its own blob
    prs = rows(plain)
    assert len(extents(prs)) == sum(1 for x in prs if x["blob_size"])
    jar = [x for x in prs if x["relative_path"].endswith("1.1.jar")]
    assert [x["fdata_offset"] for x in jar] == [i * BLOCK for i in range(len(jar))]
    assert not any(x["compressed"] for x in jar)


def test_worker_count_and_order_do_not_change_a_byte(tmp_path: Path) -> None:
    entries = artifacts(1) + artifacts(2)
    out = []
    for workers in (1, 2, 3):
        path = tmp_path / f"w{workers}.znippy"
        write_archive(path, entries, block_size=BLOCK, workers=workers, fsync=False)
        out.append(path.read_bytes())
    assert out[0] == out[1] == out[2]


def test_files_from_disk_and_a_big_zip_read_in_pieces(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql.write import ingest

    src = tmp_path / "src"
    for e in artifacts(1) + artifacts(2):
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data)  # type: ignore[arg-type]
    whole = tmp_path / "whole.znippy"
    write_archive(whole, src, block_size=BLOCK)
    monkeypatch.setattr(ingest, "ZIP_READ_WHOLE", 1000)  # every jar cut through preads
    pieces = tmp_path / "pieces.znippy"
    write_archive(pieces, src, block_size=BLOCK)
    assert whole.read_bytes() == pieces.read_bytes()
    mem = tmp_path / "mem.znippy"
    write_archive(mem, sorted(artifacts(1) + artifacts(2), key=lambda e: e.relative_path),
                  block_size=BLOCK)
    assert [(r["relative_path"], r["blob_offset"]) for r in rows(mem)] == [
        (r["relative_path"], r["blob_offset"]) for r in rows(whole)]


def test_a_source_that_vanishes_is_a_clean_error(tmp_path: Path) -> None:
    from znippy_sql import ZnippyError

    gone = tmp_path / "gone.jar"
    with pytest.raises(ZnippyError, match="cannot read source file") as info:
        write_archive(tmp_path / "a.znippy", [Entry("gone.jar", file=gone, known_size=10)])
    assert str(gone) in str(info.value)
    assert not (tmp_path / "a.znippy").exists()


def test_readers_that_know_nothing_of_sharing(tmp_path: Path) -> None:
    entries = artifacts(1) + artifacts(2)
    path = tmp_path / "a.znippy"
    meta = pa.table({"relative_path": pa.array([None], pa.utf8()), "key": ["k"], "value": ["v"]})
    write_archive(path, entries, block_size=BLOCK, fsync=False,
                  reserved_sections=[ReservedSection("__meta__", meta)])
    files = {e.relative_path: e.data for e in entries}
    data = path.read_bytes()
    independent.test_pyarrow_alone_reads_manifest_subindexes_lookup((data, files))
    independent.test_ducer_alone_reads_trie((data, files))
    independent.test_openzl_alone_decodes_blobs_and_blake3_matches((data, files))


def test_golden_dedup_archive(tmp_path: Path) -> None:
    golden = independent._golden_module()
    out = tmp_path / "g.znippy"
    golden.write_golden(out, dedup=True)
    assert out.read_bytes() == (DATA / "golden-v3-dedup.znippy").read_bytes(), (
        "the writer no longer reproduces tests/data/golden-v3-dedup.znippy: see "
        "tests/data/README.md")
    files = {p: d for (_, _, p), d in golden.golden_dedup_files().items()}
    rs = rows(out)
    assert any(len(s) == 1 and n > 1 for s, n in
               ((v, sum(1 for r in rs if (r["blob_offset"], r["blob_size"]) == k))
                for k, v in extents(rs).items()))
    independent.test_openzl_alone_decodes_blobs_and_blake3_matches((out.read_bytes(), files))


def test_append_shares_blobs_already_in_the_archive(tmp_path: Path) -> None:
    a, b = artifacts(1), artifacts(2)
    one, grown = tmp_path / "one.znippy", tmp_path / "grown.znippy"
    write_archive(one, a + b, block_size=BLOCK, workers=1)
    write_archive(grown, a, block_size=BLOCK, workers=1)
    report = append_archive(grown, b, workers=2)
    assert grown.read_bytes() == one.read_bytes()  # append = one-shot, sharing included
    new_jar = next(e for e in b if e.relative_path.endswith(".jar"))
    noise = next(e for e in b if e.relative_path.endswith(".bin"))
    assert report.blob_bytes_written < (len(noise.data)  # type: ignore[arg-type]
                                        + 0.5 * len(new_jar.data))  # type: ignore[arg-type]
    rs = rows(grown)
    old = [r for r in rs if r["relative_path"].endswith("1.2.jar")
           and r["blob_offset"] < report.old_blob_end]
    assert old  # rows of the new jar that point at blobs of the old one
    # replacing a file whose blobs are shared: only bytes nobody points at are dead
    again = append_archive(grown, [Entry(a[2].relative_path, data=b"other license")])
    assert again.rows_replaced == 1 and again.dead_bytes == 0
    with open_archive(grown) as arc:
        assert arc.verify().ok
        assert arc.read(b[2].relative_path) == b[2].data
    plain = tmp_path / "plain.znippy"
    write_archive(plain, a, block_size=BLOCK, dedup=False)
    r = append_archive(plain, b, dedup=False)
    assert r.blob_bytes_written >= sum(len(e.data) for e in b) * 0.9  # type: ignore[arg-type]


def test_store_shares_blobs_and_seals_like_a_one_shot(tmp_path: Path) -> None:
    a, b, c = artifacts(1), artifacts(2), artifacts(3)
    sidecar, wh = tmp_path / "blobs.bin", tmp_path / "wh"
    with open_store(sidecar, wh, "dd", block_size=BLOCK) as store:
        store.add(a, workers=2)
        rb = store.add(b)
    assert rb.shared_chunks > 0 and rb.bytes_saved > 0
    with open_store(sidecar, wh, "dd") as store:  # a restart: the index comes from Iceberg
        rc = store.add(c)
    assert rc.shared_chunks >= rb.shared_chunks
    one = tmp_path / "one.znippy"
    write_archive(one, a + b + c, block_size=BLOCK)
    sealed = tmp_path / "sealed.znippy"
    report = seal(sidecar, wh, "dd", sealed)
    assert sealed.read_bytes() == one.read_bytes()
    assert report.dead_bytes == 0 and report.blob_bytes_reused == report.blob_end
    # a replacement in the store: the shared license blob is not dead
    with open_store(sidecar, wh, "dd") as store:
        r = store.add([Entry(a[2].relative_path, data=b"x")])
        assert r.rows_replaced == 1 and r.dead_bytes == 0
        with store.snapshot() as snap:
            assert snap.verify().ok


def _tampered(tmp_path: Path, edit) -> list[str]:  # type: ignore[no-untyped-def]
    arc = RawArchive([("a", b"hello world"), ("b", b"hello world"), ("c", b"another one")])
    edit(arc.rows)
    path = arc.write(tmp_path / "t.znippy")
    with open_archive(path) as a:
        return a.verify().problems


def test_verify_accepts_exactly_shared_extents_and_refuses_the_rest(tmp_path: Path) -> None:
    def share(rs: list[dict]) -> None:  # b points at a's blob: same content
        rs[1]["blob_offset"] = rs[0]["blob_offset"]

    assert _tampered(tmp_path, share) == []

    def partial(rs: list[dict]) -> None:  # c starts inside b's blob
        rs[2]["blob_offset"] = rs[1]["blob_offset"] + 3
        rs[2]["blob_size"] = rs[2]["uncompressed_size"] = 8
        rs[2]["checksum"] = blake3.blake3(b"lo world").digest()

    problems = _tampered(tmp_path, partial)
    assert any("overlaps the blob of 'b'" in p for p in problems)

    def lying(rs: list[dict]) -> None:  # c claims a's blob but another content
        rs[2]["blob_offset"], rs[2]["blob_size"] = rs[0]["blob_offset"], rs[0]["blob_size"]
        rs[2]["uncompressed_size"] = rs[0]["uncompressed_size"]

    problems = _tampered(tmp_path, lying)
    assert any("shares the blob at 0 of 'a' chunk 0 but not its content" in p
               for p in problems)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    run = "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", run, *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_no_dedup_and_info_saving(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for e in artifacts(1) + artifacts(2):
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data)  # type: ignore[arg-type]
    dd, plain = tmp_path / "dd.znippy", tmp_path / "plain.znippy"
    assert _cli("create", str(src), "-o", str(dd), "--no-pack").returncode == 0
    assert _cli("create", str(src), "-o", str(plain), "--no-dedup", "--no-pack").returncode == 0
    assert rows(plain) == rows(write_archive_path(tmp_path, src, dedup=False))
    info = json.loads(_cli("info", str(dd), "--json").stdout)
    assert info["referenced_bytes"] > info["stored_blob_bytes"] > 0
    assert info["dedup_saved_bytes"] == info["referenced_bytes"] - info["stored_blob_bytes"]
    assert json.loads(_cli("info", str(plain), "--json").stdout)["dedup_saved_bytes"] == 0
    text = _cli("info", str(dd)).stdout
    assert "dedup" in text and "shared" in text
    ls = _cli("ls", "-l", "--json", str(dd))
    by = {f["relative_path"]: f for f in json.loads(ls.stdout)}
    lic = [f for p, f in by.items() if p.endswith("LICENSE")]
    assert lic[0]["blob_size"] == lic[1]["blob_size"] > 0  # each file reads the shared blob
    # its bytes are charged once, to the first in path order (docs/format.md, "Stored sizes")
    assert lic[0]["stored_size"] == lic[0]["blob_size"] and lic[1]["stored_size"] == 0


def write_archive_path(tmp_path: Path, src: Path, **kw: object) -> Path:
    out = tmp_path / "api.znippy"
    write_archive(out, src, **kw)  # type: ignore[arg-type]
    return out


def test_duckdb_and_polars_read_shared_blobs(tmp_path: Path) -> None:
    import duckdb

    from znippy_sql.duckdb import register

    entries = artifacts(1) + artifacts(2)
    path = tmp_path / "a.znippy"
    write_archive(path, entries, block_size=BLOCK)
    con = duckdb.connect()
    register(con, path, name="a")
    got = con.execute("SELECT count(*), sum(size) FROM a_files").fetchone()
    assert got == (len(entries), sum(len(e.data) for e in entries))  # type: ignore[arg-type]
    import polars as pl

    from znippy_sql.polars import read_files, scan

    files = scan(path, "files").collect()
    lic = read_files(path, ["org/ex/lib/1.1/LICENSE", "org/ex/lib/1.2/LICENSE"])
    assert lic["content"].to_list() == [entries[2].data, entries[6].data]
    assert files.height == len(entries)
    licenses = files.filter(pl.col("relative_path").str.ends_with("LICENSE"))
    assert licenses["blob_size"].n_unique() == 1
    assert licenses["stored_size"].to_list() == [licenses["blob_size"][0], 0]


def test_dedup_index_memory_is_bounded() -> None:
    from znippy_sql.write.dedup import DedupIndex

    index = DedupIndex()
    n = 20_000
    t = pa.table({
        "checksum": pa.array([blake3.blake3(b"%d" % i).digest() for i in range(n)],
                             pa.binary(32)),
        "uncompressed_size": pa.array([10] * n, pa.uint64()),
        "blob_offset": pa.array([10 * i for i in range(n)], pa.uint64()),
        "blob_size": pa.array([10] * n, pa.uint64()),
        "compressed": pa.array([False] * n, pa.bool_()),
    })
    index.seed([t, t], limit=10 * n - 10)  # the last blob ends past the limit: not entered
    assert len(index) == n - 1
    assert index.known(blake3.blake3(b"5").digest(), 10)
    assert not index.known(blake3.blake3(b"5").digest(), 11)
    assert not index.known(blake3.blake3(b"%d" % (n - 1)).digest(), 10)


@pytest.mark.skipif(not os.path.isdir(os.path.expanduser("~/.m2/repository")),
                    reason="no Maven repository at ~/.m2/repository on this machine: this test "
                           "round-trips its real jars")
@pytest.mark.slow
def test_real_jars_round_trip(tmp_path: Path) -> None:
    root = Path(os.path.expanduser("~/.m2/repository"))
    jars = sorted(root.rglob("*.jar"))[:60]
    entries = [Entry(str(p.relative_to(root)), file=p) for p in jars]
    path = tmp_path / "m2.znippy"
    r = write_archive(path, entries, fsync=False)
    assert r.shared_chunks > 0
    out = tmp_path / "x"
    with open_archive(path) as arc:
        assert arc.verify().ok
        assert arc.extract(out).ok
    for p in jars:
        assert (out / p.relative_to(root)).read_bytes() == p.read_bytes()


def test_extract_writes_a_files_many_small_chunks(tmp_path: Path) -> None:
    """A jar cut into its entries: many small chunks, gathered into few writes by the core
    (``native/src/extract/decode.rs``, ``Out``), the file whole."""
    entries = artifacts(1)
    path = tmp_path / "a.znippy"
    write_archive(path, entries, block_size=BLOCK)
    with open_archive(path) as arc:
        assert max(len(arc.must_find(e.relative_path).chunks) for e in entries) > 1
        assert arc.extract(tmp_path / "x", workers=1).ok
    for e in entries:
        assert (tmp_path / "x" / e.relative_path).read_bytes() == e.data


def test_rust_reader_reads_shared_blobs(tmp_path: Path) -> None:
    """``compat="rust-0.8"`` with dedup: the Rust 0.8 reader (tests/rust_layout.py's
    ``decompress_archive``, row by row) rebuilds every file from shared blobs."""
    import rust_layout as rl

    entries = artifacts(1) + artifacts(2)
    path = tmp_path / "rust.znippy"
    r = write_archive(path, entries, block_size=BLOCK, compat="rust-0.8")
    assert r.shared_chunks > 0
    assert rl.decompress_archive(path) == {e.relative_path: e.data for e in entries}


def test_dedup_index_table_grows_and_probes_past_collisions() -> None:
    from znippy_sql.write.dedup import DedupIndex

    index = DedupIndex()
    # the same first 8 bytes for groups of 50 digests: long probe runs, then growth
    digests = [(i // 50).to_bytes(8, "little") + blake3.blake3(b"%d" % i).digest()[8:]
               for i in range(5000)]
    for i, d in enumerate(digests):
        assert not index.known(d, 7)
        index.seed_rows(d, [7], [i], [1], [False], [0])
    assert len(index) == 5000
    assert all(index.known(d, 7) for d in digests)
    assert not index.known(bytes(32), 7) and not index.known(digests[0], 8)
    offsets, sizes, _, pieces, end, _ = index.place([7, 7], digests[10] + blake3.blake3(b"new")
                                                 .digest(), [False, True], [1, 3], b"abcd", 100)
    assert offsets == [10, 100] and sizes == [1, 3] and end == 103
    assert [bytes(p) for p in pieces] == [b"bcd"]


def test_compact_keeps_shared_blobs_shared(tmp_path: Path) -> None:
    from znippy_sql.write.compact import compact_archive

    a, b = artifacts(1), artifacts(2)
    path = tmp_path / "a.znippy"
    write_archive(path, a + b, block_size=BLOCK)
    before = path.read_bytes()
    assert not compact_archive(path).rewritten  # no dead bytes: shared blobs are not dead
    assert path.read_bytes() == before
    # replace the later version's pom: its blob dies; the shared ones stay shared
    pom = b[1]
    append_archive(path, [Entry(pom.relative_path, data=b"<project/>")])
    report = compact_archive(path)
    assert report.rewritten and report.dead_bytes_dropped > 0
    one = tmp_path / "one.znippy"
    write_archive(one, a + [b[0], Entry(pom.relative_path, data=b"<project/>"), *b[2:]],
                  block_size=BLOCK)
    with open_archive(path) as x, open_archive(one) as y:
        assert x.verify().ok
        assert x.blob_end == y.blob_end  # every shared blob copied once
        for e in a + b[2:]:
            assert x.read(e.relative_path) == e.data


def test_an_unchanged_append_writes_no_blob(tmp_path: Path) -> None:
    entries = artifacts(1)
    path = tmp_path / "a.znippy"
    write_archive(path, entries, block_size=BLOCK)
    size = path.stat().st_size
    before = path.read_bytes()
    r = append_archive(path, entries)  # the same files again, jars cut at their entries
    assert r.blob_bytes_written == 0 and r.dead_bytes == 0
    assert (r.files_unchanged, r.files_replaced) == (len(entries), 0)
    with open_archive(path) as arc:
        assert arc.verify().ok
    assert path.stat().st_size == size and path.read_bytes() == before  # nothing changed


def test_store_add_without_dedup(tmp_path: Path) -> None:
    sidecar, wh = tmp_path / "blobs.bin", tmp_path / "wh"
    with open_store(sidecar, wh, "nd", block_size=BLOCK) as store:
        store.add(artifacts(1), dedup=False)
        r = store.add(artifacts(2), dedup=False)
    assert r.shared_chunks == 0 and r.bytes_saved == 0
    one = tmp_path / "one.znippy"
    write_archive(one, artifacts(1) + artifacts(2), block_size=BLOCK, dedup=False)
    sealed = tmp_path / "sealed.znippy"
    seal(sidecar, wh, "nd", sealed)
    assert sealed.read_bytes() == one.read_bytes()
