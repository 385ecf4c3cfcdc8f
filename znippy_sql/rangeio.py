"""Checked byte ranges of one memory-mapped file.

Format code reads only through :class:`RangeSource`, whose ``read(offset, length)`` checks the
range against the file before slicing, so no length read from the file can make a reader touch
or allocate past the end. Slices are zero-copy views of the memory map.
"""

from __future__ import annotations

import os

import pyarrow as pa

from .errors import FormatError


class RangeSource:
    """A whole file as one zero-copy ``pa.Buffer``; counts the bytes handed out."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            size = os.path.getsize(self.path)
        except OSError as exc:
            raise FormatError(f"cannot open: {exc.strerror or exc}", path=self.path) from None
        if size == 0:
            self._mmap = None
            self.buffer = pa.py_buffer(b"")
        else:
            try:
                self._mmap = pa.memory_map(self.path, "r")
                self.buffer = self._mmap.read_buffer(size)
            except OSError as exc:
                raise FormatError(f"cannot map: {exc}", path=self.path) from None
        self.size = size
        self.bytes_read = 0

    def check(self, offset: int, length: int, what: str) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise FormatError(
                f"{what}: range [{offset}, {offset + length}) is outside the file "
                f"({self.size} bytes)",
                path=self.path,
            )

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        self.check(offset, length, what)
        self.bytes_read += length
        return self.buffer.slice(offset, length)

    def close(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None
