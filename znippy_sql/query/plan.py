"""What ``register`` hands DuckDB for one archive: Arrow objects and the views over them.

Planning reads the footer, the manifest and each stream's header (zero-copy, checked cheaply
in :mod:`.tables`); every error is raised here, before the connection is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import ZnippyError
from ..format.files import module_fields
from ..read.reader import Archive, open_archive
from ..format.schema import (GIT_GRAPH, GIT_OID, GIT_REACH, LOOKUP, LOOKUP_SCHEMA, META,
                      RESERVED_PKG_TYPE, SIGN_ARCHIVE, SIGN_ARTIFACTS, GroupKey, pkg_type_name)
from .sql import ident, literal, template
from .tables import group_table, section_table


@dataclass
class ArchiveViews:
    name: str
    archive: Archive
    objects: dict[str, Any] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def object_prefix(name: str) -> str:
        return f"__znippy_{name}_"

    def add_object(self, suffix: str, table: Any) -> str:
        obj = self.object_prefix(self.name) + suffix
        self.objects[obj] = table
        return ident(obj)

    def add_view(self, suffix: str, sql: str) -> None:
        self.views[f"{self.name}_{suffix}"] = sql


def plan_views(path: str, name: str, *, trust: Any = None) -> ArchiveViews:
    archive = open_archive(path)
    plan = ArchiveViews(name, archive)
    if archive.source.fetches and not archive.lookup_in_memory:
        # remote: the index streams are read on first scan
        lookup, groups = _lazy_tables(archive)
        single = False  # (knowing would cost the trie; the summing views serve any layout)
    else:
        # an archive without __lookup__ (the Rust tool's layout): the reader's in-memory one
        lookup = archive.lookup if archive.lookup_in_memory else section_table(archive, LOOKUP)
        groups = [(key, group_table(archive, key)) for key in archive.groups]
        # every file one chunk ⇔ as many trie keys as lookup rows: the files views need no sums
        single = _file_count(archive) == lookup.num_rows
    if not groups:
        groups = [(GroupKey(0, "", ""), LOOKUP_SCHEMA.empty_table())]
    chunk_parts, file_parts = [], []
    for i, (key, table) in enumerate(groups):
        obj = plan.add_object(f"g{i}", table)
        consts = dict(repo=literal(key.repo), pkg_type=str(key.pkg_type),
                      pkg_type_name=literal(pkg_type_name(key.pkg_type)),
                      module=literal(key.module_name), table=obj)
        has_pt = "pkg_type" in table.schema.names
        chunk_parts.append(template("view_chunks_group.sql", **consts,
                                    exclude="EXCLUDE (pkg_type)" if has_pt else ""))
        extra = "".join(f", {'' if single else 'f.'}{ident(f.name)}"
                        for f in module_fields(table.schema))
        file_parts.append(template("view_files_group_single.sql" if single
                                   else "view_files_group.sql", **consts, extra=extra))
    union = "\nUNION ALL BY NAME\n"
    plan.add_view("files", union.join(f"({p})" for p in file_parts))
    plan.add_view("chunks", union.join(f"({p})" for p in chunk_parts))
    manifest = plan.add_object("manifest", archive.manifest)
    plan.add_view("manifest", f"SELECT * FROM {manifest}")
    plan.add_view("groups", template("view_groups.sql", groups=plan.add_object(
        "group_rows", _group_rows(archive)), chunks=ident(f"{name}_chunks")))
    plan.add_view("lookup", f"SELECT * FROM {plan.add_object('lookup', lookup)}")
    plan.add_view("_archive", f"SELECT {literal(archive.path)} AS archive")
    _sections(plan, lookup, trust)
    return plan


def _lazy_tables(archive: Archive) -> tuple[Any, list[tuple[GroupKey, Any]]]:
    """The lookup and each sub-index as :class:`LazyTable` objects: their schemas now (the
    streams' first bytes, fetched together), their rows when DuckDB first scans them."""
    from .lazy import LazyTable, fetch_heads, stream_schema

    lk = archive.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP))
    rows = [archive.manifest_row(key) for key in archive.groups]
    fetch_heads(archive, [lk, *rows])
    lookup = LazyTable(lambda: section_table(archive, LOOKUP),
                       stream_schema(archive, lk, LOOKUP), lk.row_count)
    groups = []
    for key, row in zip(archive.groups, rows):
        what = f"sub-index {key.pkg_type}/{key.repo!r}/{key.module_name!r}"
        groups.append((key, LazyTable(lambda k=key: group_table(archive, k),
                                      stream_schema(archive, row, what), row.row_count)))
    return lookup, groups


def _file_count(archive: Archive) -> int:
    try:
        return len(archive.trie)
    except ZnippyError:
        raise
    except Exception as exc:  # ducer errors on a damaged trie
        raise ZnippyError(f"__trie__ cannot be read: {exc}", path=archive.path) from None


def _group_rows(archive: Archive) -> pa.Table:
    """One row per data group. A few rows: allocated with malloc, not from the Arrow pool,
    whose first allocation in a process reserves ~4 MB (mimalloc) — register otherwise
    allocates nothing from it."""
    pool = pa.system_memory_pool()
    data = [r for r in archive.manifest_rows if r.key.pkg_type != RESERVED_PKG_TYPE]
    schema = archive.manifest.schema
    cols = {f.name: pa.array([getattr(r.key, f.name, None) if f.name in r.key._fields
                              else getattr(r, f.name) for r in data], f.type, memory_pool=pool)
            for f in schema}
    cols["pkg_type_name"] = pa.array([pkg_type_name(r.key.pkg_type) for r in data], pa.utf8(),
                                     memory_pool=pool)
    return pa.table(cols)


def _sections(plan: ArchiveViews, lookup: Any, trust: Any) -> None:
    archive = plan.archive
    if archive.has_section(META):
        meta = plan.add_object("meta", section_table(archive, META))
        plan.add_view("meta", f"SELECT * FROM {meta}")
    if archive.has_section(SIGN_ARTIFACTS) or archive.has_section(SIGN_ARCHIVE):
        from ..provenance.sign import signatures_table

        sigs = plan.add_object("signatures", signatures_table(archive, trust=trust))
        plan.add_view("signatures", f"SELECT * FROM {sigs}")
    if archive.has_section(GIT_OID):
        from ..format.gitindex import decode_oid_index

        if not isinstance(lookup, pa.Table):  # a remote archive's lazy lookup
            lookup = lookup.table()
        objects = decode_oid_index(archive.section(GIT_OID), lookup_rows=lookup.num_rows,
                                   path=archive.path)
        rows = np.unique(objects.column("pack_row").to_numpy())
        packs = pa.table({"pack_row": pa.array(rows, pa.uint32()),
                          "relative_path": lookup.column("relative_path").take(pa.array(rows))})
        plan.add_view("git_objects", template(
            "view_git_objects.sql", objects=plan.add_object("git_objects", objects),
            packs=plan.add_object("git_packs", packs)))
    for section, suffix in ((GIT_GRAPH, "git_commits"), (GIT_REACH, "git_reach")):
        if archive.has_section(section):
            obj = plan.add_object(suffix, section_table(archive, section))
            plan.add_view(suffix, f"SELECT * FROM {obj}")
