"""Blobs back to back from an offset, and the index rows that point at them, per group.

With a :class:`~znippy_sql.write.dedup.DedupIndex`, a chunk whose content has a blob already
gets a row pointing at that blob and writes nothing (FORMAT §3, shared blobs).
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import ZnippyError
from ..format import build
from ..format.validate import module_type_problem
from ..modules import Module
from .dedup import DedupIndex
from .pipeline import BatchResult, Job
from ..format.fsio import write_all
from ..format.schema import BASE_FIELDS, INNER_FIELD, PKG_TYPE_FIELD, GroupKey


class GroupRows:
    """One group's rows, in production (= canonical) order, kept by column: a path list,
    packed integers, one byte per compressed flag and the BLAKE3 digests back to back (~85
    bytes a row besides the path, against ~170 as a tuple of Python objects; a million files
    are many, and the tail needs every row). Module columns, when the group has them, are a
    dict (or None) per row."""

    __slots__ = ("key", "module", "has_extra", "paths", "seqs", "offsets", "compressed",
                 "sizes", "blob_offsets", "blob_sizes", "digests", "extra", "order", "inner")

    def __init__(self, key: GroupKey, module: Module | None) -> None:
        self.key = key
        self.module = module
        #: whether rows carry module columns (asked once per row: computed once)
        self.has_extra = module is not None and bool(module.fields)
        if module is not None:
            _check_types(module)
        self.paths: list[str] = []
        self.seqs = array("I")
        self.offsets = array("Q")
        self.compressed = bytearray()
        self.sizes = array("Q")
        self.blob_offsets = array("Q")
        self.blob_sizes = array("Q")
        self.digests = bytearray()
        #: each row's ``inner_offset`` (FORMAT §3, packed blobs; 0 outside a pack)
        self.inner = array("Q")
        self.extra: list[dict[str, Any] | None] = []
        #: each row's place in production order over all groups (kept when the sink is
        #: asked to: the store's ordinals)
        self.order = array("Q")

    def schema(self, inner: bool = False) -> pa.Schema:
        fields = list(BASE_FIELDS)
        if inner:
            fields.append(INNER_FIELD)
        if self.has_extra:
            fields += [PKG_TYPE_FIELD, *self.module.fields]  # type: ignore[union-attr]
        return pa.schema(fields)

    def table(self, inner: bool = False) -> pa.Table:
        """The rows; ``inner``: with the ``inner_offset`` column (an archive with packs)."""
        n = len(self.paths)
        cols: list[pa.Array] = [
            build.column(self.paths, pa.utf8()),
            _ints(self.seqs, pa.uint32(), n),
            _ints(self.offsets, pa.uint64(), n),
            _flags(self.compressed, n),
            _ints(self.sizes, pa.uint64(), n),
            _ints(self.blob_offsets, pa.uint64(), n),
            _ints(self.blob_sizes, pa.uint64(), n),
            pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n,
                                                  [None, pa.py_buffer(bytes(self.digests))]),
        ]
        if inner:
            cols.append(_ints(self.inner, pa.uint64(), n))
        if self.has_extra:
            cols.append(pa.array([None if e is None else self.key.pkg_type for e in self.extra],
                                 pa.int8()))
            for f in self.module.fields:  # type: ignore[union-attr]
                values = [None if e is None else e.get(f.name) for e in self.extra]
                try:
                    cols.append(pa.array(values, f.type))
                except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
                    raise ZnippyError(
                        f"module {self.module.name!r}: column {f.name!r} ({f.type}): "  # type: ignore[union-attr]
                        f"a value it gave does not fit: {exc}") from None
        return pa.Table.from_arrays(cols, schema=self.schema(inner))


def _check_types(module: Module) -> None:
    """Refuse a module column of a type no read path can serve (``validate``)."""
    for f in module.fields:
        problem = module_type_problem(f.type)
        if problem is not None:
            raise ZnippyError(f"module {module.name!r}: column {f.name!r} ({f.type}): {problem}")


def _ints(values: array, kind: pa.DataType, n: int) -> pa.Array:
    """An Arrow integer array with a copy of ``values``' bytes (the array may grow later;
    Arrow buffers are little-endian)."""
    if sys.byteorder != "little":  # pragma: no cover
        values = array(values.typecode, values)
        values.byteswap()
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(values.tobytes())])


def _flags(flags: bytearray, n: int) -> pa.Array:
    """An Arrow boolean array from one 0/1 byte per row (Arrow packs them LSB first)."""
    bits = np.packbits(np.frombuffer(flags, dtype=np.uint8), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits.tobytes())])


class ChunkTag(NamedTuple):
    """Where a chunk's row goes: its group, path, chunk number and module columns."""

    rows: GroupRows
    path: str
    chunk_seq: int
    extra: dict[str, Any] | None


