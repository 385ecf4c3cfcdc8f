"""What reading a source file costs the writer's caller thread, alone and beside a busy thread.

Usage::

    .venv/bin/python bench/bench_callerio.py [--corpus bench/out/corpora/src_tree@1]
                                             [--contended-files 200]

Over every file of the corpus (as ``walk_directory`` lists them for the writer; warm page
cache), per file: ``open`` + ``close`` by absolute path and relative to a directory descriptor
(``dir_fd=``); ``open`` + ``pread`` of the exact size + ``close`` (what
``pipeline.read_small`` does); the same with BLAKE3 of the bytes.
Then the read loop over the first ``--contended-files`` files while another thread runs pure
Python: each system call releases the GIL, and getting it back can wait for the busy thread's
switch interval (5 ms), which is why the writer keeps Python work off its worker threads. The
contended loop is bounded in files, so it ends in seconds, not minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import blake3

from znippy_sql.write.source import walk_directory

HERE = os.path.dirname(os.path.abspath(__file__))
_R = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_D = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def corpus_files(root: str) -> list[tuple[str, int]]:
    """Each file and its size, in the order and by the names the writer reads them."""
    return [(str(e.file), e.size()) for e in walk_directory(root)]


def open_close(files: list[tuple[str, int]]) -> None:
    for path, _ in files:
        os.close(os.open(path, _R))


def open_close_dir_fd(files: list[tuple[str, int]]) -> None:
    current, dfd = None, -1
    for path, _ in files:
        parent, _, name = path.rpartition("/")
        if parent != current:
            if dfd >= 0:
                os.close(dfd)
            dfd, current = os.open(parent, _D), parent
        os.close(os.open(name, _R, dir_fd=dfd))
    if dfd >= 0:
        os.close(dfd)


def _read(path: str, size: int) -> bytes:
    fd = os.open(path, _R)
    try:
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def read_exact(files: list[tuple[str, int]]) -> None:
    for path, size in files:
        _read(path, size)


def read_and_hash(files: list[tuple[str, int]]) -> None:
    for path, size in files:
        blake3.blake3(_read(path, size)).digest()


def timed(fn, files: list[tuple[str, int]]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    wall, cpu = time.perf_counter(), time.thread_time()
    fn(files)
    return time.perf_counter() - wall, time.thread_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=os.path.join(HERE, "out", "corpora", "src_tree@1"))
    ap.add_argument("--contended-files", type=int, default=200)
    args = ap.parse_args()
    if not os.path.isdir(args.corpus):
        sys.exit(f"{args.corpus}: no such corpus (bench/run.py generates it)")
    files = corpus_files(args.corpus)
    read_exact(files)  # warm the page cache and the dentries
    print(f"{len(files)} files under {args.corpus}; switch interval "
          f"{sys.getswitchinterval() * 1e3:.1f} ms\n")
    print("| loop | files | wall s | µs a file | thread CPU s |\n|---|---:|---:|---:|---:|")
    for fn in (open_close, open_close_dir_fd, read_exact, read_and_hash) * 2:
        wall, cpu = timed(fn, files)
        print(f"| {fn.__name__} | {len(files)} | {wall:.3f} | {wall / len(files) * 1e6:.1f} "
              f"| {cpu:.3f} |")
    some = files[: args.contended_files]
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i

    busy = threading.Thread(target=spin, daemon=True)
    busy.start()
    try:
        wall, cpu = timed(read_exact, some)
    finally:
        stop.set()
        busy.join()
    print(f"| read_exact beside a thread running Python | {len(some)} | {wall:.3f} "
          f"| {wall / len(some) * 1e6:.1f} | {cpu:.3f} |")


if __name__ == "__main__":
    main()
