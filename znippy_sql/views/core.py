"""Reading a view: open the archive, check the view and its columns, project, filter, and
yield Arrow record batches (the functions the package :mod:`znippy_sql.views` exports)."""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from ..errors import ZnippyError
from ..format import build
from ..format.schema import GroupKey
from .base import Request, View, Where
from .registry import get, names, present

ArchiveLike = Any  # a path or URL (str / os.PathLike), or an open Archive
ARCHIVE_FIELD = pa.field("archive", pa.utf8(), nullable=False)


def open_or_use(archive: ArchiveLike, storage_options: Mapping[str, Any] | None
                ) -> tuple[Any, bool]:
    """(the Archive, whether this call opened it and must close it)."""
    from ..read.reader import Archive, open_archive

    if isinstance(archive, Archive):
        return archive, False
    if not isinstance(archive, (str, os.PathLike)):
        raise TypeError(f"an archive is a path, a URL or an Archive, not {archive!r}")
    return open_archive(archive, storage_options=storage_options), True


def archive_name(archive: ArchiveLike) -> str:
    """What the ``archive`` column says: the path/URL as given (an Archive's ``path``)."""
    return archive if isinstance(archive, str) else getattr(archive, "path", None) or \
        os.fspath(archive)


#: each open archive's view schemas, made once (an archive's bytes do not change while open)
_SCHEMAS: "weakref.WeakKeyDictionary[Any, dict[str, pa.Schema]]" = weakref.WeakKeyDictionary()


def _schema_of(arc: Any, view: View) -> pa.Schema:
    known = _SCHEMAS.setdefault(arc, {})
    if view.name not in known:
        known[view.name] = view.schema(arc)
    return known[view.name]


def _view(archive: Any, name: str) -> View:
    if name not in names():
        raise ValueError(f"unknown view {name!r}; one of {', '.join(names())}")
    if not present(archive, name):
        raise ZnippyError(f"the archive has no {name} section", path=archive.path)
    return get(name)


def schema(archive: ArchiveLike, name: str, *,
           storage_options: Mapping[str, Any] | None = None) -> pa.Schema:
    """The schema of view ``name`` of one archive (read from the manifest and the streams'
    headers; no row is read)."""
    arc, owned = open_or_use(archive, storage_options)
    try:
        return _schema_of(arc, _view(arc, name))
    finally:
        if owned:
            arc.close()


def project(full: pa.Schema, columns: Sequence[str] | None, name: str) -> pa.Schema:
    if columns is None:
        return full
    if isinstance(columns, str):
        raise TypeError("columns is a list of names, not one string")
    unknown = [c for c in columns if c not in full.names]
    if unknown:
        raise ValueError(f"view {name} has no column {', '.join(map(repr, unknown))}; "
                         f"its columns: {', '.join(full.names)}")
    return pa.schema([full.field(c) for c in dict.fromkeys(columns)])


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: absent ones null, others cast if needed."""
    if table.schema.equals(schema):
        return table
    if not schema:  # no column asked for: the rows still count (a zero-column table)
        return table.select([])
    cols = []
    for f in schema:
        if f.name in table.schema.names:
            col = table.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _tables(arc: Any, view: View, out: pa.Schema, full: pa.Schema, where: Where,
            groups: Iterable[GroupKey] | None) -> Iterator[pa.Table]:
    """The view's rows of one open archive, projected to ``out`` and filtered."""
    keys = None
    if view.grouped:
        keys = tuple(k for k in (arc.groups if groups is None else groups)
                     if where.keeps_group(k))
    if where.path is not None and not any(arc.find(p) is not None for p in where.path):
        return  # not one of the paths is in the trie: nothing to read
    need = None if out is full else tuple(dict.fromkeys([*out.names, *where.columns()]))
    if need == () and full.names:
        need = (full.names[0],)  # no column asked for: one keeps the count (a view may
        # build its table from the columns asked for alone)
    request = Request(need, where, keys)
    for part in view.read(arc, request):
        table = pa.Table.from_batches([part]) if isinstance(part, pa.RecordBatch) else part
        mask = where.mask(table)
        if mask is not None and not mask.all():
            table = table.filter(pa.array(mask))
        if table.num_rows or mask is None:
            yield conform(table, out)


def _batches(tables: Iterator[pa.Table], close: Any = None) -> Iterator[pa.RecordBatch]:
    try:
        for table in tables:
            yield from table.to_batches()
    finally:
        if close is not None:
            close()


