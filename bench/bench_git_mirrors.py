"""Git archives of real hosted repositories (issue 28): size against the packs, the bitmaps,
``git import`` against ``tar -cf - MIRROR | zstd -3 -T2``, ``git_log``/``git_reachable`` of
every ref. Used by ``bench/bench_git.py --parts mirrors --mirror NAME=BARE_DIR``.

Each mirror is copied into ``bench/out/git/mirrors/`` (never committed). A mirror with fewer
than ``--min-refs`` refs gets pull-request refs the way a code host has them: for each merge
commit, oldest first (``git rev-list --all --merges --reverse --date-order``), its second
parent — the tip of the merged branch — becomes ``refs/pull/<N>/head`` unless a ref already
names it, N counting up from one past the largest existing pull number, until the refs reach
the minimum. Everything is deterministic for a given mirror.
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import cast

import duckdb

from znippy_sql import corelib, open_archive
from znippy_sql.duckdb import register
from znippy_sql.git.objects import GitObjects
from znippy_sql.git.pack import ParsedPack, index_pack
from znippy_sql.git.sections import WALK_BOUND

CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: the CLI as an installed package runs it: Python may keep its bytecode (``pip install``
#: compiles it). This machine's environment sets PYTHONDONTWRITEBYTECODE, which made every
#: round compile znippy_sql's ~60 modules again (0.1-0.15 s of CPU); the first round writes
#: the bytecode and is a round like the others.
CLI_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_timed(cmd: list[str] | str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system, children included) seconds of one command."""
    cpu = child_cpu()
    wall = timed(lambda: subprocess.run(cmd, shell=isinstance(cmd, str), check=True,
                                        capture_output=True, env=env))
    return wall, child_cpu() - cpu


def ms(x: float) -> str:
    return f"{x * 1e3:,.1f} ms"


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


def copy_mirror(src: str, work: str, name: str) -> str:
    dst = os.path.join(work, "mirrors", name.replace("/", "+"))
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copytree(src, dst)
    return dst


def add_pull_refs(repo: str, minimum: int) -> tuple[int, int]:
    """Pull-request refs at merged branch tips until ``minimum`` refs (module doc);
    ``(refs before, refs added)``."""
    refs = git(repo, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()
    before = len(refs)
    if before >= minimum:
        return before, 0
    named = {ln.split()[0] for ln in refs}
    pulls = [int(r.split("/")[2]) for r in (ln.split()[1] for ln in refs)
             if r.startswith("refs/pull/") and r.split("/")[2].isdigit()]
    n = max(pulls, default=0)
    lines = []
    for ln in git(repo, "rev-list", "--all", "--merges", "--reverse", "--date-order",
                  "--parents").splitlines():
        second = ln.split()[2]
        if second in named:
            continue
        named.add(second)
        n += 1
        lines.append(f"create refs/pull/{n}/head {second}\n")
        if before + len(lines) >= minimum:
            break
    subprocess.run(["git", "-C", repo, "update-ref", "--stdin"], input="".join(lines),
                   text=True, check=True)
    return before, len(lines)


def pack_files(repo: str) -> list[str]:
    folder = os.path.join(repo, "objects", "pack")
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".pack"))


def load() -> str:
    """The 1-minute load average now (the machine is shared)."""
    return f"{os.getloadavg()[0]:.1f}"


def import_stages(repo: str) -> dict[str, float]:
    """CPU seconds (``process_time``, best of 3) of the import's own steps in this process
    (both in the core since issue 33: the threads' CPU counts)."""
    best: dict[str, float] = {}
    for _round in range(3):
        took: dict[str, float] = {}

        def step(name: str, fn: Callable[[], object]) -> object:
            t = time.process_time()
            got = fn()
            took[name] = took.get(name, 0.0) + time.process_time() - t
            return got

        packs = []
        for path in pack_files(repo):
            data = open(path, "rb").read()
            idx = open(path[:-5] + ".idx", "rb").read()
            packs.append(cast(ParsedPack, step("packs indexed (.idx checks, CRC32s, SHA-1s, commits and trees "
                              "inflated, hashed, parsed)",
                              lambda: index_pack(data, name=path, idx=idx))))
        step("sections (objects, generations, selection, layout, bitmaps)",
             lambda: corelib.git_sections([(p.core, k) for k, p in enumerate(packs)], b"",
                                          WALK_BOUND))
        for k, v in took.items():
            best[k] = min(best.get(k, v), v)
    return best


