"""Rust-layout archives against the same content in this project's layout.

Usage::

    .venv/bin/python bench/bench_rust.py [--files 100000] [--rows 1000000] [--repeat 5]
                                         [--work bench/out/rust]

Writes, once (reused when present): ``--files`` small text files as the Rust tool's CLI path
lays them out (``tests/rust_layout.py``: level-19 frames of format version 24, no ``__lookup__``
or ``__trie__``, rows in write order, the first stream unaligned) and the same files with
``write_archive`` (lookup and trie sections); and, with ``--rows``, ``--rows`` one-chunk files
(8 bytes each, skip-listed names so both writers store them raw) in both layouts.

Then, each in a fresh process, the two layouts alternating, ``--repeat`` rounds:

- ``open+read``: ``open_archive`` and the first ``read`` of one file (for the Rust layout this
  builds the lookup in memory; for ours it loads the lookup section and the trie);
- ``read``: median of 1,000 further reads of random files;
- ``ls``: the table ``znippy-sql ls`` prints (``cli.core.file_table``), and the CLI itself;
- ``register``: ``znippy_sql.duckdb.register`` and ``SELECT count(*) FROM <name>_files``;
- for ``--rows``: ``open_archive``, the first ``find`` (the lookup built or loaded), a warm
  ``find``, and the process's peak RSS.

Prints one JSON object: medians, every sample, and the ratios Rust layout / ours.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the independent writer of the Rust layouts


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM: reset by exec, unlike ru_maxrss, which a
    child inherits from the parent that forked it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def small_files(n: int) -> dict[str, bytes]:
    """``n`` text files of 400-1,600 bytes in a few hundred directories, in walk-like order."""
    rng = random.Random(12)
    words = b"alpha beta gamma delta import class def return index chunk archive".split()
    files = {}
    for i in range(n):
        line = b" ".join(rng.choice(words) for _ in range(8)) + b"\n"
        files[f"pkg{i % 317:03d}/mod{i % 13}/file{i:07d}.txt"] = line * rng.randint(8, 32)
    return files


def tiny_files(n: int) -> dict[str, bytes]:
    return {f"g{i % 1000:03d}/a{i // 1000:04d}/lib-{i:07d}.jar": b"%08d" % i for i in range(n)}


def build(work: Path, name: str, files: dict[str, bytes]) -> tuple[Path, Path]:
    import rust_layout as rl
    from znippy_sql import Entry, write_archive

    rust, ours = work / f"{name}-rust.znippy", work / f"{name}-ours.znippy"
    if not rust.exists():
        t = time.perf_counter()
        rl.write_cli(rust, files, cores=2, seed=1)
        print(f"wrote {rust} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if not ours.exists():
        t = time.perf_counter()
        write_archive(ours, (Entry(p, data=d) for p, d in sorted(files.items())), fsync=False)
        print(f"wrote {ours} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return rust, ours


# -- measured in a fresh process ------------------------------------------------------------
def measure_small(path: str, probe: list[str]) -> dict[str, float]:
    t0 = time.perf_counter()
    from znippy_sql import open_archive
    from znippy_sql.cli.core import file_table

    t1 = time.perf_counter()
    a = open_archive(path)
    a.read(probe[0])
    t2 = time.perf_counter()
    samples = []
    for p in probe[1:]:
        s = time.perf_counter()
        a.read(p)
        samples.append(time.perf_counter() - s)
    t3 = time.perf_counter()
    rows = file_table(a).num_rows
    t4 = time.perf_counter()
    a.close()
    import duckdb

    from znippy_sql.duckdb import register

    con = duckdb.connect()
    t5 = time.perf_counter()
    register(con, path, "x")
    t6 = time.perf_counter()
    (count,) = con.execute("SELECT count(*) FROM x_files").fetchone()  # type: ignore[misc]
    t7 = time.perf_counter()
    assert count == rows
    return {"import_s": t1 - t0, "open_read_ms": (t2 - t1) * 1e3,
            "read_us": statistics.median(samples) * 1e6, "ls_ms": (t4 - t3) * 1e3,
            "register_ms": (t6 - t5) * 1e3, "register_count_ms": (t7 - t5) * 1e3,
            "peak_rss_mb": peak_rss_mb()}


def measure_rows(path: str, probe: list[str]) -> dict[str, float]:
    from znippy_sql import open_archive

    rss0 = peak_rss_mb()
    t0 = time.perf_counter()
    a = open_archive(path)
    t1 = time.perf_counter()
    assert a.find(probe[0]) is not None
    t2 = time.perf_counter()
    samples = []
    for p in probe[1:]:
        s = time.perf_counter()
        a.find(p)
        samples.append(time.perf_counter() - s)
    return {"open_ms": (t1 - t0) * 1e3, "first_find_s": t2 - t1,
            "find_us": statistics.median(samples) * 1e6, "rss_before_mb": rss0,
            "peak_rss_mb": peak_rss_mb()}


def fresh(kind: str, path: Path, probe: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--measure", kind, str(path)],
                         input=json.dumps(probe), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def cli_ls(path: Path) -> float:
    cli = Path(sys.executable).parent / "znippy-sql"
    t = time.perf_counter()
    subprocess.run([str(cli), "ls", str(path)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def rounds(kind: str, paths: dict[str, Path], probe: list[str], repeat: int,
           cli: bool) -> dict[str, object]:
    samples: dict[str, list[dict[str, float]]] = {side: [] for side in paths}
    for r in range(repeat):
        for side in (list(paths) if r % 2 == 0 else list(paths)[::-1]):
            got = fresh(kind, paths[side], probe)
            if cli:
                got["cli_ls_s"] = cli_ls(paths[side])
            samples[side].append(got)
    med = {side: {k: round(statistics.median(s[k] for s in runs), 3) for k in runs[0]}
           for side, runs in samples.items()}
    ratio = {k: round(med["rust"][k] / med["ours"][k], 2) for k in med["rust"]
             if med["ours"][k]}
    return {"median": med, "rust_over_ours": ratio, "samples": samples}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=1_000_000, help="0: skip the big case")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--work", default="bench/out/rust")
    ap.add_argument("--measure", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        kind, path = args.measure
        probe = json.loads(sys.stdin.read())
        fn = measure_small if kind == "small" else measure_rows
        print(json.dumps(fn(path, probe)))
        return
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(3)
    out: dict[str, object] = {"load": os.getloadavg(), "cores": os.cpu_count()}
    files = small_files(args.files)
    rust, ours = build(work, f"small{args.files}", files)
    probe = rng.sample(sorted(files), min(1001, len(files)))
    out["small"] = {"files": len(files), "bytes": {"rust": rust.stat().st_size,
                                                   "ours": ours.stat().st_size},
                    **rounds("small", {"rust": rust, "ours": ours}, probe, args.repeat, True)}
    del files
    if args.rows:
        tiny = tiny_files(args.rows)
        rust, ours = build(work, f"rows{args.rows}", tiny)
        probe = rng.sample(sorted(tiny), 1001)
        del tiny
        out["rows"] = {"rows": args.rows,
                       **rounds("rows", {"rust": rust, "ours": ours}, probe,
                                max(1, args.repeat // 2), False)}
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