def batches(archive: ArchiveLike, name: str, columns: Sequence[str] | None = None,
            where: Where | None = None, *, storage_options: Mapping[str, Any] | None = None,
            groups: Iterable[GroupKey] | None = None) -> pa.RecordBatchReader:
    """The rows of view ``name`` of one archive: only ``columns`` (in that order; all by
    default), only the rows ``where`` keeps, only ``groups`` of a grouped view (all by
    default). The schema is known at once; rows are read as the reader is consumed. An
    archive given by path is opened here and closed when the reader is exhausted."""
    arc, owned = open_or_use(archive, storage_options)
    try:
        out, tables = _planned(arc, name, columns, where, groups)
    except BaseException:
        if owned:
            arc.close()
        raise
    return pa.RecordBatchReader.from_batches(out, _batches(tables, arc.close if owned else None))


def _planned(arc: Any, name: str, columns: Sequence[str] | None, where: Where | None,
             groups: Iterable[GroupKey] | None) -> tuple[pa.Schema, Any]:
    """The output schema of view ``name`` and its tables (lazy), ``where``'s columns checked."""
    view = _view(arc, name)
    full = _schema_of(arc, view)
    out = project(full, columns, name)
    where = where or Where()
    for column in where.columns():
        if column not in full.names:
            raise ValueError(f"view {name} has no column {column!r} to filter on")
    return out, _tables(arc, view, out, full, where, groups)


def table(archive: ArchiveLike, name: str, columns: Sequence[str] | None = None,
          where: Where | None = None, *, storage_options: Mapping[str, Any] | None = None,
          groups: Iterable[GroupKey] | None = None) -> pa.Table:
    """:func:`batches` read whole into one ``pa.Table``, without a stream in between (the
    view's own tables, zero-copy; nothing is allocated from the Arrow memory pool for a
    view that allocates nothing itself)."""
    arc, owned = open_or_use(archive, storage_options)
    try:
        out, tables = _planned(arc, name, columns, where, groups)
        parts = list(tables)
    finally:
        if owned:
            arc.close()
    if len(parts) == 1:
        return parts[0]
    if not out:  # concat_tables drops the length of zero-column tables; batches keep it
        return pa.Table.from_batches([b for t in parts for b in t.to_batches()], schema=out)
    return pa.concat_tables(parts) if parts else out.empty_table()


def schema_many(archives: Sequence[ArchiveLike], name: str, *,
                storage_options: Mapping[str, Any] | None = None) -> pa.Schema:
    """The schema of view ``name`` over several archives: ``archive`` first, then the union
    of their columns (a column one archive lacks is null there)."""
    return merge_schemas({archive_name(a): schema(a, name, storage_options=storage_options)
                    for a in archives}, name)


def merge_schemas(schemas: Mapping[str, pa.Schema], name: str) -> pa.Schema:
    """``archive`` first, then the union of the schemas of one view over several archives
    (by archive name); a column of two types is an error."""
    merged: dict[str, pa.Field] = {}
    for archive, one in schemas.items():
        for f in one:
            have = merged.get(f.name)
            if have is None:
                merged[f.name] = f
            elif have.type != f.type:
                raise ZnippyError(f"view {name}: column {f.name!r} is {have.type} in one "
                                  f"archive and {f.type} in {archive}")
            elif f.nullable and not have.nullable:
                merged[f.name] = have.with_nullable(True)
    return pa.schema([ARCHIVE_FIELD, *merged.values()])


def with_archive(reader: pa.RecordBatchReader, label: str, out: pa.Schema
                  ) -> Iterator[pa.RecordBatch]:
    for batch in reader:
        table = pa.Table.from_batches([batch])
        if "archive" in out.names:
            table = table.add_column(0, ARCHIVE_FIELD, build.repeat(label, pa.utf8(),
                                                                  table.num_rows))
        yield from conform(table, out).to_batches()


def batches_many(archives: Sequence[ArchiveLike], name: str,
                 columns: Sequence[str] | None = None, where: Where | None = None, *,
                 storage_options: Mapping[str, Any] | None = None) -> pa.RecordBatchReader:
    """:func:`batches` over several archives, one after the other, with an ``archive`` column
    (each archive's path/URL as given) first unless ``columns`` leaves it out. An archive
    without the view adds no rows (it is an error only when none has it)."""
    items = list(archives)
    have = []
    for a in items:
        arc, owned = open_or_use(a, storage_options)
        try:
            if name in names() and present(arc, name):
                have.append(a)
        finally:
            if owned:
                arc.close()
    if not have:
        if not items:
            raise ValueError("no archives given")
        return batches(items[0], name, columns, where, storage_options=storage_options)
    each = [schema(a, name, storage_options=storage_options) for a in have]
    full = merge_schemas({archive_name(a): s for a, s in zip(have, each)}, name)
    out = project(full, columns, name)

    def gen() -> Iterator[pa.RecordBatch]:
        for a, own in zip(have, each):
            inner = None if columns is None else [c for c in out.names if c in own.names]
            reader = batches(a, name, inner, where, storage_options=storage_options)
            yield from with_archive(reader, archive_name(a), out)

    return pa.RecordBatchReader.from_batches(out, gen())
