"""Several archives under one name (DuckDB, Polars, ``znippy-sql sql``), and views or scans of
an archive that was appended to in place since it was registered (issue 16, items 13-14)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from znippy_sql import Entry, append_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.errors import ZnippyError
from znippy_sql.polars import read_files, scan
from znippy_sql.read.reader import open_archive

CHANGED = "archive changed since it was registered; register it again"


@pytest.fixture
def dumps(tmp_path: Path) -> Path:
    d = tmp_path / "dumps"
    d.mkdir()
    write_archive(d / "rel.v1.znippy", [Entry("a.txt", data=b"one", repo="r1"),
                                        Entry("b.txt", data=b"bee", repo="r2")], fsync=False)
    write_archive(d / "rel.v2.znippy", [Entry("a.txt", data=b"two!", repo="r1")], fsync=False)
    write_archive(d / "other.znippy", [Entry("o.txt", data=b"o" * 10, repo="r1")], fsync=False)
    return d


def _scans(con: Any, sql: str) -> int:
    plan = "\n".join(r[1] for r in con.execute("EXPLAIN " + sql).fetchall())
    return plan.count("ARROW_SCAN")


def test_duckdb_glob_and_list(dumps: Path) -> None:
    con = duckdb.connect()
    assert register(con, dumps / "*.znippy") == "dumps"  # stems differ: the folder's name
    got = con.sql("SELECT archive, relative_path, size FROM dumps_files ORDER BY ALL").fetchall()
    assert got == [(str(dumps / "other.znippy"), "o.txt", 10),
                   (str(dumps / "rel.v1.znippy"), "a.txt", 3),
                   (str(dumps / "rel.v1.znippy"), "b.txt", 3),
                   (str(dumps / "rel.v2.znippy"), "a.txt", 4)]
    assert con.sql("SELECT count(*) FROM dumps__archive").fetchall() == [(3,)]
    assert con.sql("SELECT archive, count(*) FROM dumps_groups GROUP BY 1 ORDER BY 1"
                   ).fetchall() == [(str(dumps / n), c) for n, c in
                                    (("other.znippy", 1), ("rel.v1.znippy", 2),
                                     ("rel.v2.znippy", 1))]
    # pruning per archive and per group: one sub-index of four is scanned
    q = (f"SELECT relative_path FROM dumps_chunks WHERE archive = '{dumps / 'rel.v1.znippy'}' "
         "AND repo = 'r2'")
    assert _scans(con, q) == 1 and con.sql(q).fetchall() == [("b.txt",)]
    assert _scans(con, "SELECT * FROM dumps_chunks") == 4
    # a list of archives sharing a stem: named after it
    assert register(con, [dumps / "rel.v1.znippy", dumps / "rel.v2.znippy"]) == "rel"
    assert con.sql("SELECT * FROM znippy_cat('rel', 'a.txt') ORDER BY 2").fetchall() == [
        ("a.txt", b"one"), ("a.txt", b"two!")]
    with pytest.raises(ZnippyError, match="no archive matches"):
        register(con, dumps / "none-*.znippy")
    with pytest.raises(ValueError, match="give name="):
        register(con, [dumps / "rel.v1.znippy", dumps / "other.znippy"])


def test_polars_glob_and_list(dumps: Path) -> None:
    lf = scan(str(dumps / "rel.*.znippy"))
    assert "archive" in lf.collect_schema().names()
    v2 = str(dumps / "rel.v2.znippy")
    got = lf.filter(pl.col("archive") == v2).select("relative_path", "size").collect().rows()
    assert got == [("a.txt", 4)]
    # the pruned archive's sub-indexes are never read
    archives = [open_archive(dumps / n) for n in ("rel.v1.znippy", "rel.v2.znippy")]
    pruned = scan(archives).filter(pl.col("archive") == v2)  # reads the schema messages
    before = [a.source.bytes_read for a in archives]
    pruned.collect()
    assert archives[0].source.bytes_read == before[0]
    assert archives[1].source.bytes_read > before[1]
    both = read_files(None, lf.select("archive", "relative_path").sort("archive"))
    assert both.get_column("content").to_list() == [b"one", b"bee", b"two!"]
    manifest = scan([dumps / "rel.v1.znippy", dumps / "other.znippy"], "manifest").collect()
    assert manifest.get_column("archive").n_unique() == 2


def test_sql_cli_globs_and_as(dumps: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # two archives of one stem, given separately (as a shell expands a glob): one set
    assert main(["sql", str(dumps / "rel.v1.znippy"), str(dumps / "rel.v2.znippy"),
                 "SELECT count(*) AS n FROM rel_files", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"n": 3}
    assert main(["sql", str(dumps / "*.znippy"), "SELECT count(DISTINCT archive) AS n "
                 "FROM dumps_files", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"n": 3}
    assert main(["sql", "--as", f"old={dumps / 'rel.v1.znippy'}", "--as",
                 f"new={dumps / 'rel.v2.znippy'}", "SELECT n.size - o.size AS d FROM new_files n "
                 "JOIN old_files o USING (relative_path)", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"d": 1}


def test_registered_views_detect_an_in_place_append(dumps: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = dumps / "rel.v1.znippy"
    con = duckdb.connect()
    register(con, path, "one")
    register(con, dumps / "*.znippy", "all")
    assert con.sql("SELECT count(*) FROM one_files").fetchall() == [(2,)]
    lazy = scan(path)
    lookup = scan(path, "lookup")
    assert lazy.collect().height == 2
    append_archive(path, [Entry("c.txt", data=b"sea")])
    for view in ("one_files", "one_chunks", "one_lookup", "one_manifest", "one_groups",
                 "all_files"):
        with pytest.raises(duckdb.Error, match=CHANGED):
            con.sql(f"SELECT * FROM {view}").fetchall()
    # the other archives of the set are still read
    assert con.sql(f"SELECT count(*) FROM all_files WHERE archive <> '{path}'"
                   ).fetchall() == [(2,)]
    for frame in (lazy, lookup):
        with pytest.raises(ZnippyError, match=CHANGED):
            frame.collect()
    register(con, path, "one")  # registering again sees the appended file
    assert con.sql("SELECT count(*) FROM one_files").fetchall() == [(3,)]
    assert scan(path).collect().height == 3
