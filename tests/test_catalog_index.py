"""The catalog's path index ``paths`` (catalog/index.py) and the cached planner (planning.py):
a query by path reads ``paths`` or only the archives it lists, with the answer of a plain
``files`` scan; add/replace/rm keep it equal to ``files``; a plain pyiceberg client reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.catalog.index import PATHS


def _archive(path: Path, day: int, repo: str, n: int = 30) -> Path:
    write_archive(path, [Entry(f"com/acme/a{i}/{i % 3}.jar", data=b"%d-%d" % (day, i) * (i + 1),
                               pkg_type="maven", repo=repo) for i in range(n)], fsync=False)
    return path


def _catalog(root: Path):
    d = root / "fleet"
    d.mkdir()
    arcs = [_archive(d / f"r{r}-d{day}.znippy", day, f"r{r}") for r in range(2)
            for day in range(3)]
    c = open_catalog(root / "wh", create=True)
    c.add(arcs, batch_archives=2)
    c.arcs = arcs
    return c


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    """Six archives in three commits; read only by the tests that take it."""
    return _catalog(tmp_path_factory.mktemp("index"))


def _both(cat, query: str):
    """The query through the index, and through ``files`` alone (the index switched off)."""
    got = cat.sql(query).to_pylist()
    cat.has_index = False
    try:
        want = cat.sql(query).to_pylist()
    finally:
        cat.has_index = True
    key = lambda r: sorted(map(str, r.items()))  # noqa: E731
    return sorted(got, key=key), sorted(want, key=key)


QUERIES = [
    "SELECT archive_uri, size FROM files WHERE relative_path = 'com/acme/a7/1.jar'",
    "SELECT relative_path, repo FROM files WHERE relative_path IN ('com/acme/a7/1.jar', "
    "'com/acme/a8/2.jar', 'nope') AND repo = 'r1'",
    "SELECT count(*) n, sum(size) s FROM files WHERE relative_path LIKE 'com/acme/a1%'",
    "SELECT archive_uri, chunks, maven_artifact_id FROM files "
    "WHERE relative_path = 'com/acme/a7/1.jar' OR relative_path LIKE 'com/acme/a2%'",
    "SELECT * FROM files WHERE relative_path = 'nope'",
]


@pytest.mark.parametrize("query", QUERIES)
def test_queries_by_path_answer_as_files_does(cat, query):
    got, want = _both(cat, query)
    assert got == want
    assert "nope" in query or got


def test_a_point_query_reads_one_index_file_or_only_the_listed_archives(cat):
    plan = cat.plan("SELECT archive_uri, size FROM files "
                    "WHERE relative_path = 'com/acme/a7/1.jar'")["files"]
    assert plan["index"] == "read" and plan["data_files"] == 3  # one per commit of 2 archives
    plan = cat.plan("SELECT chunks FROM files WHERE relative_path = 'com/acme/a7/1.jar' "
                    "AND repo = 'r0'")["files"]
    assert plan["index"] == "pruned" and plan["archives"] == 3 and plan["data_files"] == 3
    assert cat.plan("SELECT chunks FROM files WHERE relative_path = 'x'")["files"][
        "data_files"] == 0
    plan = cat.plan("SELECT size FROM files WHERE repo = 'r0' OR relative_path = 'x'")
    assert plan["files"]["index"] == ""  # the path is not bounded in every branch


def test_replace_and_rm_keep_the_index_equal_to_files(tmp_path):
    cat = _catalog(tmp_path)
    q = "SELECT archive_uri, size FROM files WHERE relative_path = 'com/acme/a4/1.jar'"
    old = cat.arcs[0]
    write_archive(old, [Entry("com/acme/a4/1.jar", data=b"new" * 100, repo="r0")],
                  fsync=False)
    report = cat.add(cat.arcs)
    assert (report.replaced, report.unchanged) == (1, 5)
    got, want = _both(cat, q)
    assert got == want and {"archive_uri": str(old), "size": 300} in got
    cat.remove([cat.arcs[1], old])
    got, want = _both(cat, q)
    assert got == want and len(got) == 4
    rows = cat.table(PATHS).scan().to_arrow()
    assert rows.num_rows == cat.table("files").scan().to_arrow().num_rows == 4 * 30


def test_a_catalog_without_the_index_is_reindexed(tmp_path):
    from test_catalog import plain_catalog

    _catalog(tmp_path)
    plain = plain_catalog(tmp_path / "wh")
    assert plain.load_table("fleet.paths").scan().to_arrow().num_rows == 180
    plain.drop_table("fleet.paths")  # a catalog made before the index
    old = open_catalog(tmp_path / "wh")
    assert not old.has_index and old.sql("SELECT count(*) n FROM files WHERE relative_path "
                                         "= 'com/acme/a4/1.jar'").to_pylist() == [{"n": 6}]
    again = open_catalog(tmp_path / "wh", create=True)  # init again: built from files
    assert again.has_index and again.plan("SELECT size FROM files WHERE relative_path = "
                                          "'com/acme/a4/1.jar'")["files"]["index"] == "read"
    assert again.reindex() == 180
    with plain.load_table("fleet.paths").update_schema() as u:  # an index of other names
        u.rename_column("size", "bytes")
    assert not open_catalog(tmp_path / "wh").has_index  # not used: files answers
    again = open_catalog(tmp_path / "wh", create=True)  # rebuilt
    assert again.has_index and again.reindex() == 180
    got, want = _both(again, QUERIES[2])
    assert got == want
    assert again.verify().ok
    from pyiceberg.expressions import EqualTo

    lost = str(again.archives().column("archive_uri")[0])
    again.table(PATHS).delete(EqualTo("archive_uri", lost))  # an index gone wrong
    assert {(d.archive_uri, d.kind) for d in again.verify().drift} == {(lost, "index")}
    again.reindex()
    assert again.verify().ok
    assert len(plain.load_table("fleet.paths").scan().plan_files()) >= 1


def test_cached_planning_plans_what_pyiceberg_plans(cat):
    from pyiceberg.expressions import AlwaysTrue, EqualTo, In

    from znippy_sql.catalog import planning

    files = cat.table("files")
    for flt in (AlwaysTrue(), EqualTo("repo", "r1"), EqualTo("relative_path", "com/acme/a4/1.jar"),
                In("archive_uri", [str(a) for a in cat.arcs[:3]])):
        want = sorted(t.file.file_path for t in files.scan(row_filter=flt).plan_files())
        planning.clear()
        assert sorted(t.file.file_path for t in planning.plan_files(files, flt)) == want
        assert sorted(t.file.file_path for t in planning.plan_files(files, flt)) == want


@pytest.mark.parametrize("query", [*QUERIES, "SELECT repo, count(*) n, sum(size) s FROM files "
                                   "WHERE repo = 'r1' GROUP BY repo",
                                   "SELECT * FROM archives WHERE files > 3",
                                   "SELECT archive_uri, added_at, root_digest, size FROM "
                                   "archives WHERE files > 3",
                                   "SELECT f.relative_path, f.digest, a.added_at FROM files f "
                                   "JOIN archives a USING (archive_uri) WHERE f.repo = 'r0'"])
def test_duckdb_and_the_dataset_read_give_arrowscans_rows(cat, monkeypatch, query):
    """The three readers of planned files: DuckDB's ``read_parquet`` view (duckread.py),
    the pyarrow dataset (fastread.py) and pyiceberg's ArrowScan give the same result."""
    from znippy_sql.catalog import query as q

    key = lambda r: sorted(map(str, r.items()))  # noqa: E731
    got = cat.sql(query)
    monkeypatch.setattr(q, "DIRECT", [False])  # the Arrow path: the dataset read
    dataset = cat.sql(query)
    monkeypatch.setattr(q, "read_tasks", lambda *a: None)  # pyiceberg's ArrowScan only
    want = cat.sql(query)
    for other in (got, dataset):
        assert other.schema.names == want.schema.names
        assert other.schema.types == want.schema.types
        assert sorted(other.to_pylist(), key=key) == sorted(want.to_pylist(), key=key)


