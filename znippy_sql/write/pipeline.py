"""Chunking and compression, in threads, with results handed back in input order.

The frames are written by ``zstandard`` (:mod:`~znippy_sql.format.zlframe`: the same bytes as the
OpenZL binding, which holds the GIL), which releases the GIL while it compresses; so do reads
and BLAKE3 of large inputs. Batches of chunks therefore go to ``workers`` threads of this
process: no pickling, no pipes, no worker start-up. Files are batched (up to
``BATCH_BYTES`` or ``BATCH_JOBS``) so per-file scheduling cost does not dominate. A batch of
small chunks is read and hashed by the caller (:func:`read_small`) and compressed by a thread
in one GIL-free call (:func:`compress_small`); a batch with a big chunk is read, hashed,
probed and compressed by the thread (:func:`run_batch`). Either way the result holds the
BLAKE3 digests, each chunk's stored size and one buffer with the stored blobs back to back,
so the caller writes a batch with one ``pwrite``.

Each job says what the codec does (``Job.mode``): ``COMPRESS`` chunks of at least
``PROBE_MIN`` bytes are probed first: three ``PROBE_BYTES`` samples are compressed, and when
none of them shrinks by ``PROBE_GAIN`` the chunk is stored raw without compressing it whole
(random or already-compressed data costs a few percent of a full pass); ``PROBE`` chunks
(skip-listed names, stored zip entries) go through :func:`codec.probe` and are compressed
only when it says so; ``RAW`` chunks are stored as they are. Either probe depends only on
the chunk's bytes, so output stays deterministic. With dedup, a chunk whose digest and length
the index already knows (``known``) is hashed but not compressed: its row will point at the
old blob.

The window of batches in flight is bounded in input bytes (``WINDOW_BLOCKS × workers ×
block_size``, plus the one batch that crosses it) and in batches (``WINDOW_BATCHES ×
workers``); memory is bounded by it: a batch's result is never larger than its input.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable
from typing import NamedTuple

from .. import corelib
from ..format import b3 as blake3

from ..format import codec, zlframe
from .source import unreadable_problem
from ..format.schema import DEFAULT_BLOCK_SIZE

#: ``Job.mode`` of a packed blob (``write/pack.py``): compressed like ``codec.COMPRESS``, never
#: skipped as known (its members were looked up one by one when they joined it)
PACK = 3
#: ``Job.mode`` of a directory pack (``write/pack.py``): a :data:`PACK` compressed with a long
#: window and long-distance matching (``codec.LONG_WINDOW_LOG``)
DIR_PACK = 4
PACKS = (PACK, DIR_PACK)
_NO_DIGEST = bytes(32)
BATCH_BYTES = 1 << 20
BATCH_JOBS = 512
SMALL_CHUNK = 256 << 10  # a batch of chunks no bigger is read and hashed by the caller
PROBE_MIN = 1 << 20  # chunks at least this big are probed before a full compression
PROBE_BYTES = 64 << 10
PROBE_GAIN = 0.97  # a sample must shrink below this fraction to count as compressible
#: chunks at least this big are looked up in the dedup index before compression (a smaller
#: one costs less to compress than to look up twice; the sink decides either way)
KNOWN_MIN = 2 << 10
#: In flight at once (submitted, running, or done and waiting for the ones before them): at
#: most ``WINDOW_BLOCKS × workers × block_size`` bytes of input and ``WINDOW_BATCHES ×
#: workers`` batches. A byte budget rather than a batch count lets small batches keep a
#: worker busy while the other compresses a big chunk that results wait behind.
WINDOW_BLOCKS = 2
WINDOW_BATCHES = 8


_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


class Job(NamedTuple):
    """One chunk: its bytes (``data``) or where to read them (``file``, ``offset``), and
    what the codec does with it (``codec.COMPRESS``, ``codec.RAW`` or ``codec.PROBE``)."""

    data: bytes | memoryview | None
    file: str | None
    offset: int
    length: int
    mode: int


#: ``known(digest, length)``: the chunk has a blob already (dedup), so it is not compressed
Known = Callable[[bytes, int], bool]


class BatchResult(NamedTuple):
    """Per job: 32-byte digest, compressed flag, stored size; one buffer with the blobs.

    A chunk found ``known`` (dedup) is not compressed and has no bytes in the buffer
    (stored size 0): the caller points its row at the existing blob.

    ``error`` is ``(file, problem)`` when a source file could not be read (the jobs after it
    were not run); the caller raises it as a :class:`ZnippyError` naming the file.
    """

    digests: bytes
    compressed: list[bool]
    stored: list[int]
    buffer: bytes | memoryview
    encoded: int = 0  # input bytes that went through a full compression
    error: tuple[str, str] | None = None


def read_chunk(job: Job) -> bytes | memoryview:
    if job.data is not None:
        return job.data
    assert job.file is not None
    if not job.length:
        return b""
    fd = os.open(job.file, _READ)
    try:
        data = os.pread(fd, job.length, job.offset)
    finally:
        os.close(fd)
    if len(data) != job.length:
        raise OSError(f"short read at {job.offset} (file changed while writing?)")
    return data


def read_small(jobs: list[Job]) -> tuple[list[bytes | memoryview], bytes] | BatchResult:
    """The chunks of a batch of small jobs and their BLAKE3 digests, read in the caller's
    thread (a worker thread doing this per file would wait for the GIL after every read);
    or the :class:`BatchResult` that reports a file that could not be read."""
    chunks = []
    digests = bytearray()
    for job in jobs:
        try:
            chunk = job.data if job.data is not None else read_chunk(job)
        except OSError as exc:
            return BatchResult(bytes(digests), [], [], b"", 0,
                               (str(job.file), unreadable_problem(exc)))
        chunks.append(chunk)
        digests += blake3.blake3(chunk).digest()
    return chunks, bytes(digests)


def compress_small(jobs: list[Job], chunks: list[bytes | memoryview], digests: bytes,
                   level: int, known: list[bool] | None = None) -> BatchResult:
    """Compress a batch read by :func:`read_small`, in one call without the GIL (probes
    first, in one call too). ``known[i]``: chunk ``i`` has a blob already (dedup)."""
    todo = [i for i, (job, chunk) in enumerate(zip(jobs, chunks))
            if chunk and job.mode != codec.RAW and not (known and known[i])]
    probed = [i for i in todo if jobs[i].mode == codec.PROBE]
    if probed:
        verdicts = dict(zip(probed, codec.probe_many([chunks[i] for i in probed])))
        todo = [i for i in todo if verdicts.get(i, True)]
    packs = [i for i in todo if jobs[i].mode in PACKS]
    if packs:  # packed blobs: their own zstd parameters (codec.PACK_HASH_LOG)
        todo = [i for i in todo if jobs[i].mode not in PACKS]
    framed = dict(zip(todo, encode(level, [chunks[i] for i in todo], codec.COMPRESS)))
    for kind in (PACK, DIR_PACK) if packs else ():
        some = [i for i in packs if jobs[i].mode == kind]
        framed.update(zip(some, encode(level, [chunks[i] for i in some], kind)))
    if packs:
        todo = sorted([*todo, *packs])
    compressed: list[bool] = []
    stored: list[int] = []
    parts: list[object] = []
    for i, chunk in enumerate(chunks):
        frame = framed.get(i)
        if known and known[i]:
            stored.append(0)
        elif frame is None:
            parts.append(chunk)
            stored.append(len(chunk))
        else:
            parts.extend(frame)
            stored.append(sum(len(p) for p in frame))
        compressed.append(frame is not None)
    encoded = sum(len(chunks[i]) for i in todo)
    buffer = b"".join(parts)  # type: ignore[arg-type]
    return BatchResult(digests, compressed, stored, buffer, encoded)


def encode(level: int, chunks: list[zlframe.Bytes], mode: int
           ) -> list[tuple[bytes, ...] | None]:
    """Each chunk's frame (as buffers to write back to back), or None where it is not smaller
    than the chunk: in one GIL-free native call (``corelib.frames``: the zstd shape of
    ``format/zlframe.py``, byte for byte) where that shape is OpenZL's own at this level
    (``zlframe.fast_path_ok``), else through the binding. ``mode`` ``PACK``/``DIR_PACK``: a
    packed blob's parameters."""
    if not chunks:
        return []
    enc = codec.encoder(level)
    if not zlframe.fast_path_ok(level, enc.encode) or any(len(c) > zlframe.MAX_FAST
                                                          for c in chunks):
        if mode in PACKS:
            return enc.pack_frames_if_smaller(chunks, long=mode == DIR_PACK)
        return enc.frames_if_smaller(chunks)
    if mode == PACK:
        got = corelib.frames(chunks, level, hash_log=codec.PACK_HASH_LOG,
                             chain_log=codec.PACK_CHAIN_LOG)
    elif mode == DIR_PACK:
        got = corelib.frames(chunks, level, window_log=codec.LONG_WINDOW_LOG)
    else:
        got = corelib.frames(chunks, level)
    return [None if f is None else (f,) for f in got]


