"""Packed blobs and compressed index streams (issue 26), through the CLI, against
``tar -cf - | zstd -3 -T2`` in the same run.

Usage::

    .venv/bin/python bench/bench_packed.py [--repeat 3] [--scale 1] [--only NAME ...]
                                           [--out bench/results-packed.md]

Corpora: ``src_tree``, ``mixed_repo``, ``big_text``, ``random`` (``bench/corpora.py`` at
``--scale``; ``--big-scale`` for the last three) and ``m2_repository`` (``~/.m2/repository``
as it is, where it exists). Every command is its own process, as a user runs it:

- ``packed``: ``znippy-sql create SRC -o OUT`` (packing and index compression are the
  defaults since 2026-12-02);
- ``plain``: ``znippy-sql create SRC -o OUT --no-pack --no-index-compression`` (the layout
  before them);
- ``tar_zstd``: ``tar -cf - -C SRC . | zstd -3 -T2`` then ``sync OUT`` (our create fsyncs);
- extract of the packed and the plain archive (``znippy-sql extract``) against
  ``zstd -d | tar -x``.

The sides take turns in an order that rotates every round, on warm page cache; figures are
the median of the rounds with the range beside it, speed ratios per round (peer / ours: above
1 is faster than the peer). Index bytes per row: every byte after the blob region (sub-indexes,
lookup, trie, sections, manifest, footer) over the lookup's rows.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import corpora  # noqa: E402
from bench_dedup import CLI, M2, du, shlex_quote as q, timed  # noqa: E402

MB = 1e6


def index_bytes(archive: str) -> tuple[int, int]:
    """(bytes after the blob region, lookup rows) of an archive."""
    from znippy_sql import open_archive

    with open_archive(archive) as a:
        size = a.source.size
        rows = a.lookup.num_rows
        return size - a.tail_offset, rows


def bench_corpus(name: str, src: str, work: str, repeat: int) -> dict[str, Any]:
    files, size = du(src)
    out = {"packed": "{w}/{n}-{i}.p.znippy", "plain": "{w}/{n}-{i}.n.znippy",
           "tar_zstd": "{w}/{n}-{i}.tar.zst"}

    def path(side: str, i: int) -> str:
        return out[side].format(w=work, n=name, i=i)

    sides = {
        "packed": lambda i: [CLI, "create", src, "-o", path("packed", i)],
        "plain": lambda i: [CLI, "create", src, "-o", path("plain", i), "--no-pack",
                            "--no-index-compression"],
        "tar_zstd": lambda i: (f"tar -cf - -C {q(src)} . | zstd -3 -T2 -q -f -o "
                               f"{q(path('tar_zstd', i))} && sync {q(path('tar_zstd', i))}"),
    }
    runs: dict[str, list[tuple[float, float]]] = {
        k: [] for k in [*sides, "x_packed", "x_plain", "untar"]}
    sizes: dict[str, list[int]] = {k: [] for k in sides}
    subprocess.run(f"tar -cf - -C {q(src)} . > /dev/null", shell=True, check=True)  # warm
    load_start = os.getloadavg()[0]
    order = list(sides)
    for i in range(repeat):
        for side in order[i % len(order):] + order[: i % len(order)]:
            runs[side].append(timed(sides[side](i)))
            sizes[side].append(os.path.getsize(path(side, i)))
        xs = [("x_packed", [CLI, "extract", path("packed", i), "-o", f"{work}/{name}-{i}.xp"]),
              ("x_plain", [CLI, "extract", path("plain", i), "-o", f"{work}/{name}-{i}.xn"]),
              ("untar", f"mkdir -p {q(f'{work}/{name}-{i}.xt')} && zstd -d -q -c "
                        f"{q(path('tar_zstd', i))} | tar -xf - -C {q(f'{work}/{name}-{i}.xt')}")]
        for side, cmd in xs[i % 3:] + xs[: i % 3]:
            runs[side].append(timed(cmd))
        subprocess.run(["sync"], check=True)
        for d in ("xp", "xn", "xt"):
            shutil.rmtree(f"{work}/{name}-{i}.{d}", ignore_errors=True)
    idx = {side: index_bytes(path(side, 0)) for side in ("packed", "plain")}
    return {"name": name, "files": files, "bytes": size, "runs": runs, "sizes": sizes,
            "index": idx, "load": (load_start, os.getloadavg()[0])}


def ratio_cells(ours: list[tuple[float, float]], peer: list[tuple[float, float]]) -> str:
    r = [p[0] / o[0] for o, p in zip(ours, peer)]
    return f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"


def cpu_cell(ours: list[tuple[float, float]], peer: list[tuple[float, float]]) -> str:
    """The peer's CPU seconds (user + system, every process) over ours, per round: what the
    load does not change much (a shared machine stretches wall time, not CPU time)."""
    r = [p[1] / o[1] for o, p in zip(ours, peer) if o[1] > 0]
    if not r:
        return "-"
    return f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"


def size_cell(ours: list[int], peer: list[int]) -> str:
    r = [a / b for a, b in zip(ours, peer)]
    return f"{statistics.median(r):.3f}" + (f" ({min(r):.3f}-{max(r):.3f})"
                                           if max(r) - min(r) > 5e-4 else "")


def report(results: list[dict[str, Any]], args: argparse.Namespace, started: str) -> str:
    load = os.getloadavg()
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    lines = [f"## Run {started} UTC, {platform.node()}: {os.cpu_count()} cores, "
             f"{mem:.0f} GiB, shared, load {load[0]:.1f} at the end",
             "",
             f"Command: `.venv/bin/python bench/bench_packed.py --repeat {args.repeat} --scale "
             f"{args.scale:g} --big-scale {args.big_scale:g}"
             + (f" --only {' '.join(args.only)}" if args.only else "") + "`",
             "",
             "Sizes are archive bytes / `.tar.zst` bytes; speed ratios are the peer's seconds / "
             "ours in the same round (above 1: faster than `tar | zstd -3 -T2`, resp. `zstd -d "
             "| tar -x`); median (range) of the rounds.",
             "",
             "Wall-time ratios stretch with the load of the other users of the machine (the load "
             "column: 1-minute load average at the start and the end of that corpus); the CPU "
             "columns give the peer's CPU seconds (user + system, all its processes) over ours "
             "in the same round.",
             "",
             "| corpus | files | MB | load | size packed | size plain | create packed | create "
             "plain | extract packed | extract plain | create CPU packed | extract CPU packed "
             "| index B/row packed | plain |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        runs, sizes = r["runs"], r["sizes"]
        (ip, rp), (iq, rq) = r["index"]["packed"], r["index"]["plain"]
        lines.append(
            f"| {r['name']} | {r['files']:,} | {r['bytes'] / MB:.0f} | "
            f"{r['load'][0]:.1f}-{r['load'][1]:.1f} | "
            f"{size_cell(sizes['packed'], sizes['tar_zstd'])} | "
            f"{size_cell(sizes['plain'], sizes['tar_zstd'])} | "
            f"{ratio_cells(runs['packed'], runs['tar_zstd'])} | "
            f"{ratio_cells(runs['plain'], runs['tar_zstd'])} | "
            f"{ratio_cells(runs['x_packed'], runs['untar'])} | "
            f"{ratio_cells(runs['x_plain'], runs['untar'])} | "
            f"{cpu_cell(runs['packed'], runs['tar_zstd'])} | "
            f"{cpu_cell(runs['x_packed'], runs['untar'])} | "
            f"{ip / max(rp, 1):.0f} | {iq / max(rq, 1):.0f} |")
    lines.append("")
    lines.append("Seconds (median wall of the rounds): " + "; ".join(
        f"{r['name']}: " + ", ".join(f"{k} {statistics.median(w for w, _ in v):.2f}"
                                     for k, v in r["runs"].items()) for r in results))
    return "\n".join(lines) + "\n"


FIND_CHILD = r"""
import sys, time
t0 = time.perf_counter()
from znippy_sql import open_archive
t1 = time.perf_counter()
a = open_archive(sys.argv[1])
t2 = time.perf_counter()
assert a.find(sys.argv[2]) is not None
t3 = time.perf_counter()
assert a.find(sys.argv[3]) is not None
t4 = time.perf_counter()
print(t2 - t1, t3 - t2, t4 - t3)
"""


def bench_find(rows: int, work: str, repeat: int) -> str:
    """The lookup of ``rows`` one-chunk files written plain and compressed (the tail alone,
    no blobs), then ``open_archive`` and the first and a second ``find`` in a fresh process,
    taking turns."""
    import numpy as np
    import pyarrow as pa

    from znippy_sql.format.schema import BASE_FIELDS, GroupKey
    from znippy_sql.write.tail import write_tail

    paths = [f"org/acme/pkg{i // 1000:04d}/lib-{i % 1000:03d}/file{i:07d}.jar"
             for i in range(rows)]
    rng = np.random.default_rng(1)
    zeros = np.zeros(rows, np.uint64)
    table = pa.Table.from_arrays(
        [pa.array(paths), pa.array(np.zeros(rows, np.uint32)), pa.array(zeros),
         pa.array(np.zeros(rows, bool)), pa.array(zeros), pa.array(zeros), pa.array(zeros),
         pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), rows,
                                              [None, pa.py_buffer(rng.bytes(32 * rows))])],
        schema=pa.schema(BASE_FIELDS))
    os.makedirs(work, exist_ok=True)
    files = {}
    for ic in (False, True):
        files[ic] = os.path.join(work, f"lookup-{ic}.znippy")
        with open(files[ic], "w+b") as fh:
            write_tail(fh, 0, {GroupKey(0, "", ""): table}, fsync=False, index_compression=ic)
    got: dict[bool, list[list[float]]] = {False: [], True: []}
    for i in range(repeat):
        for ic in ((False, True) if i % 2 == 0 else (True, False)):
            out = subprocess.run([sys.executable, "-c", FIND_CHILD, files[ic], paths[rows // 2],
                                  paths[rows // 3]], check=True, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": ROOT}).stdout.split()
            got[ic].append([float(x) for x in out])
    lines = ["", f"First `find` on a lookup of {rows:,} rows (`--find-rows {rows}`, median (range) "
             f"of {repeat} fresh processes each, taking turns):", "",
             "| lookup | bytes after blobs | open_archive | first find | second find |",
             "|---|---|---|---|---|"]
    for ic in (False, True):
        cols = list(zip(*got[ic]))
        cells = [f"{1000 * statistics.median(c):.1f} ms ({1000 * min(c):.1f}-{1000 * max(c):.1f})"
                 for c in cols]
        lines.append(f"| {'compressed, 16,384-row batches' if ic else 'plain, one batch'} | "
                     f"{os.path.getsize(files[ic]) / MB:.1f} MB | " + " | ".join(cells) + " |")
    shutil.rmtree(work, ignore_errors=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="src_tree's scale")
    ap.add_argument("--big-scale", type=float, default=0.25,
                    help="scale of mixed_repo, big_text, random")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--work", default=os.path.join(HERE, "out", "packed"))
    ap.add_argument("--corpora", default=os.path.join(HERE, "out", "corpora"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-packed.md"))
    ap.add_argument("--find-rows", type=int, default=0,
                    help="only the first-find measurement on a lookup of this many rows")
    args = ap.parse_args()
    # the package's bytecode, as a wheel install has it (this machine's environment sets
    # PYTHONDONTWRITEBYTECODE, so an editable install would compile every module each run:
    # ~0.1-0.3 s of CPU per CLI command that neither a user nor the peer pays)
    import compileall

    compileall.compile_dir(os.path.join(ROOT, "znippy_sql"), quiet=1)
    if args.find_rows:
        load = os.getloadavg()[0]
        text = bench_find(args.find_rows, os.path.join(args.work, "find"), args.repeat)
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
        text = (f"\n## Run {stamp} UTC, {platform.node()}: {os.cpu_count()} cores, shared, load "
                f"{load:.1f} at the start\n\nCommand: `.venv/bin/python bench/bench_packed.py "
                f"--find-rows {args.find_rows} --repeat {args.repeat}`\n" + text)
        with open(args.out, "a") as fh:
            fh.write(text)
        print(text)
        return
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    names = args.only or ["src_tree", "m2_repository", "mixed_repo", "big_text", "random"]
    results = []
    for name in names:
        if name == "m2_repository":
            if not os.path.isdir(M2):
                continue
            src = M2
        else:
            scale = args.scale if name == "src_tree" else args.big_scale
            src = corpora.generate(args.corpora, scale=scale, only=[name])[name]
        work = os.path.join(args.work, name)
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        r = bench_corpus(name, src, work, args.repeat)
        results.append(r)
        print(report([r], args, started), flush=True)
        shutil.rmtree(work, ignore_errors=True)
    text = report(results, args, started)
    with open(args.out, "a") as fh:
        fh.write("\n" + text)
    print(text)


if __name__ == "__main__":
    main()
