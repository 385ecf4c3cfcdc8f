"""``RemoteSource``: the :class:`~znippy_sql.format.rangeio.RangeSource` of a remote object.

Opening costs one suffix GET of ``TAIL_GUESS`` bytes (the footer, the manifest and, for most
archives, the whole tail). After that the source keeps *extents*: fetched byte ranges held
in buffers placed so that a file offset that is a multiple of 64 is a multiple of 64 in memory
(Arrow streams keep the alignment the writer gave them).

- Ranges read for the index (manifest, sub-indexes, lookup, trie, sections) are kept for the
  life of the source: they are what every later query reads.
- ``prefetch(offsets, lengths)`` (extract's units) coalesces the ranges whose gaps are below
  ``GAP`` into requests of at most ``PIECE`` bytes, fetched in parallel, and keeps them as
  *transient* extents of the calling thread, dropped by its ``release`` or once more than
  ``TRANSIENT_MAX`` bytes wait.
- A blob read that no extent holds is one GET of exactly that blob, handed to the caller and
  not kept, so streaming a large file holds one chunk at a time.

A range is only ever served from one version of the object: every GET is conditional on the
ETag of the first reply (:mod:`.client`).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from .client import DAEMONS, Meta, RemoteObject, Tail

if TYPE_CHECKING:
    from typing_extensions import Buffer

#: bytes of the first (suffix) GET (docs/remote.md): the whole tail of archives up to ~1,200
#: files (~210 bytes a file), the footer and manifest of any with fewer than ~2,500 groups
TAIL_GUESS = 256 << 10
#: ranges closer than this are fetched in one request (the bytes between are thrown away):
#: on loopback a request costs what ~256 KiB of body does (bench/results-remote.md)
GAP = 256 << 10
#: index ranges kept for the archive's life (stream heads, lookup + trie) are merged only
#: across gaps below this: their bytes stay in memory, and a pruned scan reads one group
KEEP_GAP = 16 << 10
#: at most this many bytes per request, so a large run of blobs is fetched in parallel
PIECE = 8 << 20
#: a unit's prefetch fetches at most this much; the rest is fetched blob by blob on demand
PREFETCH_MAX = 32 << 20
#: transient extents waiting beyond this are dropped oldest first (they are fetched again
#: if still needed)
TRANSIENT_MAX = 128 << 20
class _Extent:
    __slots__ = ("start", "end", "buf", "transient", "owner")

    def __init__(self, start: int, buf: pa.Buffer, transient: bool) -> None:
        self.start, self.end, self.buf, self.transient = start, start + buf.size, buf, transient
        self.owner = threading.get_ident() if transient else 0


def aligned(start: int, data: Buffer) -> pa.Buffer:
    """``data`` copied into memory where address ≡ ``start`` (mod 64)."""
    view = memoryview(data).cast("B")
    n = len(view)
    raw = np.empty(n + 128, dtype=np.uint8)
    pad = (start - raw.ctypes.data) % 64
    raw[pad : pad + n] = np.frombuffer(view, dtype=np.uint8)
    return pa.py_buffer(raw[pad : pad + n])


class RemoteSource:
    """Checked byte ranges of one remote object, fetched on demand (see the module doc)."""

    fetches = True

    def __init__(self, obj: RemoteObject, tail: Tail, *,
                 on_tail: Callable[[list[tuple[int, pa.Buffer]]], None] | None = None) -> None:
        self.obj = obj
        self.path = obj.url
        self.meta: Meta = tail.meta
        self.size = tail.meta.size
        self.bytes_read = 0
        self._on_tail = on_tail  # called with the kept extents when they grow (tail cache)
        self._lock = threading.Lock()
        self._starts: list[int] = []
        self._extents: list[_Extent] = []
        self._transient: OrderedDict[int, _Extent] = OrderedDict()
        self._transient_bytes = 0
        if tail.data is not None and memoryview(tail.data).nbytes:
            self._add(_Extent(tail.start, aligned(tail.start, tail.data), False))
        for start, data in tail.more:  # index ranges the tail cache held
            self._add(_Extent(start, aligned(start, data), False))
        self._cached = sum(e.buf.size for e in self._extents)  # what the cache holds

    # -- the protocol ----------------------------------------------------------------------
    def check(self, offset: int, length: int, what: str) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FormatError(f"{what}: range [{offset}, {offset + length}) is outside the "
                              f"object ({self.size} bytes)", path=self.path)

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        self.check(offset, length, what)
        self.bytes_read += length
        return self._get(offset, length, keep=what != "blob")

    def view(self, offset: int, length: int) -> memoryview:
        self.check(offset, length, "range")
        return memoryview(self._get(offset, length, keep=False)).cast("B")

    def prefetch(self, offsets: Sequence[int], lengths: Sequence[int], *,
                 keep: bool = False) -> None:
        want = self._missing(offsets, lengths, budget=PREFETCH_MAX,
                             gap=KEEP_GAP if keep else GAP, piece=None if keep else PIECE)
        if keep and len(want) == 1:  # (merged with the kept bytes it touches)
            self._extend(*want[0])
            return
        for start, buf in self._fetch_all(want):  # in parallel
            self._add(_Extent(start, buf, not keep))
        if keep and want:
            self._kept_changed()

    def release(self, offset: int, length: int) -> None:
        """Drop the transient extents inside the range that this thread prefetched (another
        worker's unit may span the same offsets while it still reads them)."""
        end, me = offset + length, threading.get_ident()
        with self._lock:
            for ext in list(self._transient.values()):
                if ext.owner == me and ext.start >= offset and ext.end <= end:
                    self._drop(ext)

    def close(self) -> None:
        self._kept_changed(final=True)
        with self._lock:
            self._starts.clear()
            self._extents.clear()
            self._transient.clear()
            self._transient_bytes = 0

    # -- statistics ------------------------------------------------------------------------
    @property
    def requests(self) -> int:
        return self.obj.requests

    @property
    def fetched(self) -> int:
        return self.obj.fetched

    # -- inside ----------------------------------------------------------------------------
    def _covering(self, offset: int, end: int, *, owner: int | None = None) -> _Extent | None:
        """An extent holding ``[offset, end)`` (extents may overlap: concurrent units fetch
        their own); with ``owner``, only a kept one or one that thread prefetched."""
        i = bisect.bisect_right(self._starts, offset) - 1
        while i >= 0:
            ext = self._extents[i]
            if ext.end >= end and (owner is None or ext.owner in (0, owner)):
                return ext
            i -= 1
        return None

    def _get(self, offset: int, length: int, *, keep: bool) -> pa.Buffer:
        end = offset + length
        if length == 0:
            return pa.py_buffer(b"")
        with self._lock:
            ext = self._covering(offset, end)
        if ext is not None:
            return ext.buf.slice(offset - ext.start, length)
        if not keep:
            data = self.obj.get(offset, end, self.meta)
            return pa.py_buffer(data)
        return self._extend(offset, end)

    def _extend(self, offset: int, end: int) -> pa.Buffer:
        """Fetch what is missing of ``[offset, end)`` (widened to kept extents less than
        ``KEEP_GAP`` away) and keep it as one extent in place of the ones it covers."""
        with self._lock:
            lo, hi = offset, end
            for ext in self._extents:
                if not ext.transient and ext.end + KEEP_GAP >= lo and ext.start <= hi + KEEP_GAP:
                    lo, hi = min(lo, ext.start), max(hi, ext.end)
            parts = [e for e in self._extents if not e.transient and e.start >= lo and e.end <= hi]
        gaps, at = [], lo
        for ext in parts:
            if ext.start > at:
                gaps.append((at, ext.start))
            at = max(at, ext.end)
        if at < hi:
            gaps.append((at, hi))
        got = dict(self._fetch_all(gaps))
        raw = np.empty(hi - lo + 128, dtype=np.uint8)
        pad = (lo - raw.ctypes.data) % 64
        out = raw[pad : pad + hi - lo]
        for ext in parts:
            out[ext.start - lo : ext.end - lo] = np.frombuffer(ext.buf, dtype=np.uint8)
        for start, buf in got.items():
            out[start - lo : start - lo + buf.size] = np.frombuffer(buf, dtype=np.uint8)
        merged = _Extent(lo, pa.py_buffer(out), False)
        with self._lock:
            for ext in parts:
                if ext in self._extents:
                    i = self._extents.index(ext)
                    del self._extents[i], self._starts[i]
            self._add_locked(merged)
        if gaps:
            self._kept_changed()
        return merged.buf.slice(offset - lo, end - offset)

    def _kept_changed(self, *, final: bool = False) -> None:
        """Hand every kept extent to the tail cache, the one reaching the end first: at once
        when they grew by a quarter since the last time (the lookup and the trie), else when
        the source is closed (a walk over many sub-indexes rewrites the entry once)."""
        if self._on_tail is None:
            return
        with self._lock:
            kept = [(e.start, e.buf) for e in self._extents if not e.transient]
        total = sum(b.size for _, b in kept)
        if total == self._cached or (not final and total < self._cached * 5 // 4):
            return
        self._cached = total
        kept.sort(key=lambda e: (e[0] + e[1].size != self.size, e[0]))
        self._on_tail(kept)

    def _missing(self, offsets: Sequence[int], lengths: Sequence[int], *,
                 budget: int, gap: int, piece: int | None = PIECE) -> list[tuple[int, int]]:
        """The coalesced ``[start, end)`` requests for the ranges no extent holds (each at
        most ``piece`` bytes when merged; None: no limit, index ranges are one request)."""
        o = np.asarray(offsets, dtype=np.int64)
        n = np.asarray(lengths, dtype=np.int64)
        if o.size == 0:
            return []
        keep = n > 0
        o, e = o[keep], o[keep] + n[keep]
        order = np.argsort(o, kind="stable")
        o, e = o[order], e[order]
        out: list[tuple[int, int]] = []
        total = 0
        me = threading.get_ident()  # another thread's blobs may be released while we read
        with self._lock:
            for s, t in zip(o.tolist(), e.tolist()):
                if s < 0 or t > self.size or self._covering(s, t, owner=me) is not None:
                    continue  # out of range: the read says so; held: nothing to fetch
                if out and s - out[-1][1] < gap and (piece is None or t - out[-1][0] <= piece):
                    out[-1] = (out[-1][0], max(out[-1][1], t))
                else:
                    if total >= budget:
                        break
                    out.append((s, t))
                total = sum(b - a for a, b in out)
        return out

    def _fetch_all(self, ranges: list[tuple[int, int]]) -> list[tuple[int, pa.Buffer]]:
        if not ranges:
            return []

        def one(r: tuple[int, int]) -> tuple[int, pa.Buffer]:
            return r[0], aligned(r[0], self.obj.get(r[0], r[1], self.meta))

        if len(ranges) == 1:
            return [one(ranges[0])]
        futures = [DAEMONS.submit(partial(one, r)) for r in ranges]  # DAEMONS.n at a time
        return [f.result() for f in futures]

    def _add(self, ext: _Extent) -> None:
        with self._lock:
            self._add_locked(ext)

    def _add_locked(self, ext: _Extent) -> None:
        i = bisect.bisect_right(self._starts, ext.start)
        self._starts.insert(i, ext.start)
        self._extents.insert(i, ext)
        if ext.transient:
            self._transient[id(ext)] = ext
            self._transient_bytes += ext.buf.size
            while self._transient_bytes > TRANSIENT_MAX and len(self._transient) > 1:
                self._drop(next(iter(self._transient.values())))

    def _drop(self, ext: _Extent) -> None:
        """(with the lock held)"""
        if self._transient.pop(id(ext), None) is None:
            return
        self._transient_bytes -= ext.buf.size
        i = self._extents.index(ext)
        del self._extents[i], self._starts[i]

    def __repr__(self) -> str:
        return f"<RemoteSource {self.path!r}: {self.size} bytes, etag {self.meta.etag}>"