def orders(repo: str) -> dict[str, int]:
    """The stored bitmaps' bytes (traversal order), how many and how many irregular; and a
    bitmap for every commit. (The packs' own order, oid order and XOR figures of earlier
    runs needed the Python layout, which the core replaced.)"""
    packs = [index_pack(open(p, "rb").read(), name=p, idx=open(p[:-5] + ".idx", "rb").read())
             for p in pack_files(repo)]
    refs = b"".join(bytes.fromhex(ln.split()[0]) for ln in
                    git(repo, "for-each-ref", "--format=%(objectname)").splitlines())
    cores = [(p.core, k) for k, p in enumerate(packs)]
    got = corelib.git_sections(cores, refs, WALK_BOUND)
    every = corelib.git_sections(cores, refs, 0)
    return {"traversal": len(got["reach_data"]), "stored": len(got["reach_ids"]) // 20,
            "irregular": got["irregular"], "every": len(every["reach_data"])}


def bench_mirror(name: str, src: str, work: str, lines: list[str], *, min_refs: int,
                 sample: int, rounds: int = 5) -> None:
    repo = copy_mirror(src, work, name)
    before, added = add_pull_refs(repo, min_refs)
    commits = int(git(repo, "rev-list", "--all", "--count"))
    refs = git(repo, "for-each-ref", "--format=%(objectname) %(objecttype) %(refname)"
               ).splitlines()
    objects = len(git(repo, "cat-file", "--batch-all-objects", "--batch-check").splitlines())
    packs = sum(os.path.getsize(p) for p in pack_files(repo))
    promisor = any(f.endswith(".promisor") for f in os.listdir(os.path.join(repo, "objects",
                                                                             "pack")))
    safe = name.replace("/", "+")
    out = os.path.join(work, f"{safe}.znippy")
    tar = os.path.join(work, f"{safe}.tar.zst")
    ours, peer, ours_cpu, peer_cpu = [], [], [], []
    loads = [load()]
    for _round in range(rounds):
        if os.path.exists(out):
            os.unlink(out)
        wall, cpu = run_timed([CLI, "git", "import", repo, "-o", out], env=CLI_ENV)
        ours.append(wall)
        ours_cpu.append(cpu)
        wall, cpu = run_timed(f"tar -cf - -C {os.path.dirname(repo)} "
                              f"{os.path.basename(repo)} | zstd -3 -T2 -q -f -o {tar}")
        peer.append(wall)
        peer_cpu.append(cpu)
        loads.append(load())
    stages = import_stages(repo)
    size = os.path.getsize(out)
    with open_archive(out) as a:
        section = {r.key.module_name: r.index_len for r in a.manifest_rows
                   if r.key.pkg_type < 0}
        bitmaps = a.section("__gunnar_reach__").num_rows
        objs = GitObjects(a)
        absent = objs.absent_objects
        commit_refs = [(r.split()[2], bytes.fromhex(git(repo, "rev-parse",
                                                       f"{r.split()[0]}^{{commit}}").strip()))
                       if r.split()[1] != "commit" else (r.split()[2], bytes.fromhex(
                           r.split()[0])) for r in refs
                       if r.split()[1] in ("commit", "tag")]
        commit_refs = [(n, c) for n, c in commit_refs if objs.index.find(c) is not None]
        objs.reachable_array(commit_refs[0][1])
        objs.log_rows(commit_refs[0][1])
        reach_t = [timed(lambda: objs.reachable_array(c)) for _n, c in commit_refs]
        log_t = [timed(lambda: objs.log_rows(c)) for _n, c in commit_refs]
        # the 10 slowest of each, again: 5 times each, the median (one timing on a shared
        # machine catches whatever else ran then)
        again = {}
        for what, fn, ts in (("reachable", objs.reachable_array, reach_t),
                             ("log", objs.log_rows, log_t)):
            slow = sorted(range(len(ts)), key=lambda i: -ts[i])[:10]
            again[what] = sorted(
                (statistics.median(timed(lambda: fn(commit_refs[i][1])) for _ in range(5)),
                 ts[i], commit_refs[i][0], len(objs.log_rows(commit_refs[i][1])))
                for i in slow)[::-1]
    con = duckdb.connect()
    register(con, out, "m")
    rnd = random.Random(28)
    picked = rnd.sample(commit_refs, min(sample, len(commit_refs)))
    worst = sorted(range(len(commit_refs)), key=lambda i: -reach_t[i] - log_t[i])[:5]
    picked += [commit_refs[i] for i in worst]
    sql_reach, sql_log, git_reach, git_log = [], [], [], []
    loads.append(load())
    for ref, c in picked:
        hexid = c.hex()
        got = {o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('m', ?)",
                                         [hexid]).fetchall()}
        want = {ln.split(" ")[0] for ln in git(repo, "rev-list", "--objects",
                                               "--missing=allow-any", hexid).splitlines()}
        assert got == want, ref
        log = [o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_log('m', ?)",
                                         [hexid]).fetchall()]
        assert log == git(repo, "log", "--format=%H", hexid).split(), ref
        sql_reach.append(timed(lambda: con.execute(
            "SELECT count(*) FROM git_reachable('m', ?)", [hexid]).fetchall()))
        sql_log.append(timed(lambda: con.execute(
            "SELECT count(*) FROM git_log('m', ?)", [hexid]).fetchall()))
        git_reach.append(timed(lambda: git(repo, "rev-list", "--objects",
                                           "--missing=allow-any", hexid)))
        git_log.append(timed(lambda: git(repo, "log", "--format=%H", hexid)))
    loads.append(load())
    o = orders(repo)

    def dist(xs: list[float]) -> str:
        xs = sorted(xs)
        return (f"{ms(statistics.median(xs))} / {ms(xs[int(len(xs) * 0.99)])} / "
                f"{ms(xs[-1])}")

    a, b = statistics.median(ours), statistics.median(peer)
    reach = section.get("__gunnar_reach__", 0)
    lines += [
        f"### {name}", "",
        f"Mirror: the `fetch` snapshot of github:{name} (a bare repository"
        f"{', a partial clone: promisor packs' if promisor else ''}), copied to "
        f"`bench/out/git/mirrors/{name.replace('/', '+')}`. {commits:,} commits, "
        f"{len(refs):,} refs ({before:,} in the snapshot"
        + (f", {added:,} `refs/pull/N/head` added at merged branch tips as the module doc "
           "of bench/bench_git_mirrors.py says" if added else "") + f"), {objects:,} objects"
        + (f", {absent:,} ids named but absent" if absent else "") + ".", "",
        "| | value | target |", "|---|---:|---|",
        f"| packs | {mib(packs)} | |",
        f"| archive | {mib(size)} ({size / packs:.3f}× the packs) | ≤ 1.10× |",
        f"| `__gunnar_reach__` | {reach:,} B ({100 * reach / packs:.2f} % of the packs), "
        f"{bitmaps:,} bitmaps ({o['irregular']:,} irregular) | ≤ 5 % |",
        f"| `__gunnar_oid__` / `__gunnar_graph__` / `__meta__` | "
        f"{section.get('__gunnar_oid__', 0):,} / {section.get('__gunnar_graph__', 0):,} / "
        f"{section.get('__meta__', 0):,} B | |",
        f"| `git import` (process): wall, CPU | {a:.2f} s ({', '.join(f'{x:.2f}' for x in ours)}"
        f"), CPU {statistics.median(ours_cpu):.2f} s | |",
        f"| `tar -cf - MIRROR \\| zstd -3 -T2`: wall, CPU | {b:.2f} s "
        f"({', '.join(f'{x:.2f}' for x in peer)}), CPU {statistics.median(peer_cpu):.2f} s; "
        f"{mib(os.path.getsize(tar))} | |",
        f"| import / tar+zstd | {a / b:.1f}× wall, "
        f"{statistics.median(ours_cpu) / statistics.median(peer_cpu):.1f}× CPU | ≤ 3× |",
        "| the import's steps in process (CPU, best of 3) | "
        + ", ".join(f"{k} {v * 1e3:,.0f} ms" for k, v in stages.items())
        + f"; sum {sum(stages.values()) * 1e3:,.0f} ms | |",
        f"| `reachable` in process, all {len(commit_refs):,} refs (median / p99 / max) | "
        f"{dist(reach_t)} | |",
        f"| `log` in process, all refs | {dist(log_t)} | |",
        *(f"| `{what}` again, the 10 slowest refs (median of 5 each; the slowest) | "
          f"{ms(again[what][-1][0])} – {ms(again[what][0][0])}; `{again[what][0][2]}` "
          f"({again[what][0][3]:,} commits): once {ms(again[what][0][1])}, "
          f"median of 5 {ms(again[what][0][0])} | ≤ 100 ms |"
          for what in ("reachable", "log")),
        f"| `git_reachable` SQL, {len(picked)} refs (random + the 5 slowest in process) | "
        f"{dist(sql_reach)} | ≤ 100 ms |",
        f"| `git_log` SQL, the same refs | {dist(sql_log)} | ≤ 100 ms |",
        f"| peer: `git rev-list --objects`, the same refs (process) | {dist(git_reach)} | |",
        f"| peer: `git log --format=%H`, the same refs (process) | {dist(git_log)} | |", "",
        f"Equal to `git rev-list --objects --missing=allow-any` and `git log --format=%H` for "
        f"those {len(picked)} refs (checked, not timed). Stored bitmaps' bytes by position "
        f"order: traversal {o['traversal']:,} B; a bitmap for every commit (traversal "
        f"order) {o['every']:,} B. "
        f"Load (1-minute average) before the import rounds, after each, before the SQL "
        f"refs and at the end: {', '.join(loads)}.", ""]
