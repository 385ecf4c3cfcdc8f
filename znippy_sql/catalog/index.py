"""The ``paths`` table: the ``files`` rows without their chunks, sorted by path.

``files`` keeps each archive's rows in data files of their own (replace and rm drop whole
files), so a query by path across the fleet opens one data file per archive whose path bounds
contain it. ``paths`` holds the same rows (every column of ``files`` but ``chunks`` and the
module columns) written in ``relative_path`` order and cut into data files of about
``TARGET_FILE_BYTES`` each: the files of one commit cover disjoint path ranges, so an exact path
or a prefix plans one or two data files per commit, and row groups of ``ROW_GROUP_ROWS`` rows
skip the rest of each. ``add`` writes it after ``files`` and before ``archives``; ``rm`` deletes
from it after ``archives`` and before ``files``: its rows are always a subset of ``files``'s,
and every archive whose ``archives`` row exists has all of its rows there.

:mod:`.query` answers a ``files`` scan from ``paths`` when the query names only ``paths``'s
columns and its pushed filter bounds ``relative_path`` (``=``, ``IN``, ``LIKE 'prefix%'``, in
every branch of an ``OR``); when it names other columns, ``paths`` gives the archives that hold
those paths and the ``files`` scan is pruned to them. See docs/catalog.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import pyarrow as pa
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In, Or, StartsWith
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform

from .schema import ARCHIVES_PROPERTIES, FILES_SCHEMA

PATHS = "paths"
PATH = "relative_path"
#: in-memory Arrow bytes per data file (pyiceberg's measure): ~100,000 rows, ~3.5 MB of Parquet
TARGET_FILE_BYTES = 16 << 20
ROW_GROUP_ROWS = 8192

PATHS_SCHEMA = Schema(*(f for f in FILES_SCHEMA.fields if f.name != "chunks"))
COLUMNS = tuple(f.name for f in PATHS_SCHEMA.fields)
PATHS_PROPERTIES = {
    **ARCHIVES_PROPERTIES,
    "write.metadata.metrics.column.archive_uri": "full",
    f"write.metadata.metrics.column.{PATH}": "full",
    "write.parquet.row-group-limit": str(ROW_GROUP_ROWS),
    "write.target-file-size-bytes": str(TARGET_FILE_BYTES),
}


def table_spec() -> dict[str, Any]:
    """``create_table`` keyword arguments of ``paths``."""
    path_id = PATHS_SCHEMA.find_field(PATH).field_id
    return {"schema": PATHS_SCHEMA,
            "sort_order": SortOrder(SortField(source_id=path_id, transform=IdentityTransform())),
            "properties": PATHS_PROPERTIES}


def rows(files: pa.Table) -> pa.Table:
    """A batch's ``files`` rows as ``paths`` rows: its columns, in path order."""
    return files.select(list(COLUMNS)).sort_by([(PATH, "ascending"), ("archive_uri",
                                                                     "ascending")])


def _weaken(expr: BooleanExpression, leaf: Callable[[BooleanExpression], bool]
            ) -> BooleanExpression | None:
    """``expr`` weakened to the predicates ``leaf`` accepts: an ``AND`` keeps those it can, an
    ``OR`` needs all of its branches; None when nothing is left."""
    if isinstance(expr, And):
        left, right = _weaken(expr.left, leaf), _weaken(expr.right, leaf)
        if left is None or right is None:
            return left if right is None else right
        return And(left, right)
    if isinstance(expr, Or):
        left, right = _weaken(expr.left, leaf), _weaken(expr.right, leaf)
        return None if left is None or right is None else Or(left, right)
    return expr if leaf(expr) else None


def path_filter(expr: BooleanExpression) -> BooleanExpression | None:
    """A predicate on ``relative_path`` alone that every row ``expr`` keeps satisfies
    (``=``, ``IN``, ``startswith``), or None when ``expr`` does not bound the path."""
    return _weaken(expr, lambda e: isinstance(e, (EqualTo, In, StartsWith)) and getattr(
        getattr(e, "term", None), "name", None) == PATH)  # unbound, as pushdown makes them


def restrict(expr: BooleanExpression) -> BooleanExpression | None:
    """``expr`` weakened to its predicates on ``paths``'s columns, or None when nothing is
    left."""
    return _weaken(expr, lambda e: getattr(getattr(e, "term", None), "name", None) in COLUMNS)


def is_in(column: str, values: Iterable[Any]) -> BooleanExpression:
    """pyiceberg's ``In(column, values)`` (its pydantic signature reads wrong to mypy)."""
    return cast(BooleanExpression, cast(Any, In)(column, list(values)))


def covers(columns: set[str] | None) -> bool:
    """Whether a scan of these ``files`` columns can read ``paths`` instead."""
    return columns is not None and set(columns) <= set(COLUMNS)
