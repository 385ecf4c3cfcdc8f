"""Git benchmark: push-path ack latency, ``git import``, ``cat-file``, ``git_reachable``, bitmaps.

Usage::

    .venv/bin/python bench/bench_git.py --repo BARE_GIT_DIR [--out bench/results-git.md]
                                        [--parts ack,import,cat,reach,bitmaps]

``--repo`` is a real repository of at least 5,000 commits (the dulwich history, fetched as a
bare git dir; not part of this repository). Every comparison runs its peer in the same run,
alternating rounds, page cache warm for both; the figures are medians.

1. **ack**: one 8 KiB append, FastWriter (page cache) vs SafeWriter (blob fsync, journal row,
   journal fsync) vs UringWriter (the same steps as one linked io_uring chain), per append.
2. **import**: ``znippy-sql git import REPO -o OUT`` (a fresh process) vs ``git clone --mirror
   --no-local REPO`` + ``tar cf`` of the clone.
3. **cat**: one object read in process from an open archive (``GitObjects.pretty``) vs ``git
   cat-file -p`` (a process, as git is used); the CLI's own process time is shown too.
4. **reach**: ``git_reachable`` of the newest commit (DuckDB macro; and in process) vs ``git
   rev-list --objects``; also a commit whose bitmap is not stored (completed by a walk).
6. **mirrors** (issue 28): real hosted repositories fetched as bare mirrors, each named with
   ``--mirror NAME=DIR``: archive vs packs, bitmaps, import vs ``tar | zstd -3 -T2``, every
   ref's ``git_log``/``git_reachable`` (bench/bench_git_mirrors.py).
5. **bitmaps**: the ``__gunnar_reach__`` size for a 10,000-commit repository (refs of REPO taken
   until their history reaches 10,000 commits) with a bitmap every 1, 8, 32, 128 generations,
   and what completing an unstored commit costs.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "out", "git")
CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")

import duckdb  # noqa: E402

from znippy_sql import open_archive  # noqa: E402
from znippy_sql.duckdb import register  # noqa: E402
from znippy_sql.git.importer import import_repository  # noqa: E402
from znippy_sql.git.objects import GitObjects  # noqa: E402
from znippy_sql.git.uring import UringWriter  # noqa: E402
from znippy_sql.git.writers import FastWriter, SafeWriter  # noqa: E402


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def us(x: float) -> str:
    return f"{x * 1e6:,.1f} µs"


def ms(x: float) -> str:
    return f"{x * 1e3:,.2f} ms"


# -- 1. ack latency ---------------------------------------------------------------------------
def bench_ack(lines: list[str]) -> None:
    data = os.urandom(8192)
    counts = {"FastWriter": 4000, "SafeWriter": 400, "UringWriter": 400}
    writers = (FastWriter, SafeWriter, UringWriter)
    lat: dict[str, list[float]] = {k: [] for k in counts}
    for _round in range(3):
        for cls in writers:
            d = fresh(os.path.join(WORK, "ack"))
            with cls(os.path.join(d, "objects.pack")) as w:
                for _ in range(counts[cls.name]):
                    lat[cls.name].append(timed(lambda: w.append(data)))
    fast, safe = (statistics.median(lat[k]) for k in ("FastWriter", "SafeWriter"))
    lines += ["## Ack latency per 8 KiB append", "",
              "3 rounds alternating; 4,000 Fast and 400 Safe and Uring appends a round.", "",
              "| writer | durability | median | p99 |", "|---|---|---:|---:|"]
    for cls in writers:
        xs = sorted(lat[cls.name])
        lines.append(f"| {cls.name} | {cls.durability} | {us(statistics.median(xs))} | "
                     f"{us(xs[int(len(xs) * 0.99)])} |")
    lines += ["", f"Safe / Fast: {safe / fast:,.0f}× (the seed measured 3.9 µs vs 132 µs, 34×, "
              "on an 8-core laptop).", ""]


# -- 2. import ---------------------------------------------------------------------------------
def bench_import(repo: str, lines: list[str]) -> str:
    d = fresh(os.path.join(WORK, "import"))
    out = os.path.join(d, "repo.znippy")
    ours: list[float] = []
    peer: list[float] = []
    for _round in range(3):
        if os.path.exists(out):
            os.unlink(out)
        ours.append(timed(lambda: subprocess.run([CLI, "git", "import", repo, "-o", out],
                                                 check=True, capture_output=True)))
        shutil.rmtree(os.path.join(d, "m.git"), ignore_errors=True)
        peer.append(timed(lambda: (
            subprocess.run(["git", "clone", "-q", "--mirror", "--no-local", repo,
                            os.path.join(d, "m.git")], check=True),
            subprocess.run(["tar", "cf", os.path.join(d, "m.tar"), "-C", d, "m.git"],
                           check=True))))
    commits = int(git(repo, "rev-list", "--all", "--count"))
    objects = len(git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
                  .split())
    a, b = statistics.median(ours), statistics.median(peer)
    size = os.path.getsize(out)
    tar = os.path.getsize(os.path.join(d, "m.tar"))
    lines += ["## `git import` vs `git clone --mirror` + `tar`", "",
              f"Repository: {commits:,} commits, {objects:,} objects "
              f"(`git rev-list --all --count`). 3 rounds alternating.", "",
              "| | median | all rounds | output |", "|---|---:|---|---:|",
              f"| `znippy-sql git import` | {a:.2f} s | "
              f"{', '.join(f'{x:.2f}' for x in ours)} | {size / 2**20:.1f} MiB |",
              f"| `git clone --mirror` + `tar cf` | {b:.2f} s | "
              f"{', '.join(f'{x:.2f}' for x in peer)} | {tar / 2**20:.1f} MiB |",
              "", f"Ratio import / (clone + tar): {a / b:.2f}×.", ""]
    return out


# -- 3. cat-file ------------------------------------------------------------------------------
def bench_cat(repo: str, archive: str, lines: list[str]) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    picks = {"commit (HEAD)": head, "tree (HEAD^{tree})": git(repo, "rev-parse",
                                                               "HEAD^{tree}").strip()}
    blobs = [ln.split() for ln in git(repo, "ls-tree", "-r", "-l", "HEAD").splitlines()]
    biggest = max((b for b in blobs if b[1] == "blob"), key=lambda b: int(b[3]))
    picks[f"blob ({biggest[4]}, {int(biggest[3]):,} B)"] = biggest[2]
    lines += ["## `cat-file` of one object: in process vs `git cat-file -p`", "",
              "Both warm (archive open and one read done; git's files in the page cache). "
              "21 rounds alternating; medians. Target: in process within 2× of git.", "",
              "| object | in process | `git cat-file -p` | ratio | `znippy-sql git cat-file -p` "
              "(process) |", "|---|---:|---:|---:|---:|"]
    with open_archive(archive) as a:
        objs = GitObjects(a)
        for label, oid in picks.items():
            raw = bytes.fromhex(oid)
            assert objs.pretty(raw) == subprocess.run(["git", "-C", repo, "cat-file", "-p", oid],
                                                      capture_output=True).stdout
            ours, peer, cli = [], [], []
            for _ in range(21):
                ours.append(timed(lambda: objs.pretty(raw)))
                peer.append(timed(lambda: subprocess.run(["git", "-C", repo, "cat-file", "-p",
                                                          oid], capture_output=True)))
            for _ in range(5):
                cli.append(timed(lambda: subprocess.run([CLI, "git", "cat-file", archive, oid,
                                                         "-p"], capture_output=True)))
            o, p = statistics.median(ours), statistics.median(peer)
            lines.append(f"| {label} | {ms(o)} | {ms(p)} | {o / p:.2f}× | "
                         f"{ms(statistics.median(cli))} |")
    lines.append("")


# -- 4. reachability ----------------------------------------------------------------------------
def bench_reach(repo: str, archive: str, lines: list[str]) -> None:
    con = duckdb.connect()
    register(con, archive, "r")
    with open_archive(archive) as a:
        stored = set(a.section("__gunnar_reach__").column("oid").to_pylist())
    head = git(repo, "rev-parse", "HEAD").strip()
    chain = git(repo, "rev-list", "--first-parent", "HEAD").split()
    # HEAD, and the nearest first-parent ancestor whose bitmap is stored if HEAD's is not
    # (or not stored if HEAD's is): one figure for each way of answering
    other = next(c for c in chain if (bytes.fromhex(c) in stored) != (bytes.fromhex(head)
                                                                       in stored))

    def label(c: str) -> str:
        how = "bitmap stored" if bytes.fromhex(c) in stored else "completed by a walk"
        return f"{'HEAD' if c == head else 'ancestor ' + c[:10]}, {how}"

    lines += ["## `git_reachable` vs `git rev-list --objects`", "",
              "5 rounds alternating; medians. `sql`: `SELECT count(*) FROM git_reachable(...)` "
              "through DuckDB; `in process`: `GitObjects.reachable` (the bitmap).", "",
              "| commit | objects | sql | in process | `git rev-list --objects` | "
              "sql / git |", "|---|---:|---:|---:|---:|---:|"]
    with open_archive(archive) as a:
        objs = GitObjects(a)
        for c in (head, other):
            n = con.execute("SELECT count(*) FROM git_reachable('r', ?)", [c]).fetchall()[0][0]
            want = len(git(repo, "rev-list", "--objects", c).splitlines())
            assert n == want, (n, want)
            sql, inproc, peer = [], [], []
            for _ in range(5):
                sql.append(timed(lambda: con.execute(
                    "SELECT count(*) FROM git_reachable('r', ?)", [c]).fetchall()))
                inproc.append(timed(lambda: objs.reachable(bytes.fromhex(c))))
                peer.append(timed(lambda: subprocess.run(
                    ["git", "-C", repo, "rev-list", "--objects", c], check=True,
                    stdout=subprocess.DEVNULL)))
            s, p = statistics.median(sql), statistics.median(peer)
            lines.append(f"| {label(c)} | {n:,} | {ms(s)} | {ms(statistics.median(inproc))} | "
                         f"{ms(p)} | {s / p:.2f}× |")
    lines.append("")


# -- 5. bitmap density ------------------------------------------------------------------------
def subset_repo(repo: str, commits: int) -> str:
    """A bare repository holding refs of ``repo`` (main first, then by name) until their
    history reaches ``commits`` commits."""
    d = fresh(os.path.join(WORK, "subset"))
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    refs.sort(key=lambda r: (r != "refs/heads/main", r))
    taken: list[str] = []
    for ref in refs:
        taken.append(ref)
        if int(git(repo, "rev-list", "--count", *taken)) >= commits:
            break
    subprocess.run(["git", "init", "-q", "--bare", d], check=True)
    subprocess.run(["git", "-C", d, "fetch", "-q", "--no-tags", repo,
                    *(f"{r}:{r}" for r in taken)], check=True)
    return d


def bench_bitmaps(repo: str, lines: list[str]) -> None:
    sub = subset_repo(repo, 10_000)
    n = int(git(sub, "rev-list", "--all", "--count"))
    packs = sum(os.path.getsize(os.path.join(sub, "objects", "pack", f))
                for f in os.listdir(os.path.join(sub, "objects", "pack")) if f.endswith(".pack"))
    lines += ["## Reachability bitmaps: the walk bound", "",
              f"A history of {n:,} commits (refs of the benchmark repository taken until their "
              f"history reaches 10,000 commits; packs {packs / 2**20:.1f} MiB). git's selection "
              "plus irregular commits plus every commit whose completing walk could pass the "
              "bound (0: every commit stored); the others are completed from their nearest "
              "bitmapped ancestors (20 unstored commits).", "",
              "| bound | stored bitmaps | `__gunnar_reach__` | vs packs | import | completing "
              "(median / max) |", "|---:|---:|---:|---:|---:|---:|"]
    for k in (0, 100, 1000, 10_000):
        out = os.path.join(WORK, f"bitmaps-{k}.znippy")
        t = timed(lambda: import_repository(sub, out, walk_bound=k))
        with open_archive(out) as a:
            row = next(r for r in a.manifest_rows if r.key.module_name == "__gunnar_reach__")
            table = a.section("__gunnar_reach__")
            stored = set(table.column("oid").to_pylist())
            oids = a.section("__gunnar_graph__").column("oid").to_pylist()
            objs = GitObjects(a)
            todo = [o for o in oids if o not in stored][::97][:20]
            costs = [timed(lambda: objs.reachable(o)) for o in todo]
        done = (f"{ms(statistics.median(costs))} / {ms(max(costs))}" if costs else "—")
        lines.append(f"| {k:,} | {table.num_rows:,} | {row.index_len / 2**10:,.1f} KiB | "
                     f"{row.index_len / packs:.4f}× | {t:.1f} s | {done} |")
        os.unlink(out)
    lines.append("")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", help="a bare git dir of >= 5,000 commits")
    ap.add_argument("--mirror", action="append", default=[], metavar="NAME=DIR",
                    help="a fetched bare mirror of github:NAME (part mirrors)")
    ap.add_argument("--min-refs", type=int, default=2000)
    ap.add_argument("--sample", type=int, default=40, help="refs checked and timed in SQL")
    ap.add_argument("--rounds", type=int, default=5,
                    help="mirrors: git import and tar | zstd rounds, alternating")
    ap.add_argument("--out", default=os.path.join(HERE, "results-git.md"))
    ap.add_argument("--parts", default="ack,import,cat,reach,bitmaps")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    os.makedirs(WORK, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = ["# Git benchmark: push path, import, cat-file, reachability", "",
             f"Command: `.venv/bin/python bench/bench_git.py"
             f"{' --repo <dulwich history, bare>' if args.repo else ''}"
             f"{'' if parts == {'ack', 'import', 'cat', 'reach', 'bitmaps'} else ' --parts ' + args.parts}"
             f"{''.join(' --mirror ' + m.split('=')[0] + '=<fetched mirror>' for m in args.mirror)}`"
             f" — {stamp}, {platform.machine()}, {os.cpu_count()} cores (shared with other "
             f"work), Python {platform.python_version()}, {git('.', 'version').strip()}.", ""]
    if "ack" in parts:
        bench_ack(lines)
    archive = os.path.join(WORK, "import", "repo.znippy")
    if "import" in parts:
        archive = bench_import(args.repo, lines)
    elif parts & {"cat", "reach"}:
        os.makedirs(os.path.dirname(archive), exist_ok=True)
        import_repository(args.repo, archive)
    if "cat" in parts:
        bench_cat(args.repo, archive, lines)
    if "reach" in parts:
        bench_reach(args.repo, archive, lines)
    if "bitmaps" in parts:
        bench_bitmaps(args.repo, lines)
    if "mirrors" in parts:
        from bench_git_mirrors import bench_mirror

        lines += ["## Real hosted repositories (issue 28)", ""]
        for spec in args.mirror:
            name, _, path = spec.partition("=")
            bench_mirror(name, path, WORK, lines, min_refs=args.min_refs, sample=args.sample,
                         rounds=args.rounds)
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