def test_duckdb_reads_the_planned_files_only_when_it_reads_what_arrowscan_would(cat):
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.table import FileScanTask

    from znippy_sql.catalog.duckread import view_sql
    from znippy_sql.catalog.planning import plan_files

    plan = cat.plan("SELECT count(*) n, sum(size) s FROM files WHERE repo = 'r1'")["files"]
    assert plan["reader"] == "duckdb" and plan["data_files"] == 3
    plan = cat.plan("SELECT relative_path FROM files WHERE relative_path LIKE 'com/acme/a1%'")
    assert plan["files"]["reader"] == "duckdb" and plan["files"]["index"] == "read"
    # an optional column (a module column: not in every data file) → the Arrow path
    assert cat.plan("SELECT maven_artifact_id FROM files WHERE repo = 'r1'"
                    )["files"]["reader"] == "arrow"
    assert cat.plan("SELECT * FROM archives")["archives"]["reader"] == "arrow"  # meta
    files = cat.table("files")
    tasks = plan_files(files, AlwaysTrue())
    assert view_sql(files, tasks, ["relative_path"], AlwaysTrue()) is not None
    assert view_sql(files, [], ["relative_path"], AlwaysTrue()) is None
    # a data file with a delete file (another engine's merge-on-read delete): ArrowScan
    # applies it, DuckDB would not, so it is never read that way
    marked = [FileScanTask(tasks[0].file, delete_files={tasks[1].file}), *tasks[1:]]
    assert view_sql(files, marked, ["relative_path"], AlwaysTrue()) is None


