"""What ``register`` hands DuckDB for one archive or several: Arrow sources and the views over
them.

Planning reads the footer, the manifest and each stream's header, and checks each stream
cheaply (:mod:`.tables`); every error found then is raised here, before the connection is
touched. The rows are checked in full when a query first scans them (:class:`.tables.ArrowPart`).

Several archives registered under one name give the same views, each the ``UNION ALL BY
NAME`` of the archives' own, with an ``archive`` column (the path) first: a filter on
``archive`` removes whole branches at plan time, as a filter on ``repo`` does inside one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.files import module_fields
from ..format.validate import lookup_schema_problem
from ..format.schema import (GIT_GRAPH, GIT_OID, GIT_REACH, LOOKUP, LOOKUP_SCHEMA, META,
                             RESERVED_PKG_TYPE, SIGN_ARCHIVE, SIGN_ARTIFACTS, GroupKey,
                             pkg_type_name)
from ..format.validate import union_problem
from ..read.reader import Archive, group_what, open_archive
from .sql import ident, literal, template
from .tables import (CHANGED, ArrowPart, Stamp, group_schema, group_table, peek_schema,
                     section_table)


@dataclass
class ArchiveViews:
    name: str
    archive: Archive
    prefix: str = ""
    stamp: Stamp | None = None
    objects: dict[str, Any] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.prefix = self.prefix or self.object_prefix(self.name)

    @staticmethod
    def object_prefix(name: str) -> str:
        return f"__znippy_{name}_"

    def add_object(self, suffix: str, table: pa.Table) -> str:
        """An Arrow source for ``table``, made already."""
        return self.add_part(suffix, table.schema, lambda: table, suffix)

    def add_part(self, suffix: str, schema: pa.Schema, load: Any, what: str) -> str:
        """An Arrow source of ``schema`` whose rows ``load`` gives at its first scan."""
        obj = self.prefix + suffix
        self.objects[obj] = ArrowPart(schema, load, self.stamp, what)
        return ident(obj)

    def add_view(self, suffix: str, sql: str) -> None:
        self.views[suffix] = sql


def plan_views(path: str, name: str, *, trust: Any = None, prefix: str = "") -> ArchiveViews:
    """The views of one archive, by suffix (``files``, ``chunks``, ...)."""
    archive = open_archive(path)
    try:
        return _plan(ArchiveViews(name, archive, prefix, _stamp(archive)), trust)
    except BaseException:
        archive.close()
        raise


def _stamp(archive: Archive) -> Stamp | None:
    """The stamp of a local archive's file, taken after it was opened and checked against
    what was opened (a remote archive has none: it is read as the object it was)."""
    if archive.source.fetches:
        return None
    stamp = Stamp.of(archive.source.path)
    footer = archive.source.read(archive.source.size - len(stamp.footer), len(stamp.footer))
    if stamp.size != archive.source.size or stamp.footer != footer.to_pybytes():
        raise ZnippyError(CHANGED.replace("since it was registered", "while it was opened"),
                          path=archive.path)
    return stamp


def plan_many(paths: Sequence[str], name: str, *, trust: Any = None) -> list[ArchiveViews]:
    """The views of several archives registered under one name (see the module docstring)."""
    plans: list[ArchiveViews] = []
    try:
        for i, path in enumerate(paths):
            plans.append(plan_views(path, name, trust=trust,
                                    prefix=f"{ArchiveViews.object_prefix(name)}{i}:"))
    except BaseException:
        for plan in plans:
            plan.archive.close()
        raise
    return plans


def union_views(plans: Sequence[ArchiveViews]) -> dict[str, str]:
    """Each view suffix → the union of the archives' views of it, with an ``archive`` column."""
    out: dict[str, str] = {}
    suffixes = dict.fromkeys(s for p in plans for s in p.views)
    for suffix in suffixes:
        parts = [(p.archive.path, p.views[suffix]) for p in plans if suffix in p.views]
        if suffix == "_archive":
            out[suffix] = " UNION ALL ".join(f"({sql})" for _, sql in parts)
            continue
        out[suffix] = "\nUNION ALL BY NAME\n".join(
            f"(SELECT {literal(path)} AS archive, * FROM ({sql}))" for path, sql in parts)
    return out


