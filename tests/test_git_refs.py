"""Every ref of a history shaped like a code host's (a main line merging pull-request
branches, ``refs/pull/N/head`` at each branch tip, merged or open, tags) answers as git does:
``git_log`` = ``git log``, ``git_reachable`` = ``git rev-list --objects``. The history is made
here by ``git fast-import`` (no network); the real mirrors are in bench/bench_git.py."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import duckdb
import pytest

from znippy_sql import open_archive
from znippy_sql.duckdb import register
from znippy_sql.git.importer import import_repository
from znippy_sql.git.objects import GitObjects


def pr_history(prs: int, seed: int = 7) -> bytes:
    """``prs`` pull requests of 1-4 commits, each forked from a recent main commit; most are
    merged (a merge commit whose second parent is the PR's tip), some stay open; a direct
    main commit between merges; a tag every 25 merges; an old release branch."""
    rnd = random.Random(seed)
    out: list[bytes] = []
    when = 1_400_000_000
    mark = 0
    refs: list[tuple[str, int]] = []

    def commit(ref: str, parents: list[int], touch: int) -> int:
        nonlocal when, mark
        when += rnd.randint(30, 3000)
        mark += 1
        msg = b"c%d" % mark
        out.append(b"commit %s\nmark :%d\ncommitter C <c@example.com> %d +0000\ndata %d\n%s\n"
                   % (ref.encode(), mark, when, len(msg), msg))
        if parents:
            out.append(b"from :%d\n" % parents[0])
            for p in parents[1:]:
                out.append(b"merge :%d\n" % p)
        for _ in range(touch):
            path = f"pkg{rnd.randint(0, 5)}/sub{rnd.randint(0, 3)}/f{rnd.randint(0, 30)}.py"
            data = f"{path} {mark} {rnd.random()}\n".encode() * rnd.randint(1, 4)
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path.encode(), len(data), data))
        out.append(b"\n")
        return mark

    main = [commit("refs/heads/main", [], 5)]
    for n in range(1, prs + 1):
        base = main[-rnd.randint(1, min(8, len(main)))]
        tip = base
        for _ in range(rnd.randint(1, 4)):
            tip = commit("refs/heads/pr", [tip], rnd.randint(1, 3))
        refs.append((f"refs/pull/{n}/head", tip))
        if rnd.random() < 0.85:
            main.append(commit("refs/heads/main", [main[-1], tip], 0))
        if rnd.random() < 0.5:
            main.append(commit("refs/heads/main", [main[-1]], rnd.randint(1, 2)))
        if n % 25 == 0:
            refs.append((f"refs/tags/v{n // 25}", main[-1]))
        if n == prs // 3:
            refs.append(("refs/heads/release-1", main[-1]))
    for ref, target in refs:
        out.append(b"reset %s\nfrom :%d\n\n" % (ref.encode(), target))
    out.append(b"reset refs/heads/pr\nfrom :%d\n\n" % refs[-1][1])
    return b"".join(out)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def make(path: Path, prs: int) -> Path:
    path.mkdir()
    git(path, "init", "-q", "--bare", "-b", "main")
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=pr_history(prs),
                   check=True, capture_output=True)
    git(path, "repack", "-a", "-d", "-q")
    return path


def check_every_ref(repo: Path, archive: Path) -> int:
    refs = git(repo, "for-each-ref", "--format=%(objectname) %(*objectname) %(refname)"
               ).splitlines()
    con = duckdb.connect()
    register(con, archive, "g")
    checked = 0
    for line in refs:
        *ids, name = line.split()
        commit = ids[-1]                      # an annotated tag's commit, else the ref's
        log = [o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_log('g', ?)",
                                         [commit]).fetchall()]
        assert log == git(repo, "log", "--format=%H", commit).split(), name
        listed = {ln.split(" ")[0] for ln in git(repo, "rev-list", "--objects", commit)
                  .splitlines()}
        reach = {o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                           [commit]).fetchall()}
        assert reach == listed, name
        checked += 1
    return checked


def test_every_ref_with_walks_through_unstored_commits(tmp_path: Path) -> None:
    repo = make(tmp_path / "prs.git", 60)
    out = tmp_path / "prs.znippy"
    import_repository(repo, out, walk_bound=4)
    with open_archive(out) as a:
        commits = a.section("__gunnar_graph__").num_rows
        stored = a.section("__gunnar_reach__").num_rows
        assert GitObjects(a).absent_objects == 0
    assert commits > 100 and 0 < stored < commits   # some refs are completed by a walk
    assert check_every_ref(repo, out) > 60


@pytest.mark.slow
def test_every_ref_of_a_large_history(tmp_path: Path) -> None:
    """220 pull requests: ~830 commits and ~230 refs (kept this size so the test stays near
    a minute: each ref's check walks the whole history), git's selection (windows of up to
    100 past the 100 newest) and the default walk bound; every ref checked against git."""
    repo = make(tmp_path / "big.git", 220)
    out = tmp_path / "big.znippy"
    report = import_repository(repo, out)
    assert report.commits > 750
    with open_archive(out) as a:
        assert 0 < a.section("__gunnar_reach__").num_rows < report.commits
    assert check_every_ref(repo, out) > 220


def test_a_partial_clone_imports_and_says_its_history_is_incomplete(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from znippy_sql.cli import main

    src = make(tmp_path / "src.git", 12)
    git(src, "config", "uploadpack.allowFilter", "true")
    part = tmp_path / "part.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--filter=blob:none", f"file://{src}",
                    str(part)], check=True, capture_output=True)
    assert list((part / "objects" / "pack").glob("*.promisor"))
    blobs = {ln.split()[0] for ln in git(src, "cat-file", "--batch-all-objects",
                                         "--batch-check").splitlines() if " blob " in ln}
    out = tmp_path / "part.znippy"
    import_repository(part, out)
    with open_archive(out) as a:
        assert GitObjects(a).absent_objects == len(blobs) > 0
    assert main(["info", str(out)]) == 0
    assert "INCOMPLETE history" in capsys.readouterr().out
    con = duckdb.connect()
    register(con, out, "g")
    for line in git(part, "for-each-ref", "--format=%(objectname)").split():
        listed = {ln.split(" ")[0] for ln in git(part, "rev-list", "--objects",
                                                 "--missing=allow-any", line).splitlines()}
        reach = {o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                           [line]).fetchall()}
        assert reach == listed and not reach & blobs
    complete = tmp_path / "src.znippy"
    import_repository(src, complete)
    assert main(["info", str(complete)]) == 0
    assert "complete history" in capsys.readouterr().out
