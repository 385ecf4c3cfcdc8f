"""Daft: archives and the fleet catalog as DataFrames, and the bytes of files on the workers.

``read_archives`` is a Daft ``DataSource``: its tasks are the parts of
:meth:`Scan.plan <znippy_sql.engines.parts.Scan.plan>` (planned when the query runs, with the
filter Daft pushes: ``repo``/``pkg_type``/``pkg_type_name``/``module_name`` ``==``/``is_in``
prune archives and groups, ``relative_path`` ``==``/``is_in``/``startswith`` go through the
trie); Daft filters the rows again. The column projection Daft pushes is honoured, so
``content`` is read only when the query uses it. ``read_catalog`` is a source over the
catalog's table (:class:`~znippy_sql.engines.catalog.CatalogScan`: pyiceberg's planning with
the pushed filter, a path filter through the path index ``paths``).
``read_bytes`` is a UDF: each batch's files are read archive by archive on the worker.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import daft
import pyarrow as pa
from daft.expressions.visitor import PredicateVisitor
from daft.io.source import DataSource, DataSourceTask

from ..views import Part, Where
from .catalog import CatalogPart, CatalogScan
from .parts import ARCHIVE, CONTENT, TARGET_BYTES, Scan, contents
from .predicates import Conjunct, Node, conjuncts_of, where_kwargs, where_of
from .sources import expand


def read_archives(archives: Any, view: str = "files", *, content: bool = False,
                  where: Where | None = None, repo: Any = None, pkg_type: Any = None,
                  module_name: Any = None, path_prefix: Any = None, path: Any = None,
                  storage_options: Mapping[str, Any] | None = None,
                  target_bytes: int = TARGET_BYTES) -> "daft.DataFrame":
    """View ``view`` of ``archives`` (a path, a glob, a URL or URL pattern, or a list of
    them) as a DataFrame with an ``archive`` column first; ``content=True`` adds the files'
    bytes (read only if the query keeps the column). The keyword predicates prune before any
    task runs, as the filters Daft pushes do.

    ``content`` is :func:`read_bytes` over the rows read, not a column of the source: Daft
    pushes few filters into a source (not ``~col("relative_path").endswith(".jar")``), but it
    moves every filter that does not use ``content`` below the expression, so only the rows
    that pass are fetched (in the source they were all fetched, then filtered)."""
    if content and view != "files":
        raise ValueError(f"content is read for the files view, not {view!r}")
    scan = Scan(tuple(expand(archives, storage_options)), view,
                where_kwargs(where, repo=repo, pkg_type=pkg_type, module_name=module_name,
                             path_prefix=path_prefix, path=path),
                storage_options, False, target_bytes)
    df = ZnippySource(scan).read()
    if content:
        df = df.with_column(CONTENT.name, read_bytes(daft.col(ARCHIVE), daft.col(
            "relative_path"), storage_options=storage_options))
    return df


def read_catalog(warehouse: str | os.PathLike[str], table: str = "files", *,
                 catalog: Mapping[str, Any] | None = None, namespace: str = "fleet",
                 repo: Any = None, module_name: Any = None, path: Any = None,
                 path_prefix: Any = None, io_config: Any = None) -> "daft.DataFrame":
    """The catalog's ``files`` (or ``archives``, ``paths``) table as a DataFrame: planned by
    pyiceberg on the driver with the filters Daft pushes (partition pruning, min/max, delete
    files honoured), a path filter (``==``, ``is_in``, ``startswith`` on ``relative_path``)
    through the path index as ``Catalog.sql`` does, the data files read on the workers.
    ``catalog``: the pyiceberg properties of ``open_catalog``; object-storage credentials
    among them (``s3.*``) reach the workers' reads. ``io_config``: a Daft ``IOConfig`` whose
    S3 settings become those ``s3.*`` properties where ``catalog`` does not set them.

    ``repo``, ``module_name``, ``path`` (exact paths) and ``path_prefix`` (a string or a
    list of them) filter up front: Daft does not push ``startswith`` into a source, so a
    prefix reaches the path index only this way."""
    props = {**iceberg_s3_properties(io_config), **(catalog or {})}
    scan = CatalogScan(os.fspath(warehouse), table, props or None, namespace)
    upfront: list[Conjunct] = []
    for column, op, given in (("repo", "in", repo), ("module_name", "in", module_name),
                              ("relative_path", "in", path),
                              ("relative_path", "prefix", path_prefix)):
        if given is not None:
            upfront.append((column, op, (given,) if isinstance(given, str) else tuple(given)))
    return CatalogSource(scan, upfront).read()


def iceberg_s3_properties(io_config: Any) -> dict[str, str]:
    """A Daft ``IOConfig``'s S3 settings as pyiceberg's ``s3.*`` catalog properties."""
    s3 = getattr(io_config, "s3", None)
    if s3 is None:
        return {}
    props: dict[str, str] = {}
    for attr, key in (("endpoint_url", "s3.endpoint"), ("key_id", "s3.access-key-id"),
                      ("access_key", "s3.secret-access-key"),
                      ("session_token", "s3.session-token"), ("region_name", "s3.region")):
        value = getattr(s3, attr, None)
        if value:
            props[key] = str(value)
    if getattr(s3, "force_virtual_addressing", None) is not None:
        props["s3.force-virtual-addressing"] = str(bool(s3.force_virtual_addressing)).lower()
    if getattr(s3, "anonymous", False):
        props["s3.anonymous"] = "true"
    return props


def read_bytes(archive: "daft.Expression", relative_path: "daft.Expression", *,
               storage_options: Mapping[str, Any] | None = None) -> "daft.Expression":
    """An expression: the bytes of the file ``relative_path`` of ``archive`` (both string
    columns), read on the worker that evaluates it."""
    opts = dict(storage_options) if storage_options else None

    @daft.func.batch(return_dtype=daft.DataType.binary())
    def znippy_read_bytes(archives: daft.Series, paths: daft.Series) -> daft.Series:
        got = contents(archives.to_pylist(), paths.to_pylist(), opts)
        return daft.Series.from_arrow(got.cast(pa.binary()), name="content")

    return znippy_read_bytes(archive, relative_path)


def _pushed_columns(arrow: pa.Schema, pushdowns: Any) -> list[str] | None:
    """The columns a task reads: those Daft asks for and those its filters need, in the
    schema's order (None: all)."""
    columns = pushdowns.columns
    if columns is None:
        return None
    wanted = set(columns) | set(pushdowns.filter_required_column_names())
    return [n for n in arrow.names if n in wanted]