def _plan(plan: ArchiveViews, trust: Any) -> ArchiveViews:
    archive = plan.archive
    if archive.source.fetches and not archive.lookup_in_memory:
        # remote: the streams' schemas now (their first bytes, fetched together), their rows
        # when DuckDB first scans them (knowing "single" would cost the trie: the summing
        # views serve any layout)
        lookup_schema, schemas = _remote_schemas(archive)
        single = False
    else:
        # an archive without __lookup__ (the Rust tool's layout): the reader's in-memory one
        lookup = archive.lookup if archive.lookup_in_memory else section_table(archive, LOOKUP)
        lookup_schema = lookup.schema
        schemas = [(key, group_table(archive, key).schema) for key in archive.groups]
        # every file one chunk ⇔ as many trie keys as lookup rows: the files views need no sums
        single = _file_count(archive) == lookup.num_rows
    problem = union_problem((group_what(k), s) for k, s in schemas)
    if problem is not None:
        raise FormatError(problem, path=archive.path)
    chunk_parts, file_parts = [], []
    empty = not schemas
    for i, (key, schema) in enumerate(schemas or [(GroupKey(0, "", ""), LOOKUP_SCHEMA)]):
        obj = plan.add_part(f"g{i}", schema, (lambda: LOOKUP_SCHEMA.empty_table()) if empty
                            else (lambda k=key: archive.group_table(k)), group_what(key))
        consts = dict(repo=literal(key.repo), pkg_type=str(key.pkg_type),
                      pkg_type_name=literal(pkg_type_name(key.pkg_type)),
                      module=literal(key.module_name), table=obj)
        has_pt = "pkg_type" in schema.names
        chunk_parts.append(template("view_chunks_group.sql", **consts,
                                    exclude="EXCLUDE (pkg_type)" if has_pt else ""))
        extra = "".join(f", {'' if single else 'f.'}{ident(f.name)}"
                        for f in module_fields(schema))
        file_parts.append(template("view_files_group_single.sql" if single
                                   else "view_files_group.sql", **consts, extra=extra))
    union = "\nUNION ALL BY NAME\n"
    chunks = union.join(f"({p})" for p in chunk_parts)
    plan.add_view("files", union.join(f"({p})" for p in file_parts))
    plan.add_view("chunks", chunks)
    manifest = plan.add_object("manifest", archive.manifest)
    plan.add_view("manifest", f"SELECT * FROM {manifest}")
    plan.add_view("groups", template("view_groups.sql", groups=plan.add_object(
        "group_rows", _group_rows(archive)), chunks=f"({chunks})"))
    plan.add_view("lookup", "SELECT * FROM " + plan.add_part(
        "lookup", lookup_schema, lambda: archive.lookup, LOOKUP))
    plan.add_view("_archive", f"SELECT {literal(archive.path)} AS archive")
    _sections(plan, trust)
    return plan


def _remote_schemas(archive: Archive) -> tuple[pa.Schema, list[tuple[GroupKey, pa.Schema]]]:
    """A remote archive's lookup and sub-index schemas, from their streams' first bytes."""
    from .lazy import fetch_heads

    lk = archive.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP))
    fetch_heads(archive, [lk, *(archive.manifest_row(k) for k in archive.groups)])
    lookup = peek_schema(archive, lk.key, LOOKUP)
    if lookup_schema_problem(lookup) is not None:
        raise FormatError(f"{LOOKUP} does not have the base columns", path=archive.path)
    return lookup, [(key, group_schema(archive, key)) for key in archive.groups]


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


def _sections(plan: ArchiveViews, trust: Any) -> None:
    archive = plan.archive
    if archive.has_section(META):
        from ..provenance.meta import read_meta

        meta = plan.add_part("meta", _schema(archive, META), lambda: read_meta(archive), META)
        plan.add_view("meta", f"SELECT * FROM {meta}")
    if archive.has_section(SIGN_ARTIFACTS) or archive.has_section(SIGN_ARCHIVE):
        from ..provenance.sign import signatures_table

        sigs = plan.add_object("signatures", signatures_table(archive, trust=trust))
        plan.add_view("signatures", f"SELECT * FROM {sigs}")
    if archive.has_section(GIT_OID):
        from ..format.gitindex import decode_oid_index

        lookup = archive.lookup
        objects = decode_oid_index(archive.section(GIT_OID), lookup_rows=lookup.num_rows,
                                   path=archive.path)
        rows = np.unique(objects.column("pack_row").to_numpy())
        paths = lookup.column("relative_path").take(pa.array(rows))
        packs = pa.table({"pack_row": pa.array(rows, pa.uint32()), "relative_path": paths})
        plan.add_view("git_objects", template(
            "view_git_objects.sql", objects=plan.add_object("git_objects", objects),
            packs=plan.add_object("git_packs", packs)))
    for section, suffix in ((GIT_GRAPH, "git_commits"), (GIT_REACH, "git_reach")):
        if archive.has_section(section):
            obj = plan.add_part(suffix, _schema(archive, section),
                                lambda s=section: archive.section(s), section)
            plan.add_view(suffix, f"SELECT * FROM {obj}")


def _schema(archive: Archive, name: str) -> pa.Schema:
    """An Arrow section's schema: checked cheaply at once for a local archive, from its
    header for a remote one."""
    if archive.source.fetches:
        return peek_schema(archive, GroupKey(RESERVED_PKG_TYPE, "", name), name)
    return section_table(archive, name).schema