class BlobSink:
    """Writes blobs at ``cursor`` of an open file descriptor and records their rows.

    ``dedup``: the index that shares identical chunks (None: every chunk its own blob).
    ``track_order``: record each row's production place (``GroupRows.order``).
    """

    def __init__(self, fd: int, start: int, *, dedup: DedupIndex | None = None,
                 track_order: bool = False) -> None:
        self.fd = fd
        self.cursor = start
        self.dedup = dedup
        self.track_order = track_order
        self.groups: dict[GroupKey, GroupRows] = {}
        self.compressed_chunks = 0
        self.raw_chunks = 0
        self.rows = 0
        #: packed blobs written (frames holding several files) and the files in them
        self.packs = 0
        self.packed_files = 0

    def group(self, key: GroupKey, module: Module | None) -> GroupRows:
        rows = self.groups.get(key)
        if rows is None:
            rows = self.groups[key] = GroupRows(key, module)
        return rows

    def _pwrite(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        write_all(self.fd, view, self.cursor)
        self.cursor += view.nbytes

    def put_batch(self, tags: Sequence[ChunkTag], jobs: Sequence[Job],
                  result: BatchResult) -> None:
        """Write a batch's blobs in order (``result.buffer`` holds them back to back; with
        dedup, only those of new content) and record their rows."""
        inners: list[int] | None = None
        if self.dedup is None:
            stored: list[int] = result.stored
            flags: list[bool] = result.compressed
            starts = list(accumulate(stored[:-1], initial=self.cursor))
            pieces = [memoryview(result.buffer)]
        else:
            starts, stored, flags, pieces, _, inners = self.dedup.place(
                [job.length for job in jobs], result.digests, result.compressed, result.stored,
                result.buffer, self.cursor)
            if not any(inners):
                inners = None
        placed = (starts, stored, flags, result.digests, inners)
        rows = tags[0].rows if tags else None
        if rows is not None and all(tag.rows is rows for tag in tags):
            self._extend(rows, tags, jobs, placed, 0, len(tags))  # the usual case
        else:  # a batch that spans groups: runs of rows of the same group
            i = 0
            while i < len(tags):
                rows, j = tags[i].rows, i + 1
                while j < len(tags) and tags[j].rows is rows:
                    j += 1
                self._extend(rows, tags, jobs, placed, i, j)
                i = j
        self.rows += len(tags)
        packed = sum(flags)
        self.compressed_chunks += packed
        self.raw_chunks += len(flags) - packed
        for piece in pieces:
            self._pwrite(piece)

    def put_pack(self, pack: Any, result: BatchResult) -> None:
        """Write a pack (``write/pack.py`` ``Pack``: one job of its members' bytes back to
        back) and record its members' rows: slices of the one frame, or, when the frame was
        not smaller, each member its own raw blob; references point where their content
        is."""
        cursor = self.cursor
        stored = result.stored[0] if result.stored else 0
        framed = bool(result.compressed and result.compressed[0])
        lengths, refs, slots, inner = pack.lengths, pack.refs, pack.slots, pack.inner
        n = len(lengths)
        own = len([1 for r, k in zip(refs, lengths) if r < 0 and k])
        if framed and own > 1:
            self.packs += 1
            self.packed_files += own
        rows: GroupRows = pack.rows
        dedup = self.dedup
        offs: list[int] = []
        sizes: list[int] = []
        flags: list[bool] = []
        inners: list[int] = []
        for i in range(n):
            if refs[i] >= 0:
                assert dedup is not None
                off, size, flag, at = dedup.entry(refs[i])
                dedup.hits += 1
            elif framed:
                off, size, flag, at = cursor, stored, True, inner[i]
            else:
                off, size, flag, at = cursor + inner[i], lengths[i], False, 0
            if slots[i] >= 0 and dedup is not None:
                dedup.settle(slots[i], off, size, flag, at)
            offs.append(off)
            sizes.append(size)
            flags.append(flag)
            inners.append(at)
        rows.paths.extend(pack.paths)
        rows.seqs.frombytes(bytes(4 * n))
        rows.offsets.frombytes(bytes(8 * n))
        rows.compressed.extend(flags)
        rows.sizes.extend(lengths)
        rows.blob_offsets.extend(offs)
        rows.blob_sizes.extend(sizes)
        rows.digests += pack.digests
        rows.inner.extend(inners)
        if rows.has_extra:
            rows.extra.extend(pack.extras)
        if self.track_order:
            rows.order.extend(range(self.rows, self.rows + n))
        packed = sum(flags)
        self.compressed_chunks += packed
        self.raw_chunks += n - packed
        self.rows += n
        if stored:
            self._pwrite(result.buffer)

    def tables(self, inner: bool | None = None) -> dict[GroupKey, pa.Table]:
        """Each group's rows; ``inner_offset`` when any row is a slice of a pack (FORMAT §3),
        or as ``inner`` says."""
        if inner is None:
            inner = any(g.inner and max(g.inner) > 0 for g in self.groups.values())
        return {k: g.table(inner) for k, g in self.groups.items()}

    def orders(self) -> dict[GroupKey, np.ndarray]:
        """Each group's rows' places in production order (``track_order``)."""
        return {k: np.frombuffer(g.order, dtype=np.uint64).astype(np.int64)
                for k, g in self.groups.items()}

    def _extend(self, rows: GroupRows, tags: Sequence[ChunkTag], jobs: Sequence[Job],
                placed: tuple[list[int], list[int], list[bool], bytes, list[int] | None],
                i: int, j: int) -> None:
        """Append the rows of batch items ``i:j`` (all of ``rows``' group), column by column."""
        starts, stored, flags, digests, inners = placed
        whole = i == 0 and j == len(tags)
        part_tags = tags if whole else tags[i:j]
        part_jobs = jobs if whole else jobs[i:j]
        rows.paths.extend([t.path for t in part_tags])
        rows.seqs.extend([t.chunk_seq for t in part_tags])
        rows.offsets.extend([job.offset for job in part_jobs])
        rows.compressed.extend(flags if whole else flags[i:j])
        rows.sizes.extend([job.length for job in part_jobs])
        rows.blob_offsets.extend(starts if whole else starts[i:j])
        rows.blob_sizes.extend(stored if whole else stored[i:j])
        rows.digests += digests if whole else digests[32 * i : 32 * j]
        if inners is None:
            rows.inner.frombytes(bytes(8 * (j - i)))
        else:
            rows.inner.extend(inners[i:j])
        if rows.has_extra:
            rows.extra.extend([t.extra for t in part_tags])
        if self.track_order:
            rows.order.extend(range(self.rows + i, self.rows + j))
