"""Packed blobs (FORMAT §3, docs/format.md "Packed blobs"): small files share one frame.

Every read path over a packed archive (read, find, open, extract, verify), the layout rule
(which files go together, deterministically), dedup through slices, append, the options that
restore the old layout byte for byte, and the hostile slices a reader refuses.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from _splice import rebuild, sections, stream
from conftest import text_bytes
from znippy_sql import open_archive, write_archive
from znippy_sql.errors import FormatError
from znippy_sql.write import append as ap
from znippy_sql.write.pack import PACK_MEMBER_MAX, PACK_TARGET
from znippy_sql.write.source import Entry


def corpus(prefix: str = "src", n: int = 80, seed: int = 1) -> list[Entry]:
    """Small text files in two directories, an empty one, duplicates, a big file, a
    skip-listed one and an incompressible small one."""
    out = [Entry(f"{prefix}/a/f{i:03d}.py", data=text_bytes(200 + 97 * i, seed + i))
           for i in range(n)]
    out += [Entry(f"{prefix}/b/copy{i}.py", data=out[i].data) for i in range(3)]
    out += [Entry(f"{prefix}/b/empty.txt", data=b""),
            Entry(f"{prefix}/b/big.txt", data=text_bytes(PACK_MEMBER_MAX + 5000, seed)),
            Entry(f"{prefix}/b/logo.png", data=text_bytes(3000, seed + 99)),
            Entry(f"{prefix}/b/noise.bin", data=random.Random(seed).randbytes(PACK_MEMBER_MAX + 100))]
    return sorted(out, key=lambda e: e.relative_path.encode())


def write(path: Path, entries: list[Entry], **kw: object) -> Path:
    write_archive(path, entries, **{"pack": True, "workers": 1, **kw})  # type: ignore[arg-type]
    return path


def test_pack_roundtrip_every_read_path(tmp_path: Path) -> None:
    entries = corpus()
    arc = write(tmp_path / "p.znippy", entries)
    with open_archive(arc) as a:
        assert a.lookup.schema.names[8] == "inner_offset"
        for key in a.groups:
            assert a.group_table(key).schema.names[8] == "inner_offset"
        offsets = a.lookup.column("blob_offset").to_pylist()
        inner = a.lookup.column("inner_offset").to_pylist()
        assert len(set(offsets)) < len(offsets) // 4  # many files a blob
        assert max(inner) > 0
        for e in entries:
            assert a.read(e.relative_path) == e.data
            with a.open(e.relative_path) as fh:
                fh.seek(len(e.data) // 2)
                assert fh.read() == e.data[len(e.data) // 2 :]
        report = a.verify()
        assert report.ok, report.problems
        assert report.files == len(entries) and not report.notes
        out = tmp_path / "x"
        ex = a.extract(out)
        assert ex.ok and ex.files == len(entries)
    for e in entries:
        assert (out / e.relative_path).read_bytes() == e.data


def test_pack_rule_and_sizes(tmp_path: Path) -> None:
    """Which files are packed: small compressible ones; a big, an empty, a skip-listed file
    keep their own rows' layout; packs close at PACK_TARGET and at a new top directory."""
    entries = [Entry(f"t{i // 200}/f{i:04d}.txt", data=text_bytes(30000, i)) for i in range(400)]
    arc = write(tmp_path / "p.znippy", entries + corpus("z", 5))
    with open_archive(arc) as a:
        rows = a.lookup.to_pylist()
    by_blob: dict[int, list[dict]] = {}
    for r in rows:
        if r["blob_size"]:
            by_blob.setdefault(r["blob_offset"], []).append(r)
    for members in by_blob.values():
        if len(members) > 1 and members[0]["compressed"]:
            tops = {m["relative_path"].split("/")[0] for m in members}
            assert len(tops) == 1
            held = sum(m["uncompressed_size"] for m in members
                       if m["inner_offset"] or m is members[0])
            assert held < PACK_TARGET + 30000
    assert max(len(m) for m in by_blob.values()) < 200  # t0's 6 MB closed at PACK_TARGET
    big = next(r for r in rows if r["relative_path"] == "z/b/big.txt")
    png = next(r for r in rows if r["relative_path"] == "z/b/logo.png")
    for r in (big, png):
        assert r["inner_offset"] == 0 and len(by_blob[r["blob_offset"]]) == 1


