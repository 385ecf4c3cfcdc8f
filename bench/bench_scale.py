"""Many files: time and peak memory of writing and extracting an archive of N tiny files.

The issue's corpora have at most 20,000 files; repositories have millions. This measures what a
write and an extract keep per file, in a fresh interpreter each (peak RSS = the child's
``ru_maxrss``, interpreter and imports included):

    .venv/bin/python bench/bench_scale.py --entries 1000000 \\
        [--variant base=/tmp/znippy-base --variant cur=.] [--out bench/results-scale.md]

``write``: ``write_archive`` of N in-memory entries (``alpha/dNNNN/fNNNN.txt``, a few bytes
each) from a generator, no fsync. ``extract``: ``Archive.extract`` of all of them into a fresh
directory under ``/dev/shm`` (tmpfs: a million files on this disk would be slow to create and to
delete, see ``bench/run.py``), with the time spent planning (before the first unit is handed to
the writers) reported apart. Variants (``NAME=DIR``, a directory holding a ``znippy_sql``
package, first on ``PYTHONPATH``; a snapshot is made with ``git archive HEAD znippy_sql |
tar -x -C DIR``) run alternately, ``--repeat`` rounds each.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def child_write(out: str, n: int) -> dict:
    import resource

    from znippy_sql import Entry, write_archive

    def entries():  # type: ignore[no-untyped-def]
        for i in range(n):
            yield Entry(f"alpha/d{i // 1000:04d}/f{i % 1000:04d}.txt", data=b"x%d" % i)

    t = time.perf_counter()
    r = write_archive(out, entries(), fsync=False)
    return {"seconds": time.perf_counter() - t, "files": r.files,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_extract(archive: str, dest: str) -> dict:
    import resource

    from znippy_sql.read import extract as ex
    from znippy_sql import open_archive

    planned: list[float] = []
    run = ex._run

    def timed_run(*args, **kwargs):  # type: ignore[no-untyped-def]
        planned.append(time.perf_counter())
        return run(*args, **kwargs)

    ex._run = timed_run  # the plan ends where the units go to the writers
    t = time.perf_counter()
    with open_archive(archive) as a:
        r = a.extract(dest)
    return {"seconds": time.perf_counter() - t, "plan_seconds": planned[0] - t,
            "files": r.files, "failed": len(r.failed),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_child(pkg: str, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(pkg), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", *args],
                         env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--variant", action="append", default=[], help="NAME=DIR (default cur=.)")
    ap.add_argument("--out", help="also write the table to this Markdown file")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        op, *rest = args.child
        result = (child_write(rest[0], int(rest[1])) if op == "write"
                  else child_extract(rest[0], rest[1]))
        print(json.dumps(result))
        return
    variants = [tuple(v.split("=", 1)) for v in args.variant] or [("cur", ROOT)]
    work = os.path.join(HERE, "out", "scale")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else work
    os.makedirs(work, exist_ok=True)
    rows = []
    for rnd in range(args.repeat):
        for name, pkg in (variants if rnd % 2 == 0 else variants[::-1]):
            archive = os.path.join(work, f"entries-{args.entries}.{name}.znippy")
            w = run_child(pkg, ["write", archive, str(args.entries)])
            dest = tempfile.mkdtemp(prefix="znippy-scale-", dir=shm)
            try:
                x = run_child(pkg, ["extract", archive, dest])
            finally:
                shutil.rmtree(dest, ignore_errors=True)
                os.unlink(archive)
            assert w["files"] == x["files"] == args.entries and x["failed"] == 0, (w, x)
            rows.append(f"| {name} | {rnd} | {w['seconds']:.1f} | {w['peak_mb']:.0f} | "
                        f"{x['seconds']:.1f} | {x['plan_seconds']:.2f} | {x['peak_mb']:.0f} |")
            print(rows[-1], flush=True)
    table = "\n".join([
        f"`.venv/bin/python bench/bench_scale.py --entries {args.entries} --repeat "
        f"{args.repeat}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: "
        f"{args.entries:,} files of a few bytes; extract into {shm}.",
        "",
        "| variant | round | write s | write peak MB | extract s | of which plan s "
        "| extract peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *rows,
    ])
    print("\n" + table)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write("\n" + table + "\n")


if __name__ == "__main__":
    main()
