"""Every subcommand takes its positionals anywhere among its options, as tar takes members
(``extract A.znippy -o DIR PATH``, ``ls A.znippy -l PATH``): options before, between and after
the paths give the same answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "m2.znippy"
    write_archive(path, [Entry("junit/junit/4.13.2/junit-4.13.2.pom", b"<project/>\n"),
                         Entry("junit/junit/4.13.2/junit-4.13.2.jar", b"PK" + bytes(50)),
                         Entry("org/other/1.0/other-1.0.pom", b"<project>o</project>\n")])
    return path


@pytest.mark.parametrize("order", ["after", "between", "before"])
def test_ls_takes_paths_anywhere(archive: Path, order: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    a, member = str(archive), "junit/junit/4.13.2"
    argv = {"after": ["ls", a, member, "-l"], "between": ["ls", a, "-l", member],
            "before": ["ls", "-l", a, member]}[order]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "junit-4.13.2.pom" in out and "junit-4.13.2.jar" in out and "other" not in out


@pytest.mark.parametrize("order", ["after", "between", "before"])
def test_extract_takes_paths_anywhere(archive: Path, tmp_path: Path, order: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, out_dir = str(archive), str(tmp_path / f"xs-{order}")
    argv = {"after": ["extract", a, "junit", "-o", out_dir],
            "between": ["extract", a, "-o", out_dir, "junit"],
            "before": ["extract", "-o", out_dir, a, "--exclude", "*.jar", "junit"]}[order]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    got = sorted(str(p.relative_to(out_dir)) for p in Path(out_dir).rglob("*") if p.is_file())
    want = ["junit/junit/4.13.2/junit-4.13.2.pom"]
    if order != "before":
        want.insert(0, "junit/junit/4.13.2/junit-4.13.2.jar")
    assert got == want


def test_cat_and_info_and_sql_take_options_anywhere(archive: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    a = str(archive)
    code, out, err = run(["info", "--json", a], capsys)
    assert code == 0 and json.loads(out)["files"] == 3, err
    code, out, err = run(["sql", a, "--format", "csv",
                          "SELECT count(*) AS n FROM m2_files"], capsys)
    assert code == 0, err
    assert out.split()[-1] == "3"
    code, out, err = run(["sql", "--format", "json", a, "SELECT 1 AS one"], capsys)
    assert code == 0 and json.loads(out) == {"one": 1}, err
    code, out, err = run(["ls", a, "--json", "org", "--exclude", "*.jar"], capsys)
    assert code == 0 and [r["relative_path"] for r in json.loads(out)] == \
        ["org/other/1.0/other-1.0.pom"], err


def test_create_and_verify_take_options_anywhere(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "tree"
    src.mkdir()
    (src / "a.txt").write_bytes(b"a\n")
    out = tmp_path / "t.znippy"
    code, _, err = run(["create", "-o", str(out), str(src), "--pkg-type", "pypi"], capsys)
    assert code == 0, err
    code, out_text, err = run(["verify", "--json", str(out), "-v"], capsys)
    assert code == 0 and json.loads(out_text)["ok"], err


def test_catalog_subcommands_take_options_anywhere(
        archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two levels of subcommands: the leaf takes its positionals among its options."""
    cat = str(tmp_path / "cat")
    assert run(["catalog", "init", cat], capsys)[0] == 0
    code, _, err = run(["catalog", "add", cat, str(archive)], capsys)
    assert code == 0, err
    code, out, err = run(["catalog", "sql", "--format", "csv", cat,
                          "SELECT count(*) AS n FROM files"], capsys)
    assert code == 0 and out.split()[-1] == "3", err
    code, out, err = run(["catalog", "sql", cat, "--format", "csv",
                          "SELECT count(*) AS n FROM files"], capsys)
    assert code == 0 and out.split()[-1] == "3", err


def test_unknown_option_still_refused(archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["ls", str(archive), "--no-such-option", "junit"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_double_dash_ends_options(archive: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["ls", str(archive), "--", "-l"], capsys)
    assert code == 2 and "-l" in err  # a member named "-l": not found, not the option
