"""znippy_sql: query znippy archives with DuckDB and Polars without unpacking them.

Two verbs: :func:`write_archive` writes one, :func:`open_archive` reads one.
"""

from __future__ import annotations

from typing import Any

from .errors import (
    ChecksumError,
    CodecError,
    DuplicatePathError,
    FormatError,
    LockError,
    NotFoundError,
    SignatureError,
    StoreError,
    UnsafePathError,
    ZnippyError,
)
from .reader import Archive, open_archive
from .schema import GroupKey
from .source import Entry
from .tail import ReservedSection
from .writer import ArchiveWriter, WriteReport, write_archive

__version__ = "0.1.0"

# Heavier parts, imported on first use (they pull in pyiceberg, duckdb, polars, ...).
_LAZY = {
    "append_archive": ("znippy_sql.append", "append_archive"),
    "AppendReport": ("znippy_sql.append", "AppendReport"),
    "seal": ("znippy_sql.store.seal", "seal"),
    "SealReport": ("znippy_sql.store.seal", "SealReport"),
    "ExtractReport": ("znippy_sql.extract", "ExtractReport"),
    "VerifyReport": ("znippy_sql.verify", "VerifyReport"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'znippy_sql' has no attribute {name!r}")


__all__ = [
    "Archive",
    "ArchiveWriter",
    "ChecksumError",
    "CodecError",
    "DuplicatePathError",
    "Entry",
    "FormatError",
    "GroupKey",
    "LockError",
    "NotFoundError",
    "ReservedSection",
    "SignatureError",
    "StoreError",
    "UnsafePathError",
    "WriteReport",
    "ZnippyError",
    "__version__",
    "open_archive",
    "write_archive",
    *_LAZY,
]
