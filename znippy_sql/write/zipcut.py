"""Chunk boundaries of a zip-family file, taken from its own central directory.

A zip is a run of entries (local file header, data, optional data descriptor), then the central
directory (one record per entry) and the end-of-central-directory record::

    [ LFH 30 + name + extra ][ data (csize bytes) ][ DD ] ... [ central directory ][ EOCD ]
      ^ entry start            ^ data start                   ^ directory start

:func:`cut` turns that into spans ``(offset, length, mode)`` that cover the file back to back:

- the data of an entry of at least ``BODY_MIN`` compressed bytes (with its data descriptor and
  anything up to the next entry) is a span of its own, cut into ``block_size`` pieces from its
  own start; its header goes with the span before. So a class or resource that is the same in
  two jars is the same span in both, whatever the entries around it and whatever time stamp its
  header carries;
- smaller entries are grouped, header and data together, into runs ended by a content-defined
  rule: after an entry whose CRC-32 (the directory's, a function of the entry's bytes only)
  falls under a threshold proportional to the entry's size, so a run holds ``GROUP_TARGET``
  bytes on average, at least ``GROUP_MIN``, never more than ``GROUP_MAX`` nor ``block_size``.
  Identical runs of entries therefore give identical spans again after a difference;
- the central directory and the EOCD record are the last span(s).

``mode`` says what the codec should do with the span: :data:`~znippy_sql.format.codec.RAW` for
deflated (or otherwise compressed) entry data (zstd gains nothing on it),
:data:`~znippy_sql.format.codec.PROBE` for stored entry data (compressed when
:func:`codec.probe` says it pays), :data:`~znippy_sql.format.codec.COMPRESS` for grouped
entries (their headers and names shrink even when their data does not; the frame is kept
only when smaller) and for the directory.

Anything unexpected (no EOCD, a multi-disk zip, a directory that does not parse, local
headers that are not where the directory says, entries that overlap) gives ``None``: the file
is then cut into fixed-size chunks like any other. ``cut`` never raises on any input.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from collections.abc import Callable

import numpy as np

from ..format import codec

ZIP_SUFFIXES = codec.ZIP_SUFFIXES  # the file suffixes cut at entry boundaries

BODY_MIN = 2 << 10  # entry data at least this big is a span of its own
GROUP_TARGET = 64 << 10  # average bytes of a run of smaller entries
GROUP_MIN = 16 << 10
GROUP_MAX = 256 << 10
GROUP_MODE = codec.COMPRESS  # what the codec does with a run of grouped entries

#: end of central directory: sig, disk, cd disk, entries here, entries, cd size, cd offset,
#: comment length
_EOCD = struct.Struct("<4sHHHHIIH")
_EOCD_SIG = b"PK\x05\x06"
_LOC64 = struct.Struct("<4sIQI")  # zip64 locator: sig, disk, zip64 EOCD offset, disks
_LOC64_SIG = b"PK\x06\x07"
#: zip64 end record: sig, size, made by, needed, disk, cd disk, entries here, entries, cd size,
#: cd offset
_EOCD64 = struct.Struct("<4sQHHIIQQQQ")
_EOCD64_SIG = b"PK\x06\x06"
_CDR = struct.Struct("<4sHHHHHHIIIHHHHHII")  # central directory record, 46 bytes
_CDR_SIG = b"PK\x01\x02"
_LFH_SIG = b"PK\x03\x04"
_LFH_MAGIC = 0x04034B50
_MIX = 0x9E3779B1  # a 32-bit golden-ratio multiplier: spreads CRC-32 values
_LFH_SIZE = 30
_U16 = struct.Struct("<HH")
_MAX_COMMENT = 0xFFFF
_STORED = 0
_FULL32 = 0xFFFFFFFF

Span = tuple[int, int, int]  # offset, length, codec mode


def is_zip_family(path: str) -> bool:
    """True when the file name's suffix is one of :data:`ZIP_SUFFIXES`."""
    dot = path.rfind(".")
    return dot > path.rfind("/") + 1 and path[dot + 1 :].lower() in ZIP_SUFFIXES


