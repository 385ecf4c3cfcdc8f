"""Chunking and compression, in worker processes, with results handed back in input order.

OpenZL holds the GIL while it compresses, so threads would not help: batches of chunks go to a
process pool. Small files are batched (up to ``BATCH_BYTES`` or ``BATCH_JOBS``) so per-file IPC
cost does not dominate. A job is a plain tuple (cheap to pickle); a worker reads the file chunks
itself and returns, per batch, the BLAKE3 digests, each chunk's stored size and one buffer with
the stored blobs back to back — OpenZL frames, and raw chunks up to ``INLINE_RAW`` bytes. A
larger raw chunk is not sent back: the parent copies it straight from the source
(``copy_file_range``). So the parent writes a batch with a few ``pwrite`` calls.

Chunks of at least ``PROBE_MIN`` bytes are probed first: three ``PROBE_BYTES`` samples are
compressed, and when none of them shrinks by ``PROBE_GAIN`` the chunk is stored raw without
compressing it whole (random or already-compressed data costs a few percent of a full pass).
The probe depends only on the chunk's bytes, so output stays deterministic.

The pool starts once the parent has compressed ``POOL_THRESHOLD`` bytes itself: small writes
never start one, and neither do inputs that are all skip-listed or incompressible (hashing and
copying them runs at GB/s in process; starting workers costs ~0.5 s of CPU). It is started by a
helper thread (:class:`PoolStart`): whoever spawns the first worker waits for the fork server's
imports (~0.2 s), and the parent keeps compressing batches itself meanwhile.
At most ``2 × workers + 1`` batches are in flight. Until the first pooled batch comes back
(the workers are still starting, 0.3 s or more), a batch that finds the window full is
compressed by the parent itself instead of waiting. Memory is bounded by the window:
``2 × workers + 1`` batch results of at most ``BATCH_BYTES + block_size`` each, plus one chunk
being read per worker.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import sys
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple

import blake3

from . import codec

BATCH_BYTES = 1 << 20
BATCH_JOBS = 512
POOL_THRESHOLD = 8 << 20  # bytes compressed in process before a pool is worth starting
INLINE_RAW = 256 << 10  # raw chunks up to this size travel back in the batch buffer
PROBE_MIN = 1 << 20  # chunks at least this big are probed before a full compression
PROBE_BYTES = 64 << 10
PROBE_GAIN = 0.97  # a sample must shrink below this fraction to count as compressible

_M_TRIM_THRESHOLD = -1  # mallopt parameters (glibc malloc.h)
_M_MMAP_THRESHOLD = -3

#: ``stored`` value of a raw chunk that the worker did not send back (the parent copies it).
NOT_SENT = -1


class Job(NamedTuple):
    """One chunk: its bytes (``data``) or where to read them (``file``, ``offset``)."""

    data: bytes | None
    file: str | None
    offset: int
    length: int
    skip: bool  # stored raw without trying the codec


class BatchResult(NamedTuple):
    """Per job: 32-byte digest, compressed flag, stored size (or ``NOT_SENT``); one buffer.

    ``error`` is ``(file, problem)`` when a source file could not be read (the jobs after it
    were not run); the parent raises it as a :class:`ZnippyError` naming the file.
    """

    digests: bytes
    compressed: list[bool]
    stored: list[int]
    buffer: bytes
    encoded: int = 0  # input bytes that went through a full compression
    error: tuple[str, str] | None = None


def read_chunk(job: Job) -> bytes:
    if job.data is not None:
        return job.data
    assert job.file is not None
    if not job.length:
        return b""
    fd = os.open(job.file, os.O_RDONLY)
    try:
        data = os.pread(fd, job.length, job.offset)
    finally:
        os.close(fd)
    if len(data) != job.length:
        raise OSError(f"short read at {job.offset} (file changed while writing?)")
    return data


def incompressible(enc: codec.Encoder, chunk: bytes) -> bool:
    """True when samples at the start, middle and end of a big chunk do not shrink."""
    n = len(chunk)
    view = memoryview(chunk)
    for start in (0, (n - PROBE_BYTES) // 2, n - PROBE_BYTES):
        if len(enc.encode(view[start : start + PROBE_BYTES])) < PROBE_GAIN * PROBE_BYTES:
            return False
    return True


def run_batch(jobs: list[Job], level: int) -> BatchResult:
    """Read, hash and compress each job; frames (and small raw chunks) in one buffer."""
    enc = codec.encoder(level)
    digests = bytearray()
    compressed: list[bool] = []
    stored: list[int] = []
    parts: list[bytes] = []
    encoded = 0
    for job in jobs:
        try:
            chunk = read_chunk(job)
        except OSError as exc:
            problem = f"cannot read source file: {exc.strerror or exc}"
            return BatchResult(bytes(digests), compressed, stored, b"", encoded,
                               (str(job.file), problem))
        digests += blake3.blake3(chunk).digest()
        frame = None
        if not job.skip and chunk:
            if len(chunk) < PROBE_MIN or not incompressible(enc, chunk):
                candidate = enc.encode(chunk)
                encoded += len(chunk)
                if len(candidate) < len(chunk):
                    frame = candidate
        if frame is not None:
            parts.append(frame)
            compressed.append(True)
            stored.append(len(frame))
        elif len(chunk) <= INLINE_RAW or job.data is not None:
            parts.append(chunk)
            compressed.append(False)
            stored.append(len(chunk))
        else:
            compressed.append(False)
            stored.append(NOT_SENT)
    buffer = parts[0] if len(parts) == 1 else b"".join(parts)
    return BatchResult(bytes(digests), compressed, stored, buffer, encoded)


def process_pool(workers: int, *,
                 initializer: Callable[[], None] | None = None) -> ProcessPoolExecutor:
    """A process pool for OpenZL work (compress here, decode in extract/verify).

    ``forkserver``, never ``fork`` (the parent may run pyarrow/duckdb threads). The fork server
    imports this package once and workers fork from it ready to run; otherwise every worker
    pays the imports again (~0.3 s of CPU each). The preload has no effect when the fork
    server already runs, which is harmless.
    """
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", __name__])
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=initializer)


def warm_fork_server() -> None:
    """Start the fork server now, without waiting for it: its imports (~0.26 s of CPU) then
    overlap the directory walk and the first batches compressed in process, and when a pool
    is needed its workers fork at once. The walk calls it once it has seen more than
    ``POOL_THRESHOLD`` bytes (a smaller input never needs workers). Once per process (the
    server is reused); errors are left to the pool's start, which falls back to working in
    process."""
    if os.cpu_count() == 1 or getattr(multiprocessing.current_process(),
                                      "_inheriting", False):
        return  # one CPU: no pool; or this is a worker bootstrapping an unguarded script
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", __name__])
    try:
        from multiprocessing import forkserver

        forkserver.ensure_running()
    except Exception:  # noqa: BLE001
        pass


def _warm() -> None:
    """Run once in each new worker: allocator settings, and the codec loaded before the first
    batch arrives."""
    keep_freed_memory()
    codec.encoder(codec.DEFAULT_LEVEL)


def keep_freed_memory() -> None:
    """glibc only, worker processes only: serve the chunk-sized buffers (the chunk read, the
    codec's work and output buffers) from the heap and keep freed heap instead of returning it
    to the kernel, so each chunk reuses the previous chunk's pages. Otherwise every 10 MiB
    chunk faults in up to ~22 MiB of fresh zeroed pages (~5,700 page faults; measured 5-20 %
    of a worker's CPU). The caller's own process keeps its allocator settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc: nothing to tune
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)


def _ready() -> None:
    """A no-op task: submitting one spawns a worker (the pool spawns them on demand)."""


class PoolStart:
    """Starts a process pool in a helper thread and spawns its ``workers`` processes.

    Starting takes many short steps that each need the GIL back; against a busy main thread
    and the default 5 ms switch interval that took ~0.47 s instead of ~0.26 s (measured), so
    the interval is 0.5 ms until the workers are spawned. A start that is abandoned (the
    caller finished first) shuts its pool down itself; the caller does not wait for it, but
    the interpreter does at exit (not a daemon thread: a worker still being spawned while the
    interpreter exits prints a traceback from the fork server).
    """

    SWITCH_INTERVAL = 0.0005

    def __init__(self, start: Callable[[], ProcessPoolExecutor | None], workers: int) -> None:
        self._lock = threading.Lock()
        self._done = False
        self._abandoned = False
        self._pool: ProcessPoolExecutor | None = None
        self._old_interval = sys.getswitchinterval()
        if self._old_interval > self.SWITCH_INTERVAL:
            sys.setswitchinterval(self.SWITCH_INTERVAL)
        self._thread = threading.Thread(target=self._run, args=(start, workers),
                                        name="znippy-pool-start")
        self._thread.start()

    def _run(self, start: Callable[[], ProcessPoolExecutor | None], workers: int) -> None:
        pool = None
        try:
            pool = start()
            if pool is not None:
                for _ in range(workers):
                    pool.submit(_ready)
        except Exception:  # noqa: BLE001  (e.g. BrokenProcessPool: the caller runs in process)
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
            pool = None
        finally:
            if sys.getswitchinterval() == self.SWITCH_INTERVAL < self._old_interval:
                sys.setswitchinterval(self._old_interval)  # unless someone else changed it
        with self._lock:
            self._done = True
            if not self._abandoned:
                self._pool = pool
                return
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def result(self, *, wait: bool = False) -> tuple[bool, ProcessPoolExecutor | None]:
        """``(done, pool)``; the pool is None when it could not start."""
        if wait:
            self._thread.join()
        with self._lock:
            return self._done, self._pool

    def abandon(self) -> ProcessPoolExecutor | None:
        """Give up on the start: the pool if it is already up (the caller shuts it down),
        else None (the helper thread shuts it down when it gets there)."""
        with self._lock:
            if self._done:
                return self._pool
            self._abandoned = True
            return None


class Compressor:
    """Runs batches of jobs, in a lazily started process pool, handing results back in order.

    ``submit(batch, tag)`` returns the batches that are done (oldest first, never out of
    order); ``drain()`` returns the rest. Each result is ``(tag, BatchResult)``. If the pool
    breaks (workers cannot start, e.g. a script without an ``if __name__ == "__main__"``
    guard, or a worker dies), its unfinished batches and all later ones run in this process:
    the output is the same.
    """

    def __init__(self, *, level: int, workers: int | None) -> None:
        self.level = level
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._pool: ProcessPoolExecutor | None = None
        self._starting: PoolStart | None = None
        self._broken = False
        self._encoded = 0  # bytes compressed in process so far (the pool's start signal)
        self._window: deque[tuple[object, list[Job], Future[BatchResult] | BatchResult]] = (
            deque())
        self._pool_ready = False

    def _start_pool(self) -> ProcessPoolExecutor:
        return process_pool(self.workers, initializer=_warm)

    def submit(self, batch: list[Job], tag: object) -> list[tuple[object, BatchResult]]:
        if (self._pool is None and self._starting is None and not self._broken
                and self.workers > 1 and self._encoded >= POOL_THRESHOLD):
            self._starting = PoolStart(self._start_pool, self.workers)
        if self._starting is not None:
            done, pool = self._starting.result()
            if done:
                self._starting = None
                self._pool = pool
                self._broken = pool is None
        window = self._window
        if self._pool is None and not window:
            result = run_batch(batch, self.level)
            self._encoded += result.encoded
            return [(tag, result)]
        if self._pool is None:  # the pool broke; older batches still wait in the window
            window.append((tag, batch, run_batch(batch, self.level)))
        elif not self._pool_ready and len(window) >= 2 * self.workers:
            # The workers are still starting: compress this batch here rather than wait.
            window.append((tag, batch, run_batch(batch, self.level)))
        else:
            window.append((tag, batch, self._submit(batch)))
        done = []
        while window and (len(window) > 2 * self.workers + 1 or _done(window[0][2])):
            done.append(self._pop())
        return done

    def drain(self) -> list[tuple[object, BatchResult]]:
        done = []
        while self._window:
            done.append(self._pop())
        return done

    def _submit(self, batch: list[Job]) -> Future[BatchResult] | BatchResult:
        assert self._pool is not None
        try:
            return self._pool.submit(run_batch, batch, self.level)
        except BrokenProcessPool:
            self._give_up_pool()
            return run_batch(batch, self.level)

    def _pop(self) -> tuple[object, BatchResult]:
        tag, batch, res = self._window.popleft()
        if not isinstance(res, Future):
            return tag, res
        try:
            result = res.result()
        except (BrokenProcessPool, CancelledError):  # cancelled: by _give_up_pool
            self._give_up_pool()
            return tag, run_batch(batch, self.level)
        self._pool_ready = True
        return tag, result

    def _give_up_pool(self) -> None:
        """The pool is broken: finish here (later submits run in process too)."""
        self._broken = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def wait_for_pool(self) -> None:
        """Block until a pool being started is up (or failed to start)."""
        if self._starting is not None:
            _, pool = self._starting.result(wait=True)
            self._starting = None
            self._pool = pool
            self._broken = pool is None

    def close(self) -> None:
        self._window.clear()
        if self._starting is not None:
            self._pool = self._starting.abandon()
            self._starting = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _done(res: Future[BatchResult] | BatchResult) -> bool:
    return not isinstance(res, Future) or res.done()
