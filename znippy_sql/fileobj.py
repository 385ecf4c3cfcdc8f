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
        self._cached: tuple[int, bytes] | None = None
        self.name = info.relative_path

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError("negative seek position")
        self._pos = base + offset
        return self._pos

    def _chunk(self, i: int) -> bytes:
        if self._cached is None or self._cached[0] != i:
            data = self._archive.read_chunk(self._info.relative_path, self._info.chunks[i])
            self._cached = (i, data)
        return self._cached[1]

    def readinto(self, buffer: "memoryview | bytearray") -> int:  # type: ignore[override]
        if self._pos >= self._size:
            return 0
        i = bisect.bisect_right(self._starts, self._pos) - 1
        data = self._chunk(i)
        start = self._pos - self._starts[i]
        n = min(len(buffer), len(data) - start)
        memoryview(buffer)[:n] = data[start : start + n]
        self._pos += n
        return n
