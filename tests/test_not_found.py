"""A missing input path is "not found" (``PathNotFoundError``: a ``ZnippyError`` and a
``FileNotFoundError``), named with its path, exit code 2: archives, ``create`` and ``append``
sources, ``store add`` sources, ``git import`` repositories."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from znippy_sql import (Entry, NotFoundError, PathNotFoundError, ZnippyError, append_archive,
                        open_archive, write_archive)
from znippy_sql.cli import main


def test_the_error_is_both_kinds() -> None:
    exc = PathNotFoundError("archive not found", path="x.znippy")
    assert isinstance(exc, ZnippyError) and isinstance(exc, FileNotFoundError)
    assert isinstance(exc, NotFoundError)  # "not found", as a member not in an archive is
    assert exc.errno == errno.ENOENT and exc.filename == "x.znippy"
    assert str(exc) == "x.znippy: archive not found"


def test_open_archive_of_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nosuch.znippy"
    with pytest.raises(PathNotFoundError, match="nosuch.znippy: archive not found"):
        open_archive(missing)
    with pytest.raises(FileNotFoundError):
        open_archive(missing.as_uri())  # a file:// URL is the same local file


def test_write_and_append_of_a_missing_source(tmp_path: Path) -> None:
    from znippy_sql.write.source import Walk

    with pytest.raises(PathNotFoundError, match="no-dir: source not found"):
        list(Walk(tmp_path / "no-dir"))
    archive = tmp_path / "a.znippy"
    write_archive(archive, [Entry("a.txt", b"a")])
    with pytest.raises(PathNotFoundError, match="no-dir: source not found"):
        append_archive(archive, tmp_path / "no-dir")
    with pytest.raises(PathNotFoundError, match="nosuch.znippy: archive not found"):
        append_archive(tmp_path / "nosuch.znippy", tmp_path)


def test_a_file_where_a_directory_is_wanted_keeps_its_message(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert main(["create", str(tmp_path / "f"), "-o", str(tmp_path / "o.znippy")]) == 2
    err = capsys.readouterr().err
    assert "source is not a directory" in err and "not found" not in err


@pytest.mark.parametrize("argv", [
    ["ls", "{missing}"], ["info", "{missing}"], ["verify", "{missing}"],
    ["cat", "{missing}", "a.txt"], ["extract", "{missing}", "-o", "{tmp}/out"],
    ["sql", "{missing}", "SELECT 1"], ["compact", "{missing}"],
    ["append", "{missing}", "{tmp}"], ["append", "{archive}", "{tmp}/no-dir"],
    ["create", "{tmp}/no-dir", "-o", "{tmp}/o.znippy"],
    ["store", "add", "{tmp}/no-dir", "--sidecar", "{tmp}/s.znippy", "--warehouse",
     "{tmp}/wh", "--namespace", "n"],
    ["git", "import", "{tmp}/no-dir", "-o", "{tmp}/g.znippy"],
    ["git", "cat-file", "-t", "{missing}", "HEAD"], ["git", "show-ref", "{missing}"],
])
def test_cli_says_not_found(argv: list[str], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "a.znippy"
    write_archive(archive, [Entry("a.txt", b"a")])
    names = {"missing": str(tmp_path / "nosuch.znippy"), "tmp": str(tmp_path),
             "archive": str(archive)}
    argv = [a.format(**names) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    missing = next(a for a in argv if "nosuch" in a or "no-dir" in a)
    assert f"{missing}: " in err and " not found" in err, err
    assert not (tmp_path / "o.znippy").exists() and not (tmp_path / "g.znippy").exists()
    assert not (tmp_path / "wh").exists()
