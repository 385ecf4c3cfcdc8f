"""``znippy-sql catalog ...``: every subcommand, its output formats and exit codes, run as a
real process where the exit code and stderr matter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.cli import main


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path, Path]:
    a, b = tmp_path / "repo-a.znippy", tmp_path / "repo-b.znippy"
    write_archive(a, [Entry(f"com/acme/x/1.{i}/x-1.{i}.jar", data=b"PK" * (i + 9),
                            pkg_type="maven", repo="releases") for i in range(3)])
    write_archive(b, [Entry(f"docs/{i}.txt", data=b"doc %d" % i, repo="docs") for i in range(2)])
    return tmp_path / "wh", a, b


CLI = Path(sys.executable).parent / "znippy-sql"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120)


def test_init_add_ls_sql_extract_verify_rm(two, tmp_path, capsys):
    wh, a, b = two
    assert main(["catalog", "init", str(wh)]) == 0
    assert "fleet.files" in capsys.readouterr().out
    assert main(["catalog", "add", str(wh), str(a), str(b)]) == 0
    assert capsys.readouterr().out.startswith("2 archives added, 0 replaced, 0 unchanged: 5 files")
    assert main(["catalog", "add", str(wh), str(a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] == 1
    assert main(["catalog", "ls", str(wh), "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["archive_uri"], r["files"]) for r in rows] == [(str(a), 3), (str(b), 2)]
    assert len(rows[0]["root_digest"]) == 64  # hex
    assert main(["catalog", "sql", str(wh), "SELECT repo, count(*) n FROM files "
                 "GROUP BY ALL ORDER BY ALL", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ['"repo","n"', '"docs",2', '"releases",3']
    assert main(["catalog", "extract", str(wh), "--where", "repo = 'releases' AND "
                 "maven_version <> '1.0'", "-o", str(tmp_path / "out")]) == 0
    assert "2 files from 1 archive" in capsys.readouterr().out
    assert (tmp_path / "out" / "repo-a" / "com/acme/x/1.2/x-1.2.jar").read_bytes() == b"PK" * 11
    assert main(["catalog", "verify", str(wh)]) == 0
    assert "no drift" in capsys.readouterr().out
    assert main(["catalog", "rm", str(wh), str(a)]) == 0
    assert "1 archive removed (3 files)" in capsys.readouterr().out


@pytest.mark.slow
def test_arrow_output_is_an_ipc_stream(two):
    wh, a, b = two
    assert cli("catalog", "add", str(wh), str(a), str(b)).returncode == 0
    out = subprocess.run([str(CLI), "catalog", "sql", str(wh),
                          "SELECT relative_path, size FROM files ORDER BY 1", "--format",
                          "arrow"], capture_output=True, timeout=120)
    assert out.returncode == 0
    table = pa.ipc.open_stream(out.stdout).read_all()
    assert table.column("relative_path").to_pylist()[:2] == ["com/acme/x/1.0/x-1.0.jar",
                                                             "com/acme/x/1.1/x-1.1.jar"]


@pytest.mark.slow
def test_drift_and_bad_input_exit_codes(two, tmp_path):
    wh, a, b = two
    r = cli("catalog", "sql", str(tmp_path / "nowhere"), "SELECT 1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such warehouse" in r.stderr
    assert cli("catalog", "add", str(wh), str(a), str(b)).returncode == 0
    junk = tmp_path / "junk.znippy"
    junk.write_bytes(b"x" * 64)
    r = cli("catalog", "add", str(wh), str(junk))
    assert r.returncode == 2 and "junk.znippy" in r.stderr and "Traceback" not in r.stderr
    r = cli("catalog", "sql", str(wh), "SELECT nope FROM files")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "query failed" in r.stderr
    r = cli("catalog", "extract", str(wh), "--where", "relative_path LIKE 'docs/%'", "-o",
            str(tmp_path / "flat"), "--flat")
    assert r.returncode == 0
    write_archive(b, [Entry("docs/0.txt", data=b"changed", repo="docs")])
    r = cli("catalog", "verify", str(wh))
    assert r.returncode == 1 and "repo-b.znippy: root:" in r.stdout
    r = cli("catalog", "extract", str(wh), "--where", "repo = 'docs'", "-o", str(tmp_path / "o"))
    assert r.returncode == 1 and "changed in the archive since add" in r.stderr
    assert cli("catalog").returncode == 2
