"""The create path's speed work (issue 26): what it must not do, and that it changes no byte.

``znippy-sql create`` must not import pandas (pyarrow's ``pa.array(list)``/``pa.table`` and
``Array.to_numpy`` would, ~0.5-1 s a process): the index and ``__meta__`` are built from
buffers (``format/build.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import text_bytes


def _tree(root: Path, files: int = 60) -> None:
    for i in range(files):
        d = root / f"d{i % 4}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.txt").write_bytes(text_bytes(500 + 97 * i, seed=i))
    (root / "empty.txt").write_bytes(b"")


def test_cli_create_does_not_import_pandas(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tree(src)
    code = ("import sys\nfrom znippy_sql.cli import main\n"
            f"rc = main(['create', {str(src)!r}, '-o', {str(tmp_path / 'a.znippy')!r}, "
            "'--meta', 'k=v'])\n"
            "print(rc, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"


def test_cli_ls_info_extract_do_not_import_pandas(tmp_path: Path) -> None:
    """The commands a user runs on an archive right after ``create``: ``ls``, ``info`` (dedup
    figures: ``write/dedup.distinct_blob_bytes``) and ``extract``."""
    src = tmp_path / "src"
    _tree(src)
    archive = tmp_path / "a.znippy"
    from znippy_sql.cli import main
    assert main(["create", str(src), "-o", str(archive)]) == 0
    for argv in (["ls", str(archive)], ["info", str(archive)],
                 ["extract", str(archive), "-o", str(tmp_path / "out")]):
        code = ("import sys\nfrom znippy_sql.cli import main\n"
                f"rc = main({argv!r})\n"
                "print(rc, 'pandas' in sys.modules)\n")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True).stdout
        assert out.strip().splitlines()[-1] == "0 False", argv


def test_read_ahead_child_is_reaped_when_the_writer_fails(tmp_path: Path) -> None:
    """A name the format refuses stops the write mid-walk: one error line, no child left
    (the read-ahead is a native thread now: none is forked)."""
    src = tmp_path / "src"
    _tree(src)
    (src / "d1" / "bad\nname.txt").write_bytes(b"x" * 100)
    code = ("import os, sys\nfrom znippy_sql.cli import main\n"
            f"rc = main(['create', {str(src)!r}, '-o', {str(tmp_path / 'a.znippy')!r}])\n"
            "try:\n    os.waitpid(-1, os.WNOHANG); print(rc, 'child left')\n"
            "except ChildProcessError:\n    print(rc, 'reaped')\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.stdout.strip() == "2 reaped"
    assert "newline" in got.stderr or "name" in got.stderr
    assert not (tmp_path / "a.znippy").exists()
