"""Small durable-file helpers shared by every writer: full writes and directory fsyncs."""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    """fsync the directory that holds ``path``, so a rename or unlink in it is durable."""
    fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview, offset: int | None = None) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view) if offset is None else os.pwrite(fd, view, offset)
        if offset is not None:
            offset += n
        view = view[n:]
