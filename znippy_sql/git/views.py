"""The git views (docs/git-sections.md): ``git_objects`` (``__gunnar_oid__`` decoded, with the
path of each object's pack file; a Rust one, ``interop/gitoid.py``, with each object's
entry), ``git_commits`` (``__gunnar_graph__``), ``git_reach`` (``__gunnar_reach__``),
``git_refs`` (``__gunnar_refs__``), ``git_secrets`` (the Rust ``__gunnar_secrets__`` push log
as written, with ``in_force``: ``interop/pushlog.py``). Registered by name in
``znippy_sql/views/registry.py``, so an archive without git sections never imports this
package."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format.schema import (GIT_GRAPH, GIT_OID, GIT_REACH, GIT_REFS, GIT_SECRETS,
                             RESERVED_PKG_TYPE, GroupKey)
from ..views.base import Request, View
from ..views.heads import section_schema

PACK_PATH = pa.field("pack_path", pa.utf8(), nullable=True)


def objects_table(archive: Any) -> pa.Table:
    """Every object of ``__gunnar_oid__`` with ``pack_path`` (its pack file's path) after
    ``pack_row``."""
    from ..format.gitindex import decode_oid_index
    from ..interop.gitoid import decode_rust_oid_index, is_rust_oid_index

    lookup = archive.lookup
    data = archive.section(GIT_OID)
    if is_rust_oid_index(data):  # the Rust loose-object tier: an entry per object
        objects = decode_rust_oid_index(data, lookup_rows=lookup.num_rows, path=archive.path)
        return objects.append_column(pa.field("relative_path", pa.utf8(), nullable=True),
                                     lookup.column("relative_path").take(
                                         objects.column("lookup_row")))
    objects = decode_oid_index(data, lookup_rows=lookup.num_rows, path=archive.path)
    rows = objects.column("pack_row").to_numpy()
    paths = lookup.column("relative_path").take(pa.array(rows.astype(np.int64)))
    at = objects.schema.get_field_index("pack_row") + 1
    return objects.add_column(at, PACK_PATH, paths)


def _objects_schema(archive: Any) -> pa.Schema:
    return objects_table(archive).schema


def _objects(archive: Any, request: Request) -> Iterator[pa.Table]:
    yield objects_table(archive)


def _section(name: str) -> Any:
    def read(archive: Any, request: Request) -> Iterator[pa.Table]:
        table = archive.section(name)
        if not isinstance(table, pa.Table):
            raise FormatError(f"{name} is not an Arrow stream", path=archive.path)
        yield table
    return read


def _cost(name: str) -> Any:
    def cost(archive: Any, groups: object) -> int:
        return archive.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", name)).index_len
    return cost


OBJECTS_VIEW = View("git_objects", _objects_schema, _objects, sections=(GIT_OID,), eager=True,
                   cost=_cost(GIT_OID), doc="git objects by id, with their pack's path")
COMMITS_VIEW = View("git_commits", lambda a: section_schema(a, GIT_GRAPH), _section(GIT_GRAPH),
                   sections=(GIT_GRAPH,), cost=_cost(GIT_GRAPH),
                   doc="commits: parents, tree, generation, dates")
REACH_VIEW = View("git_reach", lambda a: section_schema(a, GIT_REACH), _section(GIT_REACH),
                 sections=(GIT_REACH,), cost=_cost(GIT_REACH),
                 doc="reachability bitmaps of selected commits")
REFS_VIEW = View("git_refs", lambda a: section_schema(a, GIT_REFS), _section(GIT_REFS),
                 sections=(GIT_REFS,), cost=_cost(GIT_REFS),
                 doc="refs: name, target, peeled tag target, symbolic target; shallow boundary")


def _secrets_schema(archive: Any) -> pa.Schema:
    from ..interop.pushlog import IN_FORCE

    return section_schema(archive, GIT_SECRETS).append(IN_FORCE)


def _secrets(archive: Any, request: Request) -> Iterator[pa.Table]:
    from ..interop.pushlog import secrets_table

    for table in _section(GIT_SECRETS)(archive, request):
        yield secrets_table(table, archive.path)


SECRETS_VIEW = View("git_secrets", _secrets_schema, _secrets, sections=(GIT_SECRETS,),
                    cost=_cost(GIT_SECRETS),
                    doc="secrets pushed (ciphertext as stored, never decrypted), in_force")
