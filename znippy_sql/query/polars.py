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
``pkg_type_name``, ``module``/``module_name``, and ``archive`` for several archives) is
decided once per group, so only the matching sub-indexes' byte ranges are read
(``Archive.source.bytes_read`` counts them).

Building a scan reads each sub-index's schema message only. Each collect first checks that
the archive is still the file the scan was built on (``tables.Stamp``), then takes each table
from the :class:`Archive` (its BLAKE3, full validation and value ranges checked once); what
Polars raises on a table is turned into a :class:`FormatError` naming the archive and section.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import polars as pl
import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.files import files_schema, files_table, module_fields
from ..format.schema import (INNER, INNER_FIELD, BASE_FIELDS, GIT_GRAPH, GIT_OID, GIT_REACH, LOOKUP, META,
                             SIGN_ARCHIVE, SIGN_ARTIFACTS, GroupKey, pkg_type_name)
from ..format.validate import union_problem
from ..read.reader import Archive, group_what, open_archive
from .tables import Stamp, group_schema

Section = Literal["files", "chunks", "manifest", "lookup", "meta", "signatures", "git_objects",
                  "git_commits", "git_reach"]
_SECTION_NAMES = {"meta": META, "git_commits": GIT_GRAPH, "git_reach": GIT_REACH,
                  "lookup": LOOKUP, "git_objects": GIT_OID}
_CHUNK_GROUP_FIELDS = (pa.field("repo", pa.utf8(), nullable=False),
                       pa.field("pkg_type", pa.int8(), nullable=False),
                       pa.field("pkg_type_name", pa.utf8(), nullable=False),
                       pa.field("module_name", pa.utf8(), nullable=False))
_ARCHIVE = pa.field("archive", pa.utf8(), nullable=False)
ArchiveLike = str | os.PathLike[str] | Archive
_T = TypeVar("_T")


@dataclass
class _Source:
    """One archive of a scan, with the stamp its scan was built on."""

    archive: Archive
    stamp: Stamp | None

    def check(self) -> None:
        if self.stamp is not None:
            self.stamp.check()


def _sources(archives: ArchiveLike | Sequence[ArchiveLike]) -> tuple[list[_Source], bool]:
    if isinstance(archives, Archive):
        return [_Source(archives, None)], False
    from .duckdb import expand_archives

    items = [archives] if isinstance(archives, (str, os.PathLike)) else list(archives)
    out: list[_Source] = []
    many = len(items) != 1 or not isinstance(archives, (str, os.PathLike))
    try:
        for item in items:
            if isinstance(item, Archive):
                out.append(_Source(item, None))
                continue
            paths, glob_many = expand_archives(item)
            many = many or glob_many
            for path in paths:
                stamp = Stamp.of(path)
                out.append(_Source(open_archive(path), stamp))
    except BaseException:
        for s in out:
            if s.stamp is not None:
                s.archive.close()
        raise
    return out, many


def scan(archives: ArchiveLike | Sequence[ArchiveLike], section: Section = "files", *,
         trust: Any = None) -> pl.LazyFrame:
    """A lazy scan of one section (``files`` by default) of an archive, or of several (a glob,
    or a list of paths, globs or :class:`Archive` objects) with an ``archive`` column (path)."""
    if section not in ("files", "chunks", "manifest", "signatures", *_SECTION_NAMES):
        raise ValueError(f"unknown section {section!r}; one of files, chunks, manifest, "
                         "lookup, meta, signatures, git_objects, git_commits, git_reach")
    sources, many = _sources(archives)
    if section in ("files", "chunks"):
        return _GroupScan(sources, section, many).lazy()
    return _TableScan(sources, section, many, trust).lazy()


def _absent(archive: Archive, section: str) -> ZnippyError:
    return ZnippyError(f"the archive has no {section} section", path=archive.path)


def _refused(archive: Archive, what: str, exc: BaseException) -> FormatError:
    return FormatError(f"{what}: Polars refused its rows: {str(exc)[:300]}",
                       path=archive.path if archive is not None else None)


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    return pl.from_arrow(schema.empty_table()).schema  # type: ignore[union-attr]


