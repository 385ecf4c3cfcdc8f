"""``znippy-sql sql``: output formats, several archives, errors."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from _query_expect import RawView, contents, corpus
from znippy_sql import write_archive
from znippy_sql.cli import main


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cli")
    a, b = d / "repo-a.znippy", d / "repo-b.znippy"
    write_archive(a, corpus(), workers=1, fsync=False)
    write_archive(b, corpus()[:3], workers=1, fsync=False)
    return a, b


QUERY = "SELECT repo, pkg_type, count(*) AS n, sum(size) AS bytes FROM repo_a_files " \
        "GROUP BY ALL ORDER BY ALL"


def expected(path: Path) -> list[tuple[str, int, int, int]]:
    agg: dict[tuple[str, int], list[int]] = {}
    for f in RawView(path).files():
        n = agg.setdefault((f["repo"], f["pkg_type"]), [0, 0])
        n[0] += 1
        n[1] += f["size"]
    return sorted((r, t, n, b) for (r, t), (n, b) in agg.items())


def test_table_csv_json(archives: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = archives
    want = expected(a)
    assert main(["sql", str(a), QUERY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["repo", "pkg_type", "n", "bytes"]
    assert [tuple(line.split()) for line in out[2:-1]] == [tuple(map(str, w)) for w in want]
    assert out[-1] == f"({len(want)} rows)"
    assert main(["sql", str(a), QUERY, "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["repo", "pkg_type", "n", "bytes"]
    assert [tuple(r) for r in rows[1:]] == [tuple(map(str, w)) for w in want]
    assert main(["sql", "--format", "json", str(a), QUERY]) == 0
    got = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(g["repo"], g["pkg_type"], g["n"], g["bytes"]) for g in got] == want


def test_arrow_output_and_binary_columns(archives: Any, capfdbinary: Any) -> None:
    a, _ = archives
    assert main(["sql", str(a), "SELECT relative_path, digest FROM repo_a_files "
                 "ORDER BY relative_path", "--format", "arrow"]) == 0
    table = pa.ipc.open_stream(capfdbinary.readouterr().out).read_all()
    files = RawView(a).files()
    assert table.column("relative_path").to_pylist() == [f["relative_path"] for f in files]
    assert table.column("digest").to_pylist() == [f["digest"] for f in files]


def test_two_archives_and_macros(archives: Any, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = archives
    q = ("SELECT count(*) AS shared FROM repo_a_files x JOIN repo_b_files y "
         "USING (relative_path) WHERE x.digest = y.digest")
    assert main(["sql", str(a), str(b), q, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"shared": 3}
    assert main(["sql", str(a), "SELECT * FROM znippy_cat('repo_a', 'notes/b.md')",
                 "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert bytes.fromhex(row["content"]) == contents()["notes/b.md"]


def test_errors(archives: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = archives
    assert main(["sql", str(a), "SELECT * FROM nosuch_table"]) == 2
    assert "nosuch_table" in capsys.readouterr().err
    assert main(["sql", str(tmp_path / "gone.znippy"), "SELECT 1"]) == 2
    assert "gone.znippy" in capsys.readouterr().err
    assert main(["sql", "SELECT 1"]) == 2
    assert main(["sql", "--as", "x=" + str(a), "--as", "x=" + str(a), "SELECT 1"]) == 2
    assert "names 'x' twice" in capsys.readouterr().err
    assert main(["sql", "--as", "repo_a=" + str(a), str(a), "SELECT 1"]) == 2
    assert "name it with --as too" in capsys.readouterr().err
