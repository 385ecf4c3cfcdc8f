"""A streaming, seekable, read-only file object over one archived file (one chunk in memory)."""

from __future__ import annotations

import bisect
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .reader import Archive, FileInfo


class ArchiveFile(io.RawIOBase):
    def __init__(self, archive: "Archive", info: "FileInfo") -> None:
        super().__init__()
        self._archive = archive
        self._info = info
        self._starts = [c.fdata_offset for c in info.chunks]
        self._size = info.size
        self._pos = 0
        self._cached: tuple[int, bytes | memoryview] | None = None
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

    def _empty(self) -> None:
        """An empty file's one chunk is still decoded and checked once (a frame that declares
        0 bytes may hold more: the index would lie), before end of file is reported."""
        if self._size == 0 and self._cached is None:
            self._chunk(0)

    def readinto(self, buffer: "memoryview | bytearray") -> int:  # type: ignore[override]
        """Fill ``buffer`` across chunk boundaries; short only at end of file."""
        self._empty()
        out = memoryview(buffer).cast("B")
        done = 0
        while done < len(out) and self._pos < self._size:
            i = bisect.bisect_right(self._starts, self._pos) - 1
            data = self._chunk(i)
            start = self._pos - self._starts[i]
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
            data = self._chunk(i)
            start = self._pos - self._starts[i]
            if start >= len(data):
                break
            parts.append(bytes(data[start:]) if start or not isinstance(data, bytes) else data)
            self._pos += len(data) - start
        return b"".join(parts)
