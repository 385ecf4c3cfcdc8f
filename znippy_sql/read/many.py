"""Many files' contents at once: ``Archive.read_many(paths)`` and ``Archive.iter_files(rows)``.

Plan, then read:

1. Every path is found through the trie first (an unknown path raises
   :class:`~znippy_sql.errors.NotFoundError` before anything is read or yielded).
2. The files are put in **blob order** (by the offset of their first blob; files that share
   it keep the order they were given), unless ``ordered=True`` keeps the given order.
3. They are cut into units of consecutive files: up to ``unit_bytes`` of original bytes or 256
   files; a bigger file is a unit of its own.
4. Worker threads decode the units (:func:`unit_views`, which ``Archive.extract`` uses too): a
   remote archive first fetches each unit's blob ranges in one go (neighbouring ranges
   coalesced into few ranged GETs, released after the unit); one-chunk files go through the
   vectorised path (frames decoded in one GIL-free call, a packed blob once), others chunk by
   chunk, every chunk checked against its BLAKE3 (unless ``verify=False`` or the archive was
   opened without checksums).
5. ``(path, bytes)`` pairs are yielded unit by unit in that order. At most ``workers + 1``
   units are decoded ahead of the consumer, so memory stays bounded by about
   ``(workers + 2) * unit_bytes`` (a file bigger than that is held whole: use
   ``Archive.open`` to stream one).

A path given twice is yielded twice. Stopping early (``close()`` of the generator, or a break)
cancels the units not started and waits for the running ones.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from .fileviews import file_views

if TYPE_CHECKING:
    from .columns import Chunk, FileInfo
    from .core import ArchiveCore as Archive

#: original bytes per unit of work
UNIT_BYTES = 8 << 20
UNIT_FILES = 256


def _first_blob(info: "FileInfo") -> int:
    return info.chunks[0].blob_offset if info.chunks else -1


def plan_units(infos: Sequence["FileInfo"], *, ordered: bool = False,
               unit_bytes: int = UNIT_BYTES) -> list[list[int]]:
    """The units of work: lists of indexes into ``infos``, in the order they are yielded."""
    order: Iterable[int] = range(len(infos)) if ordered else sorted(
        range(len(infos)), key=lambda i: (_first_blob(infos[i]), i))
    units: list[list[int]] = []
    unit: list[int] = []
    size = 0
    for i in order:
        n = infos[i].size
        if unit and (size + n > unit_bytes or len(unit) >= UNIT_FILES):
            units.append(unit)
            unit, size = [], 0
        unit.append(i)
        size += n
    if unit:
        units.append(unit)
    return units


@contextmanager
def unit_views(archive: "Archive", items: Sequence[tuple[str, int, int]],
               chunks: Iterable["Chunk"] = (), *, verify: bool | None = None
               ) -> Iterator[list[memoryview | None]]:
    """One unit of a bulk read (``read_many`` and ``Archive.extract`` alike).

    ``items``: each file as ``(path, first lookup row, the row after its last)`` (rows -1:
    unknown); ``chunks``: other chunks the unit reads (runs of a big file). A remote archive
    fetches every blob of the unit at once (neighbouring ranges coalesced, in parallel). Yields
    each one-chunk file's checked bytes, decoded together (one GIL-free call; a packed blob
    decoded once for all its files); None where the caller reads the file chunk by chunk
    (``Archive.chunk_views``/``file_at``, which also word any problem). On exit the unit's
    fetched ranges, and the mapped pages of its one-chunk files' blobs, are released: the
    yielded views must not be kept."""
    src = archive.source
    c = archive.lookup_columns
    rows = [r for _, row, end in items if 0 <= row < end <= c.n for r in range(row, end)]
    offsets = c.blob_offset[rows].tolist() if rows else []
    sizes = c.blob_size[rows].tolist() if rows else []
    for ch in chunks:
        offsets.append(ch.blob_offset)
        sizes.append(ch.blob_size)
    span = None
    if src.fetches and offsets:
        src.prefetch(offsets, sizes)
        span = (min(offsets), max(o + n for o, n in zip(offsets, sizes)) - min(offsets))
    try:
        ready = archive.one_chunk_views(
            [(path, row if end == row + 1 else -1) for path, row, end in items], verify=verify)
        yield ready
        small = [row for (_, row, _), data in zip(items, ready) if data is not None]
        if small:  # the small files' blobs: one release for the span they cover
            start = int(c.blob_offset[small].min())
            src.release(start, int((c.blob_offset[small] + c.blob_size[small]).max()) - start)
    finally:
        if span is not None:  # a remote unit's fetched blobs go with it
            src.release(*span)


def _decode(archive: "Archive", infos: Sequence["FileInfo"], verify: bool | None
            ) -> list[bytes]:
    """The contents of one unit's files, checked."""
    items = [(i.relative_path, i.lookup_row, i.lookup_row + 1) if len(i.chunks) == 1
             else (i.relative_path, -1, -1) for i in infos]
    others = [c for i in infos if len(i.chunks) != 1 for c in i.chunks]
    check = archive.verify_checksums if verify is None else verify
    with unit_views(archive, items, others, verify=verify) as fast:
        out = []
        for info, view in zip(infos, fast):
            if view is not None:
                out.append(bytes(view))
                continue
            parts: Sequence[bytes | memoryview] | None = file_views(
                archive, info.relative_path, info.lookup_row,
                info.lookup_row + len(info.chunks), verify=check) if len(info.chunks) > 1 \
                else None
            if parts is None:
                parts = archive.chunk_views(info.relative_path, info.chunks, verify=verify)
            out.append(b"".join(parts))
        return out


def read_many(archive: "Archive", paths: Iterable[str], *, verify: bool | None = None,
              workers: int | None = None, ordered: bool = False,
              unit_bytes: int = UNIT_BYTES) -> Iterator[tuple[str, bytes]]:
    """``(path, bytes)`` of every path, read as the module docstring says."""
    infos = []
    for path in paths:
        info = archive.find(path)
        if info is None:
            raise NotFoundError(f"no file {path!r} in the archive", path=archive.path)
        infos.append(info)
    units = plan_units(infos, ordered=ordered, unit_bytes=unit_bytes)
    return _run(archive, infos, units, verify, workers)


def _run(archive: "Archive", infos: list["FileInfo"], units: list[list[int]],
         verify: bool | None, workers: int | None) -> Iterator[tuple[str, bytes]]:
    if not units:
        return
    nworkers = max(1, min(workers or os.cpu_count() or 1, len(units)))
    pool = ThreadPoolExecutor(nworkers, thread_name_prefix="znippy-read")
    pending: deque[tuple[list[int], Future[list[bytes]]]] = deque()
    todo = iter(units)
    try:
        for unit in todo:
            pending.append((unit, pool.submit(_decode, archive, [infos[i] for i in unit],
                                              verify)))
            if len(pending) > nworkers:
                break
        while pending:
            unit, future = pending.popleft()
            nxt = next(todo, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(_decode, archive, [infos[i] for i in nxt],
                                                 verify)))
            for i, data in zip(unit, future.result()):
                yield infos[i].relative_path, data
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def rows_paths(rows: Any) -> list[str]:
    """The ``relative_path`` column of an Arrow table, record batch or reader (the rows of a
    ``files`` view), or the ``relative_path`` of each mapping of an iterable."""
    if hasattr(rows, "read_all"):  # a RecordBatchReader
        rows = rows.read_all()
    if hasattr(rows, "column") and hasattr(rows, "schema"):
        return [p for p in rows.column("relative_path").to_pylist()]
    return [row["relative_path"] for row in rows]
