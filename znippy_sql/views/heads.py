"""A stream's schema from its first bytes: what a view's schema needs of an archive before any
row is read (``register``, ``scan``, ``views.schema``).

A local archive's streams are checked cheaply at ``register`` (``query/tables.py``). A remote
archive's would have to be downloaded first, so its schemas come from each stream's schema
message (the first bytes of its range, fetched for every stream at once, coalesced), and its
rows are fetched and checked when DuckDB first scans the ``query.tables.ArrowPart`` (the Arrow
PyCapsule stream protocol: DuckDB asks for a stream at each scan).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import names_problem, read_schema
from ..format.manifest import ManifestRow
from ..format.schema import RESERVED_PKG_TYPE, GroupKey
from ..format.validate import portable_schema, subindex_schema_problem
from ..read.reader import Archive, group_what

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


def peek_schema(archive: Archive, key: GroupKey, what: str) -> pa.Schema:
    """The schema message at the start of a stream, reading only its own bytes."""
    return stream_schema(archive, archive.manifest_row(key), what)


def section_schema(archive: Archive, name: str) -> pa.Schema:
    """A reserved Arrow section's schema from its header."""
    return peek_schema(archive, GroupKey(RESERVED_PKG_TYPE, "", name), name)


def group_schema(archive: Archive, key: GroupKey) -> pa.Schema:
    """A sub-index's schema from its header, refused unless in the closed set."""
    what = group_what(key)
    schema = peek_schema(archive, key, what)
    problem = subindex_schema_problem(schema)
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=archive.path)
    return portable_schema(schema)


def group_schemas(archive: Archive, keys: Sequence[GroupKey]) -> list[pa.Schema]:
    """The schemas of several sub-indexes; a remote archive fetches their heads at once."""
    if getattr(archive.source, "fetches", False) and keys:
        fetch_heads(archive, [archive.manifest_row(k) for k in keys])
    return [group_schema(archive, k) for k in keys]
