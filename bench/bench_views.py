"""The view catalog against the code before it, side by side in one run (issue 24).

Usage::

    .venv/bin/python bench/bench_views.py --base DIR [--entries 1000000] [--ls-files 100000]

``--base DIR`` is a source tree of the code to compare with (``git archive <commit> | tar -x
-C DIR``); its children run with ``PYTHONPATH`` set to it (and the editable install's finder
removed), from a neutral directory. For each tree, alternating base / new:

1. ``register`` of a ``--entries`` archive in DuckDB: wall time and resident memory added,
   in fresh processes (median of 5; first and warm, as ``bench_query.py``).
2. Polars ``scan(a).filter(repo == 'alpha').select(...)``: bytes read and seconds.
3. ``znippy-sql ls`` of a ``--ls-files`` archive (new process, output to /dev/null), plain and
   ``--json``, and ``info``: median of 3 wall times.
4. DuckDB ``SELECT repo, pkg_type, count(*), sum(size) FROM x_files GROUP BY ALL``: best of 5.
5. Determinism: the SHA-256 of archives each tree writes from the same input.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out", "views")
sys.path.insert(0, HERE)

SITE = 'import sys\nsys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]\n'

POLARS = r"""
import json, sys, time
import polars as pl
from znippy_sql import open_archive
from znippy_sql.polars import scan
a = open_archive(sys.argv[1])
lf = scan(a).filter(pl.col("repo") == "alpha").select("relative_path", "size")
before = a.source.bytes_read
t = time.perf_counter()
df = lf.collect()
secs = time.perf_counter() - t
print(json.dumps({"rows": df.height, "read": a.source.bytes_read - before, "seconds": secs}))
"""

GROUPBY = r"""
import json, sys, time, duckdb
import znippy_sql.duckdb as zd
con = duckdb.connect()
zd.register(con, sys.argv[1], "x")
q = "SELECT repo, pkg_type, count(*), sum(size) FROM x_files GROUP BY ALL"
con.execute(q).fetchall()
ts = []
for _ in range(5):
    t = time.perf_counter(); con.execute(q).fetchall(); ts.append(time.perf_counter() - t)
print(json.dumps({"ms": min(ts) * 1000}))
"""

WRITE = r"""
import hashlib, json, os, sys
from znippy_sql import Entry, ReservedSection, write_archive
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
def text(n, seed):
    return bytes((i * 7 + seed * 13 + (i >> 5)) % 251 for i in range(n))
sets = {
    "small": [Entry(f"s/{i:04d}.txt", data=text(300 + i % 900, i), repo=("a", "b")[i % 2])
              for i in range(400)],
    "multi": [Entry(f"m/{i}.bin", data=text(700_000 + i, i), pkg_type=(0, 6)[i % 2])
              for i in range(4)],
    "modules": [Entry("org/x/y/1.0/y-1.0.pom", data=b"<project/>", pkg_type="auto"),
                Entry("pkgs/demo-1.0-py3-none-any.whl", data=text(5000, 3), pkg_type="auto"),
                Entry("plain.txt", data=b"plain")],
}
digests = {}
for name, entries in sets.items():
    p = os.path.join(out, name + ".znippy")
    write_archive(p, entries, block_size=256 * 1024, workers=2, fsync=False,
                  reserved_sections=[ReservedSection("__x_test__", b"opaque")])
    digests[name] = hashlib.sha256(open(p, "rb").read()).hexdigest()
print(json.dumps(digests))
"""


def env_for(tree: str, base: str) -> dict[str, str]:
    env = dict(os.environ)
    if tree == "base":
        site = os.path.join(OUT, "site")
        os.makedirs(site, exist_ok=True)
        with open(os.path.join(site, "sitecustomize.py"), "w") as fh:
            fh.write(SITE)
        env["PYTHONPATH"] = f"{site}:{base}"
    return env


def child(tree: str, base: str, code: str, *args: str) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         env=env_for(tree, base), cwd=tempfile.gettempdir())
    if res.returncode:
        raise SystemExit(f"{tree}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def cli_time(tree: str, base: str, *argv: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys; from znippy_sql.cli import main; "
                        "sys.exit(main())", *argv], stdout=subprocess.DEVNULL, check=True,
                       env=env_for(tree, base), cwd=tempfile.gettempdir())
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def register(tree: str, base: str, path: str, warm: bool, runs: int = 5) -> dict[str, Any]:
    from bench_query import CHILD, tiny_archive

    extra = [tiny_archive()] if warm else []
    out = [child(tree, base, CHILD, path, *extra) for _ in range(runs)]
    return {"ms": statistics.median(o["seconds"] for o in out) * 1000,
            "rss_mb": statistics.median(o["rss"] for o in out) / 1e6}


def ls_archive(n: int) -> str:
    from znippy_sql import Entry, write_archive

    path = os.path.join(OUT, f"ls-{n}.znippy")
    if not os.path.exists(path):
        write_archive(path, (Entry(f"d{i // 1000:03d}/f{i:06d}.txt", data=b"%d\n" % i,
                                   repo=("alpha", "beta")[i % 2]) for i in range(n)),
                      fsync=False)
    return path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--ls-files", type=int, default=100_000)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    import bench_query

    bench_query.OUT = os.path.join(HERE, "out", "query")
    os.makedirs(bench_query.OUT, exist_ok=True)
    big = bench_query.synthetic(args.entries)
    small = ls_archive(args.ls_files)
    res: dict[str, dict[str, Any]] = {"base": {}, "new": {}}
    for tree in ("base", "new", "base", "new"):  # alternate: load drifts during the run
        r = res[tree]
        for warm in (False, True):
            got = register(tree, args.base, big, warm)
            r.setdefault(f"register_{'warm' if warm else 'first'}", []).append(got)
        r.setdefault("polars", []).append(child(tree, args.base, POLARS, big))
        r.setdefault("groupby_ms", []).append(child(tree, args.base, GROUPBY, big)["ms"])
        r.setdefault("ls_s", []).append(cli_time(tree, args.base, "ls", small))
        r.setdefault("ls_json_s", []).append(cli_time(tree, args.base, "ls", "--json", small))
        r.setdefault("info_s", []).append(cli_time(tree, args.base, "info", big))
    for tree in ("base", "new"):
        res[tree]["digests"] = child(tree, args.base, WRITE, os.path.join(OUT, f"det-{tree}"))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
