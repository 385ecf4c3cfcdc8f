"""``Catalog.sql``: what is pushed into the Iceberg scans never changes a result.

Every query is run twice: through the catalog (pruned scans) and by DuckDB over the two tables
read whole by a plain pyiceberg scan; the results must be equal.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from pyiceberg.expressions import AlwaysTrue

from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.catalog.pushdown import analyse

QUERIES = [
    "SELECT relative_path, size FROM files WHERE repo = 'r1' ORDER BY ALL",
    "SELECT * FROM files WHERE pkg_type = 1 AND size > 55 ORDER BY archive_uri, relative_path",
    "SELECT relative_path FROM files WHERE 'r2' = repo AND 60 >= size ORDER BY ALL",
    "SELECT count(*) n FROM files WHERE repo IN ('r0', 'r2')",
    "SELECT count(*) n FROM files WHERE repo NOT IN ('r0') AND relative_path LIKE 'com/%'",
    "SELECT count(*) n FROM files WHERE relative_path LIKE 'x/_.txt'",
    "SELECT count(*) n FROM files WHERE repo = 'r1' OR pkg_type = 1",
    "SELECT count(*) n FROM files WHERE (repo = 'r1' AND size < 3) OR relative_path = 'x/0.txt'",
    "SELECT count(*) n FROM files WHERE maven_version IS NULL",
    "SELECT count(*) n FROM files WHERE maven_version IS NOT NULL",
    "SELECT count(*) n FROM files WHERE NOT (repo = 'r1')",
    "SELECT count(*) n FROM files WHERE size > 1.5",
    "SELECT count(*) n FROM files WHERE pkg_type = '1'",
    "SELECT count(*) n FROM files WHERE size < 99999999999999999999999",
    "SELECT a.archive_uri, count(*) n FROM archives a JOIN files f USING (archive_uri) "
    "WHERE f.repo = 'r1' GROUP BY ALL ORDER BY ALL",
    "SELECT a.archive_uri, f.relative_path FROM archives a LEFT JOIN files f "
    "ON a.archive_uri = f.archive_uri AND f.repo = 'r1' WHERE f.relative_path IS NULL "
    "ORDER BY ALL",
    "SELECT a.archive_uri, f.relative_path FROM archives a LEFT JOIN files f "
    "ON f.archive_uri = a.archive_uri WHERE f.repo = 'r0' ORDER BY ALL",
    "SELECT count(*) n FROM (SELECT * FROM files WHERE repo = 'r0' UNION ALL "
    "SELECT * FROM files)",
    "WITH x AS (SELECT * FROM files WHERE repo = 'r2') SELECT count(*) n FROM x "
    "WHERE size > 0",
    "SELECT (SELECT count(*) FROM files WHERE repo = 'r0') a, count(*) b FROM files",
    "SELECT f FROM files f WHERE repo = 'r1' ORDER BY f.relative_path, f.archive_uri",
    "SELECT COLUMNS('maven_.*') FROM files WHERE pkg_type = 1 ORDER BY ALL",
    "SELECT REPO, count(*) n FROM FILES WHERE Repo = 'r1' GROUP BY ALL",
    "SELECT relative_path, len(chunks) c FROM files WHERE size BETWEEN 2 AND 60 ORDER BY ALL",
    "SELECT count(*) n FROM files TABLESAMPLE 100% (bernoulli) WHERE repo = 'r1'",
    "SELECT archive_uri, files FROM archives WHERE files > 3 ORDER BY 1",
    "DESCRIBE files",
]


@pytest.fixture(scope="module")
def cat(tmp_path_factory):
    d: Path = tmp_path_factory.mktemp("sqlfleet")
    paths = []
    for i in range(6):
        p = d / f"r{i % 3}-{i}.znippy"
        write_archive(p, [Entry(f"x/{j}.txt", data=b"y" * j, repo=f"r{i % 3}")
                          for j in range(i + 2)])
        paths.append(p)
    mvn = d / "m.znippy"
    write_archive(mvn, [Entry(f"com/acme/l/1.{j}/l-1.{j}.jar", data=b"PK" * (25 + j * 5),
                              pkg_type="maven", repo="r1") for j in range(3)])
    c = open_catalog(d / "wh", create=True)
    c.add([*paths, mvn])
    return c


@pytest.mark.parametrize("query", QUERIES)
def test_pushdown_never_changes_a_result(cat, query):
    control = duckdb.connect()
    control.register("files", cat.files_table.scan().to_arrow())
    control.register("archives", cat.archives_table.scan().to_arrow())
    expect = control.sql(query).to_arrow_table()
    got = cat.sql(query)
    if "ORDER BY" in query or "count" in query:
        assert got.to_pylist() == expect.to_pylist()
    else:
        assert sorted(map(str, got.to_pylist())) == sorted(map(str, expect.to_pylist()))


def _use(cat, query):
    from znippy_sql.catalog.query import table_columns

    tables = {"files": table_columns(cat.files_table),
              "archives": table_columns(cat.archives_table)}
    return analyse(duckdb.connect(), query, tables)


def test_what_is_pushed(cat):
    u = _use(cat, "SELECT relative_path FROM files WHERE repo = 'r1' AND size > 2")["files"]
    assert u.columns == {"relative_path", "repo", "size"}
    assert "repo" in repr(u.filter) and "size" in repr(u.filter)
    u = _use(cat, "SELECT * FROM files f JOIN archives a USING (archive_uri) "
                  "WHERE f.repo = 'r1' AND files > 2")
    assert u["files"].columns is None and "repo" in repr(u["files"].filter)
    assert u["archives"].filter == AlwaysTrue()  # 'files' is unqualified in a join
    for q in ("SELECT * FROM files WHERE maven_version IS NULL",
              "SELECT * FROM files WHERE NOT (repo = 'r1')",
              "SELECT * FROM files WHERE size > 1.5",
              "SELECT * FROM files WHERE relative_path LIKE 'x/_%'",
              "SELECT * FROM files WHERE repo = 'r1' UNION ALL SELECT * FROM files",
              "SELECT * FROM files TABLESAMPLE 10% WHERE repo = 'r1'"):
        assert _use(cat, q)["files"].filter == AlwaysTrue(), q
    u = _use(cat, "SELECT * FROM files WHERE repo = 'r1' UNION ALL "
                  "SELECT * FROM files WHERE repo = 'r2'")["files"]
    assert repr(u.filter).startswith("Or(")
    u = _use(cat, "SELECT count(*) FROM files")["files"]
    assert u.columns == set() and u.filter == AlwaysTrue()
    assert _use(cat, "SELECT 42") == {}
    assert _use(cat, "this is not sql")["files"].columns is None


def test_pushdown_prunes_data_files(cat):
    plan = cat.plan("SELECT * FROM files WHERE repo = 'r1'")["files"]
    assert plan["data_files"] == 3 and plan["table_files"] == 7
    plan = cat.plan("SELECT * FROM files WHERE archive_uri LIKE '%r1-1%'")["files"]
    assert plan["data_files"] == 7  # not a prefix: not pushed
