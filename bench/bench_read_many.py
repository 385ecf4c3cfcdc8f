"""``Archive.read_many`` of every file of ``src_tree`` (issue 33 item 3: its per-file work in
the core), this work tree against ``--base`` (another checkout's ``znippy_sql``).

``bench/corpora.py`` ``src_tree`` at ``--scale`` (0.5: 10,000 small source files) is archived
once; then, for ``--rounds`` rounds, each variant reads every file in a fresh interpreter,
interleaved (the machine is shared: medians of alternating runs). Measured inside the child
around the ``read_many`` loop only (opening the archive and imports excluded): wall seconds
and CPU seconds (``time.process_time``: every thread of the process); medians, with the
lowest and highest in brackets.

    .venv/bin/python bench/bench_read_many.py --rounds 7 --base /work/main \
        --write bench/results-extract-native.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402  (bench/corpora.py)

WORK = os.path.join(HERE, "out", "work-read-many")
CHILD = """
import json, sys, time
from znippy_sql import open_archive
with open_archive(sys.argv[1]) as a:
    paths = a.select()
    a.lookup_columns
    wall, cpu = time.perf_counter(), time.process_time()
    n = size = 0
    for p, d in a.read_many(paths):
        n += 1
        size += len(d)
    print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu, n, size]))
"""


def _run(pkg: str, arc: str) -> list[float]:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(pkg))
    out = subprocess.run([sys.executable, "-c", CHILD, arc], check=True, env=env, cwd=WORK,
                         capture_output=True, text=True).stdout
    got: list[float] = json.loads(out)
    return got


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} [{min(xs):.3f}–{max(xs):.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--base", required=True, help="a directory holding another znippy_sql")
    ap.add_argument("--write", help="append the results (markdown) to this file")
    args = ap.parse_args()
    out = os.path.join(HERE, "out", "corpora")
    corpora.generate(out, scale=args.scale, only=["src_tree"])
    tree = os.path.join(out, f"src_tree@{args.scale:g}")
    os.makedirs(WORK, exist_ok=True)
    arc = os.path.join(WORK, "src_tree.znippy")
    if not os.path.exists(arc):
        subprocess.run([sys.executable, "-c",
                        "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))",
                        "create", tree, "-o", arc], check=True, cwd=WORK,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)))
    variants = {"cur": os.path.dirname(HERE), "base": args.base}
    runs: dict[str, list[list[float]]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for name, pkg in variants.items():
            runs[name].append(_run(pkg, arc))
    files, size = int(runs["cur"][0][2]), int(runs["cur"][0][3])
    assert all(r[2:] == [files, size] for rs in runs.values() for r in rs)
    cpu = {v: [r[1] for r in rs] for v, rs in runs.items()}
    wall = {v: [r[0] for r in rs] for v, rs in runs.items()}
    ratio = statistics.median(cpu["base"]) / statistics.median(cpu["cur"])
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## {when}: `read_many`, `bench/bench_read_many.py --rounds {args.rounds} "
        f"--base {args.base}`", "",
        f"2 cores (shared), load {os.getloadavg()[0]:.1f} at the end, {args.rounds} "
        f"interleaved rounds; `src_tree`, {files:,} files, {size / 2**20:.0f} MiB; every file "
        "read with `Archive.read_many` (default workers), seconds of that loop only, medians "
        "[lowest–highest].", "",
        "| seconds | cur | base | base / cur |", "|---|---|---|---|",
        f"| wall | {_med(wall['cur'])} | {_med(wall['base'])} | "
        f"{statistics.median(wall['base']) / statistics.median(wall['cur']):.2f}× |",
        f"| CPU | {_med(cpu['cur'])} | {_med(cpu['base'])} | {ratio:.2f}× |", ""]
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
