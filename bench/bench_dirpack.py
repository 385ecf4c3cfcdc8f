"""Directory packs (issue 26, docs/format.md §6): what the cap on a pack costs.

Usage::

    .venv/bin/python bench/bench_dirpack.py [--caps 8 16 32 64] [--reads 40] [--src DIR]
                                            [--out bench/results-packed.md]

For each cap (MiB) a child process writes ``--src`` (default ``~/.m2/repository``) with the
writer's defaults but ``pack.DIR_PACK_MAX`` = ``DIR_MEMBER_MAX`` = the cap and
``codec.LONG_WINDOW_LOG`` = log2 of it, then measures: the archive's size (and over the
``.tar.zst`` given by ``--tar-zst-bytes``), the write's wall time, the cold point read of
``--reads`` zip-family files chosen with a fixed seed (each from a fresh ``open_archive``
handle, page cache warm: the decode of its pack up to its slice), the largest directory
pack, and the peak RSS of ``znippy-sql extract`` of the archive (``/usr/bin/time``'s maximum
resident set size).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLI = os.path.join(ROOT, ".venv", "bin", "znippy-sql")

CHILD = r"""
import os, random, sys, time, json
cap = int(sys.argv[1]) << 20
from znippy_sql.format import codec
from znippy_sql.write import limits, pack
pack.DIR_PACK_MAX = cap
limits.DIR_MEMBER_MAX = cap
codec.LONG_WINDOW_LOG = cap.bit_length() - 1
from znippy_sql import open_archive, write_archive
src, out, reads = sys.argv[2], sys.argv[3], int(sys.argv[4])
t = time.perf_counter()
write_archive(out, src)
wall = time.perf_counter() - t
with open_archive(out) as a:
    rows = a.lookup.to_pylist()
jars = sorted({r["relative_path"] for r in rows if r["relative_path"].endswith(".jar")})
blobs = {}
for r in rows:
    if r["relative_path"].endswith(".jar") and r["inner_offset"] + r["uncompressed_size"] > 0:
        end = r["inner_offset"] + r["uncompressed_size"]
        if end > blobs.get(r["blob_offset"], (0, ""))[0]:
            blobs[r["blob_offset"]] = (end, r["relative_path"])
largest, last = max(blobs.values()) if blobs else (0, jars[0])


def cold(p):
    with open_archive(out, verify_sections=False) as a:
        a.find(p)
        t = time.perf_counter()
        a.read(p)
        return time.perf_counter() - t


times = [cold(p) for p in random.Random(26).sample(jars, min(reads, len(jars)))]
worst = [cold(last) for _ in range(5)]
print(json.dumps({"size": os.path.getsize(out), "wall": wall, "reads": times,
                  "largest": largest, "worst": worst}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--caps", type=int, nargs="*", default=[8, 16, 32, 64])
    ap.add_argument("--reads", type=int, default=40)
    ap.add_argument("--src", default=os.path.expanduser("~/.m2/repository"))
    ap.add_argument("--tar-zst-bytes", type=int, default=316_329_997,
                    help="size of `tar -cf - . | zstd -3 -T2` of --src")
    ap.add_argument("--work", default=os.path.join(HERE, "out", "dirpack"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-packed.md"))
    args = ap.parse_args()
    import json

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()[0]
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    lines = []
    for cap in args.caps:
        arc = os.path.join(args.work, f"cap{cap}.znippy")
        got = json.loads(subprocess.run(
            [sys.executable, "-c", CHILD, str(cap), args.src, arc, str(args.reads)],
            check=True, capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": ROOT}).stdout)
        dest = os.path.join(args.work, f"x{cap}")
        t = time.perf_counter()
        res = subprocess.run(["/usr/bin/time", "-f", "%M", CLI, "extract", arc, "-o", dest],
                             check=True, capture_output=True, text=True)
        xwall = time.perf_counter() - t
        rss = int(res.stderr.strip().splitlines()[-1]) / 1024
        shutil.rmtree(dest, ignore_errors=True)
        ms = sorted(1000 * x for x in got["reads"])
        worst = [1000 * x for x in got["worst"]]
        lines.append(f"| {cap} MiB | {got['size']:,} | {got['size'] / args.tar_zst_bytes:.3f} | "
                     f"{got['largest'] / (1 << 20):.1f} MiB | {got['wall']:.1f} s | "
                     f"{statistics.median(ms):.1f} / {statistics.mean(ms):.1f} / "
                     f"{ms[int(0.9 * (len(ms) - 1))]:.1f} ms | {statistics.median(worst):.1f} ms "
                     f"({min(worst):.1f}-{max(worst):.1f}) | "
                     f"{xwall:.1f} s | {rss:.0f} MB |")
        print(lines[-1], flush=True)
        os.remove(arc)
    shutil.rmtree(args.work, ignore_errors=True)
    text = "\n".join([
        f"## Run {started} UTC, {platform.node()}: {os.cpu_count()} cores, shared, load "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end", "",
        f"Command: `.venv/bin/python bench/bench_dirpack.py --caps {' '.join(map(str, args.caps))}"
        f" --reads {args.reads}` (source `{args.src}`; write through the API, extract through "
        "the CLI; cold read = one jar from a fresh archive handle, page cache warm, over "
        "a seeded sample; the last jar of the largest pack: median (range) of 5)", "",
        "| cap | archive bytes | vs .tar.zst | largest directory pack | write wall | cold read of "
        "a jar: median / mean / p90 | the last jar of the largest pack | extract wall | extract "
        "peak RSS |",
        "|---|---|---|---|---|---|---|---|---|", *lines, ""])
    with open(args.out, "a") as fh:
        fh.write("\n" + text)
    print(text)


if __name__ == "__main__":
    main()