def _frame(level: int, chunk: bytes | memoryview, mode: int = codec.COMPRESS) -> bytes | None:
    got = encode(level, [chunk], mode)[0]
    return None if got is None else b"".join(got)


def incompressible(level: int, chunk: bytes | memoryview) -> bool:
    """True when samples at the start, middle and end of a big chunk do not shrink."""
    n = len(chunk)
    view = memoryview(chunk)
    samples: list[zlframe.Bytes] = [view[start : start + PROBE_BYTES]
               for start in (0, (n - PROBE_BYTES) // 2, n - PROBE_BYTES)]
    for frame in encode(level, samples, codec.COMPRESS):
        if frame is not None and sum(map(len, frame)) < PROBE_GAIN * PROBE_BYTES:
            return False
    return True


def run_batch(jobs: list[Job], level: int, known: Known | None = None) -> BatchResult:
    """Read, hash and compress each job; frames (and small raw chunks) in one buffer.
    A chunk ``known`` (dedup) is hashed only."""
    digests = bytearray()
    compressed: list[bool] = []
    stored: list[int] = []
    parts: list[bytes | memoryview] = []
    encoded = 0
    for job in jobs:
        try:
            chunk = read_chunk(job)
        except OSError as exc:
            problem = unreadable_problem(exc)
            return BatchResult(bytes(digests), compressed, stored, b"", encoded,
                               (str(job.file), problem))
        # a pack's members were hashed when they joined it: its own digest is never used
        digest = _NO_DIGEST if job.mode in PACKS else blake3.blake3(chunk).digest()
        digests += digest
        if known is not None and chunk and job.mode not in PACKS and known(digest, len(chunk)):
            compressed.append(False)
            stored.append(0)
            continue
        frame = None
        if job.mode == codec.PROBE and chunk:
            if codec.probe(chunk):
                frame = _frame(level, chunk)
                encoded += len(chunk)
        elif job.mode in PACKS and chunk:  # no probe: its members are files to compress
            frame = _frame(level, chunk, job.mode)
            encoded += len(chunk)
        elif job.mode == codec.COMPRESS and chunk:
            if len(chunk) < PROBE_MIN or not incompressible(level, chunk):
                frame = _frame(level, chunk)
                encoded += len(chunk)
        blob = chunk if frame is None else frame
        parts.append(blob)
        compressed.append(frame is not None)
        stored.append(len(blob))
    buffer = parts[0] if len(parts) == 1 else b"".join(parts)
    return BatchResult(bytes(digests), compressed, stored, buffer, encoded)


class Compressor:
    """Runs batches of jobs in ``workers`` threads, handing results back in order.

    ``submit(batch, tag)`` returns the batches that are done (oldest first, never out of
    order); ``drain()`` returns the rest. Each result is ``(tag, BatchResult)``. With one
    worker everything runs in the caller's thread.
    """

    def __init__(self, *, level: int, workers: int | None,
                 block_size: int = DEFAULT_BLOCK_SIZE,
                 known: Known | None = None) -> None:
        self.level = level
        self.known = known
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
        self._pool: ThreadPoolExecutor | None = None
        self._window: deque[tuple[object, Future[BatchResult], int]] = deque()
        self._budget = WINDOW_BLOCKS * self.workers * max(block_size, BATCH_BYTES)
        self._in_flight = 0  # input bytes of the batches in the window

    def submit(self, batch: list[Job], tag: object) -> list[tuple[object, BatchResult]]:
        if self.workers == 1:
            return [(tag, run_batch(batch, self.level, self.known))]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="znippy-compress")
        window = self._window
        nbytes = sum(job.length for job in batch)
        future: Future[BatchResult]
        if all(job.length <= SMALL_CHUNK for job in batch):
            prepared = read_small(batch)
            if isinstance(prepared, BatchResult):  # a file could not be read
                future = Future()
                future.set_result(prepared)
            else:
                chunks, digests = prepared
                known = None
                if self.known is not None:
                    is_known = self.known  # a hint only: worth it where compression costs
                    known = [len(chunk) >= KNOWN_MIN and job.mode not in PACKS
                             and is_known(digests[k : k + 32], len(chunk))
                             for k, chunk, job in zip(range(0, len(digests), 32), chunks,
                                                      batch)]
                future = self._pool.submit(compress_small, batch, chunks, digests, self.level,
                                           known)
        else:  # a big chunk: the worker reads, hashes and probes it (GIL released)
            future = self._pool.submit(run_batch, batch, self.level, self.known)
        window.append((tag, future, nbytes))
        self._in_flight += nbytes
        done = []
        while window and (len(window) > WINDOW_BATCHES * self.workers
                          or self._in_flight > self._budget or window[0][1].done()):
            done.append(self._pop())
        return done

    def drain(self) -> list[tuple[object, BatchResult]]:
        done = []
        while self._window:
            done.append(self._pop())
        return done

    def _pop(self) -> tuple[object, BatchResult]:
        tag, future, nbytes = self._window.popleft()
        self._in_flight -= nbytes
        return tag, future.result()

    def close(self) -> None:
        self._window.clear()
        self._in_flight = 0
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
