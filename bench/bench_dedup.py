"""Dedup benchmark (issue 19): archive size and speed on artifact repositories and the four
core corpora, against ``tar | zstd -3 -T2`` and ``tar | zstd --long=27 -T2`` in the same run.

Usage::

    .venv/bin/python bench/bench_dedup.py [--repeat 3] [--scale 0.25] [--only NAME ...]
                                          [--out bench/results-dedup.md]

Corpora: ``m2_repository`` (``~/.m2/repository`` where it exists, as it is), ``maven_repo``
(``bench/corpora.py``'s stand-in for one: artifacts in several versions sharing most classes)
and the core corpora ``src_tree``, ``mixed_repo``, ``big_text``, ``random`` at ``--scale``.

Every command runs as its own process, as a user would run it: ``znippy-sql create`` (dedup,
the default), ``znippy-sql create --no-dedup`` (the layout before dedup), the two peer
pipelines (each ends with ``sync OUT``, as our create fsyncs), then ``znippy-sql extract`` of
the dedup archive against ``zstd -d | tar -x``. The sides take turns in an order that rotates
every round, each round reads warm page cache, and every figure is reported as the median of
the rounds with the range beside it (the machine is shared: spreads are wide). Speed ratios
are per round (ours / the peer's in the same round), then the median and range of those.

The dedup index alone is measured in a fresh interpreter: resident bytes per million
distinct chunks. For a Maven repository the run also counts the zip-entry bytes that occur in
more than one jar, and how many of them have the same local header too (only those can share
a chunk that holds the header: the rest differ in their time stamps).

``--cdc`` (alone) compares whole files with content-defined chunks for the repository's POMs.
``--sweep`` (alone) writes the Maven repository with other zip-cut settings (``BODY_MIN``, the
size from which an entry's data is a chunk of its own), in this process, and reports blob
bytes, index bytes and rows for each: ``BODY_MIN = 1`` gives every entry's data a chunk, so its
blob bytes are what chunk-level sharing reaches if index rows cost nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import corpora  # noqa: E402

MB = 1e6
CLI = os.path.join(ROOT, ".venv", "bin", "znippy-sql")
M2 = os.path.expanduser("~/.m2/repository")


# -- measuring ----------------------------------------------------------------------------------
def timed(cmd: list[str] | str) -> tuple[float, float]:
    """Wall and CPU seconds (the process and everything it waited for)."""
    before = os.times()
    t = time.perf_counter()
    subprocess.run(cmd, shell=isinstance(cmd, str), check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = os.times()
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system)


def du(root: str) -> tuple[int, int]:
    files = total = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            files += 1
            total += os.path.getsize(os.path.join(dirpath, n))
    return files, total


def info(archive: str) -> dict[str, Any]:
    out = subprocess.run([CLI, "info", "--json", archive], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def bench_corpus(name: str, src: str, work: str, repeat: int) -> dict[str, Any]:
    q = shlex_quote
    files, size = du(src)
    sides = {
        "dedup": lambda i: [CLI, "create", src, "-o", f"{work}/{name}-{i}.znippy"],
        "no_dedup": lambda i: [CLI, "create", src, "-o", f"{work}/{name}-{i}-nd.znippy",
                               "--no-dedup"],
        "tar_zstd": lambda i: (f"tar -cf - -C {q(src)} . | zstd -3 -T2 -q -f -o "
                               f"{q(f'{work}/{name}-{i}.tar.zst')} && sync "
                               f"{q(f'{work}/{name}-{i}.tar.zst')}"),
        "zstd_long": lambda i: (f"tar -cf - -C {q(src)} . | zstd -3 --long=27 -T2 -q -f -o "
                                f"{q(f'{work}/{name}-{i}.long.zst')} && sync "
                                f"{q(f'{work}/{name}-{i}.long.zst')}"),
    }
    outs = {"dedup": "{w}/{n}-{i}.znippy", "no_dedup": "{w}/{n}-{i}-nd.znippy",
            "tar_zstd": "{w}/{n}-{i}.tar.zst", "zstd_long": "{w}/{n}-{i}.long.zst"}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in [*sides, "extract", "untar"]}
    sizes: dict[str, int] = {}
    subprocess.run(f"tar -cf - -C {q(src)} . > /dev/null", shell=True, check=True)  # warm
    order = list(sides)
    for i in range(repeat):
        for side in order[i % len(order):] + order[: i % len(order)]:
            runs[side].append(timed(sides[side](i)))
            sizes[side] = os.path.getsize(outs[side].format(w=work, n=name, i=i))
        dest, tdest = f"{work}/{name}-{i}.x", f"{work}/{name}-{i}.tx"
        os.makedirs(tdest)
        pair = [("extract", [CLI, "extract", f"{work}/{name}-{i}.znippy", "-o", dest]),
                ("untar", f"zstd -d -q -c {q(f'{work}/{name}-{i}.tar.zst')} | tar -xf - -C "
                          f"{q(tdest)}")]
        for side, cmd in (pair if i % 2 == 0 else pair[::-1]):
            runs[side].append(timed(cmd))
        subprocess.run(["sync"], check=True)
    meta = info(f"{work}/{name}-0.znippy")
    return {"name": name, "files": files, "bytes": size, "runs": runs, "sizes": sizes,
            "rows": meta["chunks"], "tail_bytes": meta["tail_bytes"],
            "saved": meta["dedup_saved_bytes"]}


def shlex_quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


# -- the dedup index alone ----------------------------------------------------------------------
def memory_child(n: int) -> None:
    """Bytes of a DedupIndex of ``n`` distinct chunks, printed as JSON: live (``tracemalloc``)
    and peak while it was built, and the resident-set growth (allocator slack included)."""
    import tracemalloc

    import blake3

    from znippy_sql.write.dedup import DedupIndex

    digests = [blake3.blake3(i.to_bytes(8, "little")).digest() for i in range(n)]

    def rss() -> int:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    before = rss()
    tracemalloc.start()
    index = DedupIndex()
    # the table is native (write/dedup.py): tracemalloc sees none of it, RSS does
    for d in digests:
        index.pack_member(d, 4096, ())
    live, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(json.dumps({"chunks": len(index), "live_bytes": live, "peak_bytes": peak,
                      "rss_bytes": rss() - before}))


def measure_memory(n: int = 1_000_000) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--memory-child", str(n)], check=True,
                         capture_output=True, text=True, env={**os.environ,
                                                              "PYTHONPATH": ROOT}).stdout
    got = json.loads(out)
    per = 1e6 / n / MB
    return {"chunks": got["chunks"], "mb_per_million": got["live_bytes"] * per,
            "peak_mb_per_million": got["peak_bytes"] * per, "rss_mb_per_million":
            got["rss_bytes"] * per}


# -- how much a chunk index can share -----------------------------------------------------------
def analyse(root: str) -> dict[str, float]:
    """Zip-entry data occurring in more than one jar, by (CRC, sizes, data), and the part of it
    whose local header is the same too (only that can share a chunk that holds the header)."""
    import hashlib
    import struct
    import zipfile

    seen: set[bytes] = set()
    seen_full: set[bytes] = set()
    total = dup = dup_full = entries = 0
    for dirpath, _dirs, names in os.walk(root):
        for n in sorted(names):
            if not n.endswith((".jar", ".war", ".ear", ".aar", ".zip")):
                continue
            path = os.path.join(dirpath, n)
            with open(path, "rb") as fh:
                raw = fh.read()
            try:
                infos = zipfile.ZipFile(path).infolist()
            except (zipfile.BadZipFile, OSError):
                continue
            for i in infos:
                off = i.header_offset
                if raw[off : off + 4] != b"PK\x03\x04":
                    continue
                nlen, xlen = struct.unpack_from("<HH", raw, off + 26)
                start = off + 30 + nlen + xlen
                data = raw[start : start + i.compress_size]
                key = hashlib.blake2b(data, digest_size=16).digest()
                full = hashlib.blake2b(raw[off:start] + data, digest_size=16).digest()
                entries += 1
                total += len(data)
                if key in seen:
                    dup += len(data)
                seen.add(key)
                if full in seen_full:
                    dup_full += len(data)
                seen_full.add(full)
    return {"entries": entries, "entry_mb": total / MB, "dup_mb": dup / MB,
            "dup_same_header_mb": dup_full / MB}


# -- the zip-cut settings -----------------------------------------------------------------------
def sweep(root: str, work: str, body_mins: list[int]) -> str:
    sys.path.insert(0, ROOT)
    from znippy_sql.read.reader import open_archive
    from znippy_sql.write import zipcut
    from znippy_sql.write.writer import write_archive

    lines = ["| BODY_MIN | rows | blob MB | index MB | archive MB | shared MB |",
             "|---:|---:|---:|---:|---:|---:|"]
    default = zipcut.BODY_MIN
    os.makedirs(work, exist_ok=True)
    try:
        for body in body_mins:
            zipcut.BODY_MIN = body
            out = os.path.join(work, f"sweep-{body}.znippy")
            r = write_archive(out, root, fsync=False)
            with open_archive(out) as a:
                tail = a.source.size - a.tail_offset
            lines.append(f"| {body:,} | {r.chunks:,} | {r.blob_bytes / MB:.1f} | {tail / MB:.1f} "
                         f"| {r.archive_bytes / MB:.1f} | {r.bytes_saved / MB:.1f} |")
            os.unlink(out)
            print(lines[-1], file=sys.stderr, flush=True)
    finally:
        zipcut.BODY_MIN = default
    return "\n".join(lines) + "\n"


# -- content-defined chunking of other files ----------------------------------------------------
def cdc(root: str, suffix: str = ".pom", averages: tuple[int, ...] = (2048, 4096, 16384)) -> str:
    """Whole files against Gear-hash content-defined chunks (min avg/4, max 4·avg) of the
    ``suffix`` files under ``root``: distinct chunks compressed alone (zstd -3) plus ~280 bytes
    of index per row, as our archives pay them."""
    import hashlib
    import random

    import numpy as np
    import zstandard

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
                   if f.endswith(suffix))
    rng = random.Random(1)
    gear = np.array([rng.getrandbits(64) for _ in range(256)], dtype=np.uint64)
    z = zstandard.ZstdCompressor(level=3)
    row = 280

    def cuts(data: bytes, avg: int) -> list[tuple[int, int]]:
        out, start, h = [], 0, 0
        for i, v in enumerate(gear[np.frombuffer(data, dtype=np.uint8)].tolist()):
            h = ((h << 1) + v) & 0xFFFFFFFFFFFFFFFF
            n = i + 1 - start
            if (n >= avg // 4 and h & (avg - 1) == 0) or n >= 4 * avg:
                out.append((start, i + 1))
                start, h = i + 1, 0
        return out + ([(start, len(data))] if start < len(data) else [])

    blobs = [open(p, "rb").read() for p in files]
    whole = sum(min(len(b), len(z.compress(b)) + 15) for b in blobs) + row * len(blobs)
    lines = [f"{len(files):,} `{suffix}` files, {sum(map(len, blobs)) / MB:.1f} MB: whole files "
             f"{whole / MB:.2f} MB with their index rows"]
    for avg in averages:
        seen: set[bytes] = set()
        stored = rows = 0
        for b in blobs:
            for a, e in cuts(b, avg) or [(0, 0)]:
                rows += 1
                key = hashlib.blake2b(b[a:e]).digest()
                if key not in seen:
                    seen.add(key)
                    stored += min(e - a, len(z.compress(b[a:e])) + 15)
        lines.append(f"CDC average {avg // 1024} KiB: {(stored + row * rows) / MB:.2f} MB "
                     f"({rows:,} rows)")
    return "; ".join(lines) + "."


# -- report -------------------------------------------------------------------------------------
def fmt(values: list[float], digits: int = 2) -> str:
    med, lo, hi = spread(values)
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def report(results: list[dict[str, Any]], mem: dict[str, float] | None,
           analysis: dict[str, float] | None, args: argparse.Namespace) -> str:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    lines = [
        f"## Run of {stamp}",
        "",
        f"Machine: {os.cpu_count()} cores, Linux {platform.release()}, Python "
        f"{platform.python_version()}; load average at the end {' '.join(load)} (shared "
        f"machine). Command: `.venv/bin/python bench/bench_dedup.py --repeat {args.repeat} "
        f"--scale {args.scale:g}" + (f" --only {' '.join(args.only)}" if args.only else "")
        + "`. Core corpora at scale " f"{args.scale:g}. Figures: median of {args.repeat} "
        "rounds (range).",
        "",
        "### Size",
        "",
        "| corpus | files | input MB | znippy MB | no-dedup MB | .tar.zst MB | --long MB | "
        "× .tar.zst | × no-dedup | × --long | rows | index MB | shared MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s = r["sizes"]
        lines.append(
            f"| {r['name']} | {r['files']:,} | {r['bytes'] / MB:.1f} | {s['dedup'] / MB:.1f} | "
            f"{s['no_dedup'] / MB:.1f} | {s['tar_zstd'] / MB:.1f} | {s['zstd_long'] / MB:.1f} | "
            f"{s['dedup'] / s['tar_zstd']:.3f} | {s['dedup'] / s['no_dedup']:.3f} | "
            f"{s['dedup'] / s['zstd_long']:.3f} | {r['rows']:,} | {r['tail_bytes'] / MB:.1f} | "
            f"{r['saved'] / MB:.1f} |")
    lines += [
        "",
        "### Speed (create and extract, wall seconds; ratios are ours ÷ the peer's per round)",
        "",
        "| corpus | create s | no-dedup s | tar+zstd s | --long s | create MB/s × tar+zstd "
        "| no-dedup × tar+zstd | extract s | zstd -d \\| tar -x s | extract × |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        runs = r["runs"]
        wall = {k: [w for w, _ in v] for k, v in runs.items()}
        speed = [t / d for d, t in zip(wall["dedup"], wall["tar_zstd"])]
        speed_nd = [t / d for d, t in zip(wall["no_dedup"], wall["tar_zstd"])]
        ext = [u / e for e, u in zip(wall["extract"], wall["untar"])]
        lines.append(
            f"| {r['name']} | {fmt(wall['dedup'])} | {fmt(wall['no_dedup'])} | "
            f"{fmt(wall['tar_zstd'])} | {fmt(wall['zstd_long'])} | {fmt(speed)} | "
            f"{fmt(speed_nd)} | {fmt(wall['extract'])} | {fmt(wall['untar'])} | {fmt(ext)} |")
    lines += ["", "CPU seconds (median): " + "; ".join(
        f"{r['name']} create {statistics.median(c for _, c in r['runs']['dedup']):.2f} / "
        f"no-dedup {statistics.median(c for _, c in r['runs']['no_dedup']):.2f} / tar+zstd "
        f"{statistics.median(c for _, c in r['runs']['tar_zstd']):.2f}" for r in results) + "."]
    if mem is not None:
        lines += ["", f"Dedup index alone, per million distinct chunks (measured with "
                      f"{mem['chunks']:,}): {mem['mb_per_million']:.0f} MB live, "
                      f"{mem['peak_mb_per_million']:.0f} MB at the peak of building it, "
                      f"{mem['rss_mb_per_million']:.0f} MB of resident-set growth."]
    if analysis is not None:
        lines += ["", f"Zip entries of the Maven repository: {analysis['entries']:,} entries, "
                      f"{analysis['entry_mb']:.1f} MB of entry data; {analysis['dup_mb']:.1f} MB "
                      f"of it occurs in an earlier jar, {analysis['dup_same_header_mb']:.1f} MB "
                      "with the same local header too (time stamp included)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=float, default=0.25, help="scale of the core corpora")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--out", default=os.path.join(HERE, "results-dedup.md"))
    ap.add_argument("--work", default=os.path.join(HERE, "out", "dedup"))
    ap.add_argument("--corpora", default=os.path.join(HERE, "out", "corpora"))
    ap.add_argument("--memory-child", type=int)
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--no-analyse", action="store_true")
    ap.add_argument("--cdc", action="store_true",
                    help="only compare content-defined chunking of the POMs with whole files")
    ap.add_argument("--sweep", nargs="*", type=int, metavar="BODY_MIN",
                    help="only sweep BODY_MIN on the Maven repository (default: 1 1024 2048 "
                         "4096 8192)")
    args = ap.parse_args()
    if args.memory_child:
        memory_child(args.memory_child)
        return
    if args.cdc:
        print(cdc(M2 if os.path.isdir(M2) else corpora.generate(
            args.corpora, only=["maven_repo"])["maven_repo"]))
        return
    if args.sweep is not None:
        root = M2 if os.path.isdir(M2) else corpora.generate(args.corpora,
                                                             only=["maven_repo"])["maven_repo"]
        print(sweep(root, args.work, args.sweep or [1, 1024, 2048, 4096, 8192]))
        return
    names = args.only or ["m2_repository", "maven_repo", "src_tree", "mixed_repo", "big_text",
                          "random"]
    dirs: dict[str, str] = {}
    if "m2_repository" in names and os.path.isdir(M2):
        dirs["m2_repository"] = M2
    if "maven_repo" in names:
        dirs.update(corpora.generate(args.corpora, only=["maven_repo"]))
    core = [n for n in names if n in corpora.GENERATORS]
    if core:
        dirs.update(corpora.generate(args.corpora, scale=args.scale, only=core))
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    results = []
    try:
        for name in names:
            if name in dirs:
                print(f"{name} ...", file=sys.stderr, flush=True)
                results.append(bench_corpus(name, dirs[name], args.work, args.repeat))
    finally:
        shutil.rmtree(args.work, ignore_errors=True)
        os.sync()
    mem = None if args.no_memory else measure_memory()
    analysis = None
    if not args.no_analyse and "m2_repository" in dirs:
        analysis = analyse(dirs["m2_repository"])
    text = report(results, mem, analysis, args)
    print(text)
    previous = ""
    if os.path.exists(args.out):
        with open(args.out) as fh:
            previous = fh.read()
    head = "# Dedup benchmark (issue 19)\n\n"
    body = previous[len(head):] if previous.startswith(head) else previous
    with open(args.out, "w") as fh:
        fh.write(head + text + ("\n" + body if body else ""))


if __name__ == "__main__":
    main()
