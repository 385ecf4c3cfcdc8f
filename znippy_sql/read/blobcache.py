"""The last decoded compressed blob of an archive: a pack read once for the files in it.

A packed blob holds the chunks of many small files (FORMAT §3). Read one after the other
(``cat`` of neighbours, a directory listing's files, ``Archive.read`` in path order) they
would each decode the whole pack; :class:`BlobCache` keeps the last one decoded, or only the
prefix a point read needed (a cold read of a file early in a 4 MiB pack decodes a fraction of
it, at least :data:`PREFIX_MIN`).
"""

from __future__ import annotations

from ..errors import CodecError, FormatError
from ..format import codec
from ..format.rangeio import RangeSource
from ..format.validate import MAX_CHUNK_BYTES

#: a point read of a pack member decodes at least this much of the pack (the files next to it
#: are often read next, and zstd decodes in blocks of 128 KiB anyway)
PREFIX_MIN = 256 << 10


class BlobCache:
    """The last decoded blob: ``last`` is (offset, size, bytes, whole: all its bytes or only a
    prefix, its frame), or None."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.last: tuple[int, int, memoryview, bool, memoryview] | None = None

    def decoded(self, source: RangeSource, offset: int, size: int, where: str = "",
                upto: int | None = None) -> memoryview:
        """The decoded bytes of a compressed blob whatever its size (a packed blob holds
        several chunks), its declared length bounded first; the last one is kept, so the
        files of one pack read one after the other decode it once. ``upto``: only the first
        ``upto`` bytes are needed (a point read of a pack member): a frame of our zstd shape
        is decoded that far and no further (``codec.Decoder.decode_prefix``)."""
        cached = self.last
        again = cached is not None and cached[0] == offset and cached[1] == size
        if cached is not None and again:
            if cached[3] or (upto is not None and upto <= cached[2].nbytes):
                return cached[2]
            frame = cached[4]  # a prefix of it was decoded: now the whole, from those bytes
        else:
            frame = memoryview(source.read(offset, size, "blob")).cast("B")
        try:
            n = codec.content_size(frame, where=where)
        except CodecError as exc:
            raise CodecError(exc.problem, path=self.path) from None
        if n > MAX_CHUNK_BYTES:
            raise FormatError(f"{where}blob declares {n} bytes, more than the "
                              f"{MAX_CHUNK_BYTES}-byte limit", path=self.path)
        want = None if upto is None or again else max(upto, PREFIX_MIN)
        try:
            if want is not None and want < n:
                prefix = codec.decoder().decode_prefix(frame, n, want)
                if prefix is not None:
                    self.last = (offset, size, prefix, False, frame)
                    return prefix
            data = codec.decoder().decode_view(frame, n)
        except CodecError as exc:
            raise CodecError(where + exc.problem, path=self.path) from None
        self.last = (offset, size, data, True, frame)
        return data

    def clear(self) -> None:
        self.last = None
