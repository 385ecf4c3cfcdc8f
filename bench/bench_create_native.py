"""Create, CLI end to end, before and after the native walk, against ``tar | zstd -3 -T2``.

    .venv/bin/python bench/bench_create_native.py --repeat 5 \
        --variant main=/work/main --variant native=. [--scale 0.5]

Corpora from ``bench/corpora.py`` (``src_tree`` at scale 0.5: 10,000 small source files;
``maven_repo``: a Maven-like repository of jars, poms and checksums). Each round runs every
variant (``NAME=DIR``: a directory holding ``znippy_sql``, first on ``PYTHONPATH`` of the
``znippy-sql`` process) and the peer once per corpus, in turn; the figures are the medians
and the spread (min-max) of wall seconds, and each variant's speed against the peer's
(peer seconds / variant seconds: above 1 is faster than tar+zstd), and the medians of CPU
seconds (user + system of the process and its children: for the peer, tar's and zstd's).
Each variant's bytecode is compiled first and used (``PYTHONDONTWRITEBYTECODE`` is dropped
from its environment): a stale ``.pyc`` would time the compiler.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402

CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str] | str, env: dict[str, str] | None = None, shell: bool = False
          ) -> tuple[float, float]:
    """Wall and CPU seconds of ``cmd``."""
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, shell=shell, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--variant", action="append", default=[])
    ap.add_argument("--work", default="/tmp/znippy-bench-create")
    ap.add_argument("--corpus", action="append", default=[])
    args = ap.parse_args()
    variants = [v.split("=", 1) for v in args.variant] or [["cur", "."]]
    names = args.corpus or ["src_tree", "maven_repo"]
    dirs = corpora.generate(os.path.join(args.work, "corpora"), scale=args.scale, only=names)
    out = os.path.join(args.work, "out")
    os.makedirs(out, exist_ok=True)
    for _, pkg in variants:  # start-up is timed: each variant's bytecode compiled first
        compileall.compile_dir(os.path.join(os.path.abspath(pkg), "znippy_sql"), quiet=1)
    times: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.repeat):
        for corpus in names:
            src = dirs[corpus]
            for name, pkg in [*variants, ["tar|zstd", None]]:
                target = os.path.join(out, f"{corpus}.{name.replace('|', '-')}")
                if os.path.exists(target):
                    os.unlink(target)
                if pkg is None:
                    cmd = (f"tar -cf - -C {os.path.dirname(src)} {os.path.basename(src)} "
                           f"| zstd -3 -T2 -q -o {target}")
                    secs, cpu = timed(cmd, shell=True)
                else:
                    env = {**os.environ, "PYTHONPATH": os.path.abspath(pkg)}
                    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (the compiled bytecode used)
                    secs, cpu = timed([CLI, "create", src, "-o", target, "--pkg-type", "auto"],
                                      env)
                times.setdefault((corpus, name), []).append(secs)
                cpus.setdefault((corpus, name), []).append(cpu)
                print(f"round {rnd} {corpus} {name}: {secs:.2f} s, CPU {cpu:.2f} s", flush=True)
    print()
    print("| corpus | who | median s | min-max s | vs tar+zstd | CPU s (min-max) |")
    print("|---|---|---|---|---|---|")
    for corpus in names:
        peer = statistics.median(times[(corpus, "tar|zstd")])
        for name, _ in [*variants, ["tar|zstd", None]]:
            t = times[(corpus, name)]
            med = statistics.median(t)
            c = cpus[(corpus, name)]
            print(f"| {corpus} | {name} | {med:.2f} | {min(t):.2f}-{max(t):.2f} | "
                  f"{peer / med:.2f}x | {statistics.median(c):.2f} ({min(c):.2f}-{max(c):.2f}) |")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
