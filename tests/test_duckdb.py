"""DuckDB views and macros, each checked against pyarrow-only readings of the same archive."""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyroaring import BitMap

from conftest import self_signed_signer
from _query_expect import BASE, RawView, by_path, contents, corpus
from znippy_sql import ReservedSection, ZnippyError, open_archive, write_archive
from znippy_sql.duckdb import register, unregister
from znippy_sql.format.gitindex import encode_oid_index
from znippy_sql.format.schema import META_SCHEMA

OPTIONAL = ("meta", "signatures", "git_objects", "git_commits", "git_reach")


def _signer() -> Any:
    return self_signed_signer("query test")


OIDS = [bytes([b]) * 20 for b in (0x10, 0xA0, 0x33)]


def git_sections() -> list[ReservedSection]:
    oid_index = encode_oid_index([(OIDS[0], 0, 12, 1), (OIDS[1], 1, 400, 3),
                                  (OIDS[2], 0, 99, 2)])
    graph = pa.table({
        "oid": pa.array([OIDS[0]], pa.binary(20)),
        "parents": pa.array([[]], pa.list_(pa.binary(20))),
        "tree": pa.array([OIDS[2]], pa.binary(20)),
        "generation": pa.array([1], pa.uint32()),
        "commit_time": pa.array([1_700_000_000], pa.int64()),
    })
    reach = pa.table({"oid": pa.array([OIDS[0]], pa.binary(20)),
                      "bitmap": pa.array([BitMap([0, 1, 2]).serialize()], pa.binary())})
    return [ReservedSection("__gunnar_oid__", oid_index),
            ReservedSection("__gunnar_graph__", graph),
            ReservedSection("__gunnar_reach__", reach)]


META = pa.table({"relative_path": [None, "docs/readme.txt", "notes/a.txt"],
                 "key": ["release", "license", "license"],
                 "value": ["1.0", "MIT", "Apache-2.0"]}, schema=META_SCHEMA)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("q") / "full.znippy"
    write_archive(out, corpus(), block_size=256, workers=1, fsync=False, signer=_signer(),
                  reserved_sections=[ReservedSection("__meta__", META), *git_sections()])
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("q") / "plain-one.znippy"
    write_archive(out, corpus(), block_size=256, workers=1, fsync=False)
    return out


@pytest.fixture()
def con() -> Any:
    c = duckdb.connect()
    yield c
    c.close()


def rows(con: Any, sql: str) -> list[dict[str, Any]]:
    return con.sql(sql).to_arrow_table().to_pylist()


def test_files_view_matches_pyarrow(con: Any, full: Path) -> None:
    assert register(con, full) == "full"
    got = rows(con, "SELECT * FROM full_files ORDER BY relative_path")
    expected = RawView(full).files()
    assert by_path(got) == expected
    cols = con.sql("SELECT * FROM full_files LIMIT 0").columns
    assert cols[:11] == ["relative_path", "repo", "pkg_type", "pkg_type_name", "module_name", "size",
                         "stored_size", "blob_size", "chunks", "compressed", "digest"]
    assert {"maven_group_id", "pypi_name"} <= set(cols)
    pom = next(r for r in got if r["relative_path"].endswith(".pom"))
    assert (pom["maven_group_id"], pom["maven_artifact_id"]) == ("org.acme", "lib")
    assert pom["chunks"] == 4 and pom["pypi_name"] is None
    assert sum(r["size"] for r in got) == sum(len(v) for v in contents().values())


def test_chunks_lookup_manifest_groups(con: Any, full: Path) -> None:
    register(con, full)
    raw = RawView(full)
    got = rows(con, "SELECT * FROM full_chunks")
    exp = raw.chunks()
    for r in exp:
        for c in raw.module_columns():
            r.setdefault(c, None)
    assert by_path(got) == by_path(exp)
    assert rows(con, "SELECT * FROM full_lookup") == raw.section("__lookup__").to_pylist()
    assert rows(con, "SELECT * FROM full_manifest") == raw.manifest.to_pylist()
    groups = rows(con, "SELECT * FROM full_groups")
    data = [r for r in raw.rows if r["pkg_type"] != -1]
    assert [(g["pkg_type"], g["repo"], g["module_name"]) for g in groups] == sorted(
        (r["pkg_type"], r["repo"], r["module_name"]) for r in data)
    files = raw.files()
    for g in groups:
        mine = [f for f in files if (f["repo"], f["pkg_type"]) == (g["repo"], g["pkg_type"])]
        assert g["files"] == len(mine)
        assert g["size"] == sum(f["size"] for f in mine)
        assert g["stored_size"] == sum(f["stored_size"] for f in mine)
        assert g["row_count"] == sum(f["chunks"] for f in mine)


