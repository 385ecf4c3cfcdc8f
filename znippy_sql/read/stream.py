"""One chunk's bytes, checked: whole (:func:`chunk_view`) or streamed in pieces
(:func:`chunk_pieces`, :func:`checked_pieces`) so memory stays bounded whatever size an
archive claims.

A raw chunk is a view of the map; a compressed one is decoded (a packed one sliced out of its
decoded blob, :mod:`.blobcache`); either is checked against its BLAKE3 unless told not. A
compressed chunk above ``codec.STREAM_BYTES`` is decoded in pieces of ``codec.PIECE_BYTES``.
The functions read through :class:`ChunkSource`, the few members of an archive they need.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..errors import ChecksumError, CodecError, FormatError
from ..format import b3 as blake3
from ..format import codec
from ..format.rangeio import RangeSource
from ..format.validate import MAX_CHUNK_BYTES
from .columns import Chunk


class ChunkSource(Protocol):
    """What reading a chunk needs of an archive (``Archive`` is one)."""

    @property
    def path(self) -> str: ...
    @property
    def source(self) -> RangeSource: ...
    @property
    def tail_offset(self) -> int: ...
    @property
    def verify_checksums(self) -> bool: ...
    @property
    def packed(self) -> bool: ...
    def decoded_blob(self, offset: int, size: int, where: str = "",
                     upto: int | None = None) -> memoryview: ...
    def chunk_view(self, path: str, chunk: Chunk, *, verify: bool | None = None
                   ) -> bytes | memoryview: ...


def chunk_view(a: ChunkSource, path: str, chunk: Chunk, *, verify: bool | None = None
               ) -> bytes | memoryview:
    """The original bytes of one chunk (a raw one as a view of the map, no copy), checked
    against its BLAKE3 unless ``verify`` is false (None: as the archive was opened)."""
    # error texts are built only when something is wrong: this runs once per chunk
    def where() -> str:
        return f"{path!r} chunk {chunk.chunk_seq}: "

    if chunk.blob_offset + chunk.blob_size > a.tail_offset:
        raise FormatError(f"{where()}blob [{chunk.blob_offset}, "
                          f"{chunk.blob_offset + chunk.blob_size}) runs into the index tail "
                          f"at {a.tail_offset}", path=a.path)
    data: bytes | memoryview
    if chunk.compressed and a.packed:
        end = chunk.inner_offset + chunk.uncompressed_size
        decoded = a.decoded_blob(chunk.blob_offset, chunk.blob_size, where(), upto=end)
        if end > decoded.nbytes:
            raise FormatError(f"{where()}slice [{chunk.inner_offset}, {end}) lies outside "
                              f"its decoded blob of {decoded.nbytes} bytes", path=a.path)
        data = decoded[chunk.inner_offset : end]
    elif chunk.compressed:
        if chunk.uncompressed_size > MAX_CHUNK_BYTES:
            raise FormatError(f"{where()}size {chunk.uncompressed_size} exceeds the "
                              f"{MAX_CHUNK_BYTES}-byte chunk limit", path=a.path)
        blob = a.source.read(chunk.blob_offset, chunk.blob_size, "blob")
        try:
            data = codec.decoder().decode_view(memoryview(blob), chunk.uncompressed_size)
        except CodecError as exc:
            raise CodecError(where() + exc.problem, path=a.path) from None
    else:
        blob = a.source.read(chunk.blob_offset, chunk.blob_size, "blob")
        if chunk.blob_size != chunk.uncompressed_size:
            raise FormatError(f"{where()}raw blob is {chunk.blob_size} bytes, index says "
                              f"{chunk.uncompressed_size}", path=a.path)
        data = memoryview(blob).cast("B")
    if (a.verify_checksums if verify is None else verify):
        if blake3.blake3(data).digest() != chunk.checksum:
            raise ChecksumError(f"{where()}BLAKE3 mismatch", path=a.path)
    return data


def chunk_pieces(a: ChunkSource, path: str, chunk: Chunk, *, verify: bool | None = None
                 ) -> Iterator[bytes | memoryview]:
    """One chunk's bytes in order, for writing them out: a compressed chunk above
    ``codec.STREAM_BYTES`` is decoded in pieces of ``codec.PIECE_BYTES`` (bounded memory);
    any other comes whole from ``a.chunk_view``. A streamed chunk's BLAKE3 is checked after
    its last piece (ChecksumError then): write it where it is not final yet (a temporary
    file), or check it with a first pass (:func:`checked_pieces`)."""
    if not chunk.compressed or chunk.uncompressed_size <= codec.STREAM_BYTES \
            or chunk.uncompressed_size > MAX_CHUNK_BYTES \
            or chunk.blob_offset + chunk.blob_size > a.tail_offset:
        yield a.chunk_view(path, chunk, verify=verify)  # (it words any problem)
        return
    where = f"{path!r} chunk {chunk.chunk_seq}: "
    blob = a.source.read(chunk.blob_offset, chunk.blob_size, "blob")
    check = a.verify_checksums if verify is None else verify
    hasher = blake3.blake3() if check else None
    try:
        for piece in codec.decoder().decode_pieces(memoryview(blob), chunk.uncompressed_size,
                                                   where=where):
            if hasher is not None:
                hasher.update(piece)
            yield piece
    except CodecError as exc:
        raise CodecError(exc.problem, path=a.path) from None
    if hasher is not None and hasher.digest() != chunk.checksum:
        raise ChecksumError(f"{where}BLAKE3 mismatch", path=a.path)


def streamed(chunk: Chunk) -> bool:
    """Whether :func:`chunk_pieces` gives ``chunk`` in pieces, checked only after the last."""
    return chunk.compressed and codec.STREAM_BYTES < chunk.uncompressed_size <= MAX_CHUNK_BYTES


def checked_pieces(a: ChunkSource, path: str, chunk: Chunk, *, verify: bool | None = None
                   ) -> Iterator[bytes | memoryview]:
    """:func:`chunk_pieces` whose every piece is checked before it comes: a streamed chunk
    is decoded twice (a first pass checks its BLAKE3), for output that cannot be taken back
    (stdout, a reader)."""
    if streamed(chunk) and (a.verify_checksums if verify is None else verify):
        for _ in chunk_pieces(a, path, chunk, verify=True):
            pass
        verify = False
    return chunk_pieces(a, path, chunk, verify=verify)