def test_duplicates_share_one_slice(tmp_path: Path) -> None:
    entries = corpus()
    with open_archive(write(tmp_path / "p.znippy", entries)) as a:
        rows = {r["relative_path"]: r for r in a.lookup.to_pylist()}
    for i in range(3):
        orig, copy = rows[f"src/a/f{i:03d}.py"], rows[f"src/b/copy{i}.py"]
        assert (orig["blob_offset"], orig["inner_offset"]) == (copy["blob_offset"],
                                                               copy["inner_offset"])


@pytest.mark.parametrize("workers", [2, 3])
def test_deterministic_across_workers(tmp_path: Path, workers: int) -> None:
    entries = corpus(n=300)
    one = write(tmp_path / "one.znippy", entries, workers=1)
    many = write(tmp_path / "many.znippy", entries, workers=workers)
    assert one.read_bytes() == many.read_bytes()


def test_on_by_default_and_off_is_the_old_layout(tmp_path: Path) -> None:
    """Packing and index compression are the defaults; both off is the layout before them
    (golden-v3 pins those bytes: test_independent.py)."""
    entries = corpus()
    default = tmp_path / "default.znippy"
    write_archive(default, entries, workers=1)
    on = write(tmp_path / "on.znippy", entries, index_compression=True)
    assert default.read_bytes() == on.read_bytes()
    old = tmp_path / "old.znippy"
    write_archive(old, entries, workers=1, pack=False, index_compression=False)
    off = write(tmp_path / "off.znippy", entries, pack=False, index_compression=False)
    assert off.read_bytes() == old.read_bytes() != default.read_bytes()
    with open_archive(off) as a:
        assert "inner_offset" not in a.lookup.schema.names
    rust = write(tmp_path / "rust.znippy", entries, compat="rust-0.8")
    with open_archive(rust) as a:
        assert "inner_offset" not in a.group_table(a.groups[0]).schema.names


def test_append_packs_new_files_and_equals_one_shot(tmp_path: Path) -> None:
    a, b = corpus("a", 40, 1), corpus("b", 40, 2)
    one = write(tmp_path / "one.znippy", a + b)
    grown = write(tmp_path / "grown.znippy", a)
    with open_archive(grown) as arc:
        end = arc.blob_end
    before = grown.read_bytes()[:end]
    ap.append_archive(grown, b, workers=1)  # packing follows the archive's own setting
    assert grown.read_bytes() == one.read_bytes()
    assert grown.read_bytes()[:end] == before  # no old pack rewritten


def test_append_to_unpacked_archive_adds_the_column(tmp_path: Path) -> None:
    a, b = corpus("a", 10, 1), corpus("b", 30, 2)
    arc = tmp_path / "g.znippy"
    write_archive(arc, a, workers=1)
    ap.append_archive(arc, b, workers=1, pack=True)
    with open_archive(arc) as x:
        assert "inner_offset" in x.lookup.schema.names
        for e in a + b:
            assert x.read(e.relative_path) == e.data
        assert x.verify().ok


def test_append_replacing_a_packed_file_leaves_a_noted_gap(tmp_path: Path) -> None:
    entries = corpus()
    arc = write(tmp_path / "p.znippy", entries)
    ap.append_archive(arc, [Entry("src/a/f005.py", data=b"new content")], workers=1)
    with open_archive(arc) as x:
        assert x.read("src/a/f005.py") == b"new content"
        report = x.verify()
        assert report.ok, report.problems
        assert any("no file points at" in n for n in report.notes)


def test_compact_after_replacing_packed_files(tmp_path: Path) -> None:
    from znippy_sql.write.compact import compact_archive

    entries = corpus()
    arc = write(tmp_path / "p.znippy", entries)
    ap.append_archive(arc, [Entry("src/b/big.txt", data=b"small now")], workers=1)
    report = compact_archive(arc)
    assert report.rewritten
    with open_archive(arc) as a:
        assert a.verify().ok
        for e in entries:
            want = b"small now" if e.relative_path == "src/b/big.txt" else e.data
            assert a.read(e.relative_path) == want


def _edit_lookup(data: bytes, edit) -> bytes:  # type: ignore[no-untyped-def]
    """The archive with ``edit(rows)`` applied to ``__lookup__`` and to every sub-index."""
    secs = sections(data)
    out = {}
    for name, raw in secs.items():
        if name == "__lookup__" or not name.startswith("__"):
            t = pa.ipc.open_stream(pa.py_buffer(raw)).read_all()
            rows = t.to_pylist()
            edit(rows)
            out[name] = stream(pa.Table.from_pylist(rows, schema=t.schema))
    return rebuild(data, out)


