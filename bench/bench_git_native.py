"""``git import`` with the compiled core against ``tar -cf - MIRROR | zstd -3 -T2`` (issue 33).

Usage::

    .venv/bin/python bench/bench_git_native.py --mirror NAME=BARE_GIT_DIR [--rounds 7]
                                               [--before CHECKOUT] [--out bench/results-git.md]

Each round runs both commands as fresh processes, alternating which goes first (page cache
warm for both: the mirror is read once before), and records wall and CPU (the children's
user + system time). Reported: medians, the spread (min–max), the ratio of medians, the
1-minute load from ``uptime`` before and after, and Python function calls per object of
``import_repository`` in process (``sys.setprofile`` + ``threading.setprofile``, counted
after one warm-up import). The section is put at the top of ``--out``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORK = os.path.join(HERE, "out", "git-native")
CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")
sys.path.insert(0, os.path.join(ROOT, "tests"))
from _calls import python_calls  # noqa: E402


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.split(
        "load average:")[-1].strip()


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: the CLI as an installed package runs it, with its bytecode kept (``pip install`` compiles
#: it): this machine's environment sets PYTHONDONTWRITEBYTECODE, which made every round
#: compile ~60 modules again (~0.08 s of CPU); the warm-up writes the bytecode
CLI_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd: list[str] | str, env: dict[str, str] | None = None) -> tuple[float, float]:
    env = CLI_ENV if env is None else {k: v for k, v in env.items()
                                       if k != "PYTHONDONTWRITEBYTECODE"}
    cpu, t = children_cpu(), time.perf_counter()
    subprocess.run(cmd, shell=isinstance(cmd, str), check=True, stdout=subprocess.DEVNULL,
                   env=env)
    return time.perf_counter() - t, children_cpu() - cpu


def calls_per_object(repo: str, out: str) -> tuple[int, int]:
    from znippy_sql.git.importer import import_repository

    import_repository(repo, out)          # warm: modules imported, files cached
    os.unlink(out)
    report, calls = python_calls(lambda: import_repository(repo, out))
    os.unlink(out)
    return sum(calls.values()), report.objects


def bench(name: str, mirror: str, rounds: int, before: str | None) -> list[str]:
    work = os.path.join(WORK, name.replace("/", "+"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    repo = os.path.join(work, "mirror.git")
    shutil.copytree(mirror, repo, symlinks=True)
    out, tar = os.path.join(work, "out.znippy"), os.path.join(work, "mirror.tar.zst")
    imp = [CLI, "git", "import", repo, "-o", out]
    peer = (f"tar -cf - -C {work} mirror.git | zstd -3 -T2 -q -f -o {tar}")
    run(peer)                                              # the page cache warm for both
    run(imp)                                               # and the bytecode written
    os.unlink(out)
    loads = [load()]
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    old: list[tuple[float, float]] = []
    old_env = dict(os.environ, PYTHONPATH=before) if before else None
    arms = (0, 1, 2) if before else (0, 1)
    for k in range(rounds):
        for which in (arms if k % 2 == 0 else arms[::-1]):
            if which == 1:
                theirs.append(run(peer))
                continue
            if os.path.exists(out):
                os.unlink(out)
            if which == 0:
                ours.append(run(imp))
            else:
                old.append(run(imp, old_env))
    loads.append(load())
    calls, objects = calls_per_object(repo, out + ".calls")
    size, tsize = os.path.getsize(out), os.path.getsize(tar)

    def med(xs: list[tuple[float, float]], i: int) -> float:
        return statistics.median(x[i] for x in xs)

    def spread(xs: list[tuple[float, float]]) -> str:
        return f"{min(x[0] for x in xs):.2f}–{max(x[0] for x in xs):.2f}"

    a, b = med(ours, 0), med(theirs, 0)
    ac, bc = med(ours, 1), med(theirs, 1)
    return [
        f"#### {name}", "",
        f"Mirror: `{mirror}` copied to `{repo}`; {objects:,} objects. {rounds} rounds, "
        "alternating which command goes first.", "",
        "| | wall (median) | spread | CPU (median) | output |",
        "|---|---:|---:|---:|---:|",
        f"| `znippy-sql git import` | {a:.2f} s | {spread(ours)} s | {ac:.2f} s | "
        f"{size / 2**20:.1f} MiB |",
        f"| `tar -cf - MIRROR \\| zstd -3 -T2` | {b:.2f} s | {spread(theirs)} s | {bc:.2f} s "
        f"| {tsize / 2**20:.1f} MiB |",
        f"| import / tar+zstd | **{a / b:.2f}×** wall | | {ac / bc:.2f}× CPU | |",
        *([f"| before: the same CLI, `PYTHONPATH={before}` | {med(old, 0):.2f} s | "
           f"{spread(old)} s | {med(old, 1):.2f} s | |",
           f"| before / tar+zstd | {med(old, 0) / b:.2f}× wall | | {med(old, 1) / bc:.2f}× "
           "CPU | |"] if old else []), "",
        f"Python function calls in `import_repository` (in process, after a warm-up): "
        f"{calls:,} for {objects:,} objects = **{calls / objects:.3f} an object**.", "",
        f"Load (1, 5, 15 min) before the rounds: {loads[0]}; after: {loads[1]}.", ""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", action="append", required=True, help="NAME=BARE_GIT_DIR")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--before", help="another checkout of the package, run as a third arm")
    ap.add_argument("--out", default=os.path.join(HERE, "results-git.md"))
    args = ap.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    lines = [f"## {when}: `git import` in the compiled core (issue 33, item 4)", "",
             f"Command: `.venv/bin/python bench/bench_git_native.py "
             f"{' '.join('--mirror ' + m for m in args.mirror)} --rounds {args.rounds}"
             + (f" --before {args.before}" if args.before else "") + "` — "
             f"{platform.machine()}, {os.cpu_count()} cores, 24 GiB, shared with other work; "
             f"Python {platform.python_version()}, {git}.", ""]
    for spec in args.mirror:
        name, path = spec.split("=", 1)
        lines += bench(name, path, args.rounds, args.before)
    text = "\n".join(lines) + "\n"
    print(text)
    old = open(args.out).read() if os.path.exists(args.out) else ""
    head, _, rest = old.partition("\n## ")
    with open(args.out, "w") as fh:
        fh.write(head.rstrip("\n") + "\n\n" + text + ("\n## " + rest if rest else ""))


if __name__ == "__main__":
    main()
