"""Small durable-file helpers shared by every writer: full writes, range copies (in the kernel
when it can) and directory fsyncs. The one copy of each: compact, the store's seal and the git
seal copy blob regions with :func:`copy_range`."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable

#: bytes per copy step
COPY_STEP = 32 << 20
_SYNC_FILE_RANGE_WRITE = 2  # start writeback of dirty pages, do not wait
#: copy_file_range errors that mean "not here": fall back to read and write
_NO_KERNEL_COPY = frozenset({errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def _writeback_starter() -> Callable[[int, int, int], None]:
    """``sync_file_range(fd, off, n, SYNC_FILE_RANGE_WRITE)`` where libc has it, else a no-op.

    Starting writeback behind a copy lets the disk work while the next step is copied, so the
    final fsync waits for the last step only. Only a hint: durability comes from the fsync.
    """
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).sync_file_range
        fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    except (OSError, AttributeError):
        return lambda fd, offset, length: None

    def start(fd: int, offset: int, length: int) -> None:
        fn(fd, offset, length, _SYNC_FILE_RANGE_WRITE)  # a failure only loses the overlap

    return start


start_writeback = _writeback_starter()


def copy_range(src: int, dst: int, length: int, src_offset: int = 0, dst_offset: int = 0, *,
               writeback: bool = False) -> None:
    """``length`` bytes from ``src_offset`` of ``src`` to ``dst_offset`` of ``dst``: in the
    kernel (``copy_file_range``) where it can, else positioned reads and full writes.
    ``writeback``: start writing each step to disk behind the copy. A source shorter than
    asked raises ``EOFError`` naming the offset where it ended; any other error is raised."""
    done = 0
    while done < length:
        start, step = done, min(COPY_STEP, length - done)
        try:
            n = os.copy_file_range(src, dst, step, src_offset + done, dst_offset + done)
        except OSError as exc:
            if exc.errno not in _NO_KERNEL_COPY:
                raise
            n = 0
        if n <= 0:
            data = os.pread(src, step, src_offset + done)
            if not data:
                raise EOFError(f"source ended at {src_offset + done}, expected "
                               f"{src_offset + length}")
            write_all(dst, data, dst_offset + done)
            done += len(data)
        else:
            done += n
        if writeback:
            start_writeback(dst, dst_offset + start, done - start)


def fsync_dir(path: str) -> None:
    """fsync the directory that holds ``path``, so a rename or unlink in it is durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview, offset: int | None = None) -> None:
    """All of ``data`` to ``fd`` (at ``offset`` with ``pwrite``), however short each write."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        if offset is not None:
            offset += n
        view = view[n:]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (this one does; someone else's does;
    a number no process can have does not): the owner test of staging and part files."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    except OverflowError:  # beyond any pid
        return False
    return True
