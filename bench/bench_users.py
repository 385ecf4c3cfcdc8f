"""What the new-user fixes cost: POSIX facts on ``create``, an unchanged re-append, an
unchanged ``store add``, and ``compact``, each against a peer measured in the same run.

Usage::

    .venv/bin/python bench/bench_users.py [--scale 0.25] [--repeat 3] [--out bench/results-users.md]

Corpus: ``src_tree`` of ``bench/corpora.py`` (20,000 source-like files of 1-40 KB at scale 1).
Every command runs as ``znippy-sql`` in a fresh process (what a user types), alternating the
two variants of a pair, ``--repeat`` times; the table gives medians of wall and CPU seconds
(the machine is shared: CPU seconds move less) and the ratios peer / ours.

1. ``create SRC`` (POSIX facts, the default) against ``create SRC --no-posix``.
2. ``append ARCHIVE SRC`` of the tree the archive holds (every file unchanged: hashed, not
   written) against ``create SRC`` (writing it in the first place).
3. ``store add`` of the same tree a second time against the first add.
4. ``compact_archive`` of an archive whose every other file was replaced by an append (about
   a third of its bytes dead), in this process, against a copy + fsync of the same file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import resource

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402

CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")


CPU: dict[int, float] = {}  # id(times list) → CPU seconds of its runs, summed


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pair(repeat: int, a: list[str], b: list[str], before: object = None
         ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Alternate ``a`` and ``b``; ``before()`` (if given) resets the scene before each run."""
    ta: list[tuple[float, float]] = []
    tb: list[tuple[float, float]] = []
    for _ in range(repeat):
        for argv, out in ((a, ta), (b, tb)):
            if callable(before):
                before(argv)
            out.append(timed(argv))
    return ta, tb


def med(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpora", default=os.path.join(HERE, "out", "corpora"))
    ap.add_argument("--out", default=os.path.join(HERE, "results-users.md"))
    args = ap.parse_args()
    src = corpora.generate(args.corpora, scale=args.scale, only=["src_tree"])["src_tree"]
    files = sum(len(f) for _, _, f in os.walk(src))
    work = tempfile.mkdtemp(prefix="bench-users-")
    rows: list[tuple[str, str, tuple[float, float], tuple[float, float], str]] = []
    try:
        arc = os.path.join(work, "a.znippy")
        plain = os.path.join(work, "plain.znippy")

        def fresh(argv: list[str]) -> None:
            for p in (arc, plain):
                if os.path.exists(p) and p in argv:
                    os.unlink(p)

        t_posix, t_plain = pair(args.repeat, [CLI, "create", src, "-o", arc],
                                [CLI, "create", src, "-o", plain, "--no-posix"], fresh)
        size_note = (f"archive {os.path.getsize(arc):,} vs {os.path.getsize(plain):,} bytes "
                     f"(+{os.path.getsize(arc) - os.path.getsize(plain):,})")
        rows.append(("create, POSIX facts (default)", "create --no-posix", med(t_posix),
                     med(t_plain), size_note))

        before = os.path.getsize(arc)
        again = os.path.join(work, "again.znippy")
        t_append, t_create = pair(args.repeat, [CLI, "append", arc, src],
                                  [CLI, "create", src, "-o", again],
                                  lambda argv: os.path.exists(again) and again in argv
                                  and os.unlink(again))
        assert os.path.getsize(arc) == before, "an unchanged re-append changed the archive"
        rows.append(("append of the unchanged tree", "create of the tree", med(t_append),
                     med(t_create), f"{files:,} files unchanged, archive untouched"))

        store = [
            "--sidecar", os.path.join(work, "blobs.znippy"), "--warehouse",
            os.path.join(work, "wh"), "--namespace", "b"]
        first: list[tuple[float, float]] = []
        second: list[tuple[float, float]] = []
        for i in range(args.repeat):
            for p in ("blobs.znippy", "wh"):
                path = os.path.join(work, p)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.unlink(path)
            first.append(timed([CLI, "store", "add", *store, src]))
            end = os.path.getsize(os.path.join(work, "blobs.znippy"))
            second.append(timed([CLI, "store", "add", *store, src]))
            assert os.path.getsize(os.path.join(work, "blobs.znippy")) == end
        rows.append(("store add of the same tree again", "the first store add", med(second),
                     med(first), "sidecar did not grow"))

        half = os.path.join(work, "half")
        shutil.rmtree(half, ignore_errors=True)
        shutil.copytree(src, half)
        for n, (root, _dirs, names) in enumerate(os.walk(half)):
            for i, name in enumerate(sorted(names)):
                if (n + i) % 2 == 0:
                    with open(os.path.join(root, name), "ab") as fh:
                        fh.write(b"# changed\n")
        base = os.path.join(work, "base.znippy")
        subprocess.run([CLI, "create", src, "-o", base, "--no-posix"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([CLI, "append", base, half, "--no-posix"], check=True,
                       stdout=subprocess.DEVNULL)
        dead = os.path.join(work, "dead.znippy")
        copy = os.path.join(work, "copy.znippy")
        from znippy_sql.write.compact import compact_archive

        t_compact: list[tuple[float, float]] = []
        t_cp: list[tuple[float, float]] = []
        for _ in range(args.repeat):  # in this process: no interpreter start on either side
            shutil.copyfile(base, dead)
            t_compact.append(in_process(lambda: compact_archive(dead)))
            t_cp.append(in_process(lambda: copy_and_fsync(base, copy)))
        rows.append(("compact, in process (about half dead)", "copy + fsync of the archive",
                     med(t_compact), med(t_cp),
                     f"{os.path.getsize(base):,} -> {os.path.getsize(dead):,} bytes"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    probes = _probes()
    lines = [
        "# The new-user fixes: what they cost",
        "",
        f"Run on {stamp}: {os.cpu_count()} cores ({platform.machine()}, shared with other "
        f"work), Python {platform.python_version()}{probes}. "
        "Command: `.venv/bin/python bench/bench_users.py "
        f"--scale {args.scale:g} --repeat {args.repeat}`. Corpus: `src_tree` at scale "
        f"{args.scale:g} ({files:,} files). Each figure is the median of {args.repeat} runs "
        "of `znippy-sql` in a fresh process (compact: in this process), the two of a pair "
        "alternating; CPU = user + system seconds of that run. Ratio = peer / ours "
        "(> 1: ours is faster).",
        "",
        "| what | peer | wall s | peer wall s | ratio (wall) | CPU s | peer CPU s | "
        "ratio (CPU) | note |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for what, peer, (t, c), (tp, cp), note in rows:
        lines.append(f"| {what} | {peer} | {t:.2f} | {tp:.2f} | {tp / t:.2f} | {c:.2f} | "
                     f"{cp:.2f} | {cp / c if c else 0:.2f} | {note} |")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as fh:
        fh.write(text)
    print(text)


def in_process(fn: object) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started, time.process_time() - cpu


def copy_and_fsync(src: str, dst: str) -> None:
    shutil.copyfile(src, dst)
    fd = os.open(dst, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _probes() -> str:
    """The disk and CPU probes of ``bench/run.py`` (BENCHMARKS.md names machines by them)."""
    try:
        import run as bench_run  # bench/run.py

        work = tempfile.mkdtemp(prefix="bench-users-probe-")
        try:
            disk = bench_run.probe_creation(work, "probe")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return f", disk probe {disk:.0f} µs, CPU probe {bench_run.probe_cpu():.0f} ms"
    except Exception:  # noqa: BLE001  (an older run.py without probes)
        return ""


if __name__ == "__main__":
    main()
