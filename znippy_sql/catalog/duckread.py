"""Planned data files read by DuckDB itself: a temporary view over ``read_parquet``.

A ``Catalog.sql`` query otherwise reads the planned files into Arrow (:mod:`.fastread` or
pyiceberg's ``ArrowScan``) and hands the Arrow table to DuckDB, which then scans it again. When
DuckDB can read the files as they are, the table is a view ``SELECT <columns> FROM
read_parquet([<planned files>])``: one pass, DuckDB's own projection and filter pushdown into
the Parquet row groups, the query's aggregates fused with the read, footers cached by the
process's database. Used only when that reads what ``ArrowScan`` would:

- every planned file is a local Parquet file without delete files (a delete file: Arrow path);
- names are ids: every schema in the table's history names and types each field id as now
  (:func:`.fastread.stable`);
- every column the view reads is *required* in the table: a required column is in every data
  file (a file without it would be invalid), so no file needs a NULL column filled in; a
  query naming an optional column (a module column, ``archives.meta``) takes the Arrow path.

The rows are the planned files' rows; the query's ``WHERE`` (which implies the pushed filter
at every place the table is read, :mod:`.pushdown`) is evaluated by DuckDB over them, so the
result is the one the pre-filtered Arrow table gives. A ``startswith`` conjunct is added to the
view as a range (``>= p AND < p'``), which DuckDB checks against row-group statistics (it
cannot with ``LIKE 'p%'``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .fastread import local_parquet, prefix_bounds, stable


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ranges(expr: Any) -> list[str]:
    """The ``startswith`` conjuncts of ``expr`` as SQL ranges (:func:`.fastread.prefix_bounds`)."""
    return [f"{_ident(name)} >= {_quote(low)} AND {_ident(name)} < {_quote(high)}"
            for name, low, high in prefix_bounds(expr)]


def view_sql(table: Any, tasks: Sequence[Any], columns: Sequence[str] | None,
             row_filter: Any) -> str | None:
    """A ``SELECT`` over ``read_parquet`` of ``tasks`` giving ``columns`` (all when None) of
    ``table``, or None when the Arrow path must read them (see the module docstring)."""
    paths = local_parquet(tasks)
    if paths is None:
        return None
    schema = table.schema()
    fields = list(schema.fields) if columns is None else [
        schema.find_field(n) for n in columns]
    if not fields or not all(f.required for f in fields):
        return None
    if not stable(table):
        return None
    select = ", ".join(_ident(f.name) for f in fields)
    files = ", ".join(_quote(p) for p in paths)
    where = _ranges(row_filter)
    return (f"SELECT {select} FROM read_parquet([{files}], hive_partitioning = false, "
            f"union_by_name = false)" + (" WHERE " + " AND ".join(where) if where else ""))
