"""What the new-user fixes cost: POSIX facts on ``create``, an unchanged re-append, an
unchanged ``store add``, and ``compact``, each against a peer measured in the same run.

Usage::

    .venv/bin/python bench/bench_users.py [--scale 0.25] [--repeat 3] [--out bench/results-users.md]

Corpus: ``src_tree`` of ``bench/corpora.py`` (20,000 source-like files of 1-40 KB at scale 1).
Each side runs in this process, as the command calls it (``write_archive``, ``append_archive``,
``Store.add``, ``compact_archive``: an interpreter start would add the same ~0.4 s to both),
alternating the two of a pair, ``--repeat`` times; the table gives medians of wall and CPU
seconds (the machine is shared: CPU seconds move less) and the ratios peer / ours.

1. ``create`` with POSIX facts (the CLI's default) against ``--no-posix``.
2. ``append`` of the tree the archive holds (every file unchanged: hashed, not written)
   against ``create`` of it (writing it in the first place).
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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import corpora  # noqa: E402

CLI = os.path.join(os.path.dirname(sys.executable), "znippy-sql")


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

        from znippy_sql.store import open_store
        from znippy_sql.write.append import append_archive
        from znippy_sql.write.writer import write_archive

        t_posix: list[tuple[float, float]] = []
        t_plain: list[tuple[float, float]] = []
        for _ in range(args.repeat):  # what `create` and `create --no-posix` call
            for out, posix, times in ((arc, True, t_posix), (plain, False, t_plain)):
                if os.path.exists(out):
                    os.unlink(out)
                times.append(in_process(lambda: write_archive(out, src, posix=posix,
                                                              meta=True)))
        size_note = (f"archive {os.path.getsize(arc):,} vs {os.path.getsize(plain):,} bytes "
                     f"(+{os.path.getsize(arc) - os.path.getsize(plain):,})")
        rows.append(("create, POSIX facts (default)", "create --no-posix", med(t_posix),
                     med(t_plain), size_note))

        before = os.path.getsize(arc)
        again = os.path.join(work, "again.znippy")
        t_append: list[tuple[float, float]] = []
        t_create: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            t_append.append(in_process(lambda: append_archive(arc, src, posix=True)))
            if os.path.exists(again):
                os.unlink(again)
            t_create.append(in_process(lambda: write_archive(again, src, posix=True,
                                                             meta=True)))
        assert os.path.getsize(arc) == before, "an unchanged re-append changed the archive"
        rows.append(("append of the unchanged tree", "create of the tree", med(t_append),
                     med(t_create), f"{files:,} files unchanged, archive untouched"))

        first: list[tuple[float, float]] = []
        second: list[tuple[float, float]] = []
        sidecar, wh = os.path.join(work, "blobs.znippy"), os.path.join(work, "wh")
        for i in range(args.repeat):
            shutil.rmtree(wh, ignore_errors=True)
            if os.path.exists(sidecar):
                os.unlink(sidecar)
            with open_store(sidecar, wh, f"b{i}") as store:
                first.append(in_process(lambda: store.add(src)))
                end = os.path.getsize(sidecar)
                second.append(in_process(lambda: store.add(src)))
            assert os.path.getsize(sidecar) == end
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
        rows.append(("compact (every other file replaced: a third dead)", "copy + fsync of the archive",
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
        "in this process of what the command calls (no interpreter start on either side), "
        "the two of a pair alternating; CPU = this process's user + system seconds, worker "
        "threads included. Ratio = peer / ours (> 1: ours is faster).",
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
