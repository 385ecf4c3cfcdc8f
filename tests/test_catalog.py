"""The catalog of many archives: real Iceberg tables, read back by clients that know nothing of
znippy_sql (a plain pyiceberg ``SqlCatalog``, ``pl.scan_iceberg``), archives built by an
independent writer (``RawArchive``: pyarrow, ducer, blake3 only)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import blake3
import duckdb
import pyarrow as pa
import pytest

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.errors import CatalogError, ZnippyError
from znippy_sql.format.codec import decoder
from znippy_sql.provenance.meta import Meta


def maven_entries(version: str, n: int = 4) -> list[Entry]:
    out = []
    for i in range(n):
        base = f"com/acme/lib{i}/{version}/lib{i}-{version}"
        out.append(Entry(base + ".jar", data=b"PK" + bytes([i]) * (50 + i), pkg_type="maven",
                         repo="releases"))
        out.append(Entry(base + ".pom", data=f"<project>{i}</project>".encode(),
                         pkg_type="maven", repo="releases"))
    return out


def raw_entries(seed: int, n: int = 5) -> list[Entry]:
    return [Entry(f"src/mod{seed}/f{i}.txt", data=(b"line %d %d\n" % (seed, i)) * (i + 1),
                  repo="snapshots") for i in range(n)]


@pytest.fixture
def fleet(tmp_path: Path) -> dict[str, Path]:
    """Three archives: maven (releases), raw + a multi-chunk file (snapshots), and one
    written by the independent builder (untyped)."""
    d = tmp_path / "fleet"
    d.mkdir()
    a = d / "rel-a.znippy"
    write_archive(a, maven_entries("1.4.2"))
    b = d / "snap-b.znippy"
    big = Entry("src/big.bin", data=bytes(range(256)) * 700, repo="snapshots")  # 3 chunks
    write_archive(b, [*raw_entries(1), big], block_size=65536)
    return {"a": a, "b": b, "d": d}


def plain_catalog(warehouse: Path):
    """The documented way any pyiceberg client opens the default catalog."""
    from pyiceberg.catalog.sql import SqlCatalog

    wh = warehouse.resolve()
    return SqlCatalog("znippy", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")


def file_digest(path: str, checksums: list[bytes]) -> bytes:
    """FORMAT §4, written out here again."""
    h = blake3.blake3(b"znippy-file-v1\0" + path.encode() + b"\0"
                      + struct.pack("<I", len(checksums)))
    for seq, c in enumerate(checksums):
        h.update(struct.pack("<I", seq) + c)
    return h.digest()


def test_rows_read_back_by_a_plain_pyiceberg_client(tmp_path, fleet, raw_archive):
    files = [("z/last.txt", b"zz"), ("a/first.txt", b"hello"), ("m/empty", b"")]
    raw = raw_archive(files).write(fleet["d"] / "raw-d.znippy")
    cat = open_catalog(tmp_path / "wh", create=True)
    report = cat.add([fleet["a"], fleet["b"], raw])
    assert (report.added, report.replaced, report.unchanged) == (3, 0, 0)

    plain = plain_catalog(tmp_path / "wh")
    rows = plain.load_table("fleet.files").scan(
        row_filter=f"archive_uri = '{raw.resolve()}'").to_arrow().sort_by("relative_path")
    assert rows.column("relative_path").to_pylist() == ["a/first.txt", "m/empty", "z/last.txt"]
    expect = sorted(files)
    offsets = {p: off for p, off in zip([f[0] for f in files],
                                        [0, 2, 7])}  # the builder writes blobs in given order
    for row, (path, data) in zip(rows.to_pylist(), expect):
        assert row["size"] == len(data) and row["repo"] == "" and row["pkg_type"] == 0
        (chunk,) = row["chunks"]
        assert chunk == {"blob_offset": offsets[path], "blob_size": len(data),
                         "compressed": False, "uncompressed_size": len(data),
                         "checksum": blake3.blake3(data).digest()}
        assert row["digest"] == file_digest(path, [blake3.blake3(data).digest()])
    arch = plain.load_table("fleet.archives").scan().to_arrow()
    by_uri = {r["archive_uri"]: r for r in arch.to_pylist()}
    rec = by_uri[str(raw.resolve())]
    root = blake3.blake3(b"znippy-archive-v1\0")
    for path, data in expect:
        root.update(path.encode() + b"\0" + file_digest(path, [blake3.blake3(data).digest()]))
    assert rec["root_digest"] == root.digest()
    assert (rec["files"], rec["groups"], rec["chunk_rows"]) == (3, 1, 3)
    assert rec["size"] == raw.stat().st_size
    assert rec["etag_or_mtime"] == f"mtime:{raw.stat().st_mtime_ns}"
    # the multi-chunk file: its chunks in order, contiguous
    big = plain.load_table("fleet.files").scan(
        row_filter="relative_path = 'src/big.bin'").to_arrow().to_pylist()[0]
    assert [c["uncompressed_size"] for c in big["chunks"]] == [65536, 65536, 256 * 700 - 131072]
    with open_archive(fleet["b"]) as b:
        data = bytearray()
        for c in big["chunks"]:  # fetched by byte range from the catalog's rows alone
            blob = bytes(b.source.read(c["blob_offset"], c["blob_size"]).to_pybytes())
            part = decoder().decode(blob, c["uncompressed_size"]) if c["compressed"] else blob
            assert blake3.blake3(part).digest() == c["checksum"]
            data += part
        assert bytes(data) == bytes(range(256)) * 700


def test_add_reads_only_the_tail(fleet):
    from znippy_sql.catalog.rows import read_rows

    for path in (fleet["a"], fleet["b"]):
        got = read_rows(str(path))
        size = path.stat().st_size
        assert 0 < got.tail_offset and got.bytes_read <= size - got.tail_offset


def test_polars_scan_iceberg_reads_the_same_tables(tmp_path, fleet, monkeypatch):
    import polars as pl

    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"], fleet["b"]])
    df = (pl.scan_iceberg(cat.files_table).filter(pl.col("repo") == "releases")
          .select("relative_path", "maven_version", "size").collect().sort("relative_path"))
    expect = cat.sql("SELECT relative_path, maven_version, size FROM files "
                     "WHERE repo = 'releases' ORDER BY relative_path")
    assert df.to_arrow().to_pylist() == expect.to_pylist()
    assert df.height == 8 and set(df["maven_version"]) == {"1.4.2"}
    arch = pl.scan_iceberg(cat.archives_table).select("archive_uri", "files").collect()
    assert sorted(arch.rows()) == [(str(fleet["a"]), 8), (str(fleet["b"]), 6)]


def test_add_noop_replace_and_rm(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"], fleet["b"]])
    snaps = len(cat.files_table.snapshots())
    again = cat.add([fleet["a"], fleet["b"]])
    assert (again.added, again.replaced, again.unchanged, again.commits) == (0, 0, 2, 0)
    assert len(cat.files_table.snapshots()) == snaps  # nothing committed

    write_archive(fleet["a"], maven_entries("1.5.0", n=2))  # same name, new content
    os.utime(fleet["a"], ns=(1, 1))  # a different mtime whatever the clock's resolution
    meta_before = len(cat.files_table.metadata.metadata_log)
    r = cat.add([fleet["a"], fleet["b"]])
    assert (r.added, r.replaced, r.unchanged, r.rows) == (0, 1, 1, 4)
    assert len(cat.files_table.metadata.metadata_log) == meta_before + 1  # one commit
    got = cat.sql("SELECT archive_uri, maven_version, count(*) n FROM files "
                  "GROUP BY ALL ORDER BY ALL").to_pylist()
    assert got == [{"archive_uri": str(fleet["a"]), "maven_version": "1.5.0", "n": 4},
                   {"archive_uri": str(fleet["b"]), "maven_version": None, "n": 6}]
    assert cat.archives(("archive_uri", "files")).to_pylist() == [
        {"archive_uri": str(fleet["a"]), "files": 4}, {"archive_uri": str(fleet["b"]),
                                                       "files": 6}]

    rm = cat.remove([fleet["a"], tmp_path / "never-added.znippy"])
    assert (rm.removed, rm.rows) == (1, 4)
    assert cat.sql("SELECT DISTINCT archive_uri FROM files").column(0).to_pylist() == [
        str(fleet["b"])]
    assert cat.archives(("archive_uri",)).column(0).to_pylist() == [str(fleet["b"])]
    assert cat.verify().ok


def test_replacing_an_archive_drops_only_its_data_files(tmp_path, fleet):
    """Partitioned by archive_uri: a replace deletes whole files, never rewrites others."""
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"], fleet["b"]])
    before = {t.file.file_path for t in cat.files_table.scan().plan_files()}
    b_files = {t.file.file_path for t in cat.files_table.scan(
        row_filter=f"archive_uri = '{fleet['b']}'").plan_files()}
    write_archive(fleet["a"], maven_entries("2.0.0"))
    os.utime(fleet["a"], ns=(2, 2))
    cat.add([fleet["a"]])
    after = {t.file.file_path for t in cat.files_table.scan().plan_files()}
    assert b_files <= after and b_files <= before  # b's files untouched
    assert not (before - b_files) & after  # a's old files gone, not rewritten


def test_schema_grows_when_a_new_module_appears(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["b"]])
    names = {f.name for f in cat.files_table.schema().fields}
    assert not any(n.startswith(("maven_", "pypi_")) for n in names)
    cat.add([fleet["a"]])
    names = {f.name for f in cat.files_table.schema().fields}
    assert {"maven_group_id", "maven_artifact_id", "maven_version"} <= names
    py = fleet["d"] / "py-c.znippy"
    write_archive(py, [Entry("simple/acme/acme_tools-2.0.1-py3-none-any.whl", data=b"PK" * 9,
                             pkg_type="pypi", repo="pypi-local")])
    cat.add([py])
    schema = cat.files_table.schema()
    assert schema.find_field("pypi_name").optional
    assert schema.find_field("maven_version").optional
    rows = plain_catalog(tmp_path / "wh").load_table("fleet.files").scan(
        selected_fields=("archive_uri", "maven_version", "pypi_name")).to_arrow().to_pylist()
    by = {}
    for r in rows:
        by.setdefault(r["archive_uri"], set()).add((r["maven_version"], r["pypi_name"]))
    assert by == {str(fleet["b"]): {(None, None)}, str(fleet["a"]): {("1.4.2", None)},
                  str(py): {(None, "acme-tools")}}


def test_partition_pruning_by_planned_data_files(tmp_path):
    d = tmp_path / "fleet"
    d.mkdir()
    paths = []
    for i in range(6):
        p = d / f"repo{i % 3}-day{i}.znippy"
        write_archive(p, [Entry(f"x/{j}.txt", data=b"%d" % j, repo=f"repo{i % 3}")
                          for j in range(3)])
        paths.append(p)
    mvn = d / "mvn.znippy"
    write_archive(mvn, maven_entries("1.0"))
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([*paths, mvn])
    table = plain_catalog(tmp_path / "wh").load_table("fleet.files")
    assert len(table.scan().plan_files()) == 7
    assert len(table.scan(row_filter="repo = 'repo1'").plan_files()) == 2
    assert len(table.scan(row_filter="pkg_type = 1").plan_files()) == 1
    plan = cat.plan("SELECT relative_path FROM files WHERE repo = 'repo1'")["files"]
    assert (plan["data_files"], plan["table_files"]) == (2, 7)
    plan = cat.plan("SELECT count(*) FROM files WHERE pkg_type_name = 'maven' "
                    "AND pkg_type = 1")["files"]
    assert plan["data_files"] == 1 and plan["columns"] == ["pkg_type", "pkg_type_name"]


def test_batches_make_few_commits(tmp_path):
    d = tmp_path / "fleet"
    d.mkdir()
    paths = []
    for i in range(12):
        p = d / f"a{i:02}.znippy"
        write_archive(p, [Entry(f"f{j}", data=b"%d-%d" % (i, j)) for j in range(2)])
        paths.append(p)
    cat = open_catalog(tmp_path / "wh", create=True)
    r = cat.add(paths, batch_archives=5)
    assert r.added == 12 and r.commits == 9  # 3 batches x 3 tables (files, paths, archives)
    assert len(cat.files_table.snapshots()) == 3
    assert cat.sql("SELECT count(*) n FROM files").to_pylist() == [{"n": 24}]


def test_archive_meta_facts_as_a_map(tmp_path):
    p = tmp_path / "m.znippy"
    write_archive(p, [Entry("a", data=b"1")],
                  meta=Meta(facts={"team": "platform", "tag": ["x", "y"]}, provenance=False))
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([p])
    got = cat.sql("SELECT meta['team'] t, meta['tag'] g FROM archives").to_pylist()
    assert got == [{"t": "platform", "g": "x\ny"}]


def test_bad_input_is_a_clear_error(tmp_path, fleet):
    with pytest.raises(CatalogError, match="no such warehouse"):
        open_catalog(tmp_path / "nowhere")
    cat = open_catalog(tmp_path / "wh", create=True)
    junk = tmp_path / "junk.znippy"
    junk.write_bytes(b"not an archive at all, long enough for a footer")
    with pytest.raises(ZnippyError, match="junk.znippy"):
        cat.add([junk])
    with pytest.raises(CatalogError, match="missing.znippy"):
        cat.add([tmp_path / "missing.znippy"])
    with pytest.raises(CatalogError, match="query failed"):
        cat.sql("SELECT nope FROM files")
    assert cat.archives().num_rows == 0  # nothing half-added


def test_orphans_after_a_crash_between_commits_are_reported_and_healed(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"], fleet["b"]])
    # what a crash after the files commit and before the archives commit leaves
    plain_catalog(tmp_path / "wh").load_table("fleet.archives").delete(
        f"archive_uri = '{fleet['a']}'")
    drift = cat.verify().drift
    assert [(d.archive_uri, d.kind) for d in drift] == [(str(fleet["a"]), "orphans")]
    r = cat.add([fleet["a"]])
    assert r.added == 1
    assert cat.sql("SELECT count(*) n FROM files").to_pylist() == [{"n": 14}]
    assert cat.verify().ok


def test_verify_reports_drift(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"], fleet["b"]])
    assert cat.verify().ok
    write_archive(fleet["a"], maven_entries("9.9", n=1))
    fleet["b"].unlink()
    kinds = {(d.archive_uri, d.kind) for d in cat.verify().drift}
    assert kinds == {(str(fleet["a"]), "changed"), (str(fleet["a"]), "root"),
                     (str(fleet["a"]), "rows"), (str(fleet["b"]), "missing")}


def test_a_module_column_of_a_clashing_type_is_refused(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"]])
    table = plain_catalog(tmp_path / "wh").load_table("fleet.files")
    assert str(table.schema().find_field("maven_version").field_type) == "string"
    from znippy_sql.catalog.fleet import _conform

    rows = pa.table({"maven_version": pa.array([[1]], pa.list_(pa.int64()))})
    with pytest.raises(CatalogError, match="maven_version"):
        _conform(rows, table.schema(), "fleet.files")


def test_sql_in_a_given_connection_and_duckdb_relation_results(tmp_path, fleet):
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add([fleet["a"]])
    con = duckdb.connect()
    t = cat.sql("SELECT count(*) n FROM files", con=con)
    assert t.to_pylist() == [{"n": 8}]
    assert con.sql("SELECT count(*) FROM files").fetchall() == [(8,)]


def test_module_name_column_and_a_catalog_written_before_it(tmp_path, fleet):
    """The ``files`` table names the group's module ``module_name`` (as every view does); a
    catalog written when it was ``module`` is renamed when opened (metadata only), its data
    files, written under either name, read on."""
    from znippy_sql.catalog.rows import read_rows

    wh = tmp_path / "wh"
    cat = open_catalog(wh, create=True)
    cat.add([fleet["a"]])
    assert cat.files_table.schema().find_field(6).name == "module_name"
    plain = plain_catalog(wh)
    table = plain.load_table("fleet.files")
    with table.update_schema() as update:  # the schema of a catalog written before
        update.rename_column("module_name", "module")
    table = plain.load_table("fleet.files")
    rows = read_rows(str(fleet["b"])).files.rename_columns(
        {"module_name": "module"})  # a data file written under the old name, by any client
    arrow = table.schema().as_arrow()
    table.append(pa.Table.from_arrays(
        [rows.column(f.name).cast(f.type) if f.name in rows.schema.names
         else pa.nulls(rows.num_rows, f.type) for f in arrow], schema=arrow))
    assert "module_name" not in {f.name for f in plain.load_table("fleet.files").schema().fields}
    again = open_catalog(wh)
    names = [f.name for f in again.files_table.schema().fields]
    assert "module_name" in names and "module" not in names
    got = again.sql("SELECT archive_uri, module_name, count(*) n FROM files "
                    "GROUP BY ALL ORDER BY ALL").to_pylist()
    assert got == [{"archive_uri": str(fleet["a"]), "module_name": "maven", "n": 8},
                   {"archive_uri": str(fleet["b"]), "module_name": "", "n": 6}]
    again.add([fleet["b"]])  # replaced under the new name
    assert again.sql("SELECT count(*) n FROM files").to_pylist() == [{"n": 14}]