def test_slice_outside_its_blob_is_a_format_error(tmp_path: Path) -> None:
    entries = corpus()
    data = write(tmp_path / "p.znippy", entries).read_bytes()
    victim = "src/a/f010.py"

    def edit(rows):  # type: ignore[no-untyped-def]
        for r in rows:
            if r["relative_path"] == victim:
                r["inner_offset"] += 10 << 20
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(_edit_lookup(data, edit))
    with open_archive(bad) as a:
        with pytest.raises(FormatError, match="outside its decoded blob"):
            a.read(victim)
        report = a.verify()
        assert not report.ok and any("outside" in p for p in report.problems)


def test_partial_overlap_is_refused_by_verify(tmp_path: Path) -> None:
    entries = corpus()
    data = write(tmp_path / "p.znippy", entries).read_bytes()

    def edit(rows):  # type: ignore[no-untyped-def]
        for r in rows:
            if r["relative_path"] == "src/a/f011.py":
                r["inner_offset"] -= 5
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(_edit_lookup(data, edit))
    with open_archive(bad) as a:
        report = a.verify()
    assert any("overlaps another slice partially" in p for p in report.problems)


def test_inner_offset_on_a_raw_row_is_refused(tmp_path: Path) -> None:
    entries = corpus()
    data = write(tmp_path / "p.znippy", entries).read_bytes()

    def edit(rows):  # type: ignore[no-untyped-def]
        for r in rows:
            if r["relative_path"] == "src/b/noise.bin":
                r["inner_offset"] = 3
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(_edit_lookup(data, edit))
    with open_archive(bad) as a, pytest.raises(FormatError, match="non-zero inner_offset"):
        a.read("src/b/noise.bin")


def test_cli_pack_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from znippy_sql.cli import main

    src = tmp_path / "src"
    for e in corpus():
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data or b"")
    packed, plain = tmp_path / "p.znippy", tmp_path / "n.znippy"
    assert main(["create", str(src), "-o", str(packed), "--pack", "--no-posix"]) == 0
    assert "small files into" in capsys.readouterr().out
    assert main(["create", str(src), "-o", str(plain), "--no-pack", "--no-posix"]) == 0
    assert packed.stat().st_size < plain.stat().st_size
    with open_archive(packed) as a:
        assert "inner_offset" in a.lookup.schema.names
    # append follows the archive: the new files are packed too, without the flag
    more = tmp_path / "more" / "new"
    more.mkdir(parents=True)
    for i in range(20):
        (more / f"n{i}.txt").write_bytes(text_bytes(500 + i, i))
    assert main(["append", str(packed), str(tmp_path / "more"), "--no-posix"]) == 0
    with open_archive(packed) as a:
        rows = [r for r in a.lookup.to_pylist() if r["relative_path"].startswith("new/")]
        assert len(rows) == 20 and max(r["inner_offset"] for r in rows) > 0
        assert a.verify().ok


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=40),
       st.sampled_from([1, 2]))
def test_property_pack_unpack_any_small_files(tmp_path: Path, blobs: list[bytes],
                                              workers: int) -> None:
    entries = [Entry(f"d{i % 3}/f{i:03d}", data=b) for i, b in enumerate(blobs)]
    entries.sort(key=lambda e: e.relative_path)
    arc = tmp_path / f"h{os.getpid()}-{len(blobs)}-{workers}.znippy"
    if arc.exists():
        arc.unlink()
    write_archive(arc, entries, pack=True, workers=workers)
    with open_archive(arc) as a:
        for e in entries:
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok
    arc.unlink()


