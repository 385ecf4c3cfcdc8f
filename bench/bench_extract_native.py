"""CLI extract (the native core, issue 33 item 3) against ``zstd -d -c X.tar.zst | tar -x``.

Two corpora of ``bench/corpora.py``: ``src_tree`` at ``--scale-src`` (0.5: 10,000 small
source files) and ``maven_repo`` at ``--scale-maven`` (a Maven-like repository). Each is
archived once with ``znippy-sql create`` and once with ``tar -cf - | zstd -3 -T2``; then, for
``--rounds`` rounds, every variant extracts it into a fresh directory, interleaved (the
machine is shared: medians of alternating runs), under ``--extract-to`` (``/dev/shm``: without
the disk). Variants: ``cur`` (this work tree),
``--base DIR`` (another checkout's ``znippy_sql``, e.g. main before the core wrote files) and
the ``peer`` pipeline. Wall seconds, end to end (interpreter start-up included).

    .venv/bin/python bench/bench_extract_native.py --rounds 5 --base /work/main \
        --write bench/results-extract-native.md
"""

from __future__ import annotations

import argparse
import datetime
import os
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


def _timed(argv: list[str] | str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    # cwd: not a checkout (``python -c`` puts the working directory first on sys.path, before
    # PYTHONPATH: run from a work tree, every variant would import that tree's package)
    subprocess.run(argv, check=True, env=env, shell=isinstance(argv, str),
                   stdout=subprocess.DEVNULL, cwd=WORK)
    return time.perf_counter() - started


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
        made: list[str] = []
        for r in range(args.rounds):
            for v, pkg in variants.items():
                dest = os.path.join(args.extract_to, f"{name}.{v}.{r}")
                made.append(dest)
                times[v].append(_timed([sys.executable, "-c", CLI, "extract", arc, "-o", dest],
                                       _env(pkg)))
            dest = os.path.join(args.extract_to, f"{name}.peer.{r}")
            os.makedirs(dest)
            made.append(dest)
            times["peer"].append(_timed(f"zstd -q -d -c {tzst} | tar -x -C {dest}"))
        med = {v: statistics.median(t) for v, t in times.items()}
        for d in made:
            shutil.rmtree(d, ignore_errors=True)
        row = (f"| {name} | {files:,} files, {size / (1 << 20):.0f} MiB | "
               + " | ".join(f"{med[v]:.3f}" for v in times)
               + f" | {med['peer'] / med['cur']:.2f}× |")
        if "base" in med:
            row += f" {med['base'] / med['cur']:.2f}× |"
        lines.append(row)
        print(row, flush=True)
    head = ("| corpus | size | " + " | ".join(f"{v} s" for v in times)
            + " | peer / cur |" + (" base / cur |" if args.base else ""))
    rule = "|" + "---|" * (head.count("|") - 1)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = "\n".join([f"\n## {stamp}: `{' '.join(sys.argv[1:])}`\n",
                      f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end, "
                      f"{args.rounds} interleaved rounds, medians of wall seconds (CLI end to "
                      f"end, interpreter start-up included), extracting into {args.extract_to}."
                      "\n", head, rule, *lines, ""])
    print(text)
    if args.write:
        with open(args.write, "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