def _frame(archive: Archive, what: str, table: pa.Table) -> pl.DataFrame:
    df = _engine(archive, what, lambda: pl.from_arrow(table))
    assert isinstance(df, pl.DataFrame)
    return df


def _engine(archive: Archive, what: str, fn: Callable[[], _T]) -> _T:
    """Run a Polars call on our data; what it raises (or panics with: a pyo3 PanicException
    is a BaseException) becomes a FormatError naming the archive and the section."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except ZnippyError:
        raise
    except BaseException as exc:
        raise _refused(archive, what, exc) from None  # type: ignore[arg-type]


def _finish(frames: Iterator[pl.DataFrame], with_columns: list[str] | None,
            predicate: pl.Expr | None, n_rows: int | None,
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


class _Pruned:
    """What ``files``/``chunks`` and the table scans share: parts labelled by constant
    columns, and a predicate's conjuncts on those columns decided once per part."""

    group_names: set[str] = set()

    def constants(self, part: Any) -> dict[str, tuple[Any, Any]]:
        raise NotImplementedError

    def matching(self, parts: list[Any], predicate: pl.Expr | None) -> list[Any]:
        conj = [p for p in _conjuncts(predicate)
                if set(p.meta.root_names()) <= self.group_names] if predicate is not None else []
        if not conj:
            return list(parts)
        test = pl.all_horizontal(conj) if len(conj) > 1 else conj[0]
        keep = []
        for part in parts:
            consts = self.constants(part)
            row = pl.DataFrame({k: [v] for k, (v, _) in consts.items()},
                               schema={k: t for k, (_, t) in consts.items()})
            if bool(row.select(test.fill_null(False)).to_series()[0]):
                keep.append(part)
        return keep