def test_duckdb_and_polars_over_packs(tmp_path: Path) -> None:
    """Views, ``znippy_cat`` and Polars scans read a packed archive; ``blob_size`` of a
    packed file is its whole shared blob (docs/format.md, "Packed blobs"), ``stored_size``
    its share of it (tests/test_stored_share.py)."""
    import duckdb

    from znippy_sql.duckdb import register
    from znippy_sql.polars import read_files, scan

    entries = corpus()
    arc = write(tmp_path / "p.znippy", entries)
    data = {e.relative_path: e.data for e in entries}
    con = duckdb.connect()
    try:
        register(con, arc, "p")
        got = con.sql("SELECT relative_path, size, blob_size FROM p_files").fetchall()
        assert {p: s for p, s, _ in got} == {p: len(d) for p, d in data.items()}
        with open_archive(arc) as a:
            for path, _, blob in got:
                assert blob == a.find(path).stored_size
            lookup = a.lookup.to_pylist()
        assert con.sql("SELECT * FROM p_lookup").to_arrow_table().to_pylist() == lookup
        for path in ("src/a/f007.py", "src/b/copy1.py", "src/b/empty.txt"):
            row = con.sql(f"SELECT content FROM znippy_cat('p', '{path}')").fetchall()
            assert row == [(data[path],)]
        files_cols = con.sql("SELECT * FROM p_files LIMIT 0").columns
        assert "inner_offset" not in files_cols  # not a module column
        chunks = con.sql("SELECT relative_path, inner_offset FROM p_chunks").fetchall()
        assert dict(chunks) == {r["relative_path"]: r["inner_offset"] for r in lookup}
    finally:
        con.close()
    assert scan(arc, "lookup").collect().to_dicts() == lookup
    got = scan(arc, "chunks").select("relative_path", "inner_offset").collect()
    assert dict(zip(got["relative_path"], got["inner_offset"])) == {
        r["relative_path"]: r["inner_offset"] for r in lookup}
    assert "inner_offset" not in scan(arc, "files").collect_schema().names()
    df = read_files(arc, ["src/a/f003.py", "src/b/big.txt"])
    assert dict(zip(df["relative_path"], df["content"])) == {
        p: data[p] for p in ("src/a/f003.py", "src/b/big.txt")}


@pytest.mark.parametrize("golden_name", ["golden-v4-packed", "golden-v5-default",
                                         "golden-v6-default"])
def test_golden_packed_archive(tmp_path: Path, golden_name: str) -> None:
    """tests/data/golden-v6-default.znippy: the writer's defaults reproduce it byte for byte;
    golden-v4-packed (packs closed per group, the rule before) and golden-v5-default (before
    directory packs) still read. Of all, pyarrow
    alone reads every stream (compressed ones included), the OpenZL binding alone decodes
    every blob and each slice matches its BLAKE3."""
    import sys

    import blake3
    import openzl.ext as zl

    data_dir = Path(__file__).parent / "data"
    sys.path.insert(0, str(data_dir))
    import make_golden

    golden = (data_dir / f"{golden_name}.znippy").read_bytes()
    if golden_name == "golden-v6-default":
        out = tmp_path / "g.znippy"
        make_golden.write_golden_default(out)
        assert out.read_bytes() == golden, f"see tests/data/README.md ({golden_name})"
    secs = sections(golden)
    lookup = pa.ipc.open_stream(pa.py_buffer(secs["__lookup__"])).read_all()
    for name, raw in secs.items():
        if name != "__trie__":
            pa.ipc.open_stream(pa.py_buffer(raw)).read_all()
    files = {p: d for (_, _, p), d in (make_golden.golden_default_files()
                                       if golden_name == "golden-v6-default"
                                       else make_golden.golden_packed_files()).items()}
    got: dict[str, bytes] = {}
    for r in lookup.to_pylist():
        blob = golden[r["blob_offset"] : r["blob_offset"] + r["blob_size"]]
        if r["compressed"]:
            blob = zl.DCtx().decompress(blob)[0].content.as_bytes()
        piece = blob[r["inner_offset"] : r["inner_offset"] + r["uncompressed_size"]]
        assert blake3.blake3(piece).digest() == r["checksum"]
        got[r["relative_path"]] = got.get(r["relative_path"], b"") + piece
    assert got == files
    with open_archive(data_dir / f"{golden_name}.znippy") as a:
        assert a.verify().ok
        assert {p: a.read(p) for p in files} == files
        assert "inner_offset" in a.lookup.schema.names


