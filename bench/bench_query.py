"""Query-layer benchmark: register cost, DuckDB views vs a native table, Polars pruning, extract.

Usage::

    .venv/bin/python bench/bench_query.py [--entries 1000000] [--mixed-scale 0.25]
                                          [--out bench/results-query.md]

1. A synthetic archive of ``--entries`` small entries written from memory (2 repos x 2
   pkg_types, tiny contents), kept under ``bench/out/query/`` and reused when present.
2. ``register``: wall time and resident-memory delta, each in a fresh child process (median
   of 5), after DuckDB and pyarrow are imported and a connection is open.
3. The same queries on ``<name>_files`` and on a native DuckDB table holding the same rows
   (``CREATE TABLE native AS SELECT * EXCLUDE (digest) FROM <name>_files``), best of 7 after a
   warm-up, same process, same connection.
4. Polars ``scan(...).filter(pl.col("repo") == r)``: bytes read (``Archive.source.bytes_read``)
   vs that repo's sub-index bytes plus the manifest.
5. Extract of the ``mixed_repo`` corpus (``bench/corpora.py``, at ``--mixed-scale``):
   ``znippy_extract`` in DuckDB vs ``Archive.extract`` in process vs the ``znippy-sql extract``
   CLI, MB/s of original bytes, best of 3, page cache warm.
"""

from __future__ import annotations

import argparse
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
OUT = os.path.join(HERE, "out", "query")
sys.path.insert(0, HERE)