def cut(data: bytes | memoryview, *, block_size: int) -> list[Span] | None:
    """Spans covering ``data`` back to back at entry boundaries, or None (not a zip we read)."""
    view = memoryview(data)
    size = len(view)
    try:
        found = _directory(view, 0, size)
        if found is None:
            return None
        entries = _entries(view, 0, found, None)
    except (struct.error, ValueError, IndexError, OverflowError):
        return None
    return None if entries is None else _spans(entries, found[0], size, block_size)


def cut_file(fd: int, size: int, *, block_size: int) -> list[Span] | None:
    """:func:`cut` of the ``size`` bytes of an open file, read in pieces (for a zip too big
    to read whole): its end, its directory, then each local header. ``OSError`` on a failed
    or short read."""
    try:
        base = max(0, size - _TAIL)
        tail = _pread(fd, size - base, base)
        found = _directory(memoryview(tail), base, size)
        if found is None:
            return None
        if found[0] < base:  # the directory starts before the bytes read so far
            base = found[0]
            tail = _pread(fd, size - base, base)
        entries = _entries(memoryview(tail), base, found, lambda at: _pread(fd, _LFH_SIZE, at))
    except (struct.error, ValueError, IndexError, OverflowError):
        return None
    return None if entries is None else _spans(entries, found[0], size, block_size)


def _pread(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) != length:
        raise OSError(f"short read at {offset} (file changed while writing?)")
    return data


# -- the directory ------------------------------------------------------------------------------
#: the end of a zip that holds its EOCD record (with the longest comment) and zip64 records
_TAIL = _EOCD.size + _MAX_COMMENT + _LOC64.size + _EOCD64.size

Directory = tuple[int, int, int, int]  # directory start, its end, entry count, prefix bytes
#: per entry in file order: start, data start, csize, crc, method, next entry's start
Entries = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _directory(view: memoryview, base: int, size: int) -> Directory | None:
    """Where the central directory is, from the end records; ``view`` holds the file's
    bytes from ``base`` to its end ``size``."""
    tail_from = max(base, size - _EOCD.size - _MAX_COMMENT)
    eocd = bytes(view[tail_from - base :]).rfind(_EOCD_SIG)
    if eocd < 0:
        return None
    eocd += tail_from
    if eocd + _EOCD.size > size:
        return None
    _, disk, cd_disk, here, count, cd_size, cd_off, comment = _EOCD.unpack_from(view, eocd - base)
    if disk or cd_disk or here != count or eocd + _EOCD.size + comment > size:
        return None
    record_end = eocd  # the directory ends where the (zip64) end record starts
    if _FULL32 in (cd_size, cd_off) or count == 0xFFFF:
        loc = eocd - _LOC64.size
        if loc < base or bytes(view[loc - base : loc - base + 4]) != _LOC64_SIG:
            return None
        _, _, rec, _ = _LOC64.unpack_from(view, loc - base)
        if rec < base or rec + _EOCD64.size > loc or \
                bytes(view[rec - base : rec - base + 4]) != _EOCD64_SIG:
            return None
        (_, _, _, _, disk, cd_disk, here, count, cd_size,
         cd_off) = _EOCD64.unpack_from(view, rec - base)
        if disk or cd_disk or here != count:
            return None
        record_end = rec
    cd_start = record_end - cd_size
    prefix = cd_start - cd_off  # bytes before the zip (a self-extracting stub, say)
    if cd_start < 0 or prefix < 0 or count == 0:
        return None
    return cd_start, record_end, count, prefix


