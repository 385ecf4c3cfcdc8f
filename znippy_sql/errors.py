"""One base error, a handful of subclasses that say what went wrong.

Every error raised for bad input names the file it concerns (``path``) and the problem.
"""

from __future__ import annotations

import errno
import os


class ZnippyError(Exception):
    """Base of every error znippy_sql raises on purpose."""

    def __init__(self, message: str, *, path: str | os.PathLike[str] | None = None) -> None:
        self.path = os.fspath(path) if path is not None else None
        self.problem = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


class FormatError(ZnippyError):
    """The bytes are not a well-formed znippy archive (footer, manifest, index, ranges)."""


class UnsealedArchiveError(FormatError):
    """The file is an archive in its hot phase (blobs, its index in a journal beside it) or
    that journal, with no footer yet: the tool that wrote it must seal it first."""


class ChecksumError(ZnippyError):
    """A chunk's BLAKE3 does not match the checksum recorded in the index."""


class CodecError(ZnippyError):
    """A blob is not a valid OpenZL frame, or decodes to the wrong length."""


class UnsafePathError(ZnippyError):
    """A path would escape the extraction directory or is not a plain relative path."""


class DuplicatePathError(ZnippyError):
    """The same relative_path was given twice to a one-shot writer."""


class UnreadableSourceError(ZnippyError):
    """A file or directory a write was given could not be read (permissions, I/O): the write
    stopped, nothing under the final name; ``skip_unreadable`` leaves such paths out."""


class NotFoundError(ZnippyError, KeyError):
    """No file with that path in the archive."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return Exception.__str__(self)


class PathNotFoundError(NotFoundError, FileNotFoundError):
    """An input path does not exist: an archive, a source directory, a repository, a
    warehouse or a sidecar. Also a ``FileNotFoundError`` (``errno`` ENOENT, ``filename``)."""

    def __init__(self, message: str, *, path: str | os.PathLike[str]) -> None:
        super().__init__(message, path=path)
        self.errno, self.strerror, self.filename = errno.ENOENT, message, self.path


def missing_or(path: str | os.PathLike[str], problem: str, what: str) -> ZnippyError:
    """The error for an input ``path`` that is not what it should be: a
    :class:`PathNotFoundError` (``"<what> not found"``) when nothing is there, else a
    ``ZnippyError`` saying ``problem``."""
    if not os.path.lexists(path):
        return PathNotFoundError(f"{what} not found", path=path)
    return ZnippyError(problem, path=path)


class StoreError(ZnippyError):
    """The dynamic store (sidecar + Iceberg warehouse) or a seal failed."""


class CatalogError(ZnippyError):
    """The catalog of many archives (its Iceberg tables, or an archive it lists) failed."""


class LockError(ZnippyError):
    """Another writer holds the lock on this file."""


class SignatureError(ZnippyError):
    """A signature could not be made or does not verify."""


class OutputError(ZnippyError):
    """The destination will not take more (disk full, read-only, over quota): the command
    stopped at the first such failure, and says what it had written before it."""


class PackError(FormatError):
    """A git packfile is malformed: truncated, wrong magic, bad zlib, a missing delta base."""


class RemoteError(ZnippyError):
    """An object in remote storage could not be read or written (``path`` is its URL):
    a bad URL, a missing bucket or object, denied access, a server that failed after the
    last retry, an object that changed while it was read, a reply that is not the range
    asked for."""


class OptionError(ZnippyError, ValueError):
    """An option has a value this project does not take (an unknown pkg_type, a
    ``WriteOptions`` field out of range, ...): the message names the option and the value."""


__all__ = [
    "ZnippyError",
    "FormatError",
    "UnsealedArchiveError",
    "ChecksumError",
    "CodecError",
    "UnsafePathError",
    "DuplicatePathError",
    "UnreadableSourceError",
    "NotFoundError",
    "PathNotFoundError",
    "StoreError",
    "CatalogError",
    "LockError",
    "SignatureError",
    "OutputError",
    "PackError",
    "RemoteError",
    "OptionError",
]