class _GroupScan(_Pruned):
    """``files`` or ``chunks``: one part per data group of each archive."""

    def __init__(self, sources: list[_Source], section: str, many: bool) -> None:
        self.section = section
        self.many = many
        self.parts = [(s, key) for s in sources for key in s.archive.groups]
        for s in sources:
            if s.archive.source.fetches:  # remote: every group's schema message in one go
                from .lazy import fetch_heads

                fetch_heads(s.archive, [s.archive.manifest_row(k) for k in s.archive.groups])
        schemas = {(id(s), key): group_schema(s.archive, key) for s, key in self.parts}
        where = {(id(s), key): f"{group_what(key)} of {s.archive.path}" for s, key in self.parts}
        problem = union_problem((where[k], v) for k, v in schemas.items())
        if problem is not None:
            raise FormatError(problem, path=", ".join(s.archive.path for s in sources))
        self.schemas = schemas
        extra: dict[str, pa.Field] = {}
        for schema in schemas.values():
            for f in module_fields(schema):
                extra.setdefault(f.name, f.with_nullable(True))
        head = [_ARCHIVE] if many else []
        if section == "files":
            self.schema = pa.schema([*head, *files_schema(list(extra.values()))])
            self.group_names = {"repo", "pkg_type", "pkg_type_name", "module"}
        else:
            # packed blobs (FORMAT §3): inner_offset after the base columns, as DuckDB has it
            inner = [INNER_FIELD] if any(INNER in s.names for s in schemas.values()) else []
            self.schema = pa.schema([*head, *BASE_FIELDS, *inner, *extra.values(),
                                     *_CHUNK_GROUP_FIELDS])
            self.group_names = {"repo", "pkg_type", "pkg_type_name", "module_name"}
        if many:
            self.group_names.add("archive")
        self.pl_schema = _engine(sources[0].archive if sources else None,  # type: ignore[arg-type]
                                 section, lambda: _polars_schema(self.schema))
        self.sources = sources

    def lazy(self) -> pl.LazyFrame:
        from polars.io.plugins import register_io_source

        return register_io_source(self.source, schema=self.pl_schema,
                                  explain_name=f"znippy {self.section}",
                                  explain_detail=f"{len(self.parts)} groups")

    def constants(self, part: Any) -> dict[str, tuple[Any, Any]]:
        src, key = part
        module_col = "module" if self.section == "files" else "module_name"
        out = {"repo": (key.repo, pl.String), "pkg_type": (key.pkg_type, pl.Int8),
               "pkg_type_name": (pkg_type_name(key.pkg_type), pl.String),
               module_col: (key.module_name, pl.String)}
        if self.many:
            out["archive"] = (src.archive.path, pl.String)
        return out

    def frames(self, parts: list[tuple[_Source, GroupKey]], needed: list[str] | None
               ) -> Iterator[pl.DataFrame]:
        checked: set[int] = set()
        for src, key in parts:
            if id(src) not in checked:
                src.check()
                checked.add(id(src))
            archive = src.archive
            table = archive.group_table(key)
            if self.section == "files":
                part = files_table(table, key, columns=needed)
            else:
                part = _chunks_part(table, key)
            if self.many and (needed is None or "archive" in needed):
                part = part.add_column(0, _ARCHIVE, pa.repeat(pa.scalar(archive.path),
                                                              part.num_rows))
            missing = [f for f in self.schema if f.name not in part.schema.names
                       and (needed is None or f.name in needed)]
            for f in missing:
                part = part.append_column(f, pa.nulls(part.num_rows, f.type))
            names = [n for n in self.schema.names if n in part.schema.names
                     and (needed is None or n in needed)]
            what = group_what(key)
            df = _frame(archive, what, part.select(names))
            yield _engine(archive, what, lambda: df.cast(
                {n: self.pl_schema[n] for n in names}))  # type: ignore[arg-type]

    def source(self, with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        parts = self.matching(self.parts, predicate)
        needed = None
        if with_columns is not None:
            needed = list(with_columns)
            if predicate is not None:
                needed += [n for n in predicate.meta.root_names() if n not in needed]
        yield from _finish(self.frames(parts, needed), with_columns, predicate, n_rows,
                           batch_size)


class _TableScan(_Pruned):
    """A section that is one table per archive (``manifest``, ``lookup``, ``meta``, ...)."""

    def __init__(self, sources: list[_Source], section: str, many: bool, trust: Any) -> None:
        self.section = section
        self.many = many
        self.trust = trust
        have = [s for s in sources if self._has(s.archive)]
        if not have:
            raise _absent(sources[0].archive, section)
        self.sources = have
        self.group_names = {"archive"} if many else set()
        self._eager: dict[int, pa.Table] = {}
        if section in ("signatures", "git_objects"):  # computed: made now, as before
            for s in have:
                self._eager[id(s)] = self._load(s.archive)
        first = self._eager.get(id(have[0])) if have else None
        schema = first.schema if first is not None else self._schema(have[0].archive)
        self.schema = pa.schema([_ARCHIVE, *schema]) if many else schema

    def _has(self, archive: Archive) -> bool:
        if self.section == "manifest" or (self.section == "lookup" and archive.lookup_in_memory):
            return True  # (the Rust tool's layout: the lookup the reader builds in memory)
        if self.section == "signatures":
            return archive.has_section(SIGN_ARTIFACTS) or archive.has_section(SIGN_ARCHIVE)
        return archive.has_section(_SECTION_NAMES[self.section])

    def _schema(self, archive: Archive) -> pa.Schema:
        if self.section == "manifest":
            return archive.manifest.schema
        from ..format.schema import LOOKUP_SCHEMA, META_SCHEMA, RESERVED_PKG_TYPE
        from .tables import peek_schema

        name = _SECTION_NAMES[self.section]
        if name == LOOKUP:  # packed archives add inner_offset (FORMAT §3): read its head
            return LOOKUP_SCHEMA if archive.lookup_in_memory else peek_schema(
                archive, GroupKey(RESERVED_PKG_TYPE, "", name), name)
        if name == META:
            return META_SCHEMA
        return peek_schema(archive, GroupKey(RESERVED_PKG_TYPE, "", name), name)

    def _load(self, archive: Archive) -> pa.Table:
        if self.section == "manifest":
            return archive.manifest
        if self.section == "signatures":
            from ..provenance.sign import signatures_table

            return signatures_table(archive, trust=self.trust)
        if self.section == "git_objects":
            from ..format.gitindex import decode_oid_index

            return decode_oid_index(archive.section(GIT_OID), path=archive.path,
                                    lookup_rows=archive.lookup.num_rows)
        if self.section == "lookup":
            return archive.lookup
        if self.section == "meta":
            from ..provenance.meta import read_meta

            table = read_meta(archive)
            assert table is not None
            return table
        table = archive.section(_SECTION_NAMES[self.section])
        if not isinstance(table, pa.Table):
            raise FormatError(f"{_SECTION_NAMES[self.section]} is not an Arrow stream",
                              path=archive.path)
        return table

    def lazy(self) -> pl.LazyFrame:
        from polars.io.plugins import register_io_source

        schema = _engine(self.sources[0].archive, self.section,
                         lambda: _polars_schema(self.schema))
        return register_io_source(self.source, schema=schema,
                                  explain_name=f"znippy {self.section}")

    def constants(self, part: Any) -> dict[str, tuple[Any, Any]]:
        return {"archive": (part.archive.path, pl.String)}

    def frames(self, sources: list[_Source]) -> Iterator[pl.DataFrame]:
        want = pa.schema(list(self.schema)[1:]) if self.many else self.schema
        for src in sources:
            src.check()
            archive = src.archive
            table = self._eager.get(id(src))
            table = self._load(archive) if table is None else table
            if not table.schema.equals(want):
                raise FormatError(f"{self.section}: columns differ from the scan's",
                                  path=archive.path)
            if self.many:
                table = table.add_column(0, _ARCHIVE, pa.repeat(pa.scalar(archive.path),
                                                                table.num_rows))
            yield _frame(archive, self.section, table)

    def source(self, with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        yield from _finish(self.frames(self.matching(self.sources, predicate)), with_columns,
                           predicate, n_rows, batch_size)


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


def read_files(archive_path: str | os.PathLike[str] | Archive | None,
               paths_or_lazyframe: Sequence[str] | pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The given files with a ``content`` column (bytes, checked against their BLAKE3).

    Paths may be a list, or a (lazy) frame with a ``relative_path`` column whose other
    columns are kept; a frame with an ``archive`` column (a scan of several archives) reads
    each row's file from its own archive, and ``archive_path`` may then be None.
    """
    if isinstance(paths_or_lazyframe, pl.LazyFrame):
        frame = paths_or_lazyframe.collect()
    elif isinstance(paths_or_lazyframe, pl.DataFrame):
        frame = paths_or_lazyframe
    else:
        frame = pl.DataFrame({"relative_path": list(paths_or_lazyframe)},
                             schema={"relative_path": pl.String})
    if "relative_path" not in frame.columns:
        raise ValueError("read_files needs a relative_path column")
    paths = frame.get_column("relative_path").to_list()
    if archive_path is None or ("archive" in frame.columns and not isinstance(archive_path,
                                                                            Archive)):
        if "archive" not in frame.columns:
            raise ValueError("read_files needs an archive, or a frame with an archive column")
        opened: dict[str, Archive] = {}
        names = frame.get_column("archive").to_list()
        contents = [_open(opened, a).read(p) for a, p in zip(names, paths)]
    else:
        archive = archive_path if isinstance(archive_path, Archive) else \
            open_archive(archive_path)
        contents = [archive.read(p) for p in paths]
    return frame.with_columns(pl.Series("content", contents, dtype=pl.Binary))


def _open(opened: dict[str, Archive], path: str) -> Archive:
    if path not in opened:
        opened[path] = open_archive(path)
    return opened[path]


__all__ = ["scan", "read_files"]
