"""znippy_sql: query znippy archives with DuckDB and Polars without unpacking them.

Two verbs: :func:`write_archive` writes one, :func:`open_archive` reads one.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported: the CLI's fast path starts without it

from .errors import (
    ChecksumError,
    CodecError,
    DuplicatePathError,
    FormatError,
    LockError,
    NotFoundError,
    OptionError,
    PathNotFoundError,
    RemoteError,
    SignatureError,
    StoreError,
    UnreadableSourceError,
    UnsafePathError,
    UnsealedArchiveError,
    ZnippyError,
)

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers
    from typing import Any

    from .write.append import AppendReport, append_archive
    from .read.extract import ExtractReport
    from .read.reader import Archive, open_archive
    from .format.schema import GroupKey
    from .write.source import Entry
    from .store.seal import SealReport, seal
    from .format.sections import ReservedSection
    from .read.verify import VerifyReport
    from .write.writer import ArchiveWriter, WriteReport, write_archive
    from .write.options import Provenance, WriteOptions

from .version import __version__

# Everything but the errors is imported on first use: `import znippy_sql` stays cheap, and
# pyarrow, duckdb or pyiceberg are imported by the parts that use them.
_LAZY = {
    "Archive": ("znippy_sql.read.reader", "Archive"),
    "open_archive": ("znippy_sql.read.reader", "open_archive"),
    "GroupKey": ("znippy_sql.format.schema", "GroupKey"),
    "Entry": ("znippy_sql.write.source", "Entry"),
    "ReservedSection": ("znippy_sql.format.sections", "ReservedSection"),
    "ArchiveWriter": ("znippy_sql.write.writer", "ArchiveWriter"),
    "WriteReport": ("znippy_sql.write.writer", "WriteReport"),
    "write_archive": ("znippy_sql.write.writer", "write_archive"),
    "WriteOptions": ("znippy_sql.write.options", "WriteOptions"),
    "Provenance": ("znippy_sql.write.options", "Provenance"),
    "append_archive": ("znippy_sql.write.append", "append_archive"),
    "AppendReport": ("znippy_sql.write.append", "AppendReport"),
    "seal": ("znippy_sql.store.seal", "seal"),
    "SealReport": ("znippy_sql.store.seal", "SealReport"),
    "ExtractReport": ("znippy_sql.read.extract", "ExtractReport"),
    "VerifyReport": ("znippy_sql.read.verify", "VerifyReport"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'znippy_sql' has no attribute {name!r}")


__all__ = [
    "AppendReport",
    "Archive",
    "ArchiveWriter",
    "ChecksumError",
    "CodecError",
    "DuplicatePathError",
    "Entry",
    "ExtractReport",
    "FormatError",
    "GroupKey",
    "LockError",
    "NotFoundError",
    "OptionError",
    "PathNotFoundError",
    "Provenance",
    "RemoteError",
    "ReservedSection",
    "SealReport",
    "SignatureError",
    "StoreError",
    "UnreadableSourceError",
    "UnsafePathError",
    "UnsealedArchiveError",
    "VerifyReport",
    "WriteOptions",
    "WriteReport",
    "ZnippyError",
    "__version__",
    "append_archive",
    "open_archive",
    "seal",
    "write_archive",
]
