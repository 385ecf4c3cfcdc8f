"""What the git paths do not do: ``git import`` (the CLI) and the first ``git_log`` /
``git_reachable`` of an archive never import pandas (pyarrow 25 imports it at its first
array or ``to_numpy``: a second of CPU the command does not need), and a tree as the core
reads it at import (``native/src/git/parse.rs``) lists what the readers' one-by-one parse
lists, odd modes and bytes included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql.corelib import git_tree_entries
from znippy_sql.git.pack import tree_links
from test_git import Repo, numbers


def _repo(path: Path) -> Repo:
    r = Repo(path)
    for i in range(4):
        r.write(f"d{i % 2}/f{i}.txt", numbers(20, str(i)))
        r.commit(f"c{i}")
    return r


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def test_git_import_and_first_log_do_not_import_pandas(tmp_path: Path) -> None:
    r = _repo(tmp_path / "r")
    out = tmp_path / "r.znippy"
    head = r.git("rev-parse", "HEAD").strip()
    assert _python(
        "import sys; from znippy_sql.cli import main; "
        f"main(['git', 'import', {str(r.path)!r}, '-o', {str(out)!r}]); "
        "print('pandas' in sys.modules)").splitlines()[-1] == "False"
    assert _python(
        "import sys; from znippy_sql import open_archive; "
        "from znippy_sql.git.objects import GitObjects; "
        "from znippy_sql.git.revparse import Names; "
        f"n = Names(GitObjects(open_archive({str(out)!r}))); "
        f"print(len(n.log_rows_of(bytes.fromhex({head!r}))), "
        f"len(n.reachable_array_of(bytes.fromhex({head!r}))), 'pandas' in sys.modules)"
    ) == f"4 {len(r.git('rev-list', '--objects', head).splitlines())} False"


@pytest.mark.parametrize("entries", [
    [b"100644 a\0", b"40000 sub\0", b"160000 link\0", b"120000 l n\0", b"100755 x\0"],
    [b"644 odd mode\0", b"40000 t\0"],            # a mode git does not write: checked apart
    [b"100644 \0"],                               # an empty name
])
def test_the_core_tree_parse_equals_the_one_by_one_parse(entries: list[bytes]) -> None:
    # ids with NUL and space bytes in them, as real ids have
    trees = [b"".join(e + bytes([k, 0, 32, j] + list(range(16))) for j, e in enumerate(entries))
             for k in range(3)] + [b""]             # and the empty tree
    for tree in trees + [b"100644 no id\0" + b"\1" * 5, b"9x " + trees[0],
                         trees[0] + b"100644 cut\0" + b"\2" * 7]:   # bytes that do not line up
        got = git_tree_entries(tree)
        subs, blobs = tree_links(tree)
        assert [i for s, i in got if s] == subs
        assert [i for s, i in got if not s] == blobs
