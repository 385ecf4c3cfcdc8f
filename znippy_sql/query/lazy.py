"""A stream's schema from its first bytes: what ``register`` and ``scan`` need of a remote
archive before any row is read.

A local archive's streams are checked cheaply at ``register`` (:mod:`.tables`). A remote
archive's would have to be downloaded first, so its schemas come from each stream's schema
message (the first bytes of its range, fetched for every stream at once, coalesced), and its
rows are fetched and checked when DuckDB first scans the :class:`.tables.ArrowPart` (the Arrow
PyCapsule stream protocol: DuckDB asks for a stream at each scan).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import names_problem, read_schema
from ..format.manifest import ManifestRow
from ..read.reader import Archive

#: bytes fetched from the start of each stream for its schema message (one of ours is
#: ~1-2 KB; a longer one costs one more request)
HEAD = 4096
_PREFIX = struct.Struct("<Ii")  # continuation marker 0xFFFFFFFF, metadata length


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
    schema = read_schema(buf, what, archive.path)
    problem = names_problem(schema)
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=archive.path)
    return schema
