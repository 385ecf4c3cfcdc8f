"""Per-file costs of create and extract: wall and CPU seconds on ``src_tree`` and ``mixed_repo``.

Each measurement runs in a fresh child interpreter (``bench/run.py --child create|extract``,
the same child as the core benchmark: pool start-up included, interpreter start-up excluded);
CPU seconds are those of the child and its workers. The machine is shared, so variants are
compared by alternating runs and medians:

    .venv/bin/python bench/bench_smallfiles.py --repeat 5 \
        --variant base=/tmp/znippy-base --variant cur=.

runs every variant (``NAME=DIR``: a directory holding a ``znippy_sql`` package, put first on
``PYTHONPATH`` of the child; ``.`` is the work tree) once per round, rounds ``--repeat`` times,
and prints the median wall and CPU seconds per (corpus, operation, variant). ``--peer`` adds
``tar | zstd -3 -T2`` and ``zstd -d | tar -x`` in the same rounds. ``--extract-to /dev/shm``
extracts into tmpfs, without the disk. Every extraction gets a directory of its own, deleted
when all rounds are over: on this disk, creating files within minutes of deleting many others
is 10-20× slower (``bench/run.py`` says why), so wait six minutes after a run before the next.

A baseline snapshot for ``base`` is made with e.g.
``git archive HEAD znippy_sql | tar -x -C /tmp/znippy-base``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run  # noqa: E402  (bench/run.py: the child runner, CPU sampling, the peer pipelines)

CORPORA = os.path.join(HERE, "out", "corpora")
WORK = os.path.join(HERE, "out", "work-smallfiles")


def measure_variant(name: str, pkg: str, corpus: str, ops: list[str],
                    xroot: str, rnd: int) -> dict[str, tuple]:
    src = os.path.join(CORPORA, f"{corpus}@1")
    archive = os.path.join(WORK, f"{corpus}.{name}.znippy")
    dest = os.path.join(xroot, f"{corpus}.{name}.x{rnd}")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.abspath(pkg) + (os.pathsep + old if old else "")
    out = {}
    try:
        if "create" in ops or not os.path.exists(archive):
            run.rm(archive)
            r = run.run_child(["create", src, archive, "auto"])
            if "create" in ops:
                out["create"] = (r.wall, r.cpu, r.result["seconds"])
        if "extract" in ops:
            run.fresh(dest)  # deleted when all rounds are over (bench/run.py says why)
            os.sync()
            r = run.run_child(["extract", archive, dest])
            assert r.result["failed"] == 0, r.result
            out["extract"] = (r.wall, r.cpu, r.result["seconds"])
            os.sync()  # not timed: the next measurement starts without dirty pages
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old
    return out


def measure_peer(corpus: str, ops: list[str], xroot: str, rnd: int) -> dict[str, tuple]:
    src = os.path.join(CORPORA, f"{corpus}@1")
    tz = os.path.join(WORK, f"{corpus}.tar.zst")
    tx = os.path.join(xroot, f"{corpus}.tx{rnd}")
    out = {}
    if "create" in ops or not os.path.exists(tz):
        run.rm(tz)
        wall, cpu = run.shell(f"tar -cf - -C {src} . | zstd -3 -T2 -q -o {tz} && sync {tz}")
        if "create" in ops:
            out["create"] = (wall, cpu, wall)
    if "extract" in ops:
        os.makedirs(run.fresh(tx))
        os.sync()
        wall, cpu = run.shell(f"zstd -d -q -c {tz} | tar -xf - -C {tx}")
        out["extract"] = (wall, cpu, wall)
        os.sync()
    return out


def measure_rounds(args: argparse.Namespace, variants: list[tuple[str, str]],
                   samples: dict[tuple[str, str, str], list[tuple]]) -> None:
    for rnd in range(args.repeat):
        for corpus in args.corpus:
            order = variants if rnd % 2 == 0 else variants[::-1]  # alternate who goes first
            for name, pkg in order:
                for op, v in measure_variant(name, pkg, corpus, args.op, args.extract_to,
                                             rnd).items():
                    samples.setdefault((corpus, op, name), []).append(v)
                    print(f"round {rnd} {corpus:10} {op:7} {name:6} wall {v[0]:.2f} s "
                          f"CPU {v[1]:.2f} s (in-call {v[2]:.2f} s)", flush=True)
            if args.peer:
                for op, v in measure_peer(corpus, args.op, args.extract_to, rnd).items():
                    samples.setdefault((corpus, op, "peer"), []).append(v)
                    print(f"round {rnd} {corpus:10} {op:7} peer   wall {v[0]:.2f} s "
                          f"CPU {v[1]:.2f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", nargs="*", default=["src_tree", "mixed_repo"])
    ap.add_argument("--op", nargs="*", default=["create", "extract"])
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=DIR with a znippy_sql package (default: cur=. )")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peer", action="store_true", help="also time tar|zstd and zstd -d|tar")
    ap.add_argument("--extract-to", default=WORK,
                    help="directory the extractions go under (e.g. /dev/shm: no disk noise)")
    args = ap.parse_args()
    variants = ([(n, os.path.abspath(d)) for n, d in (v.split("=", 1) for v in args.variant)]
                or [("cur", os.path.dirname(HERE))])
    os.makedirs(WORK, exist_ok=True)
    # The fork server runs ``python -c``, which puts the working directory first on sys.path:
    # from the work tree it would import the work tree's package whatever PYTHONPATH says.
    os.chdir(WORK)
    samples: dict[tuple[str, str, str], list[tuple]] = {}
    try:
        measure_rounds(args, variants, samples)
    finally:
        run.clean_up()
    print(f"\nmedians of {args.repeat} alternating rounds (wall s / CPU s / in-call s):")
    print("| corpus | op | variant | wall s | CPU s | in-call s |")
    print("|---|---|---|---:|---:|---:|")
    for (corpus, op, name), vals in sorted(samples.items()):
        med = [statistics.median(x[i] for x in vals) for i in range(3)]
        print(f"| {corpus} | {op} | {name} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} |")
    shutil.rmtree(WORK, ignore_errors=True) if os.environ.get("SMALLFILES_CLEAN") else None


if __name__ == "__main__":
    main()
