"""``__gunnar_oid__``: the git object-id index, a raw reserved section (docs/git-sections.md).

Layout (all integers little-endian; the section starts 64-aligned, so every array below is
aligned to its element size)::

    offset            size        field
    0                 8           magic  b"ZNGITOID"
    8                 4           version  u32 = 1
    12                4           oid_len  u32: 20 (SHA-1) or 32 (SHA-256)
    16                8           count    u64: number of objects N
    24                8           reserved u64 = 0
    32                256 * 4     fanout: u32[256], fanout[b] = objects whose oid's first byte <= b
    1056              N * 8       offset:   u64[N], object's byte offset inside its pack
    1056 + 8N         N * 4       pack_row: u32[N], ``__lookup__`` row of the pack file (chunk 0)
    1056 + 12N        N * oid_len oid:      object ids, strictly ascending (bytewise)
    1056 + (12+L)N    N           type:     u8[N], git object type after delta resolution
                                            (1 commit, 2 tree, 3 blob, 4 tag)

Version 2 inserts, after ``pack_row``, ``order: u32[N]`` (``order[p]`` = the ordinal of the
object at bitmap *position* p, a permutation) and shifts ``oid`` and ``type`` by 4N.

An object's *ordinal* is its position in oid order. ``__gunnar_reach__`` bitmaps count in
ordinals (version 1) or in positions (version 2: a traversal order in which reachable sets
are runs). The section is exactly ``1056 + N * (13 + oid_len)`` bytes long (version 1), or
``1056 + N * (17 + oid_len)`` (version 2).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..errors import FormatError

MAGIC = b"ZNGITOID"
VERSION = 1
#: version 2 carries ``order`` (position → ordinal): bitmaps count positions
VERSIONS = (1, 2)
HEADER = struct.Struct("<8sIIQQ")  # magic, version, oid_len, count, reserved
FANOUT_LEN = 256 * 4
FIXED_LEN = HEADER.size + FANOUT_LEN  # 1056
OID_LENS = (20, 32)
#: an object's real type, after delta resolution (a delta is never recorded as such)
TYPE_NAMES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


def encode_oid_index(objects: Iterable[tuple[bytes, int, int, int]], *, oid_len: int = 20,
                     positions: Sequence[bytes] | None = None) -> bytes:
    """``(oid, pack_row, offset, type)`` tuples → the section bytes (sorted by oid here).
    ``positions``: every oid once, in bitmap position order → version 2 with ``order``."""
    if oid_len not in OID_LENS:
        raise ValueError(f"oid_len must be 20 or 32, not {oid_len}")
    rows = list(objects)
    n = len(rows)
    joined = b"".join(r[0] for r in rows)
    if len(joined) != n * oid_len:
        bad = next(r[0] for r in rows if len(r[0]) != oid_len)
        raise ValueError(f"object id {bad.hex()} is not {oid_len} bytes")
    ids = np.frombuffer(joined, dtype=np.uint8).reshape(n, oid_len)
    sort = id_order(ids)
    order = None
    if positions is not None:
        rank = np.empty(n, dtype=np.int64)
        rank[sort] = np.arange(n)
        index_of = {r[0]: i for i, r in enumerate(rows)}
        try:
            at = np.array([index_of[o] for o in positions], dtype=np.int64)
        except KeyError:
            raise ValueError("positions must list every object id once") from None
        order = rank[at]
    return encode_sorted(ids[sort], np.array([r[1] for r in rows], dtype=np.int64)[sort],
                         np.array([r[2] for r in rows], dtype=np.int64)[sort],
                         np.array([r[3] for r in rows], dtype=np.int64)[sort], order=order)


def id_order(ids: np.ndarray) -> np.ndarray:
    """The permutation that sorts ``uint8[n, oid_len]`` ids bytewise (stable)."""
    n, oid_len = ids.shape
    # lexicographic order of the ids: sort by big-endian words, last word first
    words = [ids[:, k:k + 8].copy().view(">u8")[:, 0] if k + 8 <= oid_len
             else ids[:, k:].copy().view(">u4")[:, 0] for k in range(0, oid_len, 8)]
    return np.lexsort(tuple(reversed(words))) if n else np.zeros(0, dtype=np.int64)


def encode_sorted(ids: np.ndarray, pack_rows: np.ndarray, offsets: np.ndarray,
                  kinds: np.ndarray, *, order: np.ndarray | None = None) -> bytes:
    """The section bytes of objects already in oid order: ``ids`` ``uint8[n, oid_len]``,
    then one value per object; ``order[p]`` = the ordinal at bitmap position p (version 2;
    checked to be a permutation)."""
    n, oid_len = ids.shape
    if oid_len not in OID_LENS:
        raise ValueError(f"oid_len must be 20 or 32, not {oid_len}")
    if n > 1:
        diff = ids[1:] != ids[:-1]
        first = diff.argmax(axis=1)
        rows = np.arange(n - 1)
        same = ~diff.any(axis=1)
        if bool(same.any()):
            raise ValueError(f"object id {ids[int(same.argmax())].tobytes().hex()} given twice")
        if bool((ids[rows, first] > ids[rows + 1, first]).any()):
            raise ValueError("object ids are not in ascending order")
    kinds = np.asarray(kinds, dtype=np.int64)
    known = np.isin(kinds, list(TYPE_NAMES))
    if n and not bool(known.all()):
        bad_at = int(np.argmin(known))
        raise ValueError(f"object {ids[bad_at].tobytes().hex()}: unknown git object type "
                         f"{int(kinds[bad_at])}")
    fanout = np.bincount(ids[:, 0], minlength=256) if n else np.zeros(256, dtype=np.int64)
    packed = b""
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        if len(order) != n or (n and (int(order.min()) < 0 or int(order.max()) >= n or not bool(
                (np.bincount(order, minlength=n) == 1).all()))):
            raise ValueError("positions must list every object id once")
        packed = order.astype("<u4").tobytes()
    parts = [
        HEADER.pack(MAGIC, 1 if order is None else 2, oid_len, n, 0),
        np.cumsum(fanout).astype("<u4").tobytes(),
        np.asarray(offsets).astype("<u8").tobytes(),
        np.asarray(pack_rows).astype("<u4").tobytes(),
        packed,
        np.ascontiguousarray(ids).tobytes(),
        kinds.astype(np.uint8).tobytes(),
    ]
    return b"".join(parts)


def objects_schema(oid_len: int = 20) -> pa.Schema:
    return pa.schema([
        pa.field("oid", pa.binary(oid_len), nullable=False),
        pa.field("ordinal", pa.uint32(), nullable=False),
        pa.field("pack_row", pa.uint32(), nullable=False),
        pa.field("offset", pa.uint64(), nullable=False),
        pa.field("type", pa.uint8(), nullable=False),
        pa.field("type_name", pa.utf8(), nullable=False),
    ])


def _header(buf: memoryview, path: str | None) -> tuple[int, int, np.ndarray, int]:
    """``(oid_len, count, fanout, version)`` after the O(1) checks: size, magic, version, lengths and
    a cumulative fanout that ends at the count."""
    size = len(buf)

    def bad(why: str) -> FormatError:
        return FormatError(f"__gunnar_oid__: {why}", path=path)

    if size < FIXED_LEN:
        raise bad(f"{size} bytes, shorter than its {FIXED_LEN}-byte header")
    magic, version, oid_len, count, _reserved = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise bad(f"bad magic {bytes(magic)!r}")
    if version not in VERSIONS:
        raise bad(f"unsupported version {version}")
    if oid_len not in OID_LENS:
        raise bad(f"oid length {oid_len} is neither 20 nor 32")
    per = 13 + oid_len + (4 if version == 2 else 0)
    if (size - FIXED_LEN) % per or (size - FIXED_LEN) // per != count:
        raise bad(f"{size} bytes cannot hold {count} objects of {per} bytes")
    fanout = np.frombuffer(buf, dtype="<u4", count=256, offset=HEADER.size)
    if bool((fanout[1:] < fanout[:-1]).any()) or int(fanout[-1]) != count:
        raise bad("fanout table is not cumulative or does not end at the object count")
    return int(oid_len), int(count), fanout, int(version)


class OidIndex:
    """Lookups in the section without decoding it: the fanout picks the first-byte bucket,
    a binary search finds the id (as git's ``.idx``). Only the O(1) checks of
    :func:`_header` are made; :func:`decode_oid_index` checks everything."""

    def __init__(self, data: memoryview | bytes, *, path: str | None = None) -> None:
        self.buf = memoryview(data).cast("B")
        self.oid_len, self.count, fanout, self.version = _header(self.buf, path)
        self.fanout = fanout.tolist()
        n = self.count
        extra = 4 * n if self.version == 2 else 0
        self._oids_at = FIXED_LEN + 12 * n + extra
        self.offsets = np.frombuffer(self.buf, dtype="<u8", count=n, offset=FIXED_LEN)
        self.pack_rows = np.frombuffer(self.buf, dtype="<u4", count=n, offset=FIXED_LEN + 8 * n)
        #: position → ordinal (version 2), or ``None``: bitmaps count ordinals
        self.order = (np.frombuffer(self.buf, dtype="<u4", count=n, offset=FIXED_LEN + 12 * n)
                      if extra else None)
        self.types = np.frombuffer(self.buf, dtype=np.uint8, count=n,
                                   offset=self._oids_at + self.oid_len * n)

    def oid(self, ordinal: int) -> bytes:
        at = self._oids_at + ordinal * self.oid_len
        return bytes(self.buf[at:at + self.oid_len])

    def _lower(self, key: bytes) -> int:
        """First ordinal whose id is >= ``key`` (``key`` non-empty)."""
        b = key[0]
        lo, hi = (self.fanout[b - 1] if b else 0), self.fanout[b]
        buf, at, width = self.buf, self._oids_at, self.oid_len
        while lo < hi:
            mid = (lo + hi) // 2
            start = at + mid * width
            if buf[start:start + width].tobytes() < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def find(self, oid: bytes) -> int | None:
        """The ordinal of ``oid``, or ``None``."""
        if len(oid) != self.oid_len:
            return None
        i = self._lower(oid)
        return i if i < self.count and self.oid(i) == oid else None

    def with_prefix(self, hex_prefix: str, *, limit: int = 2) -> list[int]:
        """Ordinals of the ids starting with ``hex_prefix`` (at most ``limit``)."""
        even = hex_prefix[: len(hex_prefix) // 2 * 2]
        key = bytes.fromhex(even) if even else b"\0"
        i = self._lower(key) if even else 0
        out: list[int] = []
        while i < self.count and len(out) < limit:
            text = self.oid(i).hex()
            if not text.startswith(hex_prefix):
                if text[: len(hex_prefix)] > hex_prefix:
                    break
            else:
                out.append(i)
            i += 1
        return out


def decode_oid_index(data: memoryview | bytes, *, lookup_rows: int | None = None,
                     path: str | None = None) -> pa.Table:
    """The section as rows (oid, ordinal, pack_row, offset, type, type_name); fully checked."""
    buf = memoryview(data).cast("B")

    def bad(why: str) -> FormatError:
        return FormatError(f"__gunnar_oid__: {why}", path=path)

    oid_len, n, fanout, version = _header(buf, path)
    at = FIXED_LEN
    offsets = np.frombuffer(buf, dtype="<u8", count=n, offset=at)
    at += 8 * n
    pack_rows = np.frombuffer(buf, dtype="<u4", count=n, offset=at)
    at += 4 * n
    if version == 2:
        order = np.frombuffer(buf, dtype="<u4", count=n, offset=at)
        at += 4 * n
        if n and (int(order.max()) >= n or
                  not bool((np.bincount(order, minlength=n) == 1).all())):
            raise bad("order is not a permutation of the ordinals")
    oids = np.frombuffer(buf, dtype=np.uint8, count=n * oid_len, offset=at).reshape(n, oid_len)
    at += oid_len * n
    types = np.frombuffer(buf, dtype=np.uint8, count=n, offset=at)
    if n > 1:
        diff = oids[1:] != oids[:-1]
        first = diff.argmax(axis=1)
        rows = np.arange(n - 1)
        if not bool(diff.any(axis=1).all()) or bool(
                (oids[rows, first] > oids[rows + 1, first]).any()):
            raise bad("object ids are not strictly ascending")
    if n:
        counts = np.bincount(oids[:, 0], minlength=256).cumsum()
        if not np.array_equal(counts, fanout):
            raise bad("fanout table does not match the object ids")
    known = np.array(sorted(TYPE_NAMES), dtype=np.uint8)
    if not bool(np.isin(types, known).all()):
        raise bad("unknown git object type")
    if lookup_rows is not None and n and int(pack_rows.max()) >= lookup_rows:
        raise bad(f"pack_row {int(pack_rows.max())} is past the lookup ({lookup_rows} rows)")
    names = pa.array([TYPE_NAMES[int(t)] for t in range(8) if t in TYPE_NAMES])
    codes = pa.array(types)
    name_index = pa.array(np.searchsorted(known, types).astype(np.int32))
    return pa.table(
        [
            pa.FixedSizeBinaryArray.from_buffers(pa.binary(oid_len), n,
                                                  [None, pa.py_buffer(oids.tobytes())]),
            pa.array(np.arange(n, dtype=np.uint32)),
            pa.array(pack_rows),
            pa.array(offsets),
            codes,
            names.take(name_index),
        ],
        schema=objects_schema(oid_len),
    )
