"""Reader benchmark: open, find, point read, streaming open, verify and extract of one archive.

Usage::

    .venv/bin/python bench/bench_reader.py [--corpus bench/out/corpora/src_tree@1]
                                           [--work bench/out/reader] [--reads 300]
                                           [--rounds 3] [--workers N]

Writes the archive of the corpus once (``--work/src.znippy``, reused when present), then, in
this process: ``open_archive`` (median of 50), the first ``read`` (pays for the lookup views and
the trie), warm ``find`` and ``read`` of distinct ~10 KB files (median, p90), ``open().read()``,
``verify``; then ``extract`` (in a fresh process, default workers) against ``zstd -d | tar -x``
of the same tree, alternating rounds (the machine is shared: wall times swing with the load,
which is printed too).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MB = 1e6


def median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 1)


def p90_us(samples: list[float]) -> float:
    return round(sorted(samples)[int(0.9 * len(samples))] * 1e6, 1)


def timed(cmd: list[str]) -> tuple[float, str]:
    """Wall seconds and stdout of a command."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="bench/out/corpora/src_tree@1")
    ap.add_argument("--work", default="bench/out/reader")
    ap.add_argument("--reads", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    from znippy_sql import open_archive, write_archive

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    archive = work / "src.znippy"
    out: dict[str, object] = {"corpus": args.corpus}
    if not archive.exists():
        t = time.perf_counter()
        rep = write_archive(archive, args.corpus)
        out["create_s"] = round(time.perf_counter() - t, 2)
    out["archive_bytes"] = archive.stat().st_size

    opens = []
    for _ in range(50):
        t = time.perf_counter()
        a = open_archive(archive)
        opens.append(time.perf_counter() - t)
        a.close()
    out["open_median_us"] = median_us(opens)

    a = open_archive(archive)
    lk = a.lookup
    sizes = lk.column("uncompressed_size").to_pylist()
    paths = lk.column("relative_path").to_pylist()
    seqs = lk.column("chunk_seq").to_pylist()
    out["files"] = seqs.count(0)
    small = [p for p, s, q in zip(paths, sizes, seqs) if q == 0 and 8000 <= s <= 12000]
    if not small:  # corpora of large files only: read their first 10 KB through open()
        small = [p for p, q in zip(paths, seqs) if q == 0]
    picks = random.Random(7).sample(small, min(args.reads, len(small)))
    b = open_archive(archive)
    t = time.perf_counter()
    with b.open(picks[0]) as fh:  # the first 10 KB: the whole file when it is a 10 KB one
        fh.read(10_000)
    out["first_read_us"] = round((time.perf_counter() - t) * 1e6, 1)
    b.close()

    finds, reads, streams = [], [], []
    for p in picks:
        t = time.perf_counter()
        a.find(p)
        finds.append(time.perf_counter() - t)
    big = a.find(picks[0]).size > 12000  # type: ignore[union-attr]
    for p in picks if not big else []:
        t = time.perf_counter()
        a.read(p)
        reads.append(time.perf_counter() - t)
    for p in picks:
        t = time.perf_counter()
        with a.open(p) as fh:
            fh.read(10_000)
        streams.append(time.perf_counter() - t)
    out.update(find_median_us=median_us(finds), open_read_10k_median_us=median_us(streams))
    if reads:
        out.update(read_10k_median_us=median_us(reads), read_10k_p90_us=p90_us(reads))

    t = time.perf_counter()
    rep = a.verify()
    dt = time.perf_counter() - t
    out.update(verify_ok=rep.ok, verify_s=round(dt, 2),
               verify_mb_s=round(rep.bytes_checked / MB / dt, 1))

    a.close()
    tarzst = work / "src.tar.zst"
    if not tarzst.exists():
        subprocess.run(f"tar -cf - -C {args.corpus} . | zstd -3 -T2 -q -o {tarzst}", shell=True,
                       check=True)
    # extract vs the peer, alternating, best of --rounds (the machine is shared)
    dest, peer = work / "extract", work / "peer"
    ours, theirs, nbytes = [], [], 0
    workers = "None" if args.workers is None else str(args.workers)
    for _ in range(args.rounds):
        shutil.rmtree(dest, ignore_errors=True)
        code = ("import sys, json\nfrom znippy_sql import open_archive\n"
                "if __name__ == '__main__':\n"
                f"    r = open_archive({str(archive)!r}).extract({str(dest)!r}, workers={workers})\n"
                "    print(json.dumps([r.ok, r.bytes_written]))\n")
        wall, stdout = timed([sys.executable, "-c", code])
        ok, nbytes = json.loads(stdout)
        assert ok
        ours.append(wall)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.rmtree(peer, ignore_errors=True)
        peer.mkdir()
        wall, _ = timed(["sh", "-c", f"zstd -d -q -c {tarzst} | tar -x -C {peer}"])
        theirs.append(wall)
        shutil.rmtree(peer, ignore_errors=True)
    out.update(extract_s=[round(x, 2) for x in ours], peer_extract_s=[round(x, 2) for x in theirs],
               extract_mb_s=round(nbytes / MB / min(ours), 1),
               peer_extract_mb_s=round(nbytes / MB / min(theirs), 1),
               extract_vs_peer_best=round(min(theirs) / min(ours), 2),
               load_after=os.getloadavg()[0])
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
