"""An archive laid out anew: ranges of the real file, then bytes made in memory.

A hot archive (:mod:`.hot`) is its real blob bytes followed by a tail made from its journal;
an archive with delta chunks (:mod:`.delta`) is its real bytes up to its tail, then each delta
chunk's reconstructed bytes (made when first read), then a tail made anew. Either is a
:class:`VirtualSource`: the ``RangeSource`` of ``format/rangeio.py`` over a list of pieces, so
every read path of the reader (point reads, ``read_many``, ``extract``, ``verify``, the views)
reads it as any archive. Reads inside one piece are zero-copy slices; a read across pieces is
joined.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..errors import FormatError
from ..format.footer import FOOTER_LEN, decode_footer
from ..format.rangeio import RangeSource

#: bytes made when first needed (a delta chunk's reconstruction)
Maker = Callable[[], bytes]


@dataclass
class Piece:
    """``length`` bytes at ``start`` of the virtual file: from the real file at
    ``file_offset``, else ``data``, else what ``make`` returns (kept once made)."""

    start: int
    length: int
    file_offset: int | None = None
    data: pa.Buffer | None = None
    make: Maker | None = None


class VirtualSource:
    """Checked byte ranges of the pieces laid end to end (``path`` is the real file's)."""

    fetches = False

    def __init__(self, base: RangeSource, pieces: Sequence[Piece], why: str) -> None:
        self.base = base
        self.path = base.path
        self.pieces = list(pieces)
        self._starts = [p.start for p in self.pieces]
        last = self.pieces[-1] if self.pieces else None
        self.size = 0 if last is None else last.start + last.length
        self.bytes_read = 0
        #: what was laid anew ("hot", "delta"): :mod:`.layouts` tells the reader
        self.why = why
        #: a remote archive's ranges are fetched (its pieces are read through ``base``)
        self.fetches = bool(getattr(base, "fetches", False))

    @property
    def manifest_offset(self) -> int:
        """Where the made tail's manifest starts (its footer says)."""
        at = decode_footer(self.read(self.size - FOOTER_LEN, FOOTER_LEN, "footer").to_pybytes())
        if at is None:
            raise FormatError("a made tail has no footer", path=self.path)
        return at

    def check(self, offset: int, length: int, what: str) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FormatError(f"{what}: range [{offset}, {offset + length}) is outside the "
                              f"file ({self.size} bytes)", path=self.path)

    def _bytes(self, piece: Piece, offset: int, length: int) -> pa.Buffer:
        at = offset - piece.start
        if piece.file_offset is not None:
            return self.base.read(piece.file_offset + at, length, "range")
        if piece.data is None and piece.make is not None:
            made = piece.make()
            if len(made) != piece.length:
                raise FormatError(f"a made range is {len(made)} bytes, {piece.length} were "
                                  "laid out for it", path=self.path)
            piece.data = pa.py_buffer(made)
        if piece.data is None:
            raise FormatError("a virtual range has no bytes", path=self.path)
        return piece.data.slice(at, length)

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        self.check(offset, length, what)
        self.bytes_read += length
        i = max(bisect.bisect_right(self._starts, offset) - 1, 0)
        parts: list[pa.Buffer] = []
        end = offset + length
        while offset < end or (length == 0 and not parts):
            piece = self.pieces[i]
            take = min(end, piece.start + piece.length) - offset
            parts.append(self._bytes(piece, offset, take))
            offset += take
            i += 1
            if length == 0:
                break
        if len(parts) == 1:
            return parts[0]
        return pa.py_buffer(b"".join(p.to_pybytes() for p in parts))

    def view(self, offset: int, length: int) -> memoryview:
        count = self.bytes_read
        out = memoryview(self.read(offset, length, "range")).cast("B")
        self.bytes_read = count
        return out

    def prefetch(self, offsets: Sequence[int], lengths: Sequence[int], *,
                 keep: bool = False) -> None:
        pass  # a hint only: each piece is read through base when it is needed

    def release(self, offset: int, length: int) -> None:
        pass

    def close(self) -> None:
        self.base.close()


#: what each kind of laying anew is, for ``verify``'s note and ``append``'s refusal
LAID_ANEW = {
    "hot": "an unsealed (hot) archive of the Rust tool, read with the index rows of its "
           "journal segments (<name>.hot.NNNNN) beside it",
    "delta": "an archive of the Rust tool with delta chunks (__znippy_delta__), read with "
             "each delta applied to its base",
    "iceberg": "an Iceberg-backed archive of the Rust tool (its blob sidecar), read with "
               "the index rows of its tables in the skade warehouse given",
    "appended": "an archive the Rust tool appended to, read with each group's sub-indexes "
                "(the appended rows and the carried ones) as one",
}


def laid_anew(source: object) -> str | None:
    """What a source laid anew stands for (None for any other source)."""
    return LAID_ANEW.get(source.why) if isinstance(source, VirtualSource) else None