class _Source(DataSource):
    """A Daft source over an Arrow schema (the schema Daft sees)."""

    def __init__(self, arrow: pa.Schema) -> None:
        self._arrow = arrow
        self._schema = daft.Schema.from_pyarrow_schema(arrow)

    @property
    def schema(self) -> "daft.Schema":
        return self._schema


class _Task(DataSourceTask):
    """A Daft task giving ``columns`` (all when None) of ``arrow``."""

    def __init__(self, arrow: pa.Schema, columns: Sequence[str] | None) -> None:
        self._columns = list(columns) if columns is not None else None
        names = self._columns if self._columns is not None else arrow.names
        self._out = pa.schema([arrow.field(n) for n in names])

    @property
    def schema(self) -> "daft.Schema":
        return daft.Schema.from_pyarrow_schema(self._out)


class ZnippySource(_Source):
    """A :class:`Scan` as a Daft source (one task per part)."""

    def __init__(self, scan: Scan) -> None:
        super().__init__(scan.schema())
        self._scan = scan

    @property
    def name(self) -> str:
        return f"znippy:{self._scan.view}"

    async def get_tasks(self, pushdowns: Any) -> AsyncIterator["ZnippyTask"]:
        where = where_of(conjuncts(pushdowns.filters)) if pushdowns.filters is not None \
            else Where()
        columns = _pushed_columns(self._arrow, pushdowns)
        for part in self._scan.plan(where):
            yield ZnippyTask(self._scan, part, self._arrow, columns, where)


class ZnippyTask(_Task):
    def __init__(self, scan: Scan, part: Part, arrow: pa.Schema,
                 columns: Sequence[str] | None, where: Where) -> None:
        super().__init__(arrow, columns)
        self._scan, self._part, self._arrow = scan, part, arrow
        self._where = where

    async def read(self) -> AsyncIterator[Any]:
        from daft.recordbatch import RecordBatch

        for batch in self._scan.read(self._part, self._arrow, self._columns, self._where):
            yield RecordBatch.from_arrow_record_batches([batch], self._out)


