"""Unreadable sources: a directory or a file a write cannot read stops it.

By default ``create``/``append`` (and ``write_archive``) raise ``UnreadableSourceError`` naming
the path, exit 2 and leave nothing under the final name (an append leaves the archive as it
was). ``--skip-unreadable`` (``skip_unreadable=True``) leaves such files and directories out,
lists them and exits 1. (The walk is native and reads ahead: ``walk`` and ``ahead`` are
the same write now; ``how`` stays a parameter of the runs.)

These tests run as root here, and root reads a mode-000 directory: every write below runs in
a subprocess without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (``setpriv``), so that the modes
apply to it; :func:`test_the_writer_really_cannot_read` checks that they do.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from znippy_sql import Archive, OptionError, WriteOptions, open_archive
from znippy_sql.read import posix

CLI = Path(sys.executable).parent / "znippy-sql"
_CAPS = "-dac_override,-dac_read_search"

#: a library write in a subprocess: prints the error's class and path, or the report's
#: skipped paths
_LIBRARY = """
import sys
from znippy_sql import write_archive
src, out, how, skip = sys.argv[1:]
try:
    report = write_archive(out, src, **({"skip_unreadable": True} if skip else {}))
except Exception as exc:
    print(type(exc).__name__, exc.path)
    sys.exit(3)
print(sorted(p for p, _ in report.unreadable))
"""


def _files(archive: Archive) -> list[str]:
    return sorted(set(archive.index().column("relative_path").to_pylist()))


def _unprivileged() -> list[str]:
    """The prefix that runs a command without the capabilities that let root read anything."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to make a path root cannot read")
    return [setpriv, f"--inh-caps={_CAPS}", f"--bounding-set={_CAPS}"]


def _run(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*_unprivileged(), *(os.fspath(a) for a in args)], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture()
def tree(tmp_path: Path) -> Iterator[Path]:
    """``src`` with readable files around a mode-000 directory ``locked`` (which holds a
    file) and ``out``, an empty directory for the archive."""
    src = tmp_path / "src"
    (src / "b").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"alpha\n" * 10)
    (src / "b" / "c.txt").write_bytes(b"gamma\n" * 10)
    (src / "locked").mkdir()
    (src / "locked" / "secret.txt").write_bytes(b"secret\n")
    (src / "z.txt").write_bytes(b"zeta\n" * 10)
    (tmp_path / "out").mkdir()
    (src / "locked").chmod(0)
    yield src
    (src / "locked").chmod(0o755)


def test_the_writer_really_cannot_read(tree: Path) -> None:
    got = _run(sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])", tree / "locked")
    assert got.returncode != 0 and "PermissionError" in got.stderr


@pytest.mark.parametrize("how", ["walk", "ahead"])
def test_unreadable_directory_stops_a_write(tree: Path, how: str) -> None:
    out = tree.parent / "out" / "a.znippy"
    got = _run(sys.executable, "-c", _LIBRARY, tree, out, how, "")
    assert got.returncode == 3, got.stdout + got.stderr
    assert got.stdout.split() == ["UnreadableSourceError", str(tree / "locked")]
    assert os.listdir(out.parent) == []  # no archive, no staging file


def test_create_names_the_directory_and_exits_2(tree: Path) -> None:
    out = tree.parent / "out" / "a.znippy"
    got = _run(CLI, "create", tree, "-o", out)
    assert got.returncode == 2, got.stdout + got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in got.stderr
    assert str(tree / "locked") in lines[0] and "cannot read source directory" in lines[0]
    assert "--skip-unreadable" in lines[0]
    assert got.stdout == "" and os.listdir(out.parent) == []


def test_unreadable_file_is_the_same_error(tree: Path) -> None:
    (tree / "locked").chmod(0o755)
    (tree / "locked" / "secret.txt").chmod(0)
    out = tree.parent / "out" / "a.znippy"
    for how in ("walk", "ahead"):
        got = _run(sys.executable, "-c", _LIBRARY, tree, out, how, "")
        assert got.stdout.split() == ["UnreadableSourceError",
                                      str(tree / "locked" / "secret.txt")], got.stderr
    got = _run(CLI, "create", tree, "-o", out)
    assert got.returncode == 2 and "--skip-unreadable" in got.stderr
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize("how", ["walk", "ahead"])
def test_skip_unreadable_leaves_both_out_and_says_so(tree: Path, how: str) -> None:
    (tree / "d").mkdir()
    (tree / "d" / "shut.txt").write_bytes(b"shut\n")
    (tree / "d" / "shut.txt").chmod(0)
    out = tree.parent / "out" / "a.znippy"
    got = _run(sys.executable, "-c", _LIBRARY, tree, out, how, "skip")
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.strip() == repr(sorted([str(tree / "d" / "shut.txt"),
                                              str(tree / "locked")]))
    with open_archive(out) as archive:
        assert _files(archive) == ["a.txt", "b/c.txt", "z.txt"]


def test_create_skip_unreadable_lists_and_exits_1(tree: Path) -> None:
    out = tree.parent / "out" / "a.znippy"
    got = _run(CLI, "create", tree, "-o", out, "--skip-unreadable")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "skipped 1 unreadable path (--skip-unreadable)" in got.stdout
    assert str(tree / "locked") in got.stdout
    with open_archive(out) as archive:
        assert _files(archive) == ["a.txt", "b/c.txt", "z.txt"]
        assert "locked" not in posix.directories(archive)  # not recorded as an empty one
        assert "b" in posix.directories(archive)


def test_append_refuses_then_skips(tree: Path) -> None:
    out = tree.parent / "out" / "a.znippy"
    first = tree.parent / "first"
    first.mkdir()
    (first / "one.txt").write_bytes(b"one\n")
    os.chmod(out.parent, 0o777)
    subprocess.run([CLI, "create", first, "-o", out], check=True, capture_output=True)
    before = out.read_bytes()
    got = _run(CLI, "append", out, tree)
    assert got.returncode == 2 and str(tree / "locked") in got.stderr, got.stderr
    assert out.read_bytes() == before and os.listdir(out.parent) == ["a.znippy"]
    got = _run(CLI, "append", out, tree, "--skip-unreadable")
    assert got.returncode == 1, got.stdout + got.stderr
    assert str(tree / "locked") in got.stdout
    with open_archive(out) as archive:
        assert _files(archive) == ["a.txt", "b/c.txt", "one.txt", "z.txt"]


def test_option_is_checked() -> None:
    assert WriteOptions(skip_unreadable=True).skip_unreadable
    with pytest.raises(OptionError, match="skip_unreadable"):
        WriteOptions(skip_unreadable="yes")  # type: ignore[arg-type]