def test_info_counts_packs(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    arc = write(tmp_path / "p.znippy", corpus(), index_compression=True)
    cli = Path(sys.executable).parent / "znippy-sql"
    out = subprocess.run([str(cli), "info", "--json", str(arc)],
                         check=True, capture_output=True, text=True).stdout
    info = json.loads(out)
    assert info["packs"] >= 1 and info["packed_files"] >= 80
    assert info["pack_bytes"] > info["pack_stored_bytes"] > 0
    assert info["dedup_saved_bytes"] >= 0 and info["index_bytes_per_row"] > 0


def test_remote_reads_a_pack_in_one_get(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP (a real server on 127.0.0.1): the files of one pack read in turn cost one GET
    of the pack; an extract fetches each pack once, not once per file."""
    from remote_server import RangeServer

    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))
    entries = corpus(n=200)
    arc = write(tmp_path / "p.znippy", entries, index_compression=True)
    data = {e.relative_path: e.data for e in entries}
    srv = RangeServer()
    try:
        srv.put("p.znippy", arc.read_bytes())
        with open_archive(arc) as local:
            first = local.find("src/a/f010.py")
            same = [p for p in data if p.startswith("src/a/") and local.find(p).chunks[0]
                    .blob_offset == first.chunks[0].blob_offset]
            packs = len({r for r, z in zip(local.lookup.column("blob_offset").to_pylist(),
                                           local.lookup.column("blob_size").to_pylist()) if z})
        assert len(same) > 5
        with open_archive(f"{srv.url}/p.znippy", cache=False) as remote:
            remote.find(same[0])
            srv.reset()
            for p in same:
                assert remote.read(p) == data[p]
            assert len(srv.gets()) == 1
            srv.reset()
            report = remote.extract(tmp_path / "x", workers=1)
            assert report.ok and report.files == len(entries)
            assert len(srv.gets()) <= packs
    finally:
        srv.close()
    for p, d in data.items():
        assert (tmp_path / "x" / p).read_bytes() == d


def test_pack_without_dedup_stores_duplicates_in_the_pack(tmp_path: Path) -> None:
    entries = corpus()
    arc = write(tmp_path / "p.znippy", entries, dedup=False, workers=2)
    with open_archive(arc) as a:
        rows = {r["relative_path"]: r for r in a.lookup.to_pylist()}
        for e in entries:
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok
    orig, copy = rows["src/a/f000.py"], rows["src/b/copy0.py"]
    assert (orig["blob_offset"], orig["inner_offset"]) != (copy["blob_offset"],
                                                           copy["inner_offset"])


def test_views_carry_inner_offset(tmp_path: Path) -> None:
    """The view catalog is where DuckDB, Polars, ``ls`` and ``info`` read from: its
    ``chunks`` and ``lookup`` have ``inner_offset`` right after the base columns in a packed
    archive (and not otherwise), ``files`` has no such module column, and the lookup built
    in memory (an archive without ``__lookup__``) keeps it."""
    from znippy_sql import views
    from znippy_sql.format.schema import PACKED_LOOKUP_SCHEMA
    from znippy_sql.read.memlookup import memory_lookup

    arc = write(tmp_path / "p.znippy", corpus())
    plain = write(tmp_path / "u.znippy", corpus(), pack=False)
    assert views.schema(str(arc), "chunks").names[8] == "inner_offset"
    assert views.schema(str(arc), "lookup").equals(PACKED_LOOKUP_SCHEMA)
    assert "inner_offset" not in views.schema(str(arc), "files").names
    assert "inner_offset" not in views.schema(str(plain), "chunks").names
    with open_archive(arc) as a:
        lookup = a.lookup
        assert memory_lookup(a.groups, a.group_table).equals(lookup)
    got = views.batches(str(arc), "chunks", ["relative_path", "inner_offset"]).read_all()
    want = {r["relative_path"]: r["inner_offset"] for r in lookup.to_pylist()}
    assert dict(zip(got["relative_path"].to_pylist(), got["inner_offset"].to_pylist())) == want
    assert views.batches(str(arc), "lookup").read_all().equals(lookup)


def test_member_equal_to_a_raw_written_pack_is_shared(tmp_path: Path) -> None:
    """A pack that is written raw (its frame not smaller: one small incompressible member)
    still lends its content to a later identical member, whether or not it was placed by
    the time that member arrived: one-shot and append agree."""
    noise = random.Random(5).randbytes(90)
    a = [Entry("x/a.pom", data=noise, repo="r1"), Entry("x/b.txt", data=text_bytes(3000, 1))]
    b = [Entry("y/a.pom", data=noise), Entry("y/c.txt", data=text_bytes(2000, 2))]
    one = write(tmp_path / "one.znippy", a + b)
    with open_archive(one) as arc:
        rows = {r["relative_path"]: r for r in arc.lookup.to_pylist()}
    assert (rows["x/a.pom"]["blob_offset"], rows["x/a.pom"]["compressed"]) == \
        (rows["y/a.pom"]["blob_offset"], False)
    grown = write(tmp_path / "grown.znippy", a)
    ap.append_archive(grown, b, workers=1)
    assert grown.read_bytes() == one.read_bytes()


def test_store_packs_and_seals_like_a_one_shot(tmp_path: Path) -> None:
    """A new store packs and compresses its index (the defaults, recorded at creation); its
    seal equals the one-shot write of the same adds (each a new top-level tree); a store
    made before packing existed keeps its layout; other options at a reopen are refused."""
    from znippy_sql import StoreError
    from znippy_sql.store import open_store, seal
    from znippy_sql.store.iceberg import NS_INDEX, NS_PACK

    first = corpus("a", 40, 1) + [Entry("a2/x.txt", data=text_bytes(900, 3), repo="r2")]
    second = corpus("b", 30, 2)
    sidecar, wh = tmp_path / "blobs.znippy", tmp_path / "wh"
    with open_store(sidecar, wh, "p") as store:
        assert store.options.pack and store.options.index_compression
        store.add(first, workers=2)
    with open_store(sidecar, wh, "p") as store:  # a restart
        store.add(second)
        assert all("inner_offset" in g.schema.names for g in store._groups.values())
    with pytest.raises(StoreError, match="znippy.pack=1"):
        open_store(sidecar, wh, "p", pack=False)
    one = write(tmp_path / "one.znippy", first + second, workers=2)
    sealed = tmp_path / "sealed.znippy"
    seal(sidecar, wh, "p", sealed)
    assert sealed.read_bytes() == one.read_bytes()
    with open_archive(sealed) as a:
        assert a.packed and a.verify().ok

    old_side, old_wh = tmp_path / "old.znippy", tmp_path / "old-wh"
    with open_store(old_side, old_wh, "o") as store:  # then made to look like an older one
        store.catalog.update_namespace_properties("o", removals={NS_PACK, NS_INDEX})
    with open_store(old_side, old_wh, "o") as store:
        assert not store.options.pack and not store.options.index_compression
        store.add(first)
    plain = tmp_path / "plain.znippy"
    write_archive(plain, first, pack=False, index_compression=False)
    seal(old_side, old_wh, "o", tmp_path / "old-sealed.znippy")
    assert (tmp_path / "old-sealed.znippy").read_bytes() == plain.read_bytes()


def test_point_read_decodes_a_prefix_of_the_pack(tmp_path: Path) -> None:
    """A cold read of a file early in a big pack decodes the pack only that far (at least
    PREFIX_MIN); a file further on decodes further, or the whole; every byte is right, and
    verify still decodes every pack whole."""
    from znippy_sql.read.reader import PREFIX_MIN

    entries = [Entry(f"s/f{i:04d}.txt", data=text_bytes(20_000, i)) for i in range(150)]
    arc = write(tmp_path / "p.znippy", entries)
    with open_archive(arc) as a:
        first = a.find("s/f0000.txt")
        assert first is not None
        pack = first.chunks[0]
        assert a.read("s/f0000.txt") == entries[0].data
        offset, size, part, whole, _ = a.blob_cache.last  # type: ignore[misc]
        assert (offset, size, whole) == (pack.blob_offset, pack.blob_size, False)
        assert part.nbytes == PREFIX_MIN < 150 * 20_000
        assert a.read("s/f0003.txt") == entries[3].data  # inside the prefix: no new decode
        assert a.blob_cache.last[2] is part  # type: ignore[index]
        for e in reversed(entries):
            assert a.read(e.relative_path) == e.data
        assert a.verify().ok


def test_cli_store_add_no_pack_is_fixed_at_creation(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from znippy_sql.cli import main
    from znippy_sql.store import open_store, seal

    src = tmp_path / "src"
    for e in corpus("a", 30):
        (src / e.relative_path).parent.mkdir(parents=True, exist_ok=True)
        (src / e.relative_path).write_bytes(e.data)  # type: ignore[arg-type]
    where = ["--sidecar", str(tmp_path / "s.znippy"), "--warehouse", str(tmp_path / "wh"),
             "--namespace", "n"]
    assert main(["store", "add", *where, str(src), "--no-pack", "--no-index-compression"]) == 0
    assert main(["store", "add", *where, str(src), "--pack"]) == 2  # fixed at creation
    assert "znippy.pack=0" in capsys.readouterr().err
    with open_store(tmp_path / "s.znippy", tmp_path / "wh", "n") as store:
        assert not store.options.pack and not store.options.index_compression
    seal(tmp_path / "s.znippy", tmp_path / "wh", "n", tmp_path / "sealed.znippy")
    plain = tmp_path / "plain.znippy"
    write_archive(plain, str(src), pack=False, index_compression=False)
    assert (tmp_path / "sealed.znippy").read_bytes() == plain.read_bytes()