def test_reserved_section_views(con: Any, full: Path) -> None:
    register(con, full)
    raw = RawView(full)
    assert rows(con, "SELECT * FROM full_meta") == raw.section("__meta__").to_pylist()
    assert rows(con, "SELECT * FROM znippy_meta('full', 'license')") == [
        {"relative_path": "docs/readme.txt", "key": "license", "value": "MIT"},
        {"relative_path": "notes/a.txt", "key": "license", "value": "Apache-2.0"}]
    from znippy_sql.provenance.sign import signatures_table

    sigs = rows(con, "SELECT * FROM full_signatures")
    with open_archive(full) as a:
        assert sigs == signatures_table(a).to_pylist()
    assert {s["relative_path"] for s in sigs} == set(contents()) | {None}
    lookup = raw.section("__lookup__").to_pylist()
    objs = rows(con, "SELECT * FROM full_git_objects ORDER BY ordinal")
    assert [o["oid"] for o in objs] == sorted(OIDS)
    assert [o["ordinal"] for o in objs] == [0, 1, 2]
    by_oid = {o["oid"]: o for o in objs}
    assert (by_oid[OIDS[1]]["offset"], by_oid[OIDS[1]]["type_name"]) == (400, "blob")
    assert by_oid[OIDS[1]]["pack_path"] == lookup[1]["relative_path"]
    assert by_oid[OIDS[2]]["pack_path"] == lookup[0]["relative_path"]
    assert rows(con, "SELECT * FROM full_git_commits") == raw.section(
        "__gunnar_graph__").to_pylist()
    reach = rows(con, "SELECT * FROM full_git_reach")
    assert list(BitMap.deserialize(reach[0]["bitmap"])) == [0, 1, 2]


