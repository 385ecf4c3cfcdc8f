"""Extract: every target checked before anything is written, streamed chunk by chunk, verified.

Order of work: every selected path is checked (:class:`~znippy_sql.format.paths.Targets`: no
``..``, absolute or drive paths, no symlink on the way or at the target) before anything is
written; then the files (and their directories) are written, by worker threads when there is
enough to do: decoding (:mod:`~znippy_sql.format.zlframe`), BLAKE3 of large chunks and every system
call release the GIL, so two threads also create files in parallel.
Work is cut into units of about ``UNIT_BYTES`` (at most ``UNIT_FILES`` files): runs of small
files, or runs of chunks of one large file, which its workers fill with positioned writes.
Workers get each file's lookup rows from the caller (no trie search per file; the rows are
checked again).

Memory is bounded by one chunk (the block size) per worker. A new file is created exclusively
(``O_EXCL``, never through a symlink) and removed again if a chunk fails its check; a file that
already exists is replaced through a hidden temporary sibling and a rename, so a failure leaves
the old file as it was. No symlink is ever created; modes are plain files (0o644 under umask).
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, NamedTuple, Union

import numpy as np

from ..errors import FormatError, NotFoundError, ZnippyError
from ..format.fsio import write_all
from ..format.paths import Targets, plain_paths

if TYPE_CHECKING:
    from .reader import Archive, Chunk

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OPEN = os.O_WRONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

UNIT_BYTES = 8 << 20        # work handed to a worker at a time
UNIT_FILES = 256            # and at most this many files (small units balance the workers)
#: Threads are used from this much work: the bytes written, each file counted as at least
#: PER_FILE_BYTES (creating a file costs about as much as writing that many bytes).
THREAD_BYTES = 4 << 20
PER_FILE_BYTES = 16 << 10
#: a blob at least this big has its mapped pages dropped from RSS once written out
#: (RangeSource.release): memory stays bounded by the block size, not the archive size
RELEASE_BYTES = 256 << 10


@dataclass
class ExtractReport:
    dest: str
    files: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


class _Part(NamedTuple):
    """A whole file (``chunks`` None: the worker finds them from lookup rows ``row`` to
    ``end``) or a run of chunks of a pre-created one."""

    path: str
    target: str       # where a run's bytes go (its pre-created file); "" for a whole file:
    #                   Targets.prefix + path (one string less per file to keep)
    chunks: tuple["Chunk", ...] | None
    row: int = -1     # the file's first lookup row (-1: ask the trie)
    end: int = -1     # the lookup row after its last chunk
    nbytes: int = 0   # how much it writes (for scheduling only)


Outcome = Union[int, str]  # bytes written, or the problem


def extract(archive: "Archive", dest: str, *, repo: str | None = None,
            pkg_type: int | str | None = None, glob: str | None = None,
            paths: list[str] | None = None, workers: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> ExtractReport:
    started = time.perf_counter()
    files = _files(archive)
    everything = paths is None and repo is None and pkg_type is None and glob is None
    if everything and _strictly_increasing(files.paths):  # a sound lookup: paths in order
        selected, found = files.paths, list(range(len(files.paths)))
    else:
        if paths is not None:
            selected = list(dict.fromkeys(paths))
        elif everything:  # what select() would list, each path once
            selected = sorted(set(files.paths))
        else:
            selected = archive.select(repo=repo, pkg_type=pkg_type, glob=glob)
        where = dict(zip(files.paths, range(len(files.paths))))  # (twice in a damaged lookup:
        found = [where.get(p, -1) for p in selected]  # its last place), or -1: not there
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError("workers must be at least 1")
    sizes = files.sizes
    work = sum(max(sizes[i], PER_FILE_BYTES) if i >= 0 else PER_FILE_BYTES for i in found)
    pool: ThreadPoolExecutor | None = None
    if n > 1 and work >= THREAD_BYTES:
        archive.trie, archive._cols  # noqa: B018  (load them before the threads share them)
        pool = ThreadPoolExecutor(n, thread_name_prefix="znippy-extract")
    try:
        return _extract(archive, dest, selected, found, files, pool, n, progress, started)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _extract(archive: "Archive", dest: str, selected: list[str], found: list[int],
             files: "_Files", pool: ThreadPoolExecutor | None, n_workers: int,
             progress: Callable[[int, int], None] | None, started: float) -> ExtractReport:
    targets = Targets(dest, archive=archive.path)
    report = ExtractReport(dest=dest)
    plain = files.plain
    for path, i in zip(selected, found):  # every path checked before any write
        targets.target(path, checked=i >= 0 and plain[i])
        if i < 0:
            report.failed[path] = "not in the archive"
    os.makedirs(dest, exist_ok=True)
    # Big files are cut into runs of chunks only when there are too few of them to keep every
    # worker busy: threads writing into the same file wait for its inode lock (perf: ~15 % of
    # the samples of extracting `random` spinning in rwsem_spin_on_owner).
    sizes = files.sizes
    big = sum(1 for i in found if i >= 0 and sizes[i] > UNIT_BYTES)
    parts, split = _parts(archive, targets, selected, found, files,
                          split=pool is not None and big < n_workers, report=report)
    runs: dict[str, list[Outcome]] = {}  # results so far of the files written in runs
    done_files = done_bytes = 0
    try:
        for unit_result in _run(archive, parts, pool, n_workers, targets.prefix):  # in order
            for path, result in unit_result:
                if isinstance(result, int):
                    done_bytes += result
                if path in split:
                    got = runs.setdefault(path, [])
                    got.append(result)
                    if len(got) < split[path][2]:
                        continue
                    result = _finish_split(split[path], runs.pop(path))
                if isinstance(result, str):
                    report.failed[path] = result
                else:
                    report.files += 1
                    report.bytes_written += result
                    report.written.append(path)
                done_files += 1
                if progress is not None:
                    progress(done_files, done_bytes)
    except BaseException:
        for path in split.keys() - set(report.written) - report.failed.keys():
            _remove(split[path][0])
        raise
    report.seconds = time.perf_counter() - started
    return report


def _finish_split(split: tuple[str, str, int], results: list[Outcome]) -> Outcome:
    """A file written in runs: renamed into place when every run wrote its part."""
    written, target, _ = split
    problems = [r for r in results if isinstance(r, str)]
    if problems:
        _remove(written)
        return problems[0]
    if written != target:
        try:
            os.replace(written, target)
        except OSError as exc:
            _remove(written)
            return f"cannot write: {exc.strerror or exc}"
    return sum(results)  # type: ignore[arg-type]


class _Files(NamedTuple):
    """The lookup's files by place: ``paths`` in lookup order; ``sizes`` counts only chunks
    whose sizes can be true (a corrupt index must not pre-create huge files); ``firsts[i]`` is
    the first lookup row of file ``i`` and its rows end where the next file's begin (workers
    need no trie search; the rows are checked again where they are used)."""

    paths: list[str]
    sizes: list[int]
    firsts: list[int]
    n: int  # lookup rows
    plain: list[bool]  # the path passes check_relative_path's fast path (paths.plain_paths)


def _files(archive: "Archive") -> _Files:
    from .reader import MAX_CHUNK_BYTES

    c = archive._cols
    if c.n == 0 or len(c.first_rows) == 0:
        return _Files([], [], [], c.n, [])
    tail = archive.tail_offset
    inside = (c.blob_size <= tail) & (c.blob_offset <= tail - np.minimum(c.blob_size, tail))
    raw = c.uncompressed_size == c.blob_size
    packed = c.compressed & (c.uncompressed_size <= MAX_CHUNK_BYTES)
    usable = np.where(inside & (raw | packed), c.uncompressed_size, 0)
    paths = archive.first_paths()
    offsets = c.path_offsets
    plain = plain_paths(np.frombuffer(c.path_data, dtype=np.uint8),
                        offsets[c.first_rows], offsets[c.first_rows + 1])
    return _Files(paths, np.add.reduceat(usable, c.first_rows).tolist(),
                  c.first_rows.tolist(), c.n, plain.tolist())


def _strictly_increasing(paths: list[str]) -> bool:
    """Each path after the one before (code point order = UTF-8 byte order): sorted, no path
    twice."""
    return all(map(operator.lt, paths, islice(paths, 1, None)))


def _parts(archive: "Archive", targets: Targets, selected: list[str], found: list[int],
           files: _Files, *, split: bool, report: ExtractReport
           ) -> tuple[list[list[_Part]], dict[str, tuple[str, str, int]]]:
    """Units of work. A large file (when ``split``) is pre-created here and cut into runs of
    chunks; ``split`` maps its path → (the file its runs write, its target, how many runs)."""
    units: list[list[_Part]] = []
    unit: list[_Part] = []
    size = 0
    pre: dict[str, tuple[str, str, int]] = {}
    sizes, firsts, last = files.sizes, files.firsts, len(files.firsts) - 1
    new_part = tuple.__new__  # _Part(...) goes through a Python-level __new__: ~1 µs a file
    for path, i in zip(selected, found):
        if i < 0:
            continue
        nbytes = sizes[i]
        if split and nbytes > UNIT_BYTES:
            try:
                info = archive.find(path)
                if info is None:
                    raise FormatError(f"{path!r} is in the lookup but not in the trie")
                if len(info.chunks) > 1:
                    targets.make_parent(path)
                    target = targets.prefix + path
                    written = _precreate(target)
                    runs = _runs(info.chunks)
                    pre[path] = (written, target, len(runs))
                    units.extend([[_Part(path, written, run,
                                         nbytes=sum(c.uncompressed_size for c in run))]
                                  for run in runs])
                    continue
            except ZnippyError as exc:
                report.failed[path] = exc.problem
                continue
            except OSError as exc:
                report.failed[path] = f"cannot write: {exc.strerror or exc}"
                continue
        end = firsts[i + 1] if i < last else files.n
        unit.append(new_part(_Part, (path, "", None, firsts[i], end, nbytes)))
        size += nbytes + 4096
        if size >= UNIT_BYTES or len(unit) >= UNIT_FILES:
            units.append(unit)
            unit, size = [], 0
    if unit:
        units.append(unit)
    return units, pre


def _runs(chunks: Sequence["Chunk"]) -> list[tuple["Chunk", ...]]:
    runs: list[tuple["Chunk", ...]] = []
    run: list["Chunk"] = []
    size = 0
    for c in chunks:
        run.append(c)
        size += c.uncompressed_size
        if size >= UNIT_BYTES:
            runs.append(tuple(run))
            run, size = [], 0
    if run:
        runs.append(tuple(run))
    return runs


def _precreate(target: str) -> str:
    """Create the file a split extraction fills (or its temporary sibling if it exists)."""
    fd, written = _open_new(target)
    os.close(fd)
    return written


def _run(archive: "Archive", units: list[list[_Part]], pool: ThreadPoolExecutor | None,
         n_workers: int, prefix: str):  # type: ignore[no-untyped-def]
    """Results of each unit, in unit order; at most ``2 × workers`` units in flight."""
    if pool is None or len(units) < 2:
        for unit in units:
            yield _write_unit(archive, unit, prefix)
        return
    window: deque[Future[list[tuple[str, Outcome]]]] = deque()
    for unit in units:
        window.append(pool.submit(_write_unit, archive, unit, prefix))
        while window and (len(window) > 2 * n_workers or window[0].done()):
            yield window.popleft().result()
    while window:
        yield window.popleft().result()


def _write_unit(archive: "Archive", unit: list[_Part], prefix: str
                ) -> list[tuple[str, Outcome]]:
    out: list[tuple[str, Outcome]] = []
    made: set[str] = set()  # directories this unit has made sure of
    # the one-chunk files' bytes, checked and decoded together (one GIL-free call)
    ready = archive.one_chunk_views(
        [(p.path, p.row if p.chunks is None and p.end == p.row + 1 else -1) for p in unit],
        verify=True)
    for part, data in zip(unit, ready):
        try:
            if data is not None:  # a one-chunk file, its bytes checked already
                n = _write_small(prefix + part.path, made, data)
            elif part.chunks is None:
                n = _write_file(archive, part, prefix + part.path, made)
            else:
                n = _write_run(archive, part)
            out.append((part.path, n))
        except ZnippyError as exc:
            out.append((part.path, exc.problem))
        except OSError as exc:  # e.g. "a" and "a/b" both in the archive
            out.append((part.path, f"cannot write: {exc.strerror or exc}"))
    rows = [p.row for p, d in zip(unit, ready) if d is not None]
    if rows:  # the small files' blobs: one release for the span they cover
        c = archive._cols
        start = int(c.blob_offset[rows].min())
        archive.source.release(start, int((c.blob_offset[rows] + c.blob_size[rows]).max()) - start)
    return out


def _write_small(target: str, made: set[str], data: memoryview) -> int:
    """:func:`_write_new` of one buffer, with the usual case (a new file in a directory that
    is there) in a few lines: it is most files of a source tree."""
    try:
        fd = os.open(target, _CREATE, 0o644)
    except OSError:  # no parent yet, or a file there already: the general way
        return _write_new(target, made, (data,))
    try:
        try:
            n = os.write(fd, data)
            if n < len(data):
                write_all(fd, data[n:])
        finally:
            os.close(fd)
    except BaseException:
        _remove(target)
        raise
    return len(data)


def _open_new(target: str, made: set[str] | None = None) -> tuple[int, str]:
    """A descriptor of a new file for ``target``, and its name: ``target`` itself, or a hidden
    temporary sibling when a file is there already (renamed over it once written, so a failure
    leaves the old file as it was). With ``made``, a missing parent directory is made, once per
    set (every path was checked: no symlink on the way)."""
    try:
        return os.open(target, _CREATE, 0o644), target
    except FileNotFoundError:
        parent = target.rpartition(os.sep)[0]
        if made is None or parent in made:
            raise
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
        return _open_new(target, made)
    except FileExistsError:
        tmp = _tmp_name(target)
        _remove(tmp)
        return os.open(tmp, _CREATE, 0o644), tmp


def _write_new(target: str, made: set[str], pieces: Iterable[bytes | memoryview]) -> int:
    """Write ``target`` from ``pieces`` in order (see :func:`_open_new`); its size. On any
    failure nothing is left under either name."""
    fd, written = _open_new(target, made)
    try:
        n = 0
        try:
            for data in pieces:
                write_all(fd, data)
                n += len(data)
        finally:
            os.close(fd)
        if written != target:
            os.replace(written, target)
    except BaseException:
        _remove(written)
        raise
    return n


def _file_chunks(archive: "Archive", part: _Part) -> tuple["Chunk", ...]:
    """The chunks of a whole file: from its lookup rows (or the trie), checked by the reader."""
    if part.row < 0:
        info = archive.find(part.path)
        if info is None:
            raise NotFoundError(f"{part.path!r} is not in the archive", path=archive.path)
        return info.chunks
    return archive.file_at(part.path, part.row).chunks


def _write_file(archive: "Archive", part: _Part, target: str, made: set[str]) -> int:
    """A whole file, chunk by chunk (its chunks are checked before anything is created)."""
    chunks = _file_chunks(archive, part)
    return _write_new(target, made, (data for _, data in _decoded(archive, part.path, chunks)))


def _decoded(archive: "Archive", path: str, chunks: Iterable["Chunk"]
             ) -> Iterator[tuple["Chunk", bytes | memoryview]]:
    """Each chunk and its checked bytes; a big blob's mapped pages are dropped once the caller
    has written it (when it asks for the next)."""
    for chunk in chunks:
        yield chunk, archive.chunk_view(path, chunk, verify=True)
        if chunk.blob_size >= RELEASE_BYTES:
            archive.source.release(chunk.blob_offset, chunk.blob_size)


def _write_run(archive: "Archive", part: _Part) -> int:
    """A run of chunks of a pre-created file, each at its offset."""
    fd = os.open(part.target, _OPEN)
    try:
        n = 0
        for chunk, data in _decoded(archive, part.path, part.chunks or ()):
            write_all(fd, data, chunk.fdata_offset)
            n += len(data)
        return n
    finally:
        os.close(fd)


def _tmp_name(target: str) -> str:
    return os.path.join(os.path.dirname(target),
                        f".{os.path.basename(target)}.znippy-part-{os.getpid()}")


def _remove(path: str) -> None:
    if os.path.lexists(path):
        os.unlink(path)

