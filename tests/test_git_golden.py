"""The golden git archives of tests/data (make_git_golden.py) keep reading: every commit's
``git_log`` and ``git_reachable`` equal git's on the same history, rebuilt here by ``git
fast-import`` (its object ids do not depend on the machine)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from znippy_sql import open_archive
from znippy_sql.duckdb import register
from znippy_sql.git.objects import GitObjects

DATA = Path(__file__).parent / "data"


def _maker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_git_golden", DATA / "make_git_golden.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def golden_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "golden.git"
    _maker().make_repo(path)
    return path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def check_every_commit(repo: Path, archive: Path) -> None:
    con = duckdb.connect()
    register(con, archive, "g")
    commits = _git(repo, "rev-list", "--all").split()
    assert len(commits) == 23
    for c in commits:
        log = [o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_log('g', ?)",
                                         [c]).fetchall()]
        assert log == _git(repo, "log", "--format=%H", c).split(), c
        listed = {ln.split(" ")[0] for ln in _git(repo, "rev-list", "--objects", c).splitlines()}
        reach = {o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                           [c]).fetchall()}
        assert reach == listed, c


@pytest.mark.parametrize("name", ["golden-git-v1.znippy", "golden-git-v2.znippy"])
def test_golden_git_archive_reads_like_git(golden_repo: Path, name: str) -> None:
    check_every_commit(golden_repo, DATA / name)
    with open_archive(DATA / name) as a:
        assert a.verify().ok
        objs = GitObjects(a)
        assert objs.index.count == len(_git(golden_repo, "cat-file", "--batch-all-objects",
                                            "--batch-check").splitlines())


def test_golden_v1_counts_bitmaps_in_oid_ordinals() -> None:
    """The old layout: ``__gunnar_oid__`` version 1, bitmaps over ordinals (no positions)."""
    with open_archive(DATA / "golden-git-v1.znippy") as a:
        raw = bytes(a.section("__gunnar_oid__"))
        assert raw[:8] == b"ZNGITOID" and int.from_bytes(raw[8:12], "little") == 1
        assert a.section("__gunnar_reach__").num_rows == 2
