"""Polars: an archive's sections as lazy scans, and files read into a DataFrame.

>>> import tempfile, os
>>> from znippy_sql import write_archive, Entry
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "demo.znippy")
>>> _ = write_archive(p, [Entry("a.txt", data=b"hi", repo="r")], fsync=False)
>>> scan(p).filter(pl.col("repo") == "r").select("relative_path", "size").collect().rows()
[('a.txt', 2)]

``scan`` goes through ``polars.io.plugins.register_io_source``: the callback gets the projected
columns, the predicate, ``n_rows`` and a batch size, and applies all of them itself. For
``files`` and ``chunks`` a predicate on the group columns (``repo``, ``pkg_type``,
``pkg_type_name``, ``module``/``module_name``) is decided once per group, so only the
matching sub-indexes' byte ranges are read (``Archive.source.bytes_read`` counts them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import polars as pl
import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.files import files_schema, files_table, module_fields
from ..read.reader import Archive, open_archive
from ..format.schema import (BASE_FIELDS, GIT_GRAPH, GIT_OID, GIT_REACH, LOOKUP, LOOKUP_SCHEMA,
                     META, RESERVED_PKG_TYPE, SIGN_ARCHIVE, SIGN_ARTIFACTS, GroupKey, pkg_type_name)

Section = Literal["files", "chunks", "manifest", "lookup", "meta", "signatures", "git_objects",
                  "git_commits", "git_reach"]
_SECTION_NAMES = {"meta": META, "git_commits": GIT_GRAPH, "git_reach": GIT_REACH,
                  "lookup": LOOKUP}
_CHUNK_GROUP_FIELDS = (pa.field("repo", pa.utf8(), nullable=False),
                       pa.field("pkg_type", pa.int8(), nullable=False),
                       pa.field("pkg_type_name", pa.utf8(), nullable=False),
                       pa.field("module_name", pa.utf8(), nullable=False))


def scan(archive_path: str | os.PathLike[str] | Archive, section: Section = "files", *,
         trust: Any = None) -> pl.LazyFrame:
    """A lazy scan of one section of an archive (``files`` by default)."""
    archive = archive_path if isinstance(archive_path, Archive) else open_archive(archive_path)
    if section in ("files", "chunks"):
        return _GroupScan(archive, section).lazy()
    if section == "manifest":
        return _table_scan(lambda: archive.manifest, archive.manifest.schema, "manifest")
    if section == "signatures":
        if not (archive.has_section(SIGN_ARTIFACTS) or archive.has_section(SIGN_ARCHIVE)):
            raise _absent(archive, section)
        from ..provenance.sign import signatures_table

        table = signatures_table(archive, trust=trust)
        return _table_scan(lambda: table, table.schema, section)
    if section == "git_objects":
        if not archive.has_section(GIT_OID):
            raise _absent(archive, section)
        from ..format.gitindex import decode_oid_index

        objects = decode_oid_index(archive.section(GIT_OID), path=archive.path,
                                   lookup_rows=archive.lookup.num_rows)
        return _table_scan(lambda: objects, objects.schema, section)
    if section == "lookup" and archive.lookup_in_memory:  # the Rust tool's layout
        return _table_scan(lambda: archive.lookup, LOOKUP_SCHEMA, section)
    if section in _SECTION_NAMES:
        name = _SECTION_NAMES[section]
        if not archive.has_section(name):
            raise _absent(archive, section)
        from .tables import section_table

        key = GroupKey(RESERVED_PKG_TYPE, "", name)
        schema = _peek_schema(archive, key, name)
        return _table_scan(lambda: section_table(archive, name), schema, section)
    raise ValueError(f"unknown section {section!r}; one of files, chunks, manifest, lookup, "
                     "meta, signatures, git_objects, git_commits, git_reach")


def _absent(archive: Archive, section: str) -> ZnippyError:
    return ZnippyError(f"the archive has no {section} section", path=archive.path)


def _peek_schema(archive: Archive, key: GroupKey, what: str) -> pa.Schema:
    """The schema message at the start of a stream, reading only its own bytes."""
    from .lazy import stream_schema

    return stream_schema(archive, archive.manifest_row(key), what)


def _table_scan(load: Callable[[], pa.Table], schema: pa.Schema, name: str) -> pl.LazyFrame:
    from polars.io.plugins import register_io_source

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        df = pl.from_arrow(load())
        assert isinstance(df, pl.DataFrame)
        yield from _finish([df], with_columns, predicate, n_rows, batch_size)

    return register_io_source(source, schema=_polars_schema(schema),
                              explain_name=f"znippy {name}")


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    return pl.from_arrow(schema.empty_table()).schema  # type: ignore[union-attr]


def _finish(frames: Sequence[pl.DataFrame] | Iterator[pl.DataFrame],
            with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
            batch_size: int | None) -> Iterator[pl.DataFrame]:
    left = n_rows
    step = batch_size or 65536
    for df in frames:
        if left is not None and left <= 0:
            return
        if predicate is not None:
            df = df.filter(predicate)
        if with_columns is not None:
            df = df.select(with_columns)
        if left is not None:
            df = df.head(left)
            left -= df.height
        for start in range(0, df.height, step):
            yield df.slice(start, step)


class _GroupScan:
    """``files`` or ``chunks``: one part per data group, pruned by the group columns."""

    def __init__(self, archive: Archive, section: str) -> None:
        self.archive = archive
        self.section = section
        self.keys = archive.groups
        if archive.source.fetches:  # remote: every group's schema message in one go
            from .lazy import fetch_heads

            fetch_heads(archive, [archive.manifest_row(k) for k in self.keys])
        self.schemas = {k: _peek_schema(archive, k, f"sub-index {k}") for k in self.keys}
        for k, schema in self.schemas.items():  # before module_fields takes a renamed one
            head = pa.schema(list(schema)[: len(BASE_FIELDS)])
            if len(schema) < len(BASE_FIELDS) or not head.equals(LOOKUP_SCHEMA):
                raise FormatError(f"sub-index {k} does not start with the base columns",
                                  path=archive.path)
        extra: dict[str, pa.Field] = {}
        for schema in self.schemas.values():
            for f in module_fields(schema):
                extra.setdefault(f.name, f.with_nullable(True))
        if section == "files":
            self.schema = files_schema(list(extra.values()))
            self.group_names = {"repo", "pkg_type", "pkg_type_name", "module"}
        else:
            self.schema = pa.schema([*BASE_FIELDS, *(f for n, f in extra.items()),
                                     *_CHUNK_GROUP_FIELDS])
            self.group_names = {"repo", "pkg_type", "pkg_type_name", "module_name"}
        self.pl_schema = _polars_schema(self.schema)

    def lazy(self) -> pl.LazyFrame:
        from polars.io.plugins import register_io_source

        return register_io_source(self.source, schema=self.pl_schema,
                                  explain_name=f"znippy {self.section}",
                                  explain_detail=f"{len(self.keys)} groups")

    def group_row(self, key: GroupKey) -> pl.DataFrame:
        module_col = "module" if self.section == "files" else "module_name"
        return pl.DataFrame({"repo": [key.repo], "pkg_type": [key.pkg_type],
                             "pkg_type_name": [pkg_type_name(key.pkg_type)],
                             module_col: [key.module_name]},
                            schema={"repo": pl.String, "pkg_type": pl.Int8,
                                    "pkg_type_name": pl.String, module_col: pl.String})

    def matching(self, predicate: pl.Expr | None) -> list[GroupKey]:
        parts = [p for p in _conjuncts(predicate)
                 if set(p.meta.root_names()) <= self.group_names] if predicate is not None else []
        if not parts:
            return list(self.keys)
        test = pl.all_horizontal(parts) if len(parts) > 1 else parts[0]
        keep = []
        for key in self.keys:
            hit = self.group_row(key).select(test.fill_null(False)).to_series()
            if bool(hit[0]):
                keep.append(key)
        return keep

    def frames(self, keys: list[GroupKey], needed: list[str] | None) -> Iterator[pl.DataFrame]:
        from .tables import group_table

        for key in keys:
            table = group_table(self.archive, key)
            try:  # every row is read from here on: UTF-8 too (group_table checks bounds only)
                table.validate(full=True)
            except (pa.ArrowException, ValueError) as exc:
                raise FormatError(f"sub-index {key}: {exc}", path=self.archive.path) from None
            if self.section == "files":
                part = files_table(table, key, columns=needed)
            else:
                part = _chunks_part(table, key)
            missing = [f for f in self.schema if f.name not in part.schema.names
                       and (needed is None or f.name in needed)]
            for f in missing:
                part = part.append_column(f, pa.nulls(part.num_rows, f.type))
            names = [n for n in self.schema.names if n in part.schema.names
                     and (needed is None or n in needed)]
            df = pl.from_arrow(part.select(names))
            assert isinstance(df, pl.DataFrame)
            yield df.cast({n: self.pl_schema[n] for n in names})  # type: ignore[arg-type]

    def source(self, with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        keys = self.matching(predicate)
        needed = None
        if with_columns is not None:
            needed = list(with_columns)
            if predicate is not None:
                needed += [n for n in predicate.meta.root_names() if n not in needed]
        yield from _finish(self.frames(keys, needed), with_columns, predicate, n_rows,
                           batch_size)


def _chunks_part(table: pa.Table, key: GroupKey) -> pa.Table:
    n = table.num_rows
    if "pkg_type" in table.schema.names:
        table = table.drop_columns(["pkg_type"])
    consts = [pa.scalar(key.repo, pa.utf8()), pa.scalar(key.pkg_type, pa.int8()),
              pa.scalar(pkg_type_name(key.pkg_type), pa.utf8()),
              pa.scalar(key.module_name, pa.utf8())]
    for f, value in zip(_CHUNK_GROUP_FIELDS, consts):
        table = table.append_column(f, pa.repeat(value, n))
    return table


def _conjuncts(expr: pl.Expr) -> list[pl.Expr]:
    """``a & b & c`` → ``[a, b, c]``; anything else → ``[expr]``."""
    try:
        tree = json.loads(expr.meta.serialize(format="json"))
    except Exception:
        return [expr]
    node = tree.get("BinaryExpr") if isinstance(tree, dict) else None
    if node is not None and node.get("op") == "And":
        out: list[pl.Expr] = []
        for part in expr.meta.pop():
            out.extend(_conjuncts(part))
        return out
    return [expr]


def read_files(archive_path: str | os.PathLike[str] | Archive,
               paths_or_lazyframe: Sequence[str] | pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The given files with a ``content`` column (bytes, checked against their BLAKE3).

    Paths may be a list, or a (lazy) frame with a ``relative_path`` column whose other
    columns are kept.
    """
    archive = archive_path if isinstance(archive_path, Archive) else open_archive(archive_path)
    if isinstance(paths_or_lazyframe, pl.LazyFrame):
        frame = paths_or_lazyframe.collect()
    elif isinstance(paths_or_lazyframe, pl.DataFrame):
        frame = paths_or_lazyframe
    else:
        frame = pl.DataFrame({"relative_path": list(paths_or_lazyframe)},
                             schema={"relative_path": pl.String})
    if "relative_path" not in frame.columns:
        raise ValueError("read_files needs a relative_path column")
    contents = [archive.read(p) for p in frame.get_column("relative_path").to_list()]
    return frame.with_columns(pl.Series("content", contents, dtype=pl.Binary))


__all__ = ["scan", "read_files"]
