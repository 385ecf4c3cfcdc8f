"""extract and cat as tar users expect them: named members, several --glob/--exclude,
--strip-components, -o -, cat of several paths, --version (issue 16, items 10 and 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from znippy_sql import __version__, open_archive, write_archive
from znippy_sql.cli import main

FILES = {
    "pkg/a.py": b"a = 1\n",
    "pkg/b.py": b"b = 2\n",
    "pkg/tests/test_a.py": b"assert 1\n",
    "pkg/data/x.json": b'{"x": 1}\n',
    "docs/index.md": b"# docs\n",
    "README": b"read me\n",
}


@pytest.fixture
def arc(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for rel, data in FILES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    out = tmp_path / "t.znippy"
    write_archive(out, src)
    return out


def _extracted(dest: Path) -> list[str]:
    return sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())


def _extract(arc: Path, dest: Path, *args: str, rc: int = 0) -> list[str]:
    assert main(["extract", str(arc), *args, "-o", str(dest)]) == rc
    return _extracted(dest) if dest.exists() else []


def test_named_members_files_and_directories(arc: Path, tmp_path: Path, capsys) -> None:
    assert _extract(arc, tmp_path / "m", "README", "pkg/tests") == [
        "README", "pkg/tests/test_a.py"]
    assert _extract(arc, tmp_path / "n", "pkg/nothing", rc=2) == []
    assert "'pkg/nothing': Not found in archive" in capsys.readouterr().err


def test_repeated_globs_and_excludes(arc: Path, tmp_path: Path) -> None:
    # a second --glob adds to the first (it used to replace it)
    assert _extract(arc, tmp_path / "g", "--glob", "*.md", "--glob", "README") == [
        "README", "docs/index.md"]
    assert _extract(arc, tmp_path / "e", "pkg", "--exclude", "*/tests",
                    "--exclude", "*.json") == ["pkg/a.py", "pkg/b.py"]


def test_strip_components(arc: Path, tmp_path: Path, capsys) -> None:
    got = _extract(arc, tmp_path / "s", "pkg", "--strip-components", "1")
    assert got == ["a.py", "b.py", "data/x.json", "tests/test_a.py"]
    assert (tmp_path / "s" / "tests" / "test_a.py").read_bytes() == FILES["pkg/tests/test_a.py"]
    got = _extract(arc, tmp_path / "t", "--strip-components", "1")
    out = capsys.readouterr().out
    assert "README" not in got and "skipped 'README': no more than 1 path component(s)" in out


def test_output_to_stdout_and_cat_of_several(arc: Path, tmp_path: Path, capsysbinary) -> None:
    assert main(["extract", str(arc), "pkg/a.py", "pkg/b.py", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out == FILES["pkg/a.py"] + FILES["pkg/b.py"]
    assert not Path("-").exists()  # it used to make a directory named '-'
    assert main(["extract", str(arc), "--glob", "docs/*", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out == FILES["docs/index.md"]
    assert main(["cat", str(arc), "README", "pkg/b.py"]) == 0
    assert capsysbinary.readouterr().out == FILES["README"] + FILES["pkg/b.py"]
    assert main(["cat", str(arc), "README", "nope"]) == 2  # checked before any output
    assert capsysbinary.readouterr().out == b""


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"znippy-sql {__version__}"


def test_ls_takes_the_same_selection(arc: Path, capsys) -> None:
    assert main(["ls", str(arc), "pkg", "--exclude", "*/tests", "--glob", "*.py"]) == 0
    assert capsys.readouterr().out.split() == ["pkg/a.py", "pkg/b.py"]


def test_many_failures_of_one_kind_are_one_line(tmp_path: Path, capsys) -> None:
    src = tmp_path / "many"
    src.mkdir()
    for i in range(40):
        (src / f"f{i:02}.bin").write_bytes(bytes([i]) * 700)
    arc = tmp_path / "m.znippy"
    write_archive(arc, src)
    with open_archive(arc) as a:
        offsets = [a.find(p).chunks[0].blob_offset for p in a.select()]
    with open(arc, "r+b") as fh:  # every blob damaged
        for off in offsets:
            fh.seek(off + 3)
            fh.write(b"\xff\xfe")
    assert main(["extract", str(arc), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("znippy-sql: extract: 40 files: ") and "(first: 'f00.bin'" in err[0]
    assert err[1] == "(40 in all; every one with -v or --json)"
    assert main(["extract", str(arc), "-o", str(tmp_path / "out2"), "-v"]) == 1
    assert len(capsys.readouterr().err.splitlines()) == 40
