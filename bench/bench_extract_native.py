"""CLI extract (the native core, issue 33 item 3) against ``zstd -d -c X.tar.zst | tar -x``.

Two corpora of ``bench/corpora.py``: ``src_tree`` at ``--scale-src`` (0.5: 10,000 small
source files) and ``maven_repo`` at ``--scale-maven`` (a Maven-like repository). Each is
archived once with ``znippy-sql create`` and once with ``tar -cf - | zstd -3 -T2``; then, for
``--rounds`` rounds, every variant extracts it into a fresh directory, interleaved (the
machine is shared: medians of alternating runs), under ``--extract-to`` (``/dev/shm``: without
the disk). Variants: ``cur`` (this work tree),
``--base DIR`` (another checkout's ``znippy_sql``, e.g. main before the core wrote files) and
the ``peer`` pipeline; ``--variant NAME=DIR`` adds more (e.g. a copy of the package with
another build of the core: an A/B of two builds), and ``--env NAME:VAR=VALUE`` runs variant
NAME with VAR set (e.g. ``--variant named=. --env named:ZNIPPY_EXTRACT_NAMING=named``: this
tree with the named temporaries instead of unnamed files). Wall seconds, end to end (interpreter
start-up included), and CPU seconds (user + system of the process and its children: what a
loaded machine cannot blur); medians, with the lowest and highest in brackets.

    .venv/bin/python bench/bench_extract_native.py --rounds 5 --base /work/main \
        --write bench/results-extract-native.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402  (bench/corpora.py)

WORK = os.path.join(HERE, "out", "work-extract-native")
CLI = "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))"


def _env(pkg: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.path.abspath(pkg))


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _timed(argv: list[str] | str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    cpu = _cpu()
    started = time.perf_counter()
    # cwd: not a checkout (``python -c`` puts the working directory first on sys.path, before
    # PYTHONPATH: run from a work tree, every variant would import that tree's package)
    subprocess.run(argv, check=True, env=env, shell=isinstance(argv, str),
                   stdout=subprocess.DEVNULL, cwd=WORK)
    return time.perf_counter() - started, _cpu() - cpu


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}–{max(xs):.3f}]"


def _count(root: str) -> tuple[int, int]:
    files = size = 0
    for d, _, names in os.walk(root):
        for n in names:
            files += 1
            size += os.lstat(os.path.join(d, n)).st_size
    return files, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scale-src", type=float, default=0.5)
    ap.add_argument("--scale-maven", type=float, default=0.25)
    ap.add_argument("--base", help="a directory holding another znippy_sql package")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                    help="another directory holding a znippy_sql package, measured as NAME")
    ap.add_argument("--env", action="append", default=[], metavar="NAME:VAR=VALUE",
                    help="an environment variable set for variant NAME only")
    ap.add_argument("--write", help="append the results (markdown) to this file")
    ap.add_argument("--extract-to", default=WORK,
                    help="where the extractions go (e.g. /dev/shm: without the disk)")
    args = ap.parse_args()
    out = os.path.join(HERE, "out", "corpora")
    corpora.generate(out, scale=args.scale_src, only=["src_tree"])
    corpora.generate(out, scale=args.scale_maven, only=["maven_repo"])
    trees = {"src_tree": os.path.join(out, f"src_tree@{args.scale_src:g}"),
             "maven_repo": os.path.join(out, f"maven_repo@{args.scale_maven:g}")}
    cur = os.path.dirname(HERE)
    variants = {"cur": cur} | ({"base": args.base} if args.base else {})
    variants |= dict(v.split("=", 1) for v in args.variant)
    extra: dict[str, dict[str, str]] = {}
    for spec in args.env:
        v, var = spec.split(":", 1)
        extra.setdefault(v, {}).__setitem__(*var.split("=", 1))
    os.makedirs(WORK, exist_ok=True)
    lines = []
    for name, src in trees.items():
        files, size = _count(src)
        arc = os.path.join(WORK, f"{name}.znippy")
        tzst = os.path.join(WORK, f"{name}.tar.zst")
        for p in (arc, tzst):
            if os.path.exists(p):
                os.unlink(p)
        subprocess.run([sys.executable, "-c", CLI, "create", src, "-o", arc], check=True,
                       env=_env(cur), stdout=subprocess.DEVNULL, cwd=WORK)
        subprocess.run(f"tar -cf - -C {src} . | zstd -q -3 -T2 -o {tzst}", shell=True,
                       check=True)
        times: dict[str, list[float]] = {v: [] for v in [*variants, "peer"]}
        cpus: dict[str, list[float]] = {v: [] for v in times}
        made: list[str] = []
        for r in range(args.rounds):
            for v, pkg in variants.items():
                dest = os.path.join(args.extract_to, f"{name}.{v}.{r}")
                made.append(dest)
                wall, cpu = _timed([sys.executable, "-c", CLI, "extract", arc, "-o", dest],
                                   _env(pkg) | extra.get(v, {}))
                times[v].append(wall)
                cpus[v].append(cpu)
            dest = os.path.join(args.extract_to, f"{name}.peer.{r}")
            os.makedirs(dest)
            made.append(dest)
            wall, cpu = _timed(f"zstd -q -d -c {tzst} | tar -x -C {dest}")
            times["peer"].append(wall)
            cpus["peer"].append(cpu)
        med = {v: statistics.median(t) for v, t in times.items()}
        mcpu = {v: statistics.median(t) for v, t in cpus.items()}
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
        row = (f"| {name} | {files:,} files, {size / (1 << 20):.0f} MiB | wall | "
               + " | ".join(_med(times[v]) for v in times)
               + " | " + " | ".join(f"{med[v] / med['cur']:.2f}×" for v in times if v != "cur")
               + " |")
        lines.append(row)
        row = ("| | | CPU | " + " | ".join(_med(cpus[v]) for v in times)
               + " | " + " | ".join(f"{mcpu[v] / mcpu['cur']:.2f}×" for v in times if v != "cur")
               + " |")
        lines.append(row)
        print(row, flush=True)
    head = ("| corpus | size | seconds | " + " | ".join(f"{v}" for v in times) + " | "
            + " | ".join(f"{v} / cur" for v in times if v != "cur") + " |")
    rule = "|" + "---|" * (head.count("|") - 1)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([f"\n## {stamp}: `{' '.join(sys.argv[1:])}`\n",
                      f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end, "
                      f"{args.rounds} interleaved rounds, medians [lowest–highest] of wall and "
                      f"CPU seconds (CLI end to end, interpreter start-up included), "
                      f"extracting into {args.extract_to}."
                      "\n", head, rule, *lines, ""])
    print(text)
    if args.write:
        with open(args.write, "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
