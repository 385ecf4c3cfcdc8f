"""Arrow objects that DuckDB reads on their first scan: a remote archive's index streams.

A local archive's tables point into its memory map, so registering them costs no I/O. A
remote archive's would have to be downloaded first, so ``register`` hands DuckDB a
:class:`LazyTable` for the lookup and each sub-index instead: its schema comes from the
stream's schema message (the first bytes of its range, fetched for every stream at once,
coalesced), and the table is made — fetched and checked by :mod:`.tables` — when DuckDB first
scans it, through the Arrow PyCapsule stream protocol (DuckDB asks for a stream at each scan).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from ..errors import FormatError
from ..format.manifest import ManifestRow
from ..read.reader import Archive

#: bytes fetched from the start of each stream for its schema message (one of ours is
#: ~1-2 KB; a longer one costs one more request)
HEAD = 4096
_PREFIX = struct.Struct("<Ii")  # continuation marker 0xFFFFFFFF, metadata length


class LazyTable:
    """An Arrow table made on first use; DuckDB sees its schema at once."""

    def __init__(self, make: Callable[[], pa.Table], schema: pa.Schema, num_rows: int) -> None:
        self._make = make
        self.schema = schema
        self.num_rows = num_rows
        self._table: pa.Table | None = None
        self._lock = threading.Lock()

    def table(self) -> pa.Table:
        with self._lock:
            if self._table is None:
                table = self._make()
                if not table.schema.equals(self.schema):
                    raise FormatError("an index stream's schema changed after its header was "
                                      "read")
                self._table = table
            return self._table

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.table().__arrow_c_stream__(requested_schema)


def fetch_heads(archive: Archive, rows: Sequence[ManifestRow]) -> None:
    """Ask the source for the first ``HEAD`` bytes of every stream in one go."""
    archive.source.prefetch([r.index_offset for r in rows],
                            [min(HEAD, r.index_len) for r in rows], keep=True)


def stream_schema(archive: Archive, row: ManifestRow, what: str) -> pa.Schema:
    """The schema message at the start of a stream's range, read alone."""
    src = archive.source
    if row.index_len < _PREFIX.size:
        raise FormatError(f"{what} is {row.index_len} bytes, too short for an Arrow stream",
                          path=archive.path)
    marker, length = _PREFIX.unpack(src.read(row.index_offset, _PREFIX.size, what).to_pybytes())
    if marker != 0xFFFFFFFF or not 0 < length <= row.index_len - _PREFIX.size:
        raise FormatError(f"{what} does not start with an Arrow schema message",
                          path=archive.path)
    msg = src.read(row.index_offset, _PREFIX.size + length, what)
    try:
        return pa.ipc.read_schema(pa.ipc.read_message(msg))
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise FormatError(f"{what} has no readable schema message: {exc}",
                          path=archive.path) from None
