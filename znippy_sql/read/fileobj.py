"""A streaming, seekable, read-only file object over one archived file (one chunk in memory;
a chunk that decodes to more than ``codec.STREAM_BYTES``: one piece of it, streamed after a
first pass checked it, so memory stays bounded whatever size the archive claims)."""

from __future__ import annotations

import bisect
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from .columns import FileInfo
    from .core import ArchiveCore as Archive


class ArchiveFile(io.RawIOBase):
    def __init__(self, archive: "Archive", info: "FileInfo") -> None:
        super().__init__()
        self._archive = archive
        self._info = info
        self._starts = [c.fdata_offset for c in info.chunks]
        self._size = info.size
        self._pos = 0
        self._cached: tuple[int, bytes | memoryview] | None = None
        self._stream: list | None = None  # [chunk, pieces, piece, where it starts in the chunk]
        self._checked: set[int] = set()  # streamed chunks whose BLAKE3 a first pass checked
        self.name = info.relative_path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            base = 0
        elif whence == io.SEEK_CUR:
            base = self._pos
        elif whence == io.SEEK_END:
            base = self._size
        else:
            raise ValueError(f"invalid whence ({whence!r})")
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def _chunk(self, i: int) -> bytes | memoryview:
        """Chunk ``i``, decoded and checked once; a raw chunk is a view of the map (no copy)."""
        if self._cached is None or self._cached[0] != i:
            data = self._archive.chunk_view(self._info.relative_path, self._info.chunks[i])
            self._cached = (i, data)
        return self._cached[1]

    def _data_at(self, i: int, start: int) -> tuple[bytes | memoryview, int]:
        """Bytes of chunk ``i`` holding its offset ``start``, and where they begin in it."""
        from ..format.codec import STREAM_BYTES

        chunk = self._info.chunks[i]
        if not (chunk.compressed and chunk.uncompressed_size > STREAM_BYTES):
            return self._chunk(i), 0
        s = self._stream
        if s is None or s[0] != i or start < s[3]:  # (re)start this chunk's stream
            pieces = self._archive.checked_pieces(self._info.relative_path, chunk,
                                                  verify=False if i in self._checked else None)
            self._checked.add(i)
            s = self._stream = [i, pieces, b"", 0]
        while start >= s[3] + len(s[2]):
            s[3] += len(s[2])
            piece = next(s[1], None)
            if piece is None:
                return b"", start
            s[2] = piece
        return s[2], s[3]

    def _empty(self) -> None:
        """An empty file's one chunk is still decoded and checked once (a frame that declares
        0 bytes may hold more: the index would lie), before end of file is reported."""
        if self._size == 0 and self._cached is None:
            self._chunk(0)

    def readinto(self, buffer: Buffer) -> int:
        """Fill ``buffer`` across chunk boundaries; short only at end of file."""
        self._empty()
        out = memoryview(buffer).cast("B")
        done = 0
        while done < len(out) and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            data, base = self._data_at(i, self._pos - self._starts[i])
            start = self._pos - self._starts[i] - base
            n = min(len(out) - done, len(data) - start)
            if n <= 0:  # cannot happen for a checked FileInfo; never loop forever
                break
            out[done : done + n] = data[start : start + n]
            done += n
            self._pos += n
        return done

    def readall(self) -> bytes:
        self._empty()
        parts = []
        while self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            data, base = self._data_at(i, self._pos - self._starts[i])
            start = self._pos - self._starts[i] - base
            if start >= len(data):
                break
            parts.append(bytes(data[start:]) if start or not isinstance(data, bytes) else data)
            self._pos += len(data) - start
        return b"".join(parts)
