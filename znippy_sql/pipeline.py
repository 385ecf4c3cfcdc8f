"""Chunking and compression, in worker processes, with results handed back in input order.

OpenZL holds the GIL while it compresses, so threads would not help: batches of chunks go to a
process pool. Small files are batched (up to ``BATCH_BYTES``) so per-file IPC cost does not
dominate. A worker reads file chunks itself and returns only the checksum and, when the frame
is smaller than the chunk, the frame; raw chunks are copied by the parent straight from the
source. Memory is bounded by ``2 × workers`` batches in flight. Small inputs never start a pool.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

import blake3

from . import codec

BATCH_BYTES = 1 << 20
BATCH_JOBS = 256
POOL_THRESHOLD = 8 << 20  # bytes seen before a pool is worth starting


@dataclass(frozen=True)
class Job:
    """One chunk: its bytes (``data``) or where to read them (``file``, ``offset``)."""

    data: bytes | None
    file: str | None
    offset: int
    length: int
    skip: bool  # stored raw without trying the codec


def read_chunk(job: Job) -> bytes:
    if job.data is not None:
        return job.data
    assert job.file is not None
    with open(job.file, "rb") as fh:
        data = os.pread(fh.fileno(), job.length, job.offset) if job.length else b""
    if len(data) != job.length:
        raise OSError(f"{job.file}: short read at {job.offset} (file changed while writing?)")
    return data


def run_batch(jobs: list[Job], level: int) -> list[tuple[bytes, bytes | None]]:
    """For each job: (BLAKE3 of the chunk, the OpenZL frame or None to store raw)."""
    enc = codec.encoder(level)
    out: list[tuple[bytes, bytes | None]] = []
    for job in jobs:
        chunk = read_chunk(job)
        digest = blake3.blake3(chunk).digest()
        frame = None
        if not job.skip and chunk:
            candidate = enc.encode(chunk)
            if len(candidate) < len(chunk):
                frame = candidate
        out.append((digest, frame))
    return out


class Compressor:
    """Runs batches of jobs, in a lazily started process pool, handing results back in order.

    ``submit(batch, tag)`` returns the batches that are done (oldest first, never out of
    order); ``drain()`` returns the rest. Each result is ``(tag, results)``.
    """

    def __init__(self, *, level: int, workers: int | None) -> None:
        self.level = level
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self._seen = 0
        self._window: deque[tuple[object, Future]] = deque()

    def submit(self, batch: list[Job], tag: object) -> list[tuple[object, list]]:
        self._seen += sum(j.length for j in batch)
        if self._pool is None and self.workers > 1 and self._seen >= POOL_THRESHOLD:
            ctx = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx)
        if self._pool is None:
            return [(tag, run_batch(batch, self.level))]
        self._window.append((tag, self._pool.submit(run_batch, batch, self.level)))
        done = []
        while len(self._window) > 2 * self.workers or (self._window and self._window[0][1].done()):
            t, fut = self._window.popleft()
            done.append((t, fut.result()))
        return done

    def drain(self) -> list[tuple[object, list]]:
        done = []
        while self._window:
            t, fut = self._window.popleft()
            done.append((t, fut.result()))
        return done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def batched(jobs: Iterable[Job]) -> Iterator[list[Job]]:
    batch: list[Job] = []
    size = 0
    for job in jobs:
        batch.append(job)
        size += job.length
        if size >= BATCH_BYTES or len(batch) >= BATCH_JOBS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