def _entries(view: memoryview, base: int, found: Directory,
             header: Callable[[int], bytes | memoryview] | None) -> Entries | None:
    """Per entry in file order: start, data start, csize, crc, method (arrays); None when the
    directory or the local headers do not hold together. ``view`` holds the file from
    ``base`` on (``base`` at or before the directory); ``header(at)`` gives the 30 bytes of
    a local header (None: ``view`` holds the whole file)."""
    cd_start, record_end, count, prefix = found
    b = np.frombuffer(view, dtype=np.uint8)
    records = _records_fast(b, cd_start - base, record_end - base, count)
    if records is None:
        records = _records_slow(view, cd_start - base, record_end - base, count)
        if records is None:
            return None
    local, csize, crc, method = records
    local += prefix
    order = np.argsort(local, kind="stable")
    start, csize, crc, method = local[order], csize[order], crc[order], method[order]
    stop = np.append(start[1:], cd_start)
    if bool(np.any(start + _LFH_SIZE > stop)) or (base == 0 and start[0] < 0):
        return None
    if header is None:
        lfh = _LFH_FIELDS.read(b, start)
        if bool(np.any(lfh["sig"] != _LFH_MAGIC)):
            return None
        names, extras = lfh["nlen"].astype(np.int64), lfh["xlen"].astype(np.int64)
    else:
        heads = [header(at) for at in start.tolist()]
        if any(bytes(h[:4]) != _LFH_SIG for h in heads):
            return None
        pairs = np.array([_U16.unpack_from(h, 26) for h in heads], dtype=np.int64)
        names, extras = pairs[:, 0], pairs[:, 1]
    data_at = start + _LFH_SIZE + names + extras
    if bool(np.any(data_at + csize > stop)):
        return None
    return start, data_at, csize, crc, method, stop


def _records_fast(b: np.ndarray, pos: int, end: int, count: int
                  ) -> tuple[np.ndarray, ...] | None:
    """The directory's (local offset, csize, crc, method) per record, found by their
    signatures at once; None when that is ambiguous (a name holding the signature) or a
    record needs zip64 fields: then :func:`_records_slow` walks it."""
    cd = b[pos:end]
    if len(cd) < _CDR.size:
        return None
    hits = np.flatnonzero((cd[:-3] == 0x50) & (cd[1:-2] == 0x4B) & (cd[2:-1] == 1)
                          & (cd[3:] == 2))
    if len(hits) != count or hits[0] != 0 or hits[-1] + _CDR.size > len(cd):
        return None
    rec = _CDR_FIELDS.read(b, hits + pos)
    step = (_CDR.size + rec["nlen"].astype(np.int64) + rec["xlen"].astype(np.int64)
            + rec["clen"].astype(np.int64))
    if bool(np.any(hits[1:] != hits[:-1] + step[:-1])) or hits[-1] + step[-1] != len(cd):
        return None
    csize, usize, local = (rec[f].astype(np.int64) for f in ("csize", "usize", "local"))
    if bool(np.any((csize == _FULL32) | (usize == _FULL32) | (local == _FULL32))):
        return None
    return local, csize, rec["crc"].astype(np.int64), rec["method"].astype(np.int64)


def _records_slow(view: memoryview, pos: int, end: int, count: int
                  ) -> tuple[np.ndarray, ...] | None:
    """:func:`_records_fast` by walking the records one by one (zip64 fields included)."""
    records = []
    unpack = _CDR.unpack_from
    for _ in range(count):
        (sig, _, _, _, method, _, _, crc, csize, usize, nlen, xlen, clen, _, _, _,
         local) = unpack(view, pos)
        if sig != _CDR_SIG:
            return None
        extra_at = pos + _CDR.size + nlen
        pos = extra_at + xlen + clen
        if pos > end:
            return None
        if _FULL32 in (csize, usize, local):
            csize, local = _zip64_sizes(view, extra_at, xlen, usize, csize, local)
        records.append((local, csize, crc, method))
    if pos != end:
        return None
    cols = np.array(records, dtype=np.uint64).T.astype(np.int64)
    return cols[0], cols[1], cols[2], cols[3]


class _Fields:
    """Little-endian fields read at once from records at many offsets: the bytes
    ``picks`` of each record are gathered (one fancy index) and viewed as ``dtype``."""

    def __init__(self, picks: list[range], **fields: tuple[str, int]) -> None:
        self.picks = np.concatenate([np.arange(r.start, r.stop, dtype=np.int32) for r in picks])
        where = {}
        pos = 0
        for r in picks:  # a field's place in the gathered bytes
            for i in r:
                where[i] = pos
                pos += 1
        self.dtype = np.dtype({"names": list(fields), "formats": [f for f, _ in fields.values()],
                               "offsets": [where[o] for _, o in fields.values()],
                               "itemsize": pos})

    def read(self, b: np.ndarray, at: np.ndarray) -> np.ndarray:
        kind = np.int32 if len(b) < 1 << 31 else np.int64
        return b[at.astype(kind)[:, None] + self.picks].view(self.dtype).ravel()


