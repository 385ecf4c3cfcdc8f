"""What the reader's checks cost: section BLAKE3s, full validation, the lookup's shape.

Usage::

    .venv/bin/python bench/bench_hardening.py [--entries 1000000] [--rounds 5]

On a synthetic archive of ``--entries`` one-chunk files (the one ``bench/bench_query.py``
writes, reused from ``bench/out/query/``), each figure the best of ``--rounds`` in this
process, page cache warm, one fresh ``Archive`` per round:

1. the first touch of ``__lookup__`` (what the first point read of a process pays) with and
   without the section digest (``verify_sections=False``), and its parts alone: BLAKE3 of the
   bytes, pyarrow's full validation, ``rows_problem``, ``lookup_problem``;
2. ``Archive.read`` of one file, first in a fresh Archive, with and without the digest;
3. DuckDB: ``register`` and the first and second ``count(*)`` over ``<name>_files`` (the first
   scan pays the digest and validation of each sub-index, the second a stamp check);
4. the writer: BLAKE3 of the tail it writes, against the whole ``write_tail``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def best(fn: Callable[[], Any], rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def pair(a: Callable[[], Any], b: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """Best of ``a`` and of ``b``, run alternately (a busy machine slows both alike)."""
    ta, tb = [], []
    for _ in range(rounds):
        for fn, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return min(ta), min(tb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    from bench_query import synthetic

    import blake3
    import duckdb

    from znippy_sql.duckdb import register, unregister
    from znippy_sql.format.ipc import read_table
    from znippy_sql.format.schema import LOOKUP, LOOKUP_SCHEMA, RESERVED_PKG_TYPE, GroupKey
    from znippy_sql.format.validate import lookup_problem, rows_problem
    from znippy_sql.read.reader import open_archive

    path = synthetic(args.entries)
    key = GroupKey(RESERVED_PKG_TYPE, "", LOOKUP)
    with open_archive(path) as a:
        row = a.manifest_row(key)
        lk_bytes = row.index_len
        tail_bytes = a.source.size - a.tail_offset
        buf = a.source.read(row.index_offset, row.index_len)
        lookup = read_table(buf, LOOKUP, path, LOOKUP_SCHEMA)
        tail = a.tail_offset
        first = a.first_paths()[len(a.first_paths()) // 2]

    r = args.rounds
    fig: dict[str, float] = {}

    def touch(verify: bool) -> Callable[[], Any]:
        def run() -> None:
            with open_archive(path, verify_sections=verify) as a:
                a.lookup  # noqa: B018
        return run

    def read(verify: bool) -> Callable[[], Any]:
        def run() -> None:
            with open_archive(path, verify_sections=verify) as a:
                a.read(first)
        return run

    fig["lookup, digest on"], fig["lookup, digest off"] = pair(touch(True), touch(False), r)
    fig["blake3 of the lookup, one thread"] = best(
        lambda: blake3.blake3(memoryview(buf), max_threads=1).digest(), r)
    fig["blake3 of the lookup, all cores"] = best(
        lambda: blake3.blake3(memoryview(buf), max_threads=blake3.blake3.AUTO).digest(), r)
    fig["full validation (pyarrow)"] = best(lambda: lookup.validate(full=True), r)
    fig["rows_problem"] = best(lambda: rows_problem(lookup, tail), r)
    fig["lookup_problem"] = best(lambda: lookup_problem(lookup), r)
    fig["first read, digest on"], fig["first read, digest off"] = pair(read(True), read(False),
                                                                        r)

    con = duckdb.connect()
    register(con, path, "warm")  # installs the macros
    unregister(con, "warm")
    regs, firsts, seconds = [], [], []
    for _ in range(r):
        t = time.perf_counter()
        register(con, path, "b")
        regs.append(time.perf_counter() - t)
        t = time.perf_counter()
        con.sql("SELECT count(*) FROM b_files").fetchall()
        firsts.append(time.perf_counter() - t)
        t = time.perf_counter()
        con.sql("SELECT count(*) FROM b_files").fetchall()
        seconds.append(time.perf_counter() - t)
        unregister(con, "b")
    fig["duckdb register"] = min(regs)
    fig["duckdb first count(*) of files"] = min(firsts)
    fig["duckdb second count(*) of files"] = min(seconds)

    with open(path, "rb") as fh:
        fh.seek(tail)
        tail_data = fh.read()
    fig["writer: blake3 of the tail"] = best(
        lambda: blake3.blake3(tail_data, max_threads=blake3.blake3.AUTO).digest(), r)
    _print(args, path, lk_bytes, tail_bytes, fig)


def _print(args: Any, path: str, lk_bytes: int, tail_bytes: int, fig: dict[str, float]) -> None:
    ms = {k: v * 1e3 for k, v in fig.items()}
    print(f"Command: `.venv/bin/python bench/bench_hardening.py --entries {args.entries} "
          f"--rounds {args.rounds}`  ")
    print(f"Date: {time.strftime('%Y-%m-%d')}; machine: {os.cpu_count()} cores, "
          f"{platform.machine()}, Python {platform.python_version()}; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}.  ")
    print(f"Archive: {args.entries:,} one-chunk files, {os.path.getsize(path) / 1e6:.1f} MB; "
          f"`__lookup__` {lk_bytes / 1e6:.1f} MB, tail {tail_bytes / 1e6:.1f} MB.")
    print()
    print("| what | ms (best of rounds) |")
    print("|---|---|")
    for k, v in ms.items():
        print(f"| {k} | {v:.2f} |")
    on, off = ms["lookup, digest on"], ms["lookup, digest off"]
    print()
    print(f"First touch of the lookup with its digest / without: **{on / off:.2f}x** "
          f"({on - off:.1f} ms for {lk_bytes / 1e6:.0f} MB, "
          f"{lk_bytes / 1e6 / max(on - off, 1e-9) :.1f} MB/ms).")


if __name__ == "__main__":
    main()
