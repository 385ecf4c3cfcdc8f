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
from ..format.ipc import names_problem
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
    """The schema message at the start of a stream's range, reading only its own bytes."""
    src = archive.source
    head = src.read(row.index_offset, min(_PREFIX.size, row.index_len), what).to_pybytes()
    if len(head) < _PREFIX.size or head[:4] != b"\xff\xff\xff\xff":
        raise FormatError(f"{what} does not start with an Arrow IPC message", path=archive.path)
    (meta_len,) = struct.unpack("<i", head[4:8])
    if meta_len <= 0 or _PREFIX.size + meta_len > row.index_len:
        raise FormatError(f"{what}: schema message runs past its range", path=archive.path)
    buf = src.read(row.index_offset, _PREFIX.size + meta_len, what)
    try:
        schema = pa.ipc.read_schema(pa.BufferReader(buf))
    except (pa.ArrowException, ValueError, OSError) as exc:  # OSError: bad flatbuffers
        raise FormatError(f"{what}: unreadable schema: {exc}", path=archive.path) from None
    problem = names_problem(schema)
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=archive.path)
    return schema
