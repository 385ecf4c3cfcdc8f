"""Compact: rewrite an archive without its dead bytes, blobs copied verbatim.

Appends that replace files leave the old blobs behind (FORMAT §6). ``compact_archive`` copies
every live blob (once, however many rows share it), in production (= blob) order, back to back
into a staging sibling (:mod:`~znippy_sql.write.staging`: those a killed compact left are
removed first), sets each row's ``blob_offset`` to its new place, and writes the tail
with the one :func:`~znippy_sql.write.tail.write_tail`: the result is byte-identical to a
one-shot write of the live files in that order with the same options (nothing is decoded,
compressed or hashed) — unless a shared blob's first owner was replaced: the blob keeps its
place, where a one-shot write would make it at its first live owner. The sections are carried over as they are: signatures stay valid, since a file digest
covers paths and checksums, not offsets. fsync, rename over the archive, fsync the directory:
the name holds the old or the new archive at every instant. The append lock is held
throughout (an appender is refused, not waited for).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..format.fsio import copy_range
from ..format.rollback import lock, recover_locked
from ..format.schema import GroupKey
from .append import _load
from .options import INDEX_KEY, WriteOptions, resolve
from .tail import write_tail
from .staging import Staging


@dataclass(frozen=True)
class CompactReport:
    path: str
    files: int
    rows: int
    #: blob bytes copied (the live ones)
    blob_bytes: int
    #: bytes of the old blob region no live row pointed at, now gone
    dead_bytes_dropped: int
    old_size: int
    new_size: int
    #: False when there was nothing to drop: the archive was left as it was
    rewritten: bool
    seconds: float


def _copy(src: int, dst: int, src_off: int, dst_off: int, length: int) -> None:
    try:
        copy_range(src, dst, length, src_off, dst_off)
    except EOFError as exc:
        raise OSError(f"archive {exc}") from None


def _placement(groups: dict[GroupKey, pa.Table]) -> tuple[list[GroupKey], np.ndarray,
                                                          np.ndarray, np.ndarray]:
    """Every row in production order: (group keys, order, old offsets, sizes) over the rows of
    the groups concatenated in key order. Blob order; an empty blob before the non-empty one
    that shares its offset; then group and row order."""
    keys = sorted(groups)
    offsets = np.concatenate([groups[k].column("blob_offset").to_numpy() for k in keys]) \
        if keys else np.zeros(0, np.uint64)
    sizes = np.concatenate([groups[k].column("blob_size").to_numpy() for k in keys]) \
        if keys else np.zeros(0, np.uint64)
    group = np.repeat(np.arange(len(keys)), [groups[k].num_rows for k in keys])
    row = np.concatenate([np.arange(groups[k].num_rows) for k in keys]) if keys \
        else np.zeros(0, np.int64)
    order = np.lexsort((row, group, sizes > 0, offsets))
    return keys, order, offsets, sizes


def compact_archive(path: str | os.PathLike[str], *, options: WriteOptions | None = None,
                    fsync: bool | None = None) -> CompactReport:
    """Rewrite ``path`` without dead bytes (see the module doc); a no-op when it has none.

    The archive keeps its own level, block size, packing and index compression (nothing is
    re-encoded): of ``options`` (a :class:`~znippy_sql.WriteOptions`) only ``fsync`` applies;
    ``fsync=`` overrides it."""
    started = time.perf_counter()
    options, _ = resolve(options, what="compact_archive", fsync=fsync)
    fsync = options.fsync
    path = os.fspath(path)
    from ..remote import is_url, local_path

    if is_url(path):  # compacting rewrites the file in place: a local file only
        local = local_path(path)
        if local is None:
            from ..errors import RemoteError

            raise RemoteError("compact works on local archives only (it rewrites the file in "
                              "place): download the archive, compact, upload it", path=path)
        path = local
    try:
        fh = open(path, "r+b")
    except FileNotFoundError:
        from ..errors import PathNotFoundError

        raise PathNotFoundError("archive not found", path=path) from None
    with fh, Staging(path) as staged:
        lock(fh.fileno(), path)
        recover_locked(path, fh.fileno())
        old = _load(path, signatures=True)
        keys, order, offsets, sizes = _placement(old.groups)
        new_offsets, blob_end = _new_offsets(offsets, sizes)
        rows = len(order)
        files = sum(int((old.groups[k].column("chunk_seq").to_numpy() == 0).sum()) for k in keys)
        if blob_end == old.blob_end and np.array_equal(new_offsets, offsets):
            return CompactReport(path, files, rows, blob_end, 0, old.size, old.size, False,
                                 time.perf_counter() - started)
        with open(staged.name, "w+b") as out:
            _copy_blobs(fh.fileno(), out.fileno(), order, offsets, sizes, new_offsets)
            groups: dict[GroupKey, pa.Table] = {}
            start = 0
            for key in keys:
                table = old.groups[key]
                n = table.num_rows
                col = pa.array(new_offsets[start:start + n], pa.uint64())
                i = table.schema.get_field_index("blob_offset")
                groups[key] = table.set_column(i, table.schema.field(i), col)
                start += n
            info = write_tail(out, blob_end, groups, sections=old.sections,
                              schema_metadata=old.metadata or None, fsync=fsync,
                              index_compression=INDEX_KEY in (old.metadata or {}))
        staged.commit(fsync=fsync)
    return CompactReport(path, files, rows, blob_end, old.blob_end - blob_end, old.size,
                         info.file_size, True, time.perf_counter() - started)


def _new_offsets(offsets: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's new ``blob_offset`` and the new blob end: the distinct blobs (a blob shared
    by several rows, docs/dedup.md, is one blob) back to back in their old order; an empty
    chunk where the next blob now starts."""
    used = sizes > 0
    starts, first = np.unique(offsets[used], return_index=True)
    lengths = sizes[used][first]
    if not np.array_equal(lengths[np.searchsorted(starts, offsets[used])], sizes[used]):
        # two sizes at one offset (an archive no writer of ours makes): a copy per row
        order = np.lexsort((sizes == 0, offsets))
        out = np.zeros(len(offsets), dtype=np.uint64)
        ends = np.cumsum(sizes[order], dtype=np.uint64)
        out[order] = ends - sizes[order]
        return out, int(ends[-1]) if len(ends) else 0
    placed = np.concatenate([[0], np.cumsum(lengths, dtype=np.uint64)]).astype(np.uint64)
    at = np.searchsorted(starts, offsets)  # a used row finds its own blob's start
    return placed[at], int(placed[-1])


def _copy_blobs(src: int, dst: int, order: np.ndarray, offsets: np.ndarray, sizes: np.ndarray,
                new_offsets: np.ndarray) -> None:
    """Each distinct blob to its new place, runs that are contiguous in both copied at once."""
    run_src = run_dst = run_len = 0
    done = (-1, -1)  # the blob copied last: rows sharing a blob come one after another
    for i in order.tolist():
        size = int(sizes[i])
        s, d = int(offsets[i]), int(new_offsets[i])
        if not size or (s, d) == done:
            continue
        done = (s, d)
        if run_len and s == run_src + run_len and d == run_dst + run_len:
            run_len += size
            continue
        if run_len:
            _copy(src, dst, run_src, run_dst, run_len)
        run_src, run_dst, run_len = s, d, size
    if run_len:
        _copy(src, dst, run_src, run_dst, run_len)
