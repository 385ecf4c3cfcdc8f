"""The views that are one table per archive and need no capability: ``manifest`` (the
manifest's rows, reserved sections included) and ``lookup`` (``__lookup__``, or the one the
reader builds in memory for an archive without it)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from ..format.schema import LOOKUP_SCHEMA, PACKED_LOOKUP_SCHEMA
from ..read.reader import Archive
from .base import Request, View


def _manifest(archive: Archive, request: Request) -> Iterator[pa.Table]:
    yield archive.manifest


def _lookup(archive: Archive, request: Request) -> Iterator[pa.Table]:
    yield archive.lookup


def _manifest_cost(archive: Archive, groups: object) -> int:
    return max(archive.source.size - archive.manifest_offset, 0)


def _lookup_cost(archive: Archive, groups: object) -> int:
    from ..format.schema import LOOKUP, RESERVED_PKG_TYPE, GroupKey

    key = GroupKey(RESERVED_PKG_TYPE, "", LOOKUP)
    if archive.has_section(LOOKUP):
        return archive.manifest_row(key).index_len
    return sum(archive.manifest_row(k).index_len for k in archive.groups)


MANIFEST = View("manifest", lambda a: a.manifest.schema, _manifest, cost=_manifest_cost,
                doc="the manifest's rows")
def _lookup_schema(archive: Archive) -> pa.Schema:
    """The base columns, and ``inner_offset`` in an archive with packed blobs (FORMAT §3)."""
    return PACKED_LOOKUP_SCHEMA if archive.packed else LOOKUP_SCHEMA


LOOKUP = View("lookup", _lookup_schema, _lookup, cost=_lookup_cost,
              doc="every chunk row in path order (__lookup__)")
