"""Checked byte ranges of one archive: the :class:`RangeSource` protocol and its memory map.

Format code reads only through a :class:`RangeSource`, whose ``read(offset, length)`` checks
the range against the object before slicing, so no length read from the file can make a reader
touch or allocate past the end. :class:`MappedSource` (a local file) hands out zero-copy views
of a memory map; ``znippy_sql.remote.source.RemoteSource`` (an object in S3, GCS, Azure or on
an HTTP server) fetches the ranges it is asked for. Readers do not know which one they hold.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import pyarrow as pa

from ..errors import FormatError, PathNotFoundError


@runtime_checkable
class RangeSource(Protocol):
    """Checked byte ranges of one archive of ``size`` bytes named ``path``."""

    path: str
    size: int
    bytes_read: int  #: bytes handed out by ``read`` (and counted by callers of ``view``)

    def check(self, offset: int, length: int, what: str) -> None:
        """Raise :class:`FormatError` unless ``[offset, offset+length)`` is inside."""

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        """The checked range as a buffer (zero-copy where the source allows)."""

    def view(self, offset: int, length: int) -> memoryview:
        """The unsigned bytes of a range the caller has checked, not counted in ``bytes_read``."""

    #: True when ranges are fetched (remote), False when they are a page fault away
    fetches: bool

    def prefetch(self, offsets: Sequence[int], lengths: Sequence[int], *,
                 keep: bool = False) -> None:
        """A hint: these ranges are read next (a remote source fetches them together, and
        holds them until released, or for its life with ``keep``; a memory map has nothing
        to do)."""

    def release(self, offset: int, length: int) -> None:
        """The caller is done with a range: its memory may go (best effort)."""

    def close(self) -> None: ...


class MappedSource:
    """A local file as one zero-copy ``pa.Buffer``; counts the bytes handed out."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        try:
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            raise PathNotFoundError("archive not found", path=self.path) from None
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

    def view(self, offset: int, length: int) -> memoryview:
        return self._whole[offset : offset + length]

    @property
    def _whole(self) -> memoryview:
        whole = self.__dict__.get("_mv")
        if whole is None:
            whole = self.__dict__["_mv"] = memoryview(self.buffer).cast("B")
        return whole

    fetches = False

    def prefetch(self, offsets: Sequence[int], lengths: Sequence[int], *,
                 keep: bool = False) -> None:
        pass  # every page is a fault away

    def release(self, offset: int, length: int) -> None:
        """Drop the mapped pages of a range this process has finished reading from its
        resident set (they stay in the page cache; a later read maps them again), so reading
        a whole archive once does not grow RSS with the archive's size. Best effort."""
        # only pages of this file's mapping, whatever the caller computed: madvise on any
        # other memory of the process would drop (zero) it
        offset, end = max(offset, 0), min(offset + length, self.size)
        length = end - offset
        if self._mmap is None or _MADVISE is None or length < _PAGE:
            return
        start = self.buffer.address + offset
        first = (start + _PAGE - 1) // _PAGE * _PAGE  # whole pages inside the range only
        end = (start + length) // _PAGE * _PAGE
        if end > first:
            _MADVISE(ctypes.c_void_p(first), ctypes.c_size_t(end - first), _MADV_DONTNEED)

    def close(self) -> None:
        self.__dict__.pop("_mv", None)
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None


_PAGE = mmap.PAGESIZE
_MADV_DONTNEED = getattr(mmap, "MADV_DONTNEED", 4)


def _madvise() -> Callable[..., int] | None:
    """libc's ``madvise``, or None: not a libc with madvise, nothing to release."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return None
    return fn


_MADVISE = _madvise()
