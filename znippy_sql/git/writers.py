"""Push-path writers: packfile bytes appended verbatim to a blob file, two durability contracts.

| writer        | when ``append`` returns, the bytes are ...          | a machine crash after it |
|---------------|-----------------------------------------------------|--------------------------|
| FastWriter    | in the page cache (one ``pwrite``)                  | loses them               |
| SafeWriter    | fsynced, and a fsynced journal row points at them   | keeps both               |

SafeWriter's order per append, and no other: ``pwrite`` blob bytes → ``fsync(blobs)`` → journal
row into its userspace buffer → flush (``write``) → ``fsync(journal)``. A crash between the
fsyncs leaves orphan bytes nobody points at, never a row pointing into a hole.

One writer per blob file: ``flock(LOCK_EX | LOCK_NB)`` at open, refused at once (not waited
for) with a :class:`LockError` naming the file; the kernel drops it when the process dies. Two
threads sharing one writer get disjoint extents from one reserved cursor.
"""

from __future__ import annotations

import fcntl
import os
import threading
from dataclasses import dataclass

from ..errors import LockError, ZnippyError
from ..format.fsio import write_all
from .journal import Extent, encode_row, encode_schema, journal_path, scan_journal


class InjectedCrash(RuntimeError):
    """Raised by a :class:`Faults` that stops an append where a crash would."""


@dataclass(frozen=True)
class Faults:
    """Faults injected into the real ``SafeWriter.append`` (tests only)."""

    skip_blob_fsync: bool = False      # leave out step 2, the blob fsync
    die_between_fsyncs: bool = False   # stop after the blob fsync, before the journal row
    skip_journal_flush: bool = False   # fsync the journal without flushing its buffer first


class _BlobFile:
    """The blob file, opened for writing under the writer lock, and its append cursor."""

    name = "?"
    durability = "?"

    def __init__(self, blobs: str | os.PathLike[str]) -> None:
        self.path = os.fspath(blobs)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ZnippyError(f"cannot open the blob file: {exc.strerror}", path=self.path
                              ) from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise LockError("another writer holds this blob file (one process appends at a "
                            "time; the lock goes when that process exits)", path=self.path
                            ) from None
        self._cursor = os.fstat(self._fd).st_size  # read under the lock: it cannot be stale
        self._reserve = threading.Lock()

    def _write_blob(self, data: bytes | memoryview) -> Extent:
        size = len(data)
        with self._reserve:
            offset, self._cursor = self._cursor, self._cursor + size
        write_all(self._fd, data, offset)
        return offset, size

    @property
    def cursor(self) -> int:
        """Where the next append lands (the blob file's length at open, plus every append)."""
        return self._cursor

    def pread(self, offset: int, size: int) -> bytes:
        """Bytes of the blob file, as written (for reading acked packs back)."""
        return os.pread(self._fd, size, offset)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # releases the flock
            self._fd = -1

    def __enter__(self) -> "_BlobFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_log(jfd: int, journal: str) -> int:
    """Ready the journal open at ``jfd`` for appending; its length. The schema goes in once per
    file; a torn final message (a row that was never acked: acks follow its fsync) is cut so
    later rows stay readable. A whole row is never cut."""
    size = os.fstat(jfd).st_size
    if size:
        with open(journal, "rb") as fh:
            _rows, whole = scan_journal(fh.read(), path=journal)
        if whole < size:
            os.ftruncate(jfd, whole)
            os.fsync(jfd)
            size = whole
    if size == 0:
        schema = encode_schema()
        write_all(jfd, schema, 0)
        os.fsync(jfd)
        size = len(schema)
    return size


class FastWriter(_BlobFile):
    """The ceiling: returns once the bytes are handed to the kernel. No fsync, no journal."""

    name = "FastWriter"
    durability = "none: page cache only; a machine crash after return loses the bytes"

    def append(self, data: bytes | memoryview) -> Extent:
        """Write ``data`` verbatim at the end; ``(offset, length)`` of the bytes."""
        return self._write_blob(data)


class SafeWriter(_BlobFile):
    """Durable before ack: blob fsynced, then a journal row naming it fsynced."""

    name = "SafeWriter"
    durability = "full: blob fsynced, then a journal row fsynced; a crash after return keeps both"

    def __init__(self, blobs: str | os.PathLike[str], *, faults: Faults = Faults()) -> None:
        super().__init__(blobs)
        self.faults = faults
        self.journal = journal_path(self.path)
        try:
            self._jfd = os.open(self.journal, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                0o644)
        except OSError as exc:
            super().close()
            raise ZnippyError(f"cannot open the journal: {exc.strerror}", path=self.journal
                              ) from None
        self._jbuf = bytearray()  # the userspace buffer a flush moves to the kernel
        self._jlock = threading.Lock()
        try:
            open_log(self._jfd, self.journal)
        except BaseException:
            self.close()
            raise

    def append(self, data: bytes | memoryview) -> Extent:
        """Write ``data`` verbatim at the end; return once bytes and row are durable."""
        offset, size = self._write_blob(data)                 # 1. blob bytes
        if not self.faults.skip_blob_fsync:
            os.fsync(self._fd)                                # 2. blob bytes durable
        if self.faults.die_between_fsyncs:
            raise InjectedCrash("injected crash between the blob fsync and the journal row")
        with self._jlock:
            self._jbuf += encode_row(offset, size)            # 3. the row that claims them
            if not self.faults.skip_journal_flush:
                write_all(self._jfd, bytes(self._jbuf))       # 4. userspace -> kernel
                self._jbuf.clear()
            os.fsync(self._jfd)                               # 5. kernel -> disk
        return offset, size

    def close(self) -> None:
        jfd = getattr(self, "_jfd", -1)
        if jfd >= 0:
            os.close(jfd)  # a buffered row (only under skip_journal_flush) is dropped, as a
            self._jfd = -1  # crash would drop it
        super().close()