class CatalogSource(_Source):
    """A :class:`~znippy_sql.engines.catalog.CatalogScan` as a Daft source: one task per
    part (a few data files), planned with the filters and columns Daft pushes."""

    def __init__(self, scan: CatalogScan, upfront: Sequence[Conjunct] = ()) -> None:
        super().__init__(scan.schema())
        self._scan = scan
        self._upfront = list(upfront)

    @property
    def name(self) -> str:
        return f"znippy-catalog:{self._scan.table}"

    async def get_tasks(self, pushdowns: Any) -> AsyncIterator["CatalogTask"]:
        pushed = self._upfront + (conjuncts(pushdowns.filters)
                                  if pushdowns.filters is not None else [])
        columns = _pushed_columns(self._arrow, pushdowns)
        for part in self._scan.plan(pushed, columns):
            yield CatalogTask(self._scan, part, self._arrow, columns, pushed)


class CatalogTask(_Task):
    def __init__(self, scan: CatalogScan, part: CatalogPart, arrow: pa.Schema,
                 columns: Sequence[str] | None, pushed: Sequence[Conjunct]) -> None:
        super().__init__(arrow, columns)
        self._scan, self._part, self._pushed = scan, part, list(pushed)

    async def read(self) -> AsyncIterator[Any]:
        from daft.recordbatch import RecordBatch

        for batch in self._scan.read(self._part, self._out.names, self._pushed):
            yield RecordBatch.from_arrow_record_batches([batch.cast(self._out)], self._out)


def conjuncts(expr: "daft.Expression") -> list[Conjunct]:
    """The AND-ed ``col == lit``, ``col.is_in([...])``, ``startswith`` tests of ``expr``."""
    try:
        return conjuncts_of(_Tree().visit(expr))
    except Exception:  # noqa: BLE001  (an expression shape Daft added later: push nothing)
        return []


class _Tree(PredicateVisitor):
    """A Daft filter spelled as a :data:`~.predicates.Node` (the walk is
    :func:`~.predicates.conjuncts_of`)."""

    def visit_col(self, name: str) -> Node:
        return ("col", name)

    def visit_lit(self, value: Any) -> Node:
        return ("lit", value)

    def visit_function(self, name: str, args: list[Any]) -> Node:
        if name in ("starts_with", "startswith") and len(args) == 2:
            return ("prefix", self.visit(args[0]), self.visit(args[1]))
        return None

    def visit_and(self, left: Any, right: Any) -> Node:
        return ("and", self.visit(left), self.visit(right))

    def visit_or(self, left: Any, right: Any) -> Node:
        return ("or", self.visit(left), self.visit(right))

    def visit_equal(self, left: Any, right: Any) -> Node:
        return ("eq", self.visit(left), self.visit(right))

    def visit_is_in(self, expr: Any, items: Any) -> Node:
        values: list[Any] = []
        for item in items if isinstance(items, list) else [items]:
            lit = self.visit(item)
            if not (isinstance(lit, tuple) and lit[0] == "lit"):
                return None
            values.extend(lit[1] if isinstance(lit[1], (list, tuple)) else [lit[1]])
        return ("in", self.visit(expr), tuple(values))

    # what a Where cannot express: nothing pushed (Daft filters the rows)
    def visit_alias(self, expr: Any, alias: str) -> Node:
        return None

    def visit_cast(self, expr: Any, dtype: Any) -> Node:
        return None

    def visit_coalesce(self, args: Any) -> Node:
        return None

    def visit_not(self, expr: Any) -> Node:
        return None

    def visit_not_equal(self, left: Any, right: Any) -> Node:
        return None

    def visit_less_than(self, left: Any, right: Any) -> Node:
        return None

    def visit_less_than_or_equal(self, left: Any, right: Any) -> Node:
        return None

    def visit_greater_than(self, left: Any, right: Any) -> Node:
        return None

    def visit_greater_than_or_equal(self, left: Any, right: Any) -> Node:
        return None

    def visit_between(self, expr: Any, lower: Any, upper: Any) -> Node:
        return None

    def visit_is_null(self, expr: Any) -> Node:
        return None

    def visit_not_null(self, expr: Any) -> Node:
        return None
