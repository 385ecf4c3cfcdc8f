"""The dedup index: chunk content (BLAKE3 + length) → the one blob that holds it.

A writer with dedup on asks :meth:`DedupIndex.place` where each finished chunk goes: a chunk
whose digest and length are already in the index gets the existing blob's
``(blob_offset, blob_size, compressed)`` and writes nothing; any other chunk is written at the
cursor and entered. Chunks are placed in input order, so which occurrence owns the blob (the
first) does not depend on the worker count. Empty chunks are never entered (they own no bytes).

An append or a store seeds the index with the rows it already has (:meth:`DedupIndex.seed`):
new chunks then point at old blobs, found through the rows' checksums; no blob is read.

Memory: no Python object per chunk. The table is native (``native/src/create/dedup.rs``): a
distinct chunk takes its 32-byte digest, 34 bytes of columns (length, blob offset and size,
codec flag, inner offset, state) and 8 bytes of an open-addressing table at most half full:
~74 bytes (``bench/bench_dedup.py`` measures it per million chunks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from .. import corelib
from ..format import build
from ..format.kernels import numpy_of, one_array

Placed = tuple[list[int], list[int], list[bool], list[memoryview], int, list[int]]


def distinct_blob_bytes(tables: Iterable[pa.Table]) -> int:
    """Bytes of the distinct blobs that rows point at: a shared blob counted once."""
    parts = [t.select(["blob_offset", "blob_size"]) for t in tables if t.num_rows]
    if not parts:
        return 0
    off = np.concatenate([numpy_of(one_array(t.column("blob_offset"))) for t in parts])
    size = np.concatenate([numpy_of(one_array(t.column("blob_size"))) for t in parts])
    used = size > 0
    _, first = np.unique(off[used], return_index=True)
    return int(size[used][first].sum())


class DedupIndex(corelib.DedupTable):
    """Distinct chunks and their blobs; ``hits``/``saved`` count the rows and bytes shared.

    The table and every per-chunk method are native (``native/src/create/dedup.rs``, one
    definition): ``known(digest, length)`` (whether a chunk of this content has a blob
    already; safe from a worker thread: entries are only ever added, so a True stays
    true); ``pack_member(digest, length, pack_slots)``, a new pack member's ``(ref, slot)``:
    ``ref`` the slot it may point at — a member of a closed or placed pack of this write, of
    the open pack ``pack_slots`` itself, or a blob seeded from existing rows; never a whole
    blob of this write nor a member of another open pack (whether those are placed first
    depends on timing) — else -1; and ``slot``, the pending entry made for its content when
    it is stored (-1: none, the digest has an entry already); ``close(slots)``: the pack
    holding these pending members was sent to the codec; ``settle(slot, offset, size,
    compressed, inner)``: where a pending member went once its pack was placed;
    ``entry(slot)``: ``(blob_offset, blob_size, compressed, inner_offset)`` of a placed
    entry. ``limit``: blobs must end at or before this offset to be entered by
    :meth:`seed`."""

    __slots__ = ()

    def seed(self, tables: Iterable[pa.Table], *, limit: int) -> None:
        """Enter the blobs of existing rows that end at or before ``limit`` (the archive's or
        sidecar's blob end); for content held by several blobs, the lowest offset wins."""
        self.limit = limit
        names = ["checksum", "uncompressed_size", "blob_offset", "blob_size", "compressed"]
        parts = [t.select(names).append_column(
                     "inner_offset", t.column("inner_offset") if "inner_offset" in t.schema.names
                     else build.repeat(0, pa.uint64(), t.num_rows))
                 for t in tables if t.num_rows]
        if not parts:
            return
        rows = pa.concat_tables(parts).combine_chunks()
        size = rows.column("uncompressed_size").to_numpy()
        off = rows.column("blob_offset").to_numpy()
        stored = rows.column("blob_size").to_numpy()
        fits = (stored <= limit) & (off <= limit - np.minimum(stored, limit))  # no overflow
        keep = (size > 0) & (stored > 0) & fits
        order = np.flatnonzero(keep)
        order = order[np.argsort(off[order], kind="stable")]
        sums = rows.column("checksum").chunk(0)
        digests = sums.buffers()[1].to_pybytes()[32 * sums.offset : 32 * (sums.offset + len(sums))]
        flags = rows.column("compressed").to_numpy(zero_copy_only=False)
        inner = rows.column("inner_offset").to_numpy()
        self.seed_rows(b"".join(digests[32 * i : 32 * i + 32] for i in order.tolist()),
                       size[order].tolist(), off[order].tolist(), stored[order].tolist(),
                       flags[order].tolist(), inner[order].tolist())

    def place(self, lengths: Sequence[int], digests: bytes, compressed: Sequence[bool],
              stored: Sequence[int], buffer: bytes | memoryview, cursor: int) -> Placed:
        """Where each chunk of a finished batch goes. ``buffer`` holds the batch's blobs
        back to back (``stored`` bytes each; 0 for a chunk a worker found known already).
        Returns per chunk ``(blob_offset, blob_size, compressed)`` as three lists, the views
        of ``buffer`` to write at ``cursor`` (adjacent ones merged), the new cursor and each
        chunk's ``inner_offset`` (non-zero for content found inside a packed blob); decided
        natively (``place_runs``)."""
        offsets, sizes, flags, runs, cursor, inners = self.place_runs(
            lengths, digests, compressed, stored, cursor)
        view = memoryview(buffer)
        return offsets, sizes, flags, [view[a:b] for a, b in runs], cursor, inners
