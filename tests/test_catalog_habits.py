"""Catalog and SQL habits a new user meets (issue 23 §5): partial ``catalog add``, ``rm`` of
an unknown archive, grouped ``catalog extract`` failures, the catalog's own tables suggested,
every statement's result of ``sql "a; b"``, one change rule for ``znippy_cat`` and the views,
no ETA before a rate is known."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.cli import main
from znippy_sql.cli.common import Progress
from znippy_sql.query.tables import CHANGED
from znippy_sql.write.append import append_archive


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b = tmp_path / "repo-a.znippy", tmp_path / "repo-b.znippy"
    write_archive(a, [Entry(f"x/{i}.txt", data=b"a%d" % i, repo="ra") for i in range(11)],
                  fsync=False)
    write_archive(b, [Entry(f"docs/{i}.txt", data=b"doc %d" % i, repo="docs") for i in range(2)],
                  fsync=False)
    return tmp_path / "wh", a, b


def _err_lines(capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    got = capsys.readouterr()
    return got.out, got.err.splitlines()


def test_add_adds_the_readable_archives_and_names_the_others(two, tmp_path, capsys) -> None:
    wh, a, b = two
    missing = tmp_path / "missing.znippy"
    junk = tmp_path / "junk.znippy"
    junk.write_bytes(b"x" * 64)
    assert main(["catalog", "add", str(wh), str(a), str(missing), str(junk), str(b)]) == 1
    out, err = _err_lines(capsys)
    assert "2 archives added" in out and "2 archives not added" in out
    assert len(err) == 2 and "missing.znippy" in err[0] and "junk.znippy" in err[1]
    assert all(line.startswith("znippy-sql: catalog add: ") for line in err)
    assert main(["catalog", "sql", str(wh), "SELECT count(*) n FROM archives", "--format",
                 "csv"]) == 0
    assert capsys.readouterr().out.split()[-1] == "2"
    assert main(["catalog", "add", str(wh), str(missing)]) == 2  # nothing could be read
    capsys.readouterr()
    assert main(["catalog", "add", str(wh), str(missing), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert list(report["failed"]) == [str(missing)]


def test_rm_of_an_archive_not_in_the_catalog(two, capsys) -> None:
    wh, a, b = two
    assert main(["catalog", "add", str(wh), str(a)]) == 0
    capsys.readouterr()
    assert main(["catalog", "rm", str(wh), str(b)]) == 2
    out, err = _err_lines(capsys)
    assert err == [f"znippy-sql: catalog rm: {b}: not in the catalog"]
    assert main(["catalog", "rm", str(wh), str(a), str(b)]) == 2  # a removed, b named
    out, err = _err_lines(capsys)
    assert "1 archive removed" in out and len(err) == 1


def test_extract_from_a_missing_archive_is_one_grouped_line(two, tmp_path, capsys) -> None:
    wh, a, b = two
    assert main(["catalog", "add", str(wh), str(a), str(b)]) == 0
    a.unlink()
    capsys.readouterr()
    assert main(["catalog", "extract", str(wh), "--where", "true", "-o",
                 str(tmp_path / "o")]) == 1
    out, err = _err_lines(capsys)
    assert "2 files from 2 archives" in out and "11 failed" in out
    assert len(err) == 2, err  # the group, and how to see every one
    assert err[0].startswith("znippy-sql: catalog extract: 11 files: cannot open the archive")
    assert main(["catalog", "extract", str(wh), "--where", "true", "-o",
                 str(tmp_path / "o2"), "-v"]) == 1
    assert len(_err_lines(capsys)[1]) == 11


def test_a_misspelt_table_lists_the_catalogs_tables(two, capsys) -> None:
    wh, a, _ = two
    assert main(["catalog", "add", str(wh), str(a)]) == 0
    capsys.readouterr()
    assert main(["catalog", "sql", str(wh), "SELECT * FROM fils"]) == 2
    err = capsys.readouterr().err
    assert "no table 'fils'" in err and "files and archives" in err and "pg_" not in err


def test_sql_prints_every_statements_result(two, capsys) -> None:
    _, a, _ = two
    assert main(["sql", str(a), "SELECT 1 AS one; CREATE TEMP TABLE t AS SELECT 2 AS x; "
                 "SELECT count(*) AS n FROM repo_a_files; SELECT x FROM t",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ['"one"', "1", '"n"', "11", '"x"', "2"]
    assert main(["sql", str(a), "SELECT 1 AS one; SELECT nope"]) == 2
    got = capsys.readouterr()
    assert "one" in got.out and "nope" in got.err


def test_znippy_cat_follows_the_views_rule_on_a_changed_archive(two) -> None:
    from znippy_sql.duckdb import register

    _, a, _ = two
    con = duckdb.connect()
    register(con, a, "a")
    got = con.sql("SELECT content FROM znippy_cat('a', 'x/1.txt')").fetchall()
    assert got == [(b"a1",)]
    append_archive(a, [Entry("x/new.txt", data=b"new", repo="ra")])
    with pytest.raises(duckdb.Error, match=CHANGED):
        con.sql("SELECT count(*) FROM a_files").fetchall()
    with pytest.raises(duckdb.Error, match=CHANGED):
        con.sql("SELECT content FROM znippy_cat('a', 'x/new.txt')").fetchall()
    register(con, a, "a")  # registered again: both see the new archive
    assert con.sql("SELECT content FROM znippy_cat('a', 'x/new.txt')").fetchall() == [(b"new",)]


def test_no_eta_until_a_rate_is_known() -> None:
    p = Progress("extract", total=100, total_bytes=10 << 30, stream=io.StringIO())
    p(1, 1000)  # the first frame: a few bytes in a few microseconds
    assert "ETA --:--" in p.line()
    p._first = (p._first[0] - 2.0, 1000)  # two seconds later, 1 GiB more
    p._state = (50, 1000 + (1 << 30))
    line = p.line()
    assert "ETA --:--" not in line and "ETA 0:1" in line  # ~18 s left at 0.5 GiB/s
