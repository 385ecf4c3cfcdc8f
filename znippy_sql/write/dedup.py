"""The dedup index: chunk content (BLAKE3 + length) → the one blob that holds it.

A writer with dedup on asks :meth:`DedupIndex.place` where each finished chunk goes: a chunk
whose digest and length are already in the index gets the existing blob's
``(blob_offset, blob_size, compressed)`` and writes nothing; any other chunk is written at the
cursor and entered. Chunks are placed in input order, so which occurrence owns the blob (the
first) does not depend on the worker count. Empty chunks are never entered (they own no bytes).

An append or a store seeds the index with the rows it already has (:meth:`DedupIndex.seed`):
new chunks then point at old blobs, found through the rows' checksums; no blob is read.

Memory: no Python object per chunk. A distinct chunk takes its 32-byte digest, 25 bytes of
packed arrays (length, blob offset and size, codec flag) and 8 bytes of :class:`_Slots`, an
open-addressing table at most half full: ~65 bytes (``bench/bench_dedup.py`` measures it per
million chunks).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..format import build
from ..format.kernels import numpy_of, one_array

Placed = tuple[list[int], list[int], list[bool], list[memoryview], int, list[int]]

#: an entry's state: a whole blob (written here or seeded); a member of an open pack of this
#: write (its offsets unknown); a member of a placed pack; a member of a closed pack (sent to
#: the codec, not placed yet); a member of a placed pack written as its own raw blob (a whole
#: blob, but one a later pack member may point at as at any member: its pack closed in input
#: order, so whether it is placed yet must not matter)
WHOLE, PENDING, PACKED, CLOSED, PACK_WHOLE = 0, 1, 2, 3, 4


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


class _Slots:
    """Digest → slot number: linear probing on the digest's first 8 bytes in a table of
    ``slot + 1`` (0: empty) at most half full; the digests are ``digests[32 s : 32 s + 32]``.

    Workers read it while the caller adds (``DedupIndex.known``): the table and its mask are
    one tuple, replaced whole when the table grows, and a digest is stored before its slot is
    put in the table, so a reader finds an entry or misses it, never a wrong one."""

    __slots__ = ("digests", "state", "count")

    def __init__(self, digests: bytearray) -> None:
        self.digests = digests
        self.state: tuple[array, int] = (array("I", bytes(4 * 1024)), 1023)
        self.count = 0

    def get(self, digest: bytes) -> int:
        table, mask = self.state
        digests = self.digests
        i = int.from_bytes(digest[:8], "little") & mask
        while True:
            s = table[i]
            if not s:
                return -1
            if digests[32 * s - 32 : 32 * s] == digest:
                return s - 1
            i = (i + 1) & mask

    def put(self, digest: bytes, slot: int) -> None:
        """Enter ``slot`` for ``digest`` (not in the table yet; its bytes already stored)."""
        if 2 * (self.count + 1) > len(self.state[0]):
            self._grow()
        table, mask = self.state
        i = int.from_bytes(digest[:8], "little") & mask
        while table[i]:
            i = (i + 1) & mask
        table[i] = slot + 1
        self.count += 1

    def _grow(self) -> None:
        """Twice the size, every slot placed again (rounds of numpy: each free position goes
        to its first claimant, the others probe on)."""
        size = 2 * len(self.state[0])
        mask = size - 1
        n = self.count
        keys = np.frombuffer(self.digests, dtype="<u8", count=4 * n)  # no copy: let go below
        pos = (keys[::4] & np.uint64(mask)).astype(np.int64)
        del keys  # the bytearray may grow again once no view of it is left
        table = np.zeros(size, dtype=np.uint32)
        pending = np.arange(n, dtype=np.int64)
        while pending.size:
            at = pos[pending]
            free = table[at] == 0
            spots, first = np.unique(at[free], return_index=True)
            winners = pending[free][first]
            table[spots] = (winners + 1).astype(np.uint32)
            placed = np.zeros(n, dtype=bool)
            placed[winners] = True
            pending = pending[~placed[pending]]
            pos[pending] = (pos[pending] + 1) & mask
        grown = array("I")
        grown.frombytes(table.tobytes())
        self.state = (grown, mask)


class DedupIndex:
    """Distinct chunks and their blobs; ``hits``/``saved`` count the rows and bytes shared."""

    __slots__ = ("_digests", "_slots", "_lengths", "_offsets", "_sizes", "_flags", "_inner",
                 "_state", "limit", "hits", "saved")

    def __init__(self) -> None:
        self._digests = bytearray()
        self._slots = _Slots(self._digests)
        self._lengths = array("Q")
        self._offsets = array("Q")
        self._sizes = array("Q")
        self._flags = bytearray()
        #: where the content starts inside the decoded blob (packed blobs, FORMAT §3)
        self._inner = array("Q")
        self._state = bytearray()
        #: blobs must end at or before this offset to be entered by :meth:`seed`
        self.limit = 0
        #: chunks placed as references to an existing blob, and the blob bytes not written
        self.hits = 0
        self.saved = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def known(self, digest: bytes, length: int) -> bool:
        """Whether a chunk of this content has a blob already (safe from a worker thread:
        entries are only ever added, so a True stays true)."""
        slot = self._slots.get(digest)
        return slot >= 0 and self._lengths[slot] == length and self._state[slot] in (
            WHOLE, PACKED, PACK_WHOLE)

    def _enter(self, digest: bytes, length: int, offset: int, size: int,
               compressed: bool, inner: int = 0, state: int = WHOLE) -> int:
        slot = len(self._lengths)
        self._digests += digest
        self._lengths.append(length)
        self._offsets.append(offset)
        self._sizes.append(size)
        self._flags.append(compressed)
        self._inner.append(inner)
        self._state.append(state)
        self._slots.put(digest, slot)
        return slot

    # -- packed blobs (write/pack.py) ---------------------------------------------------------
    def pack_member(self, digest: bytes, length: int, pack_slots: Sequence[int]
                    ) -> tuple[int, int]:
        """A new pack member's ``(ref, slot)``: ``ref`` the slot it may point at — a member
        of a closed or placed pack of this write, of the open pack ``pack_slots`` itself, or
        a blob seeded from existing rows; never a whole blob of this write nor a member of
        another open pack (whether those are placed first depends on timing) — else -1; and
        ``slot``, the pending entry made for its content when it is stored (-1: none, the
        digest has an entry already)."""
        slot = self._slots.get(digest)
        if slot < 0:
            return -1, self._enter(digest, length, 0, 0, False, 0, PENDING)
        if self._lengths[slot] == length:
            state = self._state[slot]
            if state in (PACKED, CLOSED, PACK_WHOLE) or (state == PENDING and slot in pack_slots) \
                    or (state == WHOLE
                        and self._offsets[slot] + self._sizes[slot] <= self.limit):
                return slot, -1
        return -1, -1

    def close(self, slots: Sequence[int]) -> None:
        """The pack holding these pending members was sent to the codec."""
        for slot in slots:
            self._state[slot] = CLOSED

    def settle(self, slot: int, offset: int, size: int, compressed: bool, inner: int) -> None:
        """Where a pending member went once its pack was placed."""
        self._offsets[slot] = offset
        self._sizes[slot] = size
        self._flags[slot] = compressed
        self._inner[slot] = inner
        self._state[slot] = PACKED if size and (inner or size != self._lengths[slot]
                                                or compressed) else PACK_WHOLE

    def entry(self, slot: int) -> tuple[int, int, bool, int]:
        """``(blob_offset, blob_size, compressed, inner_offset)`` of a placed entry."""
        if self._state[slot] in (PENDING, CLOSED):
            raise RuntimeError("a pack member was referenced before its pack was placed")
        return (self._offsets[slot], self._sizes[slot], bool(self._flags[slot]),
                self._inner[slot])

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
        slots = self._slots
        for i, n, o, s, c, k in zip(order.tolist(), size[order].tolist(), off[order].tolist(),
                                    stored[order].tolist(), flags[order].tolist(),
                                    inner[order].tolist()):
            d = digests[32 * i : 32 * i + 32]
            if slots.get(d) < 0:
                self._enter(d, n, o, s, c, k, PACKED if k else WHOLE)

    def place(self, lengths: Sequence[int], digests: bytes, compressed: Sequence[bool],
              stored: Sequence[int], buffer: bytes | memoryview, cursor: int) -> Placed:
        """Where each chunk of a finished batch goes. ``buffer`` holds the batch's blobs
        back to back (``stored`` bytes each; 0 for a chunk a worker found known already).
        Returns per chunk ``(blob_offset, blob_size, compressed)`` as three lists, the views
        of ``buffer`` to write at ``cursor`` (adjacent ones merged), the new cursor and each
        chunk's ``inner_offset`` (non-zero for content found inside a packed blob)."""
        inners: list[int] = []
        state = self._state
        offsets: list[int] = []
        sizes: list[int] = []
        flags: list[bool] = []
        pieces: list[memoryview] = []
        view = memoryview(buffer)
        find = self._slots.get
        known_lengths, known_offsets, known_sizes = self._lengths, self._offsets, self._sizes
        pos = run = 0  # the unwritten run of new blobs is view[run:pos]
        for i, n in enumerate(lengths):
            s = stored[i]
            if n == 0:
                offsets.append(cursor)
                sizes.append(0)
                flags.append(False)
                inners.append(0)
                continue
            d = digests[32 * i : 32 * i + 32]
            slot = find(d)
            if slot >= 0 and known_lengths[slot] == n and state[slot] in (WHOLE, PACKED,
                                                                          PACK_WHOLE):
                if run < pos:
                    pieces.append(view[run:pos])
                pos += s
                run = pos
                offsets.append(known_offsets[slot])
                sizes.append(known_sizes[slot])
                flags.append(bool(self._flags[slot]))
                inners.append(self._inner[slot])
                self.hits += 1
                if state[slot] != PACKED:  # a slice of a pack saves no whole blob
                    self.saved += known_sizes[slot]
                continue
            if s == 0:
                raise RuntimeError("a chunk skipped as known has no blob in the index")
            c = compressed[i]
            if slot < 0:
                self._enter(d, n, cursor, s, c)
            offsets.append(cursor)
            sizes.append(s)
            flags.append(c)
            inners.append(0)
            cursor += s
            pos += s
        if run < pos:
            pieces.append(view[run:pos])
        return offsets, sizes, flags, pieces, cursor, inners