def test_duckdb_views_and_registered_tables_alternate_in_a_given_connection(cat):
    import duckdb

    con = duckdb.connect()
    direct = "SELECT count(*) n FROM files WHERE repo = 'r1'"
    arrow = "SELECT count(*) + 0 * count(maven_artifact_id) n FROM files WHERE repo = 'r1'"
    for _ in range(2):
        assert cat.sql(direct, con=con).to_pylist() == [{"n": 90}]
        assert con.sql("SELECT count(*) FROM files").fetchall() == [(90,)]
        assert cat.sql(arrow, con=con).to_pylist() == [{"n": 90}]


def test_the_dataset_read_only_where_names_are_ids(tmp_path):
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import AlwaysTrue, GreaterThan
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.types import StringType

    from znippy_sql.catalog.fastread import read_tasks
    from znippy_sql.catalog.planning import plan_files

    ice = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    ice.create_namespace("n")
    t = ice.create_table("n.t", schema=pa.schema([("a", pa.int64()), ("b", pa.string())]))
    t.append(pa.table({"a": [1, 2], "b": ["x", "y"]}))
    with t.update_schema() as u:  # a module column arriving later: NULL in the older file
        u.add_column("c", StringType())
    t = ice.load_table("n.t")
    t.append(pa.table({"a": [3], "b": ["z"], "c": ["new"]}).cast(t.schema().as_arrow()))

    def both(tbl, flt):
        tasks = plan_files(tbl, flt)
        scan = tbl.scan(row_filter=flt)
        want = ArrowScan(tbl.metadata, tbl.io, scan.projection(), flt).to_table(tasks)
        return read_tasks(tbl, tasks, None, flt), want

    got, want = both(t, GreaterThan("a", 1))
    assert got is not None and sorted(got.to_pylist(), key=str) == sorted(
        want.to_pylist(), key=str) == [{"a": 2, "b": "y", "c": None},
                                       {"a": 3, "b": "z", "c": "new"}]
    with t.update_schema() as u:  # a rename: names no longer say ids
        u.rename_column("b", "bb")
    got, want = both(ice.load_table("n.t"), AlwaysTrue())
    assert got is None and sorted(want.column("bb").to_pylist()) == ["x", "y", "z"]


def test_a_query_sees_a_commit_made_by_another_process(tmp_path):
    """Queries reuse a loaded table while the catalog names the same metadata file; a commit
    from elsewhere (here a second Catalog object, as another process would) moves it on."""
    cat = _catalog(tmp_path)
    q = "SELECT count(*) n FROM files WHERE repo = 'r0'"
    assert cat.sql(q).to_pylist() == [{"n": 90}]
    assert cat.table_for_read("files") is cat.table_for_read("files")  # nothing changed
    other = open_catalog(tmp_path / "wh")
    extra = _archive(tmp_path / "fleet" / "r0-d9.znippy", 9, "r0")
    other.add([extra])
    assert cat.sql(q).to_pylist() == [{"n": 120}]
    other.remove([extra])
    assert cat.sql(q).to_pylist() == [{"n": 90}]
