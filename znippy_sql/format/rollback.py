"""The hot journal of an interrupted append: a property of the archive file, like SQLite's.

An appender writes ``<archive>.znippy-journal`` and fsyncs it, with its directory entry, before it
overwrites the first byte at ``blob_end``; it removes the journal once the new tail and footer
are fsynced. Layout::

    [ "ZNPYJRNL" ][ u32 version ][ u32 flags ][ u64 old_size ][ u64 blob_end ][ u64 tail_len ]
    [ u64 st_dev ][ u64 st_ino ]  (the archive file the journal belongs to)
    [ old tail bytes: the archive's [blob_end, old_size) ][ 32-byte BLAKE3 of all the above ]

:func:`recover`, which every opener runs first, puts a valid (hot) journal's bytes back and
truncates to the old size; a journal that fails its BLAKE3 was torn before the archive was
touched and is simply removed, as is one written for another file (device and inode differ).
This module sits below both the reader and the appender, so the read path never imports the
write path.
"""

from __future__ import annotations

import fcntl
import os
import struct

from . import b3 as blake3

from ..errors import LockError, ZnippyError
from .fsio import fsync_dir, write_all

JOURNAL_SUFFIX = ".znippy-journal"
_MAGIC = b"ZNPYJRNL"
_VERSION = 1
#: magic, version, flags, old_size, blob_end, tail_len, st_dev, st_ino of the archive
_HEAD = struct.Struct("<8sIIQQQQQ")
_DIGEST = 32


def journal_path(path: str | os.PathLike[str]) -> str:
    return os.fspath(path) + JOURNAL_SUFFIX


def _encode_journal(old_size: int, blob_end: int, tail: bytes, identity: tuple[int, int]
                    ) -> bytes:
    head = _HEAD.pack(_MAGIC, _VERSION, 0, old_size, blob_end, len(tail), *identity)
    return head + tail + blake3.blake3(head + tail).digest()


def _decode_journal(data: bytes) -> tuple[int, int, memoryview, tuple[int, int]] | None:
    """(old_size, blob_end, old tail bytes, (st_dev, st_ino)), or None when torn or foreign."""
    if len(data) < _HEAD.size + _DIGEST:
        return None
    magic, version, _flags, old_size, blob_end, tail_len, dev, ino = _HEAD.unpack_from(data)
    if magic != _MAGIC or version != _VERSION:
        return None
    if len(data) != _HEAD.size + tail_len + _DIGEST or blob_end + tail_len != old_size:
        return None
    body = memoryview(data)[: _HEAD.size + tail_len]  # header + old tail
    if blake3.blake3(body).digest() != data[-_DIGEST:]:  # last 32 bytes: BLAKE3 of the body
        return None
    return old_size, blob_end, body[_HEAD.size :], (dev, ino)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def write_journal(path: str, fd: int, old_size: int, blob_end: int, tail: bytes) -> None:
    jpath = journal_path(path)
    jfd = os.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(jfd, _encode_journal(old_size, blob_end, tail, _identity(fd)))
        os.fsync(jfd)
    finally:
        os.close(jfd)
    fsync_dir(jpath)  # the journal's name is durable before the archive is touched




def drop_journal(path: str) -> None:
    os.unlink(journal_path(path))
    fsync_dir(path)


def lock(fd: int, path: str) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise LockError("another process is appending to this archive", path=path) from None


def rollback(fd: int, path: str, old_size: int, blob_end: int, tail: bytes | memoryview) -> None:
    write_all(fd, tail, blob_end)
    os.ftruncate(fd, old_size)
    os.fsync(fd)
    drop_journal(path)


def recover_locked(path: str, fd: int) -> bool:
    jpath = journal_path(path)
    try:
        with open(jpath, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return False
    parsed = _decode_journal(data)
    if parsed is None or parsed[3] != _identity(fd):
        # torn while being written (the archive was not touched yet), or left by an append
        # to a file since replaced under this name: nothing of it applies to this file
        drop_journal(path)
        return False
    old_size, blob_end, tail, _ = parsed
    rollback(fd, path, old_size, blob_end, tail)
    return True


def recover(path: str | os.PathLike[str]) -> bool:
    """Roll back an interrupted append of ``path``; True when a hot journal was rolled back.

    Costs one ``stat`` when there is no journal. Raises :class:`LockError` while another process
    is appending (its journal is live, not hot).
    """
    path = os.fspath(path)
    if not os.path.exists(journal_path(path)):
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        raise ZnippyError(f"a journal {journal_path(path)!r} exists but the archive does not",
                          path=path) from None
    except PermissionError:
        raise ZnippyError("an interrupted append left a journal; open the archive once with "
                          "write access to roll it back", path=path) from None
    try:
        lock(fd, path)
        return recover_locked(path, fd)
    finally:
        os.close(fd)
