"""Engines benchmark: the same fleet through DuckDB (one process), Daft (native), Spark
(``local[N]``) and Ray (local), each engine in a child process of its own.

Usage::

    .venv/bin/python bench/bench_engines.py [--archives 8] [--files 3000] [--workers 2]
        [--engines duckdb,daft,spark,ray] [--plan-archives 1000] [--scaling] [--s3]
        [--out bench/results-engines.md]

Per engine, in one run: start-up, planning (the ``files`` view's parts of the whole fleet),
count by repo, a grep of every text file's content (``TODO``; run twice, the second time
with each engine's first-use costs paid), extract of 1,000 files
selected by a query (content fetched and written to disk). Wall time per step, peak RSS
summed over the engine's process tree (sampled every 50 ms), bytes read from disk by that
tree (``/proc/<pid>/io`` ``read_bytes``, plus ``rchar`` for page-cache reads). Every
engine's answers are compared with DuckDB's. ``--plan-archives N`` times ``views.plan`` over
N small archives; ``--scaling`` runs Daft and Ray with 1 worker and with ``--workers``.
``--s3`` runs the engines a second time over the same archives uploaded to the S3 test server
(SeaweedFS ``weed server -s3`` on 127.0.0.1, tests/remote_server.py), credentials given as
storage options; there the DuckDB path reads the ``files`` view with ``views.batches_many``
(``register`` takes local paths) and the bytes with ``read_files`` (ranged GETs).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
WORK = os.path.join(HERE, "out", "engines")
GREP = b"TODO"


def write_fleet(root: str, archives: int, files: int) -> list[str]:
    from znippy_sql import Entry, write_archive

    os.makedirs(root, exist_ok=True)
    out = []
    for i in range(archives):
        repo = f"repo{i % 4}"
        maven = i % 2 == 0
        entries = []
        for j in range(files):
            if maven:
                path = f"com/acme/g{j // 50}/a{j % 50}/1.{i}/a{j % 50}-1.{i}" + (
                    ".pom" if j % 3 else ".jar")
                data = (b"<project>%d %d</project>\n" % (i, j) * 40 if j % 3
                        else os.urandom(2048) + b"PK" * 512)
            else:
                path = f"src/pkg{j // 100}/mod{j}.py"
                data = b"def f%d():\n    return %d\n" % (j, i) * 60
            if j % 7 == 0 and not (maven and j % 3 == 0):
                data += b"# TODO: licence header\n"
            entries.append(Entry(path, data=data, pkg_type="maven" if maven else 0,
                                 repo=repo))
        p = os.path.join(root, f"{repo}-day{i:03}.znippy")
        write_archive(p, entries, fsync=False, workers=1)
        out.append(p)
    return out


# -- one engine, in a child process ----------------------------------------------------------

CHILD = r'''
import json, os, sys, time
sys.path.insert(0, {root!r})
engine, paths, workers, dest = {engine!r}, {paths!r}, {workers}, {dest!r}
opts = {opts!r}
GREP = {grep!r}
out = {{}}
t0 = time.perf_counter()
def mark(name, t):
    out["t_" + name] = time.perf_counter() - t
def twice(grep):
    """The grep run twice: ``t_grep`` the first (with the engine's first-use costs),
    ``t_grep2`` the second; both answers must agree."""
    t = time.perf_counter(); out["grep"] = grep(); mark("grep", t)
    t = time.perf_counter(); again = grep(); mark("grep2", t)
    assert again == out["grep"], "the grep's second answer differs"
def text(b):
    return b is not None and b"\x00" not in b[:1024]
if engine == "duckdb":
    import duckdb
    from znippy_sql.duckdb import register
    con = duckdb.connect(); con.execute(f"SET threads = {{workers}}")
    mark("start", t0)
    t = time.perf_counter()
    if opts:
        from znippy_sql import views
        con.register("f_arrow", views.batches_many(paths, "files", storage_options=opts).read_all())
        con.execute("CREATE TEMP VIEW f_files AS SELECT * FROM f_arrow")
    else:
        register(con, paths, name="f")
    mark("plan", t)
    t = time.perf_counter()
    out["by_repo"] = sorted(con.sql("SELECT repo, count(*) FROM f_files GROUP BY 1").fetchall())
    mark("count", t)
    from znippy_sql.engines.parts import read_files
    def grep():
        rows = con.sql("SELECT archive, relative_path FROM f_files WHERE NOT ends_with(relative_path, '.jar')").fetchall()
        by = {{}}
        for a, p in rows:
            by.setdefault(a, []).append(p)
        hits = []
        for a, ps in by.items():
            for p, b in read_files(a, ps, opts).items():
                if GREP in b:
                    hits.append([a, p])
        return sorted(hits)
    twice(grep)
    t = time.perf_counter()
    sel = con.sql("SELECT archive, relative_path FROM f_files WHERE relative_path LIKE '%.pom' ORDER BY 1, 2 LIMIT 1000").fetchall()
    n = 0
    by = {{}}
    for a, p in sel:
        by.setdefault(a, []).append(p)
    for a, ps in by.items():
        for p, b in read_files(a, ps, opts).items():
            d = os.path.join(dest, os.path.basename(a), p); os.makedirs(os.path.dirname(d), exist_ok=True)
            open(d, "wb").write(b); n += 1
    out["extract"] = n; mark("extract", t)
elif engine.startswith("daft"):
    import daft
    from daft import col
    from daft.functions import try_decode
    import znippy_sql.daft as zd
    if engine == "daft-ray":
        daft.set_runner_ray()
    else:
        daft.set_runner_native(num_threads=workers)
    mark("start", t0)
    t = time.perf_counter(); from znippy_sql.engines.parts import Scan
    parts = Scan(tuple(paths), storage_options=opts).plan(); mark("plan", t); out["parts"] = len(parts)
    t = time.perf_counter()
    d = zd.read_archives(paths, storage_options=opts).groupby("repo").agg(col("relative_path").count().alias("n")).to_pydict()
    out["by_repo"] = sorted(zip(d["repo"], d["n"])); mark("count", t)
    def grep():
        df = zd.read_archives(paths, content=True, storage_options=opts).where(~col("relative_path").endswith(".jar"))
        d = df.where(col("content").not_null() & try_decode(col("content"), "utf-8").contains(GREP.decode())).select("archive", "relative_path").to_pydict()
        return sorted(map(list, zip(d["archive"], d["relative_path"])))
    twice(grep)
    t = time.perf_counter()
    d = zd.read_archives(paths, storage_options=opts).where(col("relative_path").endswith(".pom")).sort(["archive", "relative_path"]).limit(1000).with_column("content", zd.read_bytes(col("archive"), col("relative_path"), storage_options=opts)).to_pydict()
    for a, p, b in zip(d["archive"], d["relative_path"], d["content"]):
        dd = os.path.join(dest, os.path.basename(a), p); os.makedirs(os.path.dirname(dd), exist_ok=True)
        open(dd, "wb").write(b)
    out["extract"] = len(d["archive"]); mark("extract", t)
elif engine == "spark":
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    import znippy_sql.spark as zs
    s = SparkSession.builder.master(f"local[{{workers}}]").config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(workers)).getOrCreate()
    zs.register(s); mark("start", t0)
    def znippy():
        r = s.read.format("znippy")
        return r.option("storage_options", json.dumps(opts)) if opts else r
    t = time.perf_counter(); df = znippy().load(paths); out["parts"] = df.rdd.getNumPartitions(); mark("plan", t)
    t = time.perf_counter(); out["by_repo"] = sorted((r[0], r[1]) for r in df.groupBy("repo").count().collect()); mark("count", t)
    def grep():
        g = znippy().option("content", "true").load(paths).where("NOT relative_path LIKE '%.jar'").where(f"instr(content, '{{GREP.decode()}}') > 0")
        return sorted([r[0], r[1]] for r in g.select("archive", "relative_path").collect())
    twice(grep)
    t = time.perf_counter()
    sel = znippy().option("content", "true").load(paths).where("relative_path LIKE '%.pom'").orderBy("archive", "relative_path").limit(1000).select("archive", "relative_path", "content").collect()
    for a, p, b in sel:
        dd = os.path.join(dest, os.path.basename(a), p); os.makedirs(os.path.dirname(dd), exist_ok=True)
        open(dd, "wb").write(b)
    out["extract"] = len(sel); mark("extract", t)
    s.stop()
elif engine == "ray":
    import ray
    from ray.data.expressions import col
    import znippy_sql.ray as zr
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    mark("start", t0)
    t = time.perf_counter(); from znippy_sql.engines.parts import Scan
    out["parts"] = len(Scan(tuple(paths), storage_options=opts).plan()); mark("plan", t)
    t = time.perf_counter(); out["by_repo"] = sorted((r["repo"], r["count()"]) for r in zr.read_archives(paths, storage_options=opts).groupby("repo").count().take_all()); mark("count", t)
    def grep():
        ds = zr.read_archives(paths, content=True, storage_options=opts)
        hits = []
        for b in ds.select_columns(["archive", "relative_path", "content"]).iter_batches(batch_format="pyarrow", batch_size=4096):
            for a, p, c in zip(b["archive"].to_pylist(), b["relative_path"].to_pylist(), b["content"].to_pylist()):
                if not p.endswith(".jar") and GREP in c:
                    hits.append([a, p])
        return sorted(hits)
    twice(grep)
    t = time.perf_counter()
    sel = sorted((r["archive"], r["relative_path"]) for r in zr.read_archives(paths, storage_options=opts).filter(expr=col("pkg_type") == 1).select_columns(["archive", "relative_path"]).take_all() if r["relative_path"].endswith(".pom"))[:1000]
    from znippy_sql.engines.parts import contents
    got = contents([a for a, _ in sel], [p for _, p in sel], opts).to_pylist()
    for (a, p), b in zip(sel, got):
        dd = os.path.join(dest, os.path.basename(a), p); os.makedirs(os.path.dirname(dd), exist_ok=True)
        open(dd, "wb").write(b)
    out["extract"] = len(sel); mark("extract", t)
    ray.shutdown()
print("RESULT " + json.dumps(out, default=list))
'''


def tree_sample(pid: int, stop: threading.Event, peak: list[int], io: dict[int, tuple[int, int]]
                ) -> None:
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        rss = 0
        for p in procs:
            try:
                rss += p.memory_info().rss
                c = p.io_counters()
                io[p.pid] = (c.read_bytes, c.read_chars)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        peak[0] = max(peak[0], rss)
        stop.wait(0.05)


def run_engine(engine: str, paths: list[str], workers: int,
               opts: dict[str, str] | None = None) -> dict:
    dest = tempfile.mkdtemp(prefix=f"extract-{engine}-", dir=WORK)
    code = CHILD.format(root=os.path.dirname(HERE), engine=engine, paths=paths,
                        workers=workers, dest=dest, grep=GREP, opts=opts)
    t = time.perf_counter()
    # a tail cache of its own: no engine finds the indexes another one fetched
    env = {**os.environ, "ZNIPPY_SQL_CACHE": tempfile.mkdtemp(prefix="tails-", dir=WORK)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    stop, peak, io = threading.Event(), [0], {}
    th = threading.Thread(target=tree_sample, args=(proc.pid, stop, peak, io), daemon=True)
    th.start()
    out, err = proc.communicate()
    stop.set()
    th.join()
    wall = time.perf_counter() - t
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not line:
        why = [ln for ln in err.splitlines() if ln.strip()][-1:] or ["no output"]
        print(f"{engine} failed:\n{err[-3000:]}", file=sys.stderr, flush=True)
        return {"error": why[0][:200], "wall": wall, "rss": peak[0]}
    res = json.loads(line[-1][7:])
    res.update(wall=wall, rss=peak[0], read_bytes=sum(a for a, _ in io.values()),
               rchar=sum(b for _, b in io.values()))
    shutil.rmtree(dest, ignore_errors=True)
    return res


def plan_many(n: int) -> tuple[float, int]:
    from znippy_sql import Entry, write_archive
    from znippy_sql.engines.parts import Scan

    root = os.path.join(WORK, "plan")
    os.makedirs(root, exist_ok=True)
    paths = []
    for i in range(n):
        p = os.path.join(root, f"a{i:04}.znippy")
        write_archive(p, [Entry(f"f{j}.txt", data=b"%d" % j, repo=f"r{i % 7}")
                          for j in range(5)], fsync=False, workers=1)
        paths.append(p)
    t = time.perf_counter()
    parts = Scan(tuple(paths)).plan()
    return time.perf_counter() - t, len(parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--archives", type=int, default=8)
    ap.add_argument("--files", type=int, default=3000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engines", default="duckdb,daft,spark,ray")
    ap.add_argument("--plan-archives", type=int, default=1000)
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--s3", action="store_true", help="also over the S3 test server")
    ap.add_argument("--out", default=os.path.join(HERE, "results-engines.md"))
    args = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    t = time.perf_counter()
    paths = write_fleet(os.path.join(WORK, "fleet"), args.archives, args.files)
    size = sum(os.path.getsize(p) for p in paths)
    print(f"fleet: {len(paths)} archives, {size / 1e6:.1f} MB in "
          f"{time.perf_counter() - t:.0f} s", flush=True)
    runs = {}
    for engine in args.engines.split(","):
        runs[engine] = run_engine(engine, paths, args.workers)
        r = runs[engine]
        print(engine, {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()
                       if k not in ("grep", "by_repo")}, flush=True)
    scaling = {}
    if args.scaling:
        for engine in ("duckdb", "daft"):
            scaling[engine] = {w: run_engine(engine, paths, w) for w in (1, args.workers)}
    compare(runs)
    s3 = run_s3(args, paths) if args.s3 else {}
    t_plan, n_parts = plan_many(args.plan_archives) if args.plan_archives else (0.0, 0)
    write(args, paths, size, runs, scaling, t_plan, n_parts, s3)


def compare(runs: dict) -> None:
    """Mark each run whose answers equal DuckDB's (in the same run, the same sources)."""
    ref = runs.get("duckdb")
    for r in runs.values():
        if "error" in r:
            continue
        r["equal"] = ref is None or "error" in ref or (sorted(map(tuple, r["grep"])) == sorted(
            map(tuple, ref["grep"])) and sorted(map(tuple, r["by_repo"])) == sorted(
            map(tuple, ref["by_repo"])) and r["extract"] == ref["extract"])


def run_s3(args, paths: list[str]) -> dict:
    """The engines over the fleet uploaded to a SeaweedFS S3 server started here."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
    from pathlib import Path

    import obstore
    from obstore.store import S3Store
    from remote_server import ACCESS_KEY, SECRET_KEY, RangeServer, Seaweed

    weed = Seaweed(Path(WORK) / "weed")
    # the engines talk to SeaweedFS through a counting proxy: requests and body bytes per run
    proxy = RangeServer(upstream=("127.0.0.1", int(weed.endpoint.rsplit(":", 1)[1])))
    try:
        opts = {"endpoint": proxy.url, "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY, "region": "us-east-1"}
        store = S3Store("fleet", endpoint=weed.endpoint, access_key_id=ACCESS_KEY,
                        secret_access_key=SECRET_KEY, region="us-east-1",
                        client_options={"allow_http": True})
        urls = []
        for p in paths:
            obstore.put(store, f"bench/{os.path.basename(p)}", Path(p).read_bytes())
            urls.append(f"s3://fleet/bench/{os.path.basename(p)}")
        runs = {}
        for engine in args.engines.split(","):
            proxy.reset()
            runs[engine] = r = run_engine(engine, urls, args.workers, opts)
            r.update(s3_requests=len(proxy.hits), s3_bytes=proxy.bytes_sent())
            print("s3", engine, {k: (round(v, 2) if isinstance(v, float) else v)
                                 for k, v in r.items() if k not in ("grep", "by_repo")},
                  flush=True)
        compare(runs)
        return runs
    finally:
        proxy.close()
        weed.close()


def table_rows(runs: dict, s3: bool = False) -> list[str]:
    lines = []
    for engine, r in runs.items():
        wire = (f" {r.get('s3_bytes', 0) / 1e6:,.2f} MB ({r.get('s3_requests', 0):,}) |"
                if s3 else "")
        if "error" in r:
            lines.append(f"| {engine} | failed: {r['error']} | | | | | | {r['wall']:.1f} s | "
                         f"{r['rss'] / 2**20:,.0f} MiB | | |{wire} |")
            continue
        lines.append(
            f"| {engine} | {r['t_start']:.2f} s | {r['t_plan']:.2f} s | {r['t_count']:.2f} s | "
            f"{r['t_grep']:.2f} s | {r.get('t_grep2', float('nan')):.2f} s | "
            f"{r['t_extract']:.2f} s | {r['wall']:.1f} s | "
            f"{r['rss'] / 2**20:,.0f} MiB | {r['read_bytes'] / 1e6:,.1f} MB | "
            f"{r['rchar'] / 1e6:,.1f} MB |{wire} {'yes' if r['equal'] else 'NO'} |")
    return lines


def write(args, paths, size, runs, scaling, t_plan, n_parts, s3) -> None:
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    files = args.archives * args.files
    lines = [
        "# Engines benchmark: DuckDB, Daft, Spark, Ray over the same fleet", "",
        f"Command: `.venv/bin/python bench/bench_engines.py --archives {args.archives} "
        f"--files {args.files} --workers {args.workers} --engines {args.engines}"
        f"{' --scaling' if args.scaling else ''}{' --s3' if args.s3 else ''}`. Run on {now}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs shared with other work (load {os.getloadavg()[0]:.1f} at the "
        f"end), Python {platform.python_version()}. Fleet: {len(paths)} archives, "
        f"{files:,} files, {size / 1e6:.1f} MB, local disk. Each engine in a child process "
        f"of its own with {args.workers} workers; RSS is the peak of the sum over the "
        "child's process tree (JVM, Python workers, raylets), bytes read are `read_bytes` "
        "(disk) and `rchar` (all reads, page cache included) of that tree.", "",
        "\"grep again\": the same grep run a second time in the same process (the engine's "
        "first-use costs paid: Daft's kernels, the archives opened).", "",
        "| engine | start | plan | count by repo | grep text files | grep again | "
        "extract 1,000 | wall | peak RSS | disk read | all reads | = DuckDB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += table_rows(runs)
    if s3:
        lines += ["", "## Archives on the S3 test server", "",
                  "The same archives uploaded to SeaweedFS (`weed server -s3` on 127.0.0.1, "
                  "this machine: no network latency, the server's CPU shares the 2 cores), "
                  "read by URL with credentials as storage options. DuckDB's row: the `files` "
                  "view by `views.batches_many`, bytes by `read_files` (ranged GETs). Bytes "
                  "read count the engine's tree only (the server's disk reads are not in them; "
                  "`rchar` includes each engine's own imports and files). \"from S3\": the "
                  "body bytes (and requests) the server sent, counted at a proxy in front of it.",
                  "", "| engine | start | plan | count by repo | grep text files | grep again | "
                  "extract 1,000 | wall | peak RSS | disk read | all reads | from S3 | = DuckDB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += table_rows(s3, s3=True)
    if "t_grep" in runs.get("duckdb", {}) and "t_grep" in runs.get("daft", {}):
        for label, rs in (("local", runs), ("S3", s3 or {})):
            d, k = rs.get("daft", {}), rs.get("duckdb", {})
            if "t_grep" in d and "t_grep" in k:
                lines += ["", f"Daft native / DuckDB on the grep, {label}: first "
                              f"{d['t_grep'] / k['t_grep']:.2f}x, again "
                              f"{d['t_grep2'] / k['t_grep2']:.2f}x (target ≤ 1.25x)."]
    if t_plan:
        lines += ["", f"Planning {args.plan_archives:,} small archives (`Scan.plan`: footer "
                      f"and manifest of each, local): {t_plan:.2f} s, {n_parts} parts "
                      "(target < 5 s)."]
    if scaling:
        lines += ["", "## 1 worker vs 2", "", "| engine | grep, 1 worker | grep, 2 workers | "
                  "ratio |", "|---|---:|---:|---:|"]
        for engine, by in scaling.items():
            one, two = by[1]["t_grep"], by[args.workers]["t_grep"]
            lines.append(f"| {engine} | {one:.2f} s | {two:.2f} s | {one / two:.2f}x |")
    lines.append("")
    with open(args.out, "w") as fh:
        fh.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