def view_names(con: Any) -> set[str]:
    return {r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE temporary").fetchall()}


def test_absent_sections_have_no_views(con: Any, plain: Path) -> None:
    name = register(con, plain)
    assert name == "plain_one"
    views = view_names(con)
    for suffix in ("files", "chunks", "manifest", "groups", "lookup"):
        assert f"plain_one_{suffix}" in views
    for suffix in OPTIONAL:
        assert f"plain_one_{suffix}" not in views
    with pytest.raises(duckdb.CatalogException):
        con.execute("SELECT * FROM plain_one_meta").fetchall()


def test_ls_and_cat_macros(con: Any, full: Path) -> None:
    register(con, full, "a")
    files = RawView(full).files()

    def ls(**kw: Any) -> list[str]:
        args = "".join(f", {k} := {v!r}" if isinstance(v, str) else f", {k} := {v}"
                       for k, v in kw.items())
        return [r["relative_path"] for r in rows(con, f"SELECT * FROM znippy_ls('a'{args})")]

    assert ls() == [f["relative_path"] for f in files]
    assert ls(repo="local") == [f["relative_path"] for f in files if f["repo"] == "local"]
    maven = [f["relative_path"] for f in files if f["pkg_type"] == 1]
    assert ls(pkg_type=1) == maven and ls(pkg_type="maven") == maven
    assert ls(pkg_type="maven2") == maven and ls(pkg_type="1") == maven
    assert ls(repo="central", pkg_type=0) == ["docs/empty.txt", "docs/readme.txt"]
    want = [f["relative_path"] for f in files if fnmatch.fnmatchcase(f["relative_path"], "*.jar")]
    assert ls(glob="*.jar") == want and len(want) == 2
    assert ls(glob="notes/*", repo="local") == ["notes/a.txt", "notes/b.md", "notes/sub/c.txt"]
    with pytest.raises(duckdb.Error, match="unknown pkg_type"):
        ls(pkg_type="nosuch")
    data = contents()
    for path in ("org/acme/lib/1.0/lib-1.0.pom", "docs/empty.txt", "notes/sub/c.txt"):
        got = rows(con, f"SELECT * FROM znippy_cat('a', '{path}')")
        assert got == [{"relative_path": path, "content": data[path]}]
    assert rows(con, "SELECT * FROM znippy_cat('a', 'no/such')") == []


def test_extract_macro_equals_archive_extract(con: Any, full: Path, tmp_path: Path) -> None:
    register(con, full, "a")
    dest = tmp_path / "sql"
    got = rows(con, f"SELECT * FROM znippy_extract('a', '{dest}', repo := 'local')")
    data = contents()
    local = sorted(p for p, f in ((f["relative_path"], f) for f in RawView(full).files())
                   if f["repo"] == "local")
    assert [r["relative_path"] for r in got] == local
    assert all(r["checksum_ok"] for r in got)
    assert [r["bytes_written"] for r in got] == [len(data[p]) for p in local]
    ref = tmp_path / "ref"
    with open_archive(full) as a:
        a.extract(ref, repo="local")
    assert _tree(dest) == _tree(ref)
    assert {p: (dest / p).read_bytes() for p in local} == {p: data[p] for p in local}
    # the same filters as a number and a name, and a glob
    d2 = tmp_path / "maven"
    got = rows(con, f"SELECT * FROM znippy_extract('a', '{d2}', pkg_type := 'maven', "
                    "glob := '*.jar')")
    assert sorted(r["relative_path"] for r in got) == sorted(
        p for p in data if p.endswith(".jar"))
    assert sorted(_tree(d2)) == sorted(p for p in data if p.endswith(".jar"))


def test_extract_writes_each_file_once_in_a_transaction(con: Any, full: Path,
                                                        tmp_path: Path) -> None:
    register(con, full, "a")
    dest = tmp_path / "once"
    con.execute("BEGIN").fetchall()
    first = rows(con, f"SELECT * FROM znippy_extract('a', '{dest}', repo := 'central')")
    stamps = {p: os.stat(dest / p).st_mtime_ns for p in _tree(dest)}
    inodes = {p: os.stat(dest / p).st_ino for p in _tree(dest)}
    again = rows(con, f"SELECT * FROM znippy_extract('a', '{dest}', repo := 'central')")
    con.execute("COMMIT").fetchall()
    assert first == again and len(first) == len(stamps) == 5
    assert {p: os.stat(dest / p).st_ino for p in _tree(dest)} == inodes
    assert {p: os.stat(dest / p).st_mtime_ns for p in _tree(dest)} == stamps


def _tree(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, names in os.walk(root):
        for n in names:
            full = Path(dirpath) / n
            out[full.relative_to(root).as_posix()] = full.read_bytes()
    return out


def test_reregister_and_two_archives(con: Any, full: Path, plain: Path) -> None:
    register(con, full, "x")
    assert "x_meta" in view_names(con)
    register(con, plain, "x")  # replaces: the optional views of `full` are gone
    views = view_names(con)
    assert "x_meta" not in views and "x_git_objects" not in views
    assert not any(v.startswith("__znippy_x_git") for v in views)
    assert con.sql("SELECT count(*) FROM x_files").fetchall()[0] == (len(contents()),)
    register(con, full, "y")
    joined = con.sql("SELECT count(*) FROM x_files a JOIN y_files b USING (relative_path) "
                     "WHERE a.digest = b.digest").fetchall()[0]
    assert joined == (len(contents()),)
    # views scan the same buffers any number of times
    for _ in range(3):
        assert con.sql("SELECT sum(size) FROM y_files").fetchall()[0] == (
            sum(len(v) for v in contents().values()),)
    unregister(con, "y")
    assert not any(v.startswith("y_") or v.startswith("__znippy_y_") for v in view_names(con))


def test_missing_and_corrupt_archives(con: Any, full: Path, tmp_path: Path) -> None:
    register(con, full, "good")
    with pytest.raises(ZnippyError, match="no-such.znippy"):
        register(con, tmp_path / "no-such.znippy")
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(b"not an archive at all, just some bytes")
    with pytest.raises(ZnippyError, match="bad.znippy"):
        register(con, bad)
    # a sub-index whose bytes are damaged: caught when registering, not by a crash later
    raw = RawView(full)
    row = next(r for r in raw.rows if r["pkg_type"] == 1)
    damaged = bytearray(raw.data)
    mid = row["index_offset"] + row["index_len"] // 2
    damaged[mid:mid + 64] = b"\xff" * 64
    hurt = tmp_path / "hurt.znippy"
    hurt.write_bytes(bytes(damaged))
    with pytest.raises(ZnippyError, match="hurt.znippy"):
        register(con, hurt, "good")
    # the connection still works and still holds the good archive
    assert con.sql("SELECT count(*) FROM good_files").fetchall()[0] == (len(contents()),)
    assert con.sql("SELECT 1 + 1").fetchall()[0] == (2,)


def test_filters_reach_the_right_groups(con: Any, full: Path) -> None:
    register(con, full, "a")
    plan = "\n".join(r[1] for r in con.execute(
        "EXPLAIN SELECT relative_path FROM a_files WHERE repo = 'local'").fetchall())
    # the central groups' constants fold the filter away: only the local groups are scanned
    local = [r for r in RawView(full).rows if r["pkg_type"] != -1 and r["repo"] == "local"]
    groups = [r for r in RawView(full).rows if r["pkg_type"] != -1]
    # multi-chunk files: each group's part scans its sub-index twice (first rows, sums)
    assert plan.count("PYTHON_ARROW_SCAN") == 2 * len(local) == 4 < 2 * len(groups)
    got = rows(con, "SELECT relative_path FROM a_files WHERE repo = 'local' ORDER BY 1")
    assert [r["relative_path"] for r in got] == sorted(
        f["relative_path"] for f in RawView(full).files() if f["repo"] == "local")


def test_archive_with_no_files(con: Any, tmp_path: Path) -> None:
    out = tmp_path / "empty.znippy"
    write_archive(out, [], workers=1, fsync=False)
    register(con, out)
    assert rows(con, "SELECT * FROM empty_files") == []
    assert rows(con, "SELECT * FROM empty_chunks") == []
    assert rows(con, "SELECT * FROM empty_groups") == []
    assert rows(con, "SELECT * FROM znippy_ls('empty')") == []
    assert rows(con, f"SELECT * FROM znippy_extract('empty', '{tmp_path / 'o'}')") == []


def test_copied_archive_registers_under_its_own_stem(con: Any, full: Path,
                                                      tmp_path: Path) -> None:
    copy = tmp_path / "2024-build.v1.znippy"
    shutil.copy(full, copy)
    assert register(con, copy) == "_2024_build"
    assert con.sql("SELECT count(*) FROM _2024_build_files").fetchall()[0] == (len(contents()),)
    cols = {f.name for f in con.sql("SELECT * FROM _2024_build_chunks LIMIT 0")
            .to_arrow_table().schema}
    assert set(BASE) <= cols


def test_extract_refuses_paths_outside_dest(con: Any, tmp_path: Path,
                                            raw_archive: Any) -> None:
    hostile = raw_archive([("ok.txt", b"fine"), ("../escape.txt", b"evil")])
    path = hostile.write(tmp_path / "hostile.znippy")
    register(con, path)
    dest = tmp_path / "d" / "out"
    with pytest.raises(duckdb.Error, match="escape.txt"):
        con.execute(f"SELECT * FROM znippy_extract('hostile', '{dest}')").fetchall()
    assert not (tmp_path / "d" / "escape.txt").exists()
    assert not (dest / "ok.txt").exists()  # every target is checked before anything is written
    # the same archive, only the safe file selected: extracted
    got = rows(con, f"SELECT * FROM znippy_extract('hostile', '{dest}', glob := 'ok*')")
    assert got == [{"relative_path": "ok.txt", "bytes_written": 4, "checksum_ok": True,
                    "status": "extracted", "problem": None}]
    assert (dest / "ok.txt").read_bytes() == b"fine"


def test_string_offsets_that_run_backwards_are_refused(con: Any, tmp_path: Path,
                                                        raw_archive: Any) -> None:
    def scramble(name: str, table: pa.Table) -> pa.Table:
        if name != "sub":
            return table
        col = table.column("relative_path").combine_chunks()
        validity, offsets, data = col.buffers()
        raw = bytearray(offsets.to_pybytes())
        raw[4:8], raw[8:12] = raw[8:12], raw[4:8]  # offsets[1] > offsets[2]
        bad = pa.Array.from_buffers(pa.utf8(), len(col), [validity, pa.py_buffer(bytes(raw)),
                                                          data])
        return table.set_column(0, table.schema.field(0), bad)

    arch = raw_archive([("a.txt", b"aaaa"), ("bb.txt", b"b"), ("c.txt", b"cc")])
    path = arch.write(tmp_path / "scrambled.znippy", table_edit=scramble)
    with pytest.raises(ZnippyError, match="string offsets"):
        register(con, path)
    assert con.sql("SELECT 42").fetchall() == [(42,)]


def test_oid_index_layout_and_bad_bytes() -> None:
    import struct as st

    from znippy_sql import FormatError
    from znippy_sql.format.gitindex import FIXED_LEN, decode_oid_index

    good = encode_oid_index([(OIDS[0], 0, 12, 1), (OIDS[1], 1, 400, 3), (OIDS[2], 0, 99, 2)])
    assert len(good) == FIXED_LEN + 3 * (13 + 20)
    assert good[:8] == b"ZNGITOID" and st.unpack_from("<IIQ", good, 8) == (1, 20, 3)
    fanout = st.unpack_from("<256I", good, 32)
    assert fanout[0x0F] == 0 and fanout[0x10] == 1 and fanout[0x33] == 2 and fanout[255] == 3
    t = decode_oid_index(good, lookup_rows=2)
    assert t.column("oid").to_pylist() == sorted(OIDS)
    assert t.column("offset").to_pylist() == [12, 99, 400]
    assert t.column("pack_row").to_pylist() == [0, 0, 1]
    body = FIXED_LEN
    oid_at = body + 3 * 12

    def patched(at: int, data: bytes) -> bytes:
        return good[:at] + data + good[at + len(data):]

    bad = {
        "shorter than": good[:100],
        "bad magic": patched(0, b"NOTGITOI"),
        "unsupported version": patched(8, st.pack("<I", 3)),
        "neither 20 nor 32": patched(12, st.pack("<I", 24)),
        "cannot hold": patched(16, st.pack("<Q", 4)),
        "strictly ascending": patched(oid_at, OIDS[2]),
        "unknown git object type": patched(oid_at + 60, b"\x05"),
        "not cumulative": patched(32, st.pack("<I", 9)),
    }
    for why, data in bad.items():
        with pytest.raises(FormatError, match=why):
            decode_oid_index(data, path="x.znippy")
    with pytest.raises(FormatError, match="past the lookup"):
        decode_oid_index(good, lookup_rows=1)


def test_oid_index_version_2_carries_the_position_order() -> None:
    import struct as st

    from znippy_sql import FormatError
    from znippy_sql.format.gitindex import FIXED_LEN, OidIndex, decode_oid_index

    rows = [(OIDS[0], 0, 12, 1), (OIDS[1], 1, 400, 3), (OIDS[2], 0, 99, 2)]
    positions = [OIDS[1], OIDS[2], OIDS[0]]
    good = encode_oid_index(rows, positions=positions)
    assert len(good) == FIXED_LEN + 3 * (17 + 20)
    assert st.unpack_from("<IIQ", good, 8) == (2, 20, 3)
    index = OidIndex(good)
    ordinal = {o: i for i, o in enumerate(sorted(OIDS))}
    assert index.order.tolist() == [ordinal[o] for o in positions]
    assert [index.oid(i) for i in range(3)] == sorted(OIDS)
    assert index.find(OIDS[1]) == ordinal[OIDS[1]]
    assert index.types.tolist() == [1, 2, 3]  # by oid: OIDS sorted are 0x10.., 0x33.., ...
    t = decode_oid_index(good)
    assert t.column("offset").to_pylist() == [12, 99, 400]
    at = FIXED_LEN + 3 * 12
    twice = good[:at] + st.pack("<3I", 0, 0, 1) + good[at + 12:]
    with pytest.raises(FormatError, match="not a permutation"):
        decode_oid_index(twice, path="x.znippy")
    with pytest.raises(ValueError, match="every object id once"):
        encode_oid_index(rows, positions=positions[:2])