def synthetic(n: int) -> str:
    from znippy_sql import Entry, write_archive

    path = os.path.join(OUT, f"entries-{n}.znippy")
    if os.path.exists(path):
        return path

    def gen() -> Any:
        for i in range(n):
            repo = ("alpha", "beta")[i % 2]
            yield Entry(f"{repo}/d{i // 1000:04d}/f{i:07d}.txt", data=b"x%d\n" % i, repo=repo,
                        pkg_type=(0, 7)[(i // 2) % 2])

    t = time.perf_counter()
    write_archive(path, gen(), fsync=False)
    print(f"wrote {path} in {time.perf_counter() - t:.1f} s", flush=True)
    return path


CHILD = r"""
import json, os, sys, time
import duckdb, pyarrow, numpy
import znippy_sql.duckdb as zd
def rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
con = duckdb.connect()
con.execute("SELECT 1").fetchall()
zd.install(con)
if len(sys.argv) > 2:  # warm: one-time library set-up (Arrow memory pool, ...) paid first
    zd.register(con, sys.argv[2], "tiny")
before = rss()
t = time.perf_counter()
zd.register(con, sys.argv[1], "bench")
dt = time.perf_counter() - t
after = rss()
print(json.dumps({"seconds": dt, "rss": after - before}))
"""


def tiny_archive() -> str:
    from znippy_sql import Entry, write_archive

    path = os.path.join(OUT, "tiny.znippy")
    if not os.path.exists(path):
        write_archive(path, [Entry("a.txt", data=b"a", repo="r")], fsync=False, workers=1)
    return path


def register_cost(path: str, runs: int = 5, *, warm: bool = False) -> dict[str, Any]:
    out = []
    extra = [tiny_archive()] if warm else []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", CHILD, path, *extra], capture_output=True,
                             text=True, check=True, cwd=ROOT)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return {"ms": statistics.median(o["seconds"] for o in out) * 1000,
            "rss_mb": statistics.median(o["rss"] for o in out) / 1e6,
            "ms_all": [round(o["seconds"] * 1000, 1) for o in out],
            "rss_all": [round(o["rss"] / 1e6, 2) for o in out]}


def best(con: Any, sql: str, k: int = 7) -> float:
    con.execute(sql).fetchall()
    times = []
    for _ in range(k):
        t = time.perf_counter()
        con.execute(sql).fetchall()
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def queries(path: str) -> list[tuple[str, float, float]]:
    import duckdb

    import znippy_sql.duckdb as zd

    con = duckdb.connect()
    zd.register(con, path, "bench")
    con.execute("CREATE TABLE native AS SELECT * EXCLUDE (digest) FROM bench_files").fetchall()
    qs = [
        ("GROUP BY repo, pkg_type",
         "SELECT repo, pkg_type, count(*), sum(size) FROM {t} GROUP BY ALL"),
        ("relative_path LIKE 'alpha/d0123%'",
         "SELECT count(*), sum(size) FROM {t} WHERE relative_path LIKE 'alpha/d0123%'"),
        ("point lookup relative_path = ...",
         "SELECT * FROM {t} WHERE relative_path = 'beta/d0500/f0500001.txt'"),
    ]
    out = []
    for label, q in qs:
        view = best(con, q.format(t="bench_files").replace("SELECT *", "SELECT * EXCLUDE (digest)"))
        native = best(con, q.format(t="native").replace("SELECT *", "SELECT *"))
        out.append((label, view, native))
    # the exact-path lookup through the lookup view and through znippy_cat (reads the file)
    out.append(("point lookup via bench_lookup",
                best(con, "SELECT * FROM bench_lookup WHERE relative_path = "
                          "'beta/d0500/f0500001.txt'"), float("nan")))
    out.append(("znippy_cat of one file",
                best(con, "SELECT * FROM znippy_cat('bench', 'beta/d0500/f0500001.txt')"),
                float("nan")))
    con.close()
    return out


def polars_bytes(path: str) -> dict[str, Any]:
    import polars as pl

    from znippy_sql import open_archive
    from znippy_sql.polars import scan

    a = open_archive(path)
    manifest_bytes = a.source.size - 16 - a.manifest_offset
    lf = scan(a).filter(pl.col("repo") == "alpha").select("relative_path", "size")
    before = a.source.bytes_read
    t = time.perf_counter()
    df = lf.collect()
    secs = time.perf_counter() - t
    read = a.source.bytes_read - before
    sub = sum(r.index_len for r in a.manifest_rows if r.key.repo == "alpha")
    return {"rows": df.height, "read": read, "subindex": sub, "manifest": manifest_bytes,
            "ratio": read / (sub + manifest_bytes), "seconds": secs}


def extract_speed(scale: float) -> dict[str, Any]:
    import duckdb

    import corpora
    import znippy_sql.duckdb as zd
    from znippy_sql import open_archive, write_archive

    src = corpora.generate(os.path.join(HERE, "out", "corpora"), scale=scale,
                           only=["mixed_repo"], log=lambda s: None)["mixed_repo"]
    arc = os.path.join(OUT, f"mixed_repo@{scale:g}.znippy")
    if not os.path.exists(arc):
        write_archive(arc, src, fsync=False)
    a = open_archive(arc)
    con = duckdb.connect()
    zd.register(con, arc, "mixed")
    total = con.execute("SELECT sum(size) FROM mixed_files").fetchall()[0][0]
    files = con.execute("SELECT count(*) FROM mixed_files").fetchall()[0][0]
    dest = os.path.join(OUT, "extract")

    def run(kind: str) -> float:
        times = []
        for _ in range(3):
            shutil.rmtree(dest, ignore_errors=True)
            t = time.perf_counter()
            if kind == "sql":
                con.execute(f"SELECT count(*), sum(bytes_written) FROM "
                            f"znippy_extract('mixed', '{dest}')").fetchall()
            elif kind == "api":
                a.extract(dest)
            else:
                subprocess.run([os.path.join(ROOT, ".venv", "bin", "znippy-sql"), "extract",
                                arc, "-o", dest], check=True)
            times.append(time.perf_counter() - t)
        return min(times)

    res = {k: run(k) for k in ("cli", "api", "sql")}
    shutil.rmtree(dest, ignore_errors=True)
    return {"files": files, "bytes": int(total), "archive": os.path.getsize(arc),
            **{f"{k}_s": v for k, v in res.items()},
            **{f"{k}_mbs": total / v / 1e6 for k, v in res.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--mixed-scale", type=float, default=0.25)
    ap.add_argument("--out", default=os.path.join(HERE, "results-query.md"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    path = synthetic(args.entries)
    reg = {"cold": register_cost(path), "warm": register_cost(path, warm=True)}
    print("register", reg, flush=True)
    qs = queries(path)
    for q in qs:
        print(q, flush=True)
    pb = polars_bytes(path)
    print("polars", pb, flush=True)
    ex = extract_speed(args.mixed_scale)
    print("extract", ex, flush=True)
    write_report(args, path, reg, qs, pb, ex)


def write_report(args: Any, path: str, reg: dict[str, Any], qs: list[Any], pb: dict[str, Any],
                 ex: dict[str, Any]) -> None:
    import duckdb
    import polars

    cmd = (f".venv/bin/python bench/bench_query.py --entries {args.entries} "
           f"--mixed-scale {args.mixed_scale:g}")
    lines = [
        "# Query-layer benchmark (issue 3)",
        "",
        f"Command: `{cmd}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs (shared with other jobs), "
        f"Python {platform.python_version()}, duckdb {duckdb.__version__}, "
        f"polars {polars.__version__}; load average at the end of the run "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} (other jobs share the CPUs, so "
        "absolute times are noisy; ratios are measured in the same process back to back).  ",
        f"Archive: {args.entries:,} entries written from memory (2 repos x 2 pkg_types, "
        f"4 groups, one chunk each), {os.path.getsize(path) / 1e6:.1f} MB.",
        "",
        "## register",
        "",
        "Each run is a fresh process that has imported duckdb/pyarrow/znippy_sql, opened a "
        "connection and installed the macros. *first* = the first `register` in that process "
        "(it also pays one-time set-up such as the Arrow memory pool's first allocation); "
        "*warm* = after registering a one-file archive under another name.",
        "",
        "| metric | target | first register (median of 5) | warm (median of 5) |",
        "|---|---|---|---|",
        f"| wall time | < 50 ms | {reg['cold']['ms']:.1f} ms {reg['cold']['ms_all']} | "
        f"{reg['warm']['ms']:.1f} ms {reg['warm']['ms_all']} |",
        f"| resident memory added | < 10 MB | {reg['cold']['rss_mb']:.2f} MB "
        f"{reg['cold']['rss_all']} | {reg['warm']['rss_mb']:.2f} MB {reg['warm']['rss_all']} |",
        "",
        "## DuckDB: `bench_files` view vs a native table with the same rows",
        "",
        "Best of 7 after one warm-up; native = `CREATE TABLE native AS SELECT * EXCLUDE "
        "(digest) FROM bench_files` in the same connection.",
        "",
        "| query | view ms | native ms | view / native | target |",
        "|---|---|---|---|---|",
    ]
    targets = {"GROUP BY repo, pkg_type": "<= 1.5x",
               "relative_path LIKE 'alpha/d0123%'": "<= 1.5x",
               "point lookup relative_path = ...": "<= 20 ms"}
    for label, view, native in qs:
        ratio = "" if native != native else f"{view / native:.2f}x"
        nat = "" if native != native else f"{native:.2f}"
        lines.append(f"| {label} | {view:.2f} | {nat} | {ratio} | {targets.get(label, '')} |")
    like = next(q for q in qs if q[0].startswith("relative_path LIKE"))
    if like[1] > 1.5 * like[2]:
        lines += [
            "",
            f"**Missed target:** the prefix filter is {like[1] / like[2]:.1f}x the native "
            "table. The native table is sorted by path within each group (it was filled from "
            "the view) and DuckDB skips its row groups by min/max statistics; an Arrow scan "
            "has no statistics, and DuckDB does not push `prefix()` into the pyarrow scanner, "
            "so the view converts and tests every path of the scanned groups "
            f"(~{like[1] * 1e6 / args.entries:.0f} ns per row here). "
            "A filter on `repo` / `pkg_type` is still pruned per group at plan time. Exact "
            "paths are best asked through the trie: `znippy_cat` takes the time shown above.",
        ]
    lines += [
        "",
        "## Polars group pruning",
        "",
        f"`scan(archive).filter(pl.col('repo') == 'alpha').select('relative_path', 'size')`: "
        f"{pb['rows']:,} rows in {pb['seconds'] * 1000:.0f} ms; bytes read {pb['read']:,} vs "
        f"the alpha sub-indexes {pb['subindex']:,} + manifest {pb['manifest']:,} = "
        f"**{pb['ratio']:.3f}x** (target <= 1.1x).",
        "",
        "## Extract (mixed_repo corpus)",
        "",
        f"mixed_repo at scale {args.mixed_scale:g} (the full corpus is ~400 MB; this smaller "
        f"copy keeps the run to a few minutes): {ex['files']:,} files, {ex['bytes'] / 1e6:.1f} "
        f"MB original, archive {ex['archive'] / 1e6:.1f} MB. Best of 3, warm page cache, "
        "destination removed before each run.",
        "",
        "| path | seconds | MB/s (original bytes) |",
        "|---|---|---|",
        f"| `znippy-sql extract` (CLI, new process) | {ex['cli_s']:.2f} | {ex['cli_mbs']:.0f} |",
        f"| `Archive.extract` (in process) | {ex['api_s']:.2f} | {ex['api_mbs']:.0f} |",
        f"| `znippy_extract` macro (DuckDB) | {ex['sql_s']:.2f} | {ex['sql_mbs']:.0f} |",
        "",
        f"znippy_extract / CLI = **{ex['sql_mbs'] / ex['cli_mbs']:.2f}x**, "
        f"/ Archive.extract = {ex['sql_mbs'] / ex['api_mbs']:.2f}x (target >= 0.8x).",
        "",
    ]
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