_CDR_FIELDS = _Fields([range(10, 12), range(16, 34), range(42, 46)], method=("<u2", 10),
                      crc=("<u4", 16), csize=("<u4", 20), usize=("<u4", 24), nlen=("<u2", 28),
                      xlen=("<u2", 30), clen=("<u2", 32), local=("<u4", 42))
_LFH_FIELDS = _Fields([range(0, 4), range(26, 30)], sig=("<u4", 0), nlen=("<u2", 26),
                      xlen=("<u2", 28))


def _zip64_sizes(view: memoryview, at: int, xlen: int, usize: int, csize: int,
                 local: int) -> tuple[int, int]:
    """``(csize, local header offset)`` from an entry's zip64 extra field (its values come in
    the order usize, csize, offset, each only when the 32-bit field is full)."""
    end = at + xlen
    while at + 4 <= end:
        tag, size = _U16.unpack_from(view, at)
        if tag == 1:
            values = iter(struct.unpack_from(f"<{size // 8}Q", view, at + 4))
            if usize == _FULL32:
                next(values)
            if csize == _FULL32:
                csize = next(values)
            if local == _FULL32:
                local = next(values)
            return csize, local
        at += 4 + size
    raise ValueError("zip64 sizes without a zip64 extra field")


# -- the spans ----------------------------------------------------------------------------------
def _spans(entries: Entries, cd_start: int, size: int, block: int) -> list[Span]:
    start, data_at, csize, crc, method, stop = entries
    group_max = min(GROUP_MAX, block)
    big = csize >= BODY_MIN
    # content-defined end of a run: the CRC-32 mixed, under a threshold proportional to the
    # entry's share of the target (so runs hold GROUP_TARGET bytes on average)
    mixed = (crc * _MIX) & _FULL32
    ends = ~big & (mixed * GROUP_TARGET < (stop - start) << 32)
    events = np.flatnonzero(big | ends)
    cut = _Cutter(start.tolist(), group_max, block)
    for i, is_big, body, end, stored in zip(events.tolist(), big[events].tolist(),
                                            data_at[events].tolist(), stop[events].tolist(),
                                            (method[events] == _STORED).tolist()):
        if is_big:
            cut.run_to(body)
            _pieces(cut.spans, body, end, block, codec.PROBE if stored else codec.RAW)
            cut.run = end
        elif end - cut.run >= GROUP_MIN:
            cut.run_to(end)
    cut.run_to(cd_start)
    _pieces(cut.spans, cd_start, size, block, codec.COMPRESS)
    return cut.spans


class _Cutter:
    """Runs of grouped entries: ``run`` is where the open run starts; :meth:`run_to` ends it,
    in pieces when it holds more than ``group_max`` (cut at entry starts where it can)."""

    def __init__(self, starts: list[int], group_max: int, block: int) -> None:
        self.spans: list[Span] = []
        self.run = 0
        self._starts = starts
        self._max = group_max
        self._block = block

    def run_to(self, end: int) -> None:
        run = self.run
        while end - run > self._max:
            # the last entry start that keeps the piece within the cap (none: block pieces)
            k = bisect_right(self._starts, run + self._max) - 1
            at = self._starts[k] if k >= 0 else run
            if at <= run:
                at = min(end, run + self._block)
            self.spans.append((run, at - run, GROUP_MODE))
            run = at
        if end > run:
            self.spans.append((run, end - run, GROUP_MODE))
        self.run = end


def _pieces(spans: list[Span], start: int, end: int, block: int, mode: int) -> None:
    """``[start, end)`` as spans of at most ``block`` bytes cut from ``start``."""
    for off in range(start, end, block):
        spans.append((off, min(block, end - off), mode))
