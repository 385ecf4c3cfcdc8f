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

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import FormatError, ZnippyError
from .. import views
from ..format import build
from ..format.schema import ARROW_SECTIONS, LOOKUP, LOOKUP_SCHEMA, RESERVED_PKG_TYPE, GroupKey
from ..modules.pkgtypes import pkg_type_name
from ..format.validate import lookup_schema_problem, union_problem
from ..read.reader import Archive, group_what, open_archive
from .sql import ident, literal, template
from ..views.files import GROUPS_SCHEMA, module_fields
from ..views.heads import fetch_heads, group_schema, peek_schema
from ..views.shares import file_shares
from .tables import CHANGED, ArrowPart, Stamp, group_table, section_table

#: the views planned as SQL over the zero-copy sub-indexes (the rest: ``_sections``)
_DATA_VIEWS = ("files", "chunks", "groups", "manifest", "lookup")


@dataclass
class ArchiveViews:
    name: str
    archive: Archive
    prefix: str = ""
    stamp: Stamp | None = None
    objects: dict[str, Any] = field(default_factory=dict)
    views: dict[str, str] = field(default_factory=dict)
    #: scalar functions the views call, by name: (function, parameter types, return type)
    functions: dict[str, tuple[Any, list[str], str]] = field(default_factory=dict)

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

    def add_share_function(self) -> str:
        """A scalar function ``(relative_path) -> stored_size`` of this archive's files
        (``views/shares.py``): its shares are computed at its first call, so a query that
        does not ask for ``stored_size`` reads no more sub-indexes than before."""
        name = re.sub(r"\W", "_", self.prefix) + "stored_size"
        archive, stamp = self.archive, self.stamp

        def stored_size(paths: Any) -> pa.Array:
            if stamp is not None:
                stamp.check()
            return file_shares(archive, paths)

        self.functions[name] = (stored_size, ["VARCHAR"], "UBIGINT")
        return ident(name)


def plan_views(path: str, name: str, *, prefix: str = "") -> ArchiveViews:
    """The views of one archive, by suffix (``files``, ``chunks``, ...)."""
    archive = open_archive(path)
    try:
        return _plan(ArchiveViews(name, archive, prefix, _stamp(archive)))
    except BaseException:
        archive.close()
        raise


def _stamp(archive: Archive) -> Stamp | None:
    """The stamp of a local archive's file, taken after it was opened and checked against
    what was opened (a remote archive has none: it is read as the object it was)."""
    if archive.source.fetches:
        return None
    src = getattr(archive.source, "base", archive.source)  # laid anew (interop/): its file
    stamp = Stamp.of(src.path)
    footer = src.read(src.size - len(stamp.footer), len(stamp.footer))
    if stamp.size != src.size or stamp.footer != footer.to_pybytes():
        raise ZnippyError(CHANGED.replace("since it was registered", "while it was opened"),
                          path=archive.path)
    return stamp


