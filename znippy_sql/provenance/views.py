"""The provenance views: ``meta`` (the ``__meta__`` facts) and ``signatures`` (one row per
signed file, then the archive root; checked against ``trust`` when given). Registered by
name in ``znippy_sql/views/registry.py``; read through :func:`znippy_sql.views.batches`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..format.schema import META, SIGN_ARCHIVE, SIGN_ARTIFACTS
from ..views.base import Request, View
from ..views.heads import section_schema


def _meta(archive: Any, request: Request) -> Iterator[pa.Table]:
    from .meta import read_meta

    table = read_meta(archive)
    if table is not None:
        yield table


def _signatures_schema(archive: Any) -> pa.Schema:
    from .sign import SIGNATURES_SCHEMA

    return SIGNATURES_SCHEMA


def _signatures(archive: Any, request: Request) -> Iterator[pa.Table]:
    from .sign import signatures_table

    yield signatures_table(archive)


def _cost(name: str) -> Any:
    def cost(archive: Any, groups: object) -> int:
        from ..format.schema import RESERVED_PKG_TYPE, GroupKey

        key = GroupKey(RESERVED_PKG_TYPE, "", name)
        return archive.manifest_row(key).index_len if archive.has_section(name) else 0
    return cost


def _signatures_cost(archive: Any, groups: object) -> int:
    return _cost(SIGN_ARTIFACTS)(archive, groups) + _cost(SIGN_ARCHIVE)(archive, groups)


META_VIEW = View("meta", lambda a: section_schema(a, META), _meta, sections=(META,),
                 cost=_cost(META), doc="searchable facts (__meta__)")
SIGNATURES = View("signatures", _signatures_schema, _signatures, eager=True,
                  sections=(SIGN_ARTIFACTS, SIGN_ARCHIVE), cost=_signatures_cost,
                  doc="signed files and the archive root, checked")
