"""Ray Data: a view of many archives as a ``ray.data.Dataset`` (a custom ``Datasource``).

One read task per part of the plan (manifests only, on the driver). Ray's projection
pushdown is honoured (``content`` is read only when the dataset keeps the column), and so is
its predicate pushdown (``ds.filter(expr=col("repo") == "central")``): ``==``/``is_in`` on
``repo``, ``pkg_type``, ``pkg_type_name``, ``module_name``, ``relative_path`` prune archives and
groups before any task runs, and the whole predicate is evaluated on each block (Ray drops its
own filter once a source takes it). The keyword predicates of :func:`read_archives` prune the
same way.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import ray.data
from ray.data import Datasource, ReadTask
from ray.data.block import BlockMetadata

from ..views import Part, Where
from .parts import TARGET_BYTES, Scan
from .predicates import Conjunct, Node, conjuncts_of, where_kwargs, where_of
from .sources import expand

try:  # Ray's name for the null column a block of no column keeps its length with
    from ray.data._internal.arrow_block import _BATCH_SIZE_PRESERVING_STUB_COL_NAME as STUB
except ImportError:  # pragma: no cover  (a Ray that moved it: the name it has used)
    STUB = "__bsp_stub"


def read_archives(archives: Any, view: str = "files", *, content: bool = False,
                  where: Where | None = None, repo: Any = None, pkg_type: Any = None,
                  module_name: Any = None, path_prefix: Any = None, path: Any = None,
                  storage_options: Mapping[str, Any] | None = None,
                  target_bytes: int = TARGET_BYTES, **read_args: Any) -> "ray.data.Dataset":
    """View ``view`` of ``archives`` (a path, glob, URL or a list) as a Dataset with an
    ``archive`` column first; ``content=True`` adds the files' bytes. ``read_args`` go to
    ``ray.data.read_datasource`` (``concurrency``, ``ray_remote_args``...)."""
    scan = Scan(tuple(expand(archives, storage_options)), view,
                where_kwargs(where, repo=repo, pkg_type=pkg_type, module_name=module_name,
                             path_prefix=path_prefix, path=path),
                storage_options, content, target_bytes)
    return ray.data.read_datasource(ZnippyDatasource(scan), **read_args)


class ZnippyDatasource(Datasource):
    def __init__(self, scan: Scan) -> None:
        super().__init__()
        self._scan = scan
        self._arrow = scan.schema()
        self._predicate_expr = None
        self._projection_map = None

    def get_name(self) -> str:
        return f"Znippy({self._scan.view})"

    def supports_predicate_pushdown(self) -> bool:
        return True

    def supports_projection_pushdown(self) -> bool:
        return True

    def apply_predicate(self, predicate_expr: Any) -> "ZnippyDatasource":
        clone = copy.copy(self)
        clone._predicate_expr = predicate_expr if self._predicate_expr is None else \
            self._predicate_expr & predicate_expr
        return clone

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        pred = self._predicate_expr
        where = where_of(conjuncts(pred)) if pred is not None else Where()
        columns = self._get_data_columns()
        names = self._arrow.names if columns is None else \
            [n for n in self._arrow.names if n in set(columns)]
        need = list(names)
        if pred is not None:
            need = [n for n in self._arrow.names if n in set(names) | _columns(pred)]
        out = pa.schema([self._arrow.field(n) for n in names]) if names else \
            pa.schema([pa.field(STUB, pa.null())])  # a count: rows, no column
        tasks = []
        for part in self._scan.plan(where):
            meta = BlockMetadata(num_rows=None, size_bytes=part.est_bytes, exec_stats=None,
                                 input_files=part.archives)
            tasks.append(ReadTask(_reader(self._scan, part, self._arrow, need, names, where,
                                          pred), meta, schema=out,
                                  per_task_row_limit=per_task_row_limit))
        return tasks


def _reader(scan: Scan, part: Part, arrow: pa.Schema, need: list[str], names: list[str],
            where: Where, pred: Any) -> Any:
    def read() -> Iterator[pa.Table]:
        flt = pred.to_pyarrow() if pred is not None else None
        for batch in scan.read(part, arrow, need, where):
            table = pa.Table.from_batches([batch])
            if flt is not None:
                table = table.filter(flt)
            if table.num_rows:
                yield table.select(names) if names else \
                    table.select([]).append_column(STUB, pa.nulls(table.num_rows))
    return read


def _columns(expr: Any) -> set[str]:
    from ray.data._internal.planner.plan_expression.expression_visitors import (
        _ColumnReferenceCollector)

    got = _ColumnReferenceCollector()
    got.visit(expr)
    return set(got.get_column_refs())


def conjuncts(expr: Any) -> list[Conjunct]:
    """The AND-ed ``col == lit`` and ``col.is_in([...])`` tests of a Ray expression (an OR
    of equalities on one column too)."""
    return conjuncts_of(_tree(expr))


def _tree(expr: Any) -> Node:
    """A Ray expression spelled as a :data:`~.predicates.Node`."""
    from ray.data.expressions import BinaryExpr, ColumnExpr, LiteralExpr, Operation

    if isinstance(expr, ColumnExpr):
        return ("col", expr.name)
    if isinstance(expr, LiteralExpr):
        return ("lit", expr.value)
    if not isinstance(expr, BinaryExpr):
        return None
    kind = {Operation.AND: "and", Operation.OR: "or", Operation.EQ: "eq"}.get(expr.op)
    if kind is not None:
        return (kind, _tree(expr.left), _tree(expr.right))
    if expr.op == Operation.IN and isinstance(expr.right, LiteralExpr) \
            and isinstance(expr.right.value, (list, tuple, set)):
        return ("in", _tree(expr.left), tuple(expr.right.value))
    return None