def plan_many(paths: Sequence[str], name: str) -> list[ArchiveViews]:
    """The views of several archives registered under one name (see the module docstring)."""
    plans: list[ArchiveViews] = []
    try:
        for i, path in enumerate(paths):
            plans.append(plan_views(path, name,
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


def _plan(plan: ArchiveViews) -> ArchiveViews:
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
    chunk_parts: list[str] = []
    file_parts: list[str] = []
    empty = not schemas
    share = plan.add_share_function()
    for i, (key, schema) in enumerate(schemas or [(GroupKey(0, "", ""), LOOKUP_SCHEMA)]):
        obj = plan.add_part(f"g{i}", schema, (lambda: LOOKUP_SCHEMA.empty_table()) if empty
                            else (lambda k=key: archive.group_table(k)), group_what(key))
        consts = dict(repo=literal(key.repo), pkg_type=str(key.pkg_type),
                      pkg_type_name=literal(pkg_type_name(key.pkg_type)),
                      module_name=literal(key.module_name), table=obj, share=share)
        extra = "".join(f", {'' if single else 'f.'}{ident(f.name)}"
                        for f in module_fields(schema))
        mods = [ident(f.name) for f in module_fields(schema)]
        drop = (["pkg_type"] if "pkg_type" in schema.names else []) + mods
        chunk_parts.append(template("view_chunks_group.sql", **consts,
                                    exclude=f"EXCLUDE ({', '.join(drop)})" if drop else "",
                                    extra="".join(f", {m}" for m in mods)))
        file_parts.append(template("view_files_group_single.sql" if single
                                   else "view_files_group.sql", **consts, extra=extra))
    union = "\nUNION ALL BY NAME\n"
    chunks = union.join(f"({p})" for p in chunk_parts)
    plan.add_view("files", union.join(f"({p})" for p in file_parts))
    plan.add_view("chunks", chunks)
    manifest = plan.add_object("manifest", views.table(archive, "manifest"))
    plan.add_view("manifest", f"SELECT * FROM {manifest}")
    plan.add_view("groups", template("view_groups.sql", groups=plan.add_object(
        "group_rows", _group_rows(archive)), chunks=f"({chunks})", share=share,
        columns=", ".join(f"g.{c}" for c in _MANIFEST_COLUMNS)))
    plan.add_view("lookup", "SELECT * FROM " + plan.add_part(
        "lookup", lookup_schema, lambda: archive.lookup, LOOKUP))
    # the macros (znippy_cat, ...) find the archive here: a scan checks the stamp, so they
    # refuse an archive changed since it was registered, as the views do (tables.CHANGED)
    path_only = build.table({"archive": [archive.path]}, _ARCHIVE_PATH)
    plan.add_view("_archive", "SELECT archive FROM " + plan.add_part(
        "archive", path_only.schema, lambda: path_only, "the archive"))
    _sections(plan)
    return plan


def _remote_schemas(archive: Archive) -> tuple[pa.Schema, list[tuple[GroupKey, pa.Schema]]]:
    """A remote archive's lookup and sub-index schemas, from their streams' first bytes."""
    lk = archive.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP))
    fetch_heads(archive, [lk, *(archive.manifest_row(k) for k in archive.groups)])
    lookup = peek_schema(archive, lk.key, LOOKUP)
    if lookup_schema_problem(lookup) is not None:
        raise FormatError(f"{LOOKUP} does not have the base columns", path=archive.path)
    return lookup, [(key, group_schema(archive, key)) for key in archive.groups]


def _file_count(archive: Archive) -> int:
    return len(archive.trie)  # (a damaged trie: a FormatError)


_MANIFEST_COLUMNS = tuple(GROUPS_SCHEMA.names[:7])
_ARCHIVE_PATH = pa.schema([pa.field("archive", pa.utf8())])  # the groups view's manifest columns


def _group_rows(archive: Archive) -> pa.Table:
    """The groups view's manifest columns (its few rows allocated with malloc, not from the
    Arrow pool, whose first allocation in a process reserves ~4 MB: register otherwise
    allocates nothing from it)."""
    return views.table(archive, "groups", list(_MANIFEST_COLUMNS))


def _sections(plan: ArchiveViews) -> None:
    """The views that are one table per archive, as the view catalog defines them: a view
    whose sections the archive lacks is left out (its capability's code is not imported)."""
    archive = plan.archive
    for name in views.names():
        if name in _DATA_VIEWS or not views.present(archive, name):
            continue
        view = views.get(name)
        if view.eager:  # computed (signatures checked, objects decoded): made now, as before
            obj = plan.add_object(name, views.table(archive, name))
        else:
            if not archive.source.fetches:  # a local archive's streams: checked cheaply now
                for section in view.sections:
                    if section in ARROW_SECTIONS and archive.has_section(section):
                        section_table(archive, section)
            obj = plan.add_part(name, views.schema(archive, name),
                                lambda n=name: views.table(archive, n), name)
        plan.add_view(name, f"SELECT * FROM {obj}")
