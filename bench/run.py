"""Core benchmark: znippy create/extract/open/read against ``tar | zstd -3 -T2``.

Usage::

    .venv/bin/python bench/run.py [--scale 1.0] [--mem-scale 0.25] [--only NAME ...]
                                  [--workers N] [--out bench/results-core.md]

Each znippy measurement runs in a fresh child Python process (``bench/run.py --child ...``)
that calls the Python API in process (``write_archive``, ``open_archive(...).extract``) and
reports its own wall time and high-water RSS (``VmHWM``); the parent samples its descendants
(fork server, workers) every 50 ms for their summed resident memory and their CPU time, and takes
the child's own CPU time from ``wait4``. The peer pipelines run through ``sh -c`` and are timed
around the whole pipeline. Both sides read warm
page cache (the corpora were just generated or read). ``create`` fsyncs the archive and its
directory; the peer pipeline ends with ``sync OUT`` so both pay for durability. Extract does
not sync on either side.

Every archive and every extraction (ours and the peer's, every repeat) gets a name of its own;
extractions are synced (untimed) before the next measurement, and all of them are deleted only
when the whole run is over. Deleting the previous extraction's 20,000 files just before the
next one is created made this disk's ext4 (mounted without a journal) create files 10-20×
slower (``perf``: ``ext4_create`` → ``recently_deleted``: the inode allocator skips inodes
freed less than 60 s ago, 360 s when their inode-table blocks are dirty again — and creating
files next to them dirties them — reading those blocks one by one); whichever side came after a
deletion paid it, so ``src_tree`` extract swung between 0.4 s and 9 s for the same command. For
the same reason, start a run six minutes after the last one ended (its clean-up deletes and
syncs), or after anything else deleted many files on this disk: a run 2.5 minutes after such a
deletion still found both sides' ``src_tree`` extract at ~2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402

MB = 1e6  # throughput and sizes are reported in decimal MB
LEFT: list[str] = []  # extraction directories, deleted when the run is over (see above)
ANALYSIS = "## Analysis"  # a hand-written section at the end of the results file, kept


# -- child side: one measurement in a fresh interpreter ---------------------------------------
def child(argv: list[str]) -> None:
    op = argv[0]
    if op == "create":
        from znippy_sql import write_archive

        src, out, workers = argv[1], argv[2], argv[3]
        t = time.perf_counter()
        r = write_archive(out, src, workers=None if workers == "auto" else int(workers))
        dt = time.perf_counter() - t
        print(json.dumps({"seconds": dt, "bytes_in": r.bytes_in, "size": r.archive_bytes,
                          "files": r.files, "compressed_chunks": r.compressed_chunks,
                          "raw_chunks": r.raw_chunks, "blob_bytes": r.blob_bytes,
                          "hwm_kb": hwm_kb(os.getpid())}))
    elif op == "extract":
        from znippy_sql import open_archive

        archive, dest = argv[1], argv[2]
        t = time.perf_counter()
        with open_archive(archive) as a:
            r = a.extract(dest)
        dt = time.perf_counter() - t
        print(json.dumps({"seconds": dt, "files": r.files, "bytes": r.bytes_written,
                          "failed": len(r.failed), "hwm_kb": hwm_kb(os.getpid())}))
    elif op == "calibrate":
        print(json.dumps({**calibrate(argv[1:]), "hwm_kb": hwm_kb(os.getpid())}))
    elif op == "access":
        print(json.dumps({**access(argv[1]), "hwm_kb": hwm_kb(os.getpid())}))
    else:
        raise SystemExit(f"unknown child op {op}")


SOURCE_SUFFIXES = (".py", ".pyi", ".c", ".h", ".cc", ".cpp", ".hpp", ".java", ".js", ".ts",
                   ".rs", ".go", ".kt", ".md")


def calibrate(roots: list[str]) -> dict[str, Any]:
    """Per-file OpenZL frames vs one .tar.zst over the same files: what per-file frames cost.

    Run on the src_tree corpus and on real source code (the .venv's site-packages), it shows
    whether the synthetic corpus compresses per file like real code does.
    """
    from znippy_sql.format import codec

    enc = codec.Encoder(codec.DEFAULT_LEVEL)
    out = {}
    for root in roots:
        files = []
        for dirpath, _d, names in os.walk(root):
            for n in names:
                p = os.path.join(dirpath, n)
                if n.endswith(SOURCE_SUFFIXES) and os.path.isfile(p) and not os.path.islink(p):
                    files.append(p)
        files.sort()
        files = files[:20000]
        total = frames = 0
        for p in files:
            with open(p, "rb") as fh:
                data = fh.read()
            total += len(data)
            frames += min(len(enc.encode(data)), len(data)) if data else 0
        listing = os.path.join(HERE, "out", "calibrate-files.txt")
        with open(listing, "w") as fh:
            fh.write("\n".join(files))
        tar = subprocess.run(f"tar -cf - -T {shlex.quote(listing)} 2>/dev/null | zstd -3 -T2 -q "
                             "-c | wc -c", shell=True, capture_output=True, text=True, check=True)
        out[root] = {"files": len(files), "bytes": total, "frames": frames,
                     "tar_zst": int(tar.stdout.strip())}
    return {"calibration": out}


def access(archive: str) -> dict[str, Any]:
    """open_archive (first and median of 30) and warm reads of ~10 KB files."""
    from znippy_sql import open_archive

    t = time.perf_counter()
    a = open_archive(archive)
    first_open = time.perf_counter() - t
    a.close()
    opens = []
    for _ in range(30):
        t = time.perf_counter()
        b = open_archive(archive)
        opens.append(time.perf_counter() - t)
        b.close()
    a = open_archive(archive)
    lk = a.lookup
    sizes = lk.column("uncompressed_size").to_pylist()
    paths = lk.column("relative_path").to_pylist()
    seqs = lk.column("chunk_seq").to_pylist()
    small = [p for p, s, q in zip(paths, sizes, seqs) if q == 0 and 8000 <= s <= 12000]
    rng = random.Random(7)
    picks = rng.sample(small, min(200, len(small)))
    first_read_t = time.perf_counter()
    a.read(picks[0])  # the first read of the process pays for the trie and lookup views
    first_read = time.perf_counter() - first_read_t
    distinct = []
    for p in picks:
        t = time.perf_counter()
        a.read(p)
        distinct.append(time.perf_counter() - t)
    same = []
    for _ in range(200):
        t = time.perf_counter()
        a.read(picks[0])
        same.append(time.perf_counter() - t)
    return {"first_open": first_open, "open_median": statistics.median(opens),
            "first_read": first_read, "read_median_distinct": statistics.median(distinct),
            "read_p90_distinct": sorted(distinct)[int(0.9 * len(distinct))],
            "read_median_same": statistics.median(same), "reads": len(distinct)}


# -- parent side ------------------------------------------------------------------------------
def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def cpu_s(pid: int) -> float:
    """utime + stime of a live process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hwm_kb(pid: int, field: str = "VmHWM") -> int:
    """A memory figure of a live process from ``/proc/PID/status`` (high-water by default)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


@dataclass
class ChildRun:
    result: dict[str, Any]
    wall: float
    main_rss_mb: float
    tree_rss_mb: float  # peak of the summed anonymous memory of the child and its workers
    cpu: float  # CPU seconds of the child and its workers (workers' last 50 ms may be missed)


def run_child(args: list[str]) -> ChildRun:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", *args]
    # as the CLI does (znippy_sql/cli): numpy's OpenBLAS threads would spin for ~0.1 s after
    # the import, inside the timed call; nothing in znippy uses BLAS
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    peak = [0]  # highest sum of the descendants' resident memory seen at one sample
    cpus: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = hwm_kb(proc.pid, "RssAnon")
            for p in descendants(proc.pid):
                total += hwm_kb(p, "RssAnon")
                cpus[p] = max(cpus.get(p, 0.0), cpu_s(p))
            peak[0] = max(peak[0], total)
            stop.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stdout is not None
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    stop.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child {' '.join(args)} failed with {proc.returncode}")
    result = json.loads(out)
    main_kb = result.pop("hwm_kb")  # ru_maxrss would carry the forking parent's RSS over
    cpu = usage.ru_utime + usage.ru_stime + sum(cpus.values())
    return ChildRun(result, wall, main_kb / 1024, peak[0] / 1024, cpu)


def shell(cmd: str) -> tuple[float, float]:
    """Wall seconds and CPU seconds (of sh and everything it waited for) of a pipeline."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(["sh", "-c", cmd], check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def rm(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


def warm(root: str) -> None:
    subprocess.run(["sh", "-c", f"tar -cf - -C {shlex.quote(root)} . > /dev/null"], check=True)


@dataclass
class CorpusResult:
    name: str
    src: str
    files: int
    bytes_in: int
    create: ChildRun
    tar_create_s: float
    tar_create_cpu: float
    tar_size: int
    extract: ChildRun
    tar_extract_s: float
    tar_extract_cpu: float
    access: dict[str, Any] | None = None
    commands: dict[str, str] = field(default_factory=dict)
    runs: dict[str, list[float]] = field(default_factory=dict)  # every run's seconds, by side


def bench_corpus(name: str, src: str, work: str, workers: str, repeat: int) -> CorpusResult:
    warm(src)
    create = tar = extract = untar = None
    archive = tarzst = dest = tdest = tar_cmd = untar_cmd = ""
    runs: dict[str, list[float]] = {k: [] for k in ("create", "tar", "probe", "extract", "untar",
                                                    "cli_create", "cli_extract", "cpu")}
    for rep in range(repeat):  # best of ``repeat``: the machine is shared
        runs["cpu"].append(probe_cpu())
        # alternate which side goes first, so neither always meets the same page cache / load
        for side in (("ours", "peer") if rep % 2 == 0 else ("peer", "ours")):
            if side == "ours":
                archive = fresh(os.path.join(work, f"{name}.{rep}.znippy"))
                c = run_child(["create", src, archive, workers])
                runs["create"].append(c.result["seconds"])
                if create is None or c.result["seconds"] < create.result["seconds"]:
                    create = c
            else:
                tarzst = fresh(os.path.join(work, f"{name}.{rep}.tar.zst"))
                tar_cmd = (f"tar -cf - -C {shlex.quote(src)} . | zstd -3 -T2 -q -o "
                           f"{shlex.quote(tarzst)} && sync {shlex.quote(tarzst)}")
                t = shell(tar_cmd)
                runs["tar"].append(t[0])
                tar = t if tar is None or t[0] < tar[0] else tar
        runs["probe"].append(probe_creation(work, f"{name}.probe{rep}"))
        for side in (("peer", "ours") if rep % 2 == 0 else ("ours", "peer")):
            if side == "peer":
                tdest = fresh(os.path.join(work, f"{name}.tx{rep}"))
                os.makedirs(tdest)
                untar_cmd = (f"zstd -d -q -c {shlex.quote(tarzst)} | "
                             f"tar -xf - -C {shlex.quote(tdest)}")
                u = shell(untar_cmd)
                runs["untar"].append(u[0])
                os.sync()  # not timed: the next measurement starts without dirty pages
                untar = u if untar is None or u[0] < untar[0] else untar
            else:
                dest = fresh(os.path.join(work, f"{name}.x{rep}"))
                x = run_child(["extract", archive, dest])
                runs["extract"].append(x.result["seconds"])
                os.sync()
                if extract is None or x.result["seconds"] < extract.result["seconds"]:
                    extract = x
    assert create is not None and tar is not None and extract is not None and untar is not None
    check_same(src, dest)
    # the same through the CLI, end to end (interpreter start and imports included)
    cli = shlex.quote(os.path.join(os.path.dirname(sys.executable), "znippy-sql"))
    for rep in range(repeat):
        out = fresh(os.path.join(work, f"{name}.cli{rep}.znippy"))
        runs["cli_create"].append(shell(f"{cli} create {shlex.quote(src)} -o "
                                        f"{shlex.quote(out)} > /dev/null")[0])
        cdest = fresh(os.path.join(work, f"{name}.cli{rep}.x"))
        runs["cli_extract"].append(shell(f"{cli} extract {shlex.quote(out)} -o "
                                         f"{shlex.quote(cdest)} > /dev/null")[0])
        os.sync()
    res = CorpusResult(
        name=name, src=src, files=create.result["files"], bytes_in=create.result["bytes_in"],
        create=create, tar_create_s=tar[0], tar_create_cpu=tar[1],
        tar_size=os.path.getsize(tarzst), extract=extract, tar_extract_s=untar[0],
        tar_extract_cpu=untar[1],
        commands={"create": f"python bench/run.py --child create {src} {archive} {workers}",
                  "tar": tar_cmd, "extract": f"python bench/run.py --child extract {archive} "
                  f"{dest}", "untar": untar_cmd}, runs=runs)
    if name == "src_tree":
        res.access = run_child(["access", archive]).result
    return res


_CPU_PROBE_INPUT = b"".join(b"%d: def f_%x(self, x): return x * %d\n" % (i, i * 2654435761 % 99991, i)
                            for i in range(200_000))


def probe_cpu() -> float:
    """Milliseconds for a fixed piece of work (zstd level 3 of the same ~9 MB of text, one
    thread, in this process): how fast the shared host is right now. The same code's timings
    swing 2-3x within minutes here, and both sides of a round swing together."""
    import zstandard

    t = time.perf_counter()
    zstandard.ZstdCompressor(level=3).compress(_CPU_PROBE_INPUT)
    return (time.perf_counter() - t) * 1e3


def probe_creation(work: str, name: str, files: int = 1000) -> float:
    """Microseconds to create one empty file here, now (the disk's state before an extract
    round; the files stay until the clean-up, so the probe deletes nothing)."""
    root = fresh(os.path.join(work, name))
    os.makedirs(root)
    t = time.perf_counter()
    for i in range(files):
        os.close(os.open(os.path.join(root, f"f{i}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    return (time.perf_counter() - t) / files * 1e6


def fresh(path: str) -> str:
    """A name to write an archive or an extraction to, left in place until :func:`clean_up`."""
    rm(path)  # only a crashed earlier run leaves one behind
    LEFT.append(path)
    return path


def clean_up() -> None:
    while LEFT:
        rm(LEFT.pop())
    os.sync()  # the freed inodes' blocks clean: ext4 skips them for 60 s, not 360 s


def check_same(src: str, dest: str) -> None:
    """Every source file exists in ``dest`` with the same size; a sample matches byte for byte."""
    rng = random.Random(1)
    files = []
    for dirpath, _d, names in os.walk(src):
        for n in names:
            files.append(os.path.relpath(os.path.join(dirpath, n), src))
    for rel in files:
        if os.path.getsize(os.path.join(src, rel)) != os.path.getsize(os.path.join(dest, rel)):
            raise SystemExit(f"extract differs in size: {rel}")
    for rel in rng.sample(files, min(40, len(files))):
        with open(os.path.join(src, rel), "rb") as a, open(os.path.join(dest, rel), "rb") as b:
            if a.read() != b.read():
                raise SystemExit(f"extract differs: {rel}")


def mbps(n: int, s: float) -> float:
    return n / MB / s if s else 0.0


def report(results: list[CorpusResult], mem: list[tuple[float, CorpusResult]],
           calib: dict[str, Any], scale: float,
           mem_scale: float, workers: str, repeat: int, load: tuple[list[float], list[float]],
           elapsed: float, argv: list[str]) -> str:
    size_target = {"src_tree": 1.20}
    speed_target = {"mixed_repo": 1.3}
    lines = [
        "# Core benchmark: znippy writer/extract vs tar + zstd",
        "",
        f"Generated by `.venv/bin/python bench/run.py {' '.join(argv)}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {zstd_version()}. Scale {scale:g} "
        f"(1 = the full corpora of the issue); took {elapsed / 60:.1f} min. Load average "
        f"(1/5/15 min) before: {fmt_load(load[0])}, after: {fmt_load(load[1])} — the machine "
        "is shared with other work, whose load is in these numbers.",
        "",
        "znippy is measured **in process through the Python API** (`write_archive(out, src, "
        f"workers={workers})`, `open_archive(a).extract(dest)`) inside a fresh child "
        "interpreter per measurement (`bench/run.py --child ...`), timed by the child around "
        "the call (interpreter start-up and the package import excluded; whatever the call "
        "imports, and its worker threads, included), with `OPENBLAS_NUM_THREADS=1` as the CLI "
        "sets it. The peer is timed around the whole shell pipeline. Both read warm page cache. "
        "`create` fsyncs the archive and its directory; the peer ends with `sync OUT`. "
        f"Each figure is the best of {repeat} run(s), the two sides alternating which goes "
        "first. CPU s = user + system seconds of all "
        "processes involved (znippy: the child and any processes it starts — none: its "
        "workers are threads —, sampled from `/proc`; "
        "peer: `sh` and its pipeline, from `RUSAGE_CHILDREN`) — less sensitive to the shared "
        "machine's load than wall time.",
        "",
        "Corpora (`bench/corpora.py`, seeded; sizes at scale 1): "
        + "; ".join(f"`{k}` {v.describe}" for k, v in corpora.SPECS.items()) + ".",
        "",
        "## Create",
        "",
        "| corpus | files | input MB | znippy s | znippy MB/s | tar+zstd s | tar+zstd MB/s | "
        "speed × (target) | CPU s znippy / tar+zstd | znippy MB | .tar.zst MB | size × (target) "
        "| ratio znippy / zstd |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        zs = r.create.result["seconds"]
        size = r.create.result["size"]
        speed_x = r.tar_create_s / zs
        size_x = size / r.tar_size
        st = speed_target.get(r.name, 1.0)
        zt = size_target.get(r.name, 1.03)
        lines.append(
            f"| {r.name} | {r.files} | {r.bytes_in / MB:.1f} | {zs:.2f} | "
            f"{mbps(r.bytes_in, zs):.0f} | {r.tar_create_s:.2f} | "
            f"{mbps(r.bytes_in, r.tar_create_s):.0f} | **{speed_x:.2f}×** (≥{st}) "
            f"{ok(speed_x >= st)} | {r.create.cpu:.2f} / {r.tar_create_cpu:.2f} | "
            f"{size / MB:.2f} | {r.tar_size / MB:.2f} | "
            f"**{size_x:.3f}×** (≤{zt}) {ok(size_x <= zt)} | "
            f"{r.bytes_in / size:.2f} / {r.bytes_in / r.tar_size:.2f} |")
    lines += [
        "",
        "## Extract everything",
        "",
        "| corpus | znippy s | znippy MB/s | zstd -d \\| tar -x s | MB/s | speed × (≥1.0) | "
        "CPU s znippy / zstd+tar |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        zs = r.extract.result["seconds"]
        x = r.tar_extract_s / zs
        lines.append(f"| {r.name} | {zs:.2f} | {mbps(r.bytes_in, zs):.0f} | "
                     f"{r.tar_extract_s:.2f} | {mbps(r.bytes_in, r.tar_extract_s):.0f} | "
                     f"**{x:.2f}×** {ok(x >= 1.0)} | {r.extract.cpu:.2f} / "
                     f"{r.tar_extract_cpu:.2f} |")
    lines += [
        "",
        "Every run, in order (seconds; the tables above take the best of each side). Probe: "
        "µs to create one empty file on this disk just before each extract round (1,000 "
        "files; ~10-40 µs is the disk's normal state on the machines measured so far "
        "(`BENCHMARKS.md`), hundreds mean it is skipping recently freed inodes, see the "
        "module docstring). CPU probe: "
        "ms for a fixed zstd job at the "
        "start of each round (the host's speed then; `probe_cpu`):",
        "",
        "| corpus | create znippy | tar+zstd | extract znippy | zstd -d \\| tar -x | probe µs "
        "| CPU probe ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        cells = [", ".join(f"{v:.2f}" if k not in ("probe", "cpu") else f"{v:.0f}"
                           for v in r.runs.get(k, []))
                 for k in ("create", "tar", "extract", "untar", "probe", "cpu")]
        lines.append(f"| {r.name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The same through the CLI, end to end (`znippy-sql create SRC -o OUT`, `znippy-sql "
        "extract OUT -o DIR`, after the rounds above; interpreter start and imports included): "
        "best of the runs (all of them in brackets) against the peer's best:",
        "",
        "| corpus | `znippy-sql create` s | × tar+zstd | `znippy-sql extract` s "
        "| × zstd -d \\| tar -x |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        cc, cx = r.runs.get("cli_create", []), r.runs.get("cli_extract", [])
        if cc and cx:
            every = [" [" + ", ".join(f"{v:.2f}" for v in x) + "]" for x in (cc, cx)]
            lines.append(f"| {r.name} | {min(cc):.2f}{every[0]} | {r.tar_create_s / min(cc):.2f}× "
                         f"| {min(cx):.2f}{every[1]} | {r.tar_extract_s / min(cx):.2f}× |")
    acc = next((r.access for r in results if r.access), None)
    if acc:
        lines += [
            "",
            "## Random access on the src_tree archive (in process)",
            "",
            "| measure | value | target |",
            "|---|---:|---|",
            f"| `open_archive` first call in the process | {acc['first_open'] * 1e3:.2f} ms | "
            f"< 5 ms {ok(acc['first_open'] < 0.005)} |",
            f"| `open_archive` median of 30 | {acc['open_median'] * 1e3:.2f} ms | < 5 ms "
            f"{ok(acc['open_median'] < 0.005)} |",
            f"| first `read` in the process (builds trie/lookup views) | "
            f"{acc['first_read'] * 1e3:.2f} ms | |",
            f"| `read(path)` of a ~10 KB file, median over {acc['reads']} distinct random files"
            f" | {acc['read_median_distinct'] * 1e3:.3f} ms (p90 "
            f"{acc['read_p90_distinct'] * 1e3:.3f} ms) | < 1 ms "
            f"{ok(acc['read_median_distinct'] < 0.001)} |",
            f"| `read(path)` of the same ~10 KB file, median of 200 | "
            f"{acc['read_median_same'] * 1e3:.3f} ms | < 1 ms "
            f"{ok(acc['read_median_same'] < 0.001)} |",
        ]
    lines += [
        "",
        "## Peak memory (RSS high-water)",
        "",
        "`main` = the writer/extractor process's own high-water RSS (`VmHWM`, includes the "
        "interpreter and its imports); `all` = the highest sum, over samples every 50 ms, of "
        "the anonymous memory (`RssAnon`: heap, buffers — not file pages such as a memory-"
        "mapped archive, which the kernel can drop) of that process and any it starts "
        f"(workers are threads). Block size 10 MiB, workers = {workers}.",
        "",
        "| corpus | scale | input MB | create main MB | create all (anon) MB | extract main MB | "
        "extract all (anon) MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for sc, r in mem:
        lines.append(f"| {r.name} | {sc:g} | {r.bytes_in / MB:.0f} | {r.create.main_rss_mb:.0f} |"
                     f" {r.create.tree_rss_mb:.0f} | {r.extract.main_rss_mb:.0f} | "
                     f"{r.extract.tree_rss_mb:.0f} |")
    src = next((r for r in results if r.name == "src_tree"), None)
    if src is not None:
        blob = src.create.result["blob_bytes"]
        tail = src.create.result["size"] - blob
        lines += [
            "",
            "## Where the src_tree size goes",
            "",
            f"Blob region {blob / MB:.2f} MB = **{blob / src.tar_size:.3f}×** the .tar.zst "
            f"({src.tar_size / MB:.2f} MB); index tail (sub-index + `__lookup__` + `__trie__` + "
            f"manifest, {src.files} files) {tail / MB:.2f} MB = "
            f"{tail / src.tar_size * 100:.1f}% of the .tar.zst.",
        ]
    if calib:
        lines += [
            "",
            "## Calibration: per-file frames vs one .tar.zst, synthetic vs real source",
            "",
            "Each source file compressed alone with the writer's codec settings (OpenZL zstd "
            "graph, level 3), summed, against `tar | zstd -3` of the same files "
            "(`bench/run.py --child calibrate ROOT...`). Real source = the `.py/.c/.h/...` files of"
            " this project's `.venv/lib/python3.11/site-packages`.",
            "",
            "| files from | files | MB | sum of per-file frames MB | .tar.zst MB | "
            "per-file × |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for root, c in calib.items():
            lines.append(f"| `{os.path.relpath(root, os.path.dirname(HERE))}` | {c['files']} | "
                         f"{c['bytes'] / MB:.1f} | {c['frames'] / MB:.2f} | "
                         f"{c['tar_zst'] / MB:.2f} | **{c['frames'] / c['tar_zst']:.3f}×** |")
    lines += ["", "## Commands", ""]
    for r in results:
        lines.append(f"- {r.name}:")
        for k, v in r.commands.items():
            lines.append(f"  - {k}: `{v}`")
    lines.append("")
    return "\n".join(lines)


def ok(flag: bool) -> str:
    return "✅" if flag else "❌"


def fmt_load(v: list[float]) -> str:
    return "/".join(f"{x:.2f}" for x in v)


def zstd_version() -> str:
    out = subprocess.run(["zstd", "--version"], capture_output=True, text=True).stdout
    return out.strip().strip("*").strip().split(",")[0]


def measure(args: argparse.Namespace, names: list[str], dirs: dict[str, str]
            ) -> tuple[list[CorpusResult], list[tuple[float, CorpusResult]], dict[str, Any]]:
    results = []
    for name in names:
        r = bench_corpus(name, dirs[name], args.work, args.workers, args.repeat)
        print(f"{name}: create {r.create.result['seconds']:.2f}s vs {r.tar_create_s:.2f}s, "
              f"size {r.create.result['size']} vs {r.tar_size}, extract "
              f"{r.extract.result['seconds']:.2f}s vs {r.tar_extract_s:.2f}s, "
              f"rss {r.create.tree_rss_mb:.0f}/{r.extract.main_rss_mb:.0f} MB", flush=True)
        results.append(r)
    mem_scale = args.mem_scale if args.mem_scale is not None else args.scale / 4
    mem = [(args.scale, r) for r in results if r.name in ("big_text", "mixed_repo")]
    mem_names = [n for n in ("big_text", "mixed_repo") if n in names]
    small = corpora.generate(args.corpora, scale=mem_scale, only=mem_names)
    for name in mem_names:
        r = bench_corpus(name, small[name], args.work, args.workers, args.repeat)
        mem.append((mem_scale, r))
    mem.sort(key=lambda x: (x[1].name, x[0]))
    calib: dict[str, Any] = {}
    if "src_tree" in dirs:
        site = os.path.join(os.path.dirname(HERE), ".venv", "lib",
                            f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
        roots = [dirs["src_tree"]] + ([site] if os.path.isdir(site) else [])
        calib = run_child(["calibrate", *roots]).result["calibration"]
    return results, mem, calib


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--mem-scale", type=float, default=None,
                    help="second, smaller scale for the memory comparison (default scale/4)")
    ap.add_argument("--only", nargs="*", choices=list(corpora.GENERATORS))
    ap.add_argument("--workers", default="auto")
    ap.add_argument("--repeat", type=int, default=1, help="best of N runs per measurement")
    ap.add_argument("--corpora", default=os.path.join(HERE, "out", "corpora"))
    ap.add_argument("--work", default=os.path.join(HERE, "out", "work"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-core.md"))
    args = ap.parse_args()
    started = time.perf_counter()
    load0 = list(os.getloadavg())
    names = args.only or list(corpora.GENERATORS)
    dirs = corpora.generate(args.corpora, scale=args.scale, only=names)
    os.makedirs(args.work, exist_ok=True)
    try:
        results, mem, calib = measure(args, names, dirs)
    finally:
        clean_up()
    mem_scale = args.mem_scale if args.mem_scale is not None else args.scale / 4
    text = report(results, mem, calib, args.scale, mem_scale, args.workers, args.repeat,
                  (load0, list(os.getloadavg())), time.perf_counter() - started, sys.argv[1:])
    if os.path.exists(args.out):  # keep the hand-written analysis across re-runs
        with open(args.out) as fh:
            old = fh.read()
        if ANALYSIS in old:
            text = text.rstrip("\n") + "\n\n" + old[old.index(ANALYSIS):]
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
