"""Polars: an archive's sections as lazy scans, and files read into a DataFrame.

>>> import tempfile, os
>>> from znippy_sql import write_archive, Entry
>>> d = tempfile.mkdtemp()
>>> p = os.path.join(d, "demo.znippy")
>>> _ = write_archive(p, [Entry("a.txt", data=b"hi", repo="r")], fsync=False)
>>> scan(p).filter(pl.col("repo") == "r").select("relative_path", "size").collect().rows()
[('a.txt', 2)]

``scan`` goes through ``polars.io.plugins.register_io_source``: the callback gets the projected
columns, the predicate, ``n_rows`` and a batch size, and applies all of them itself. The rows
come from the view catalog (:mod:`znippy_sql.views`, one definition per view). For the grouped
views (``files``, ``chunks``, ``groups``) a predicate on the group columns (``repo``,
``pkg_type``, ``pkg_type_name``, ``module_name``, and ``archive`` for several archives) is
decided once per group, so only the matching sub-indexes' byte ranges are read
(``Archive.source.bytes_read`` counts them).

Building a scan reads each sub-index's schema message only. Each collect first checks that
the archive is still the file the scan was built on (``tables.Stamp``), then takes each table
from the :class:`Archive` (its BLAKE3, full validation and value ranges checked once); what
Polars raises on a table is turned into a :class:`FormatError` naming the archive and section.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import polars as pl
import pyarrow as pa

from .. import views
from ..errors import FormatError, ZnippyError
from ..format import build
from ..format.schema import GroupKey
from ..read.reader import Archive, group_what, open_archive
from ..remote import is_url, local_path
from ..views.files import GROUP_COLUMNS
from ..views.opened import opened
from .tables import Stamp

Section = Literal["files", "chunks", "groups", "manifest", "lookup", "meta", "signatures",
                  "git_objects", "git_commits", "git_reach", "git_refs", "git_secrets"]
_ARCHIVE = views.ARCHIVE_FIELD
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
                local = local_path(path) if is_url(path) else path  # a remote one: none
                stamp = Stamp.of(local) if local is not None else None
                out.append(_Source(open_archive(path), stamp))
    except BaseException:
        for s in out:
            if s.stamp is not None:
                s.archive.close()
        raise
    return out, many


def scan(archives: ArchiveLike | Sequence[ArchiveLike], section: Section = "files"
         ) -> pl.LazyFrame:
    """A lazy scan of one view (``files`` by default; any of ``views.names()``) of an
    archive, or of several (a glob, or a list of paths, globs or :class:`Archive` objects)
    with an ``archive`` column (path)."""
    if section not in views.names():
        raise ValueError(f"unknown section {section!r}; one of {', '.join(views.names())}")
    sources, many = _sources(archives)
    return _Scan(sources, section, many).lazy()


def _refused(archive: Archive, what: str, exc: BaseException) -> FormatError:
    return FormatError(f"{what}: Polars refused its rows: {str(exc)[:300]}",
                       path=archive.path if archive is not None else None)


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    frame = pl.from_arrow(schema.empty_table())
    assert isinstance(frame, pl.DataFrame)  # from a Table (a Series comes only of an Array)
    return frame.schema


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
        raise _refused(archive, what, exc) from None


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


class _Scan:
    """One view over the sources: parts are (source, data groups) for a grouped view (one
    part per group), (source, None) otherwise. A predicate's conjuncts on a part's constant
    columns (the group's ``repo``, ``pkg_type``, ``pkg_type_name``, ``module_name``, and
    ``archive`` for several archives) are decided once per part; the rest, projection and
    reading go through :func:`znippy_sql.views.batches`."""

    def __init__(self, sources: list[_Source], section: str, many: bool) -> None:
        self.section = section
        self.many = many
        have = [s for s in sources if views.present(s.archive, section)]
        if not have:
            raise ZnippyError(f"the archive has no {section} section",
                              path=sources[0].archive.path if sources else None)
        self.view = views.get(section)
        self.sources = have
        schemas: dict[int, pa.Schema] = {}
        for s in have:
            schemas[id(s)] = _engine(s.archive, section,
                                     functools.partial(views.schema, s.archive, section))
        if many:
            from ..views import merge_schemas

            merged = merge_schemas({s.archive.path: schemas[id(s)] for s in have}, section)
            self.schema = merged  # the archive column first
        else:
            self.schema = schemas[id(have[0])]
        self.schemas = schemas
        self._eager: dict[int, pa.Table] = {}
        if self.view.eager:  # computed (signatures checked, objects decoded): made now
            for s in have:
                self._eager[id(s)] = self._read(s, None, None)
        names = set(GROUP_COLUMNS) if self.view.grouped else set()
        self.group_names = (names | {"archive"}) if many else names
        self.parts: list[tuple[_Source, GroupKey | None]] = [
            (s, k) for s in have for k in (s.archive.groups if self.view.grouped else [None])]
        self.pl_schema = _engine(have[0].archive, section, lambda: _polars_schema(self.schema))

    def _read(self, src: _Source, groups: list[GroupKey] | None,
              needed: list[str] | None) -> pa.Table:
        own = self.schemas[id(src)]
        cols = None if needed is None else [c for c in own.names if c in needed]
        return views.batches(src.archive, self.section, cols, groups=groups).read_all()

    def lazy(self) -> pl.LazyFrame:
        from polars.io.plugins import register_io_source

        if self.view.grouped:
            return register_io_source(self.source, schema=self.pl_schema,
                                      explain_name=f"znippy {self.section}",
                                      explain_detail=f"{len(self.parts)} groups")
        return register_io_source(self.source, schema=self.pl_schema,
                                  explain_name=f"znippy {self.section}")

    def constants(self, part: tuple[_Source, GroupKey | None]) -> dict[str, tuple[Any, Any]]:
        src, key = part
        out: dict[str, tuple[Any, Any]] = {}
        if key is not None:
            from ..modules.pkgtypes import pkg_type_name

            out = {"repo": (key.repo, pl.String), "pkg_type": (key.pkg_type, pl.Int8),
                   "pkg_type_name": (pkg_type_name(key.pkg_type), pl.String),
                   "module_name": (key.module_name, pl.String)}
        if self.many:
            out["archive"] = (src.archive.path, pl.String)
        return out

    def matching(self, predicate: pl.Expr | None) -> list[tuple[_Source, GroupKey | None]]:
        conj = [p for p in _conjuncts(predicate)
                if set(p.meta.root_names()) <= self.group_names] if predicate is not None else []
        if not conj:
            return list(self.parts)
        test = pl.all_horizontal(conj) if len(conj) > 1 else conj[0]
        keep = []
        for part in self.parts:
            consts = self.constants(part)
            row = pl.DataFrame({k: [v] for k, (v, _) in consts.items()},
                               schema={k: t for k, (_, t) in consts.items()})
            if bool(row.select(test.fill_null(False)).to_series()[0]):
                keep.append(part)
        return keep

    def frames(self, parts: list[tuple[_Source, GroupKey | None]], needed: list[str] | None
               ) -> Iterator[pl.DataFrame]:
        checked: set[int] = set()
        for src, key in parts:
            if id(src) not in checked:
                src.check()
                checked.add(id(src))
            archive = src.archive
            what = group_what(key) if key is not None else self.section
            table = self._eager.get(id(src))
            if table is None:
                table = self._read(src, None if key is None else [key], needed)
            elif needed is not None:
                table = table.select([c for c in table.schema.names if c in needed])
            if self.many and (needed is None or "archive" in needed):
                table = table.add_column(0, _ARCHIVE, build.repeat(archive.path, pa.utf8(),
                                                                  table.num_rows))
            names = [n for n in self.schema.names if needed is None or n in needed]
            out = views.conform(table, pa.schema([self.schema.field(n) for n in names]))
            df = _frame(archive, what, out)
            yield _engine(archive, what, lambda: df.cast(
                {n: self.pl_schema[n] for n in names}))

    def source(self, with_columns: list[str] | None, predicate: pl.Expr | None,
               n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
        parts = self.matching(predicate)
        needed = None
        if with_columns is not None:
            needed = list(with_columns)
            if predicate is not None:
                needed += [n for n in predicate.meta.root_names() if n not in needed]
        yield from _finish(self.frames(parts, needed), with_columns, predicate, n_rows,
                           batch_size)


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
        names = frame.get_column("archive").to_list()
        got: dict[tuple[str, str], bytes] = {}
        for name in dict.fromkeys(names):
            wanted = dict.fromkeys(p for a, p in zip(names, paths) if a == name)
            got.update(((name, p), data) for p, data in opened(name).read_many(wanted))
        contents = [got[(a, p)] for a, p in zip(names, paths)]
    else:
        archive = archive_path if isinstance(archive_path, Archive) else \
            open_archive(archive_path)
        one = dict(archive.read_many(dict.fromkeys(paths)))  # blob order, decoded in threads
        contents = [one[p] for p in paths]
    return frame.with_columns(pl.Series("content", contents, dtype=pl.Binary))




__all__ = ["scan", "read_files"]
