"""Planned data files read by one pyarrow dataset scan, when that is what pyiceberg would read.

pyiceberg's ``ArrowScan`` maps each data file's columns to the table's by field id, applies
delete files and converts every batch, in Python, per file: ~2.5 ms of CPU a file, most of a
one-repo query over ten files. When nothing of that can matter, the same rows come from one
pyarrow dataset scan by column name (C++, multi-threaded, row groups skipped by statistics):

- every task is a Parquet file on the local file system without delete files;
- the table's columns were only ever added: in every schema of the table's history each field
  id has the name and type it has now (so a name read is an id read; a column a file lacks, a
  later module column, reads NULL, as Iceberg says).

Anything else (a rename, a type promotion, delete files, object storage, an error from the
scan) returns None and the caller reads with ``ArrowScan``. The rows are a superset filter
result either way: ``Catalog.sql`` runs the whole query in DuckDB over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa


def _stable(metadata: Any) -> bool:
    """Whether every field id of every schema in the history is named and typed as now."""
    from pyiceberg.schema import index_by_id

    now = index_by_id(metadata.schema())
    for schema in metadata.schemas:
        for fid, f in index_by_id(schema).items():
            cur = now.get(fid)
            if cur is None or cur.name != f.name or cur.field_type != f.field_type:
                return False
    return True


_STABLE: dict[str, bool] = {}


def stable(table: Any) -> bool:
    """:func:`_stable` of the table's metadata, once per metadata file (never rewritten)."""
    loc = getattr(table, "metadata_location", None)
    if not isinstance(loc, str) or not loc:
        return _stable(table.metadata)
    got = _STABLE.get(loc)
    if got is None:
        if len(_STABLE) > 256:
            _STABLE.clear()
        got = _STABLE[loc] = _stable(table.metadata)
    return got


def _local(path: str) -> str | None:
    if path.startswith("file:"):
        return unquote(urlparse(path).path)
    return path if path.startswith("/") else None


def local_parquet(tasks: Sequence[Any]) -> list[str] | None:
    """The local paths of ``tasks``' data files when every one is a local Parquet file
    without delete files, else None (then pyiceberg's own reader takes them)."""
    from pyiceberg.manifest import FileFormat

    if not tasks or any(t.delete_files for t in tasks):
        return None
    paths = []
    for t in tasks:
        path = _local(t.file.file_path)
        if path is None or t.file.file_format != FileFormat.PARQUET:
            return None
        paths.append(path)
    return paths


def prefix_bounds(expr: Any) -> list[tuple[str, str, str]]:
    """The ``startswith`` conjuncts of ``expr`` (through ``AND`` only) as (column, low, high):
    ``low <= column < high``, a range Parquet row-group statistics can be checked against
    (``starts_with`` / ``LIKE 'p%'`` cannot)."""
    from pyiceberg.expressions import And, StartsWith

    if isinstance(expr, And):
        return prefix_bounds(expr.left) + prefix_bounds(expr.right)
    if isinstance(expr, StartsWith) and expr.literal.value and \
            ord(expr.literal.value[-1]) < 0xD7FF:
        p = expr.literal.value
        return [(getattr(expr.term, "name"), p, p[:-1] + chr(ord(p[-1]) + 1))]  # unbound
    return []


def _prefix_ranges(expr: Any) -> Any:
    """:func:`prefix_bounds` as one pyarrow expression, or None."""
    import pyarrow.compute as pc

    out = None
    for name, low, high in prefix_bounds(expr):
        term = (pc.field(name) >= low) & (pc.field(name) < high)
        out = term if out is None else out & term
    return out


def read_tasks(table: Any, tasks: Sequence[Any], columns: Sequence[str] | None,
               row_filter: Any) -> pa.Table | None:
    """The rows of ``tasks`` (columns ``columns``, all when None) that ``row_filter`` may
    keep, or None when pyiceberg's ``ArrowScan`` must read them."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.expressions.visitors import bind
    from pyiceberg.io.pyarrow import expression_to_pyarrow, schema_to_pyarrow

    if not stable(table):
        return None
    paths = local_parquet(tasks)
    if paths is None:
        return None
    schema = table.schema()
    names = [f.name for f in schema.fields] if columns is None else list(columns)
    try:
        import pyarrow.dataset as ds

        arrow = schema_to_pyarrow(schema, include_field_ids=False)
        flt = None if isinstance(row_filter, AlwaysTrue) else expression_to_pyarrow(
            bind(schema, row_filter, case_sensitive=True))
        ranges = _prefix_ranges(row_filter)
        if ranges is not None:
            flt = ranges if flt is None else ranges & flt
        return ds.dataset(paths, schema=arrow, format="parquet").to_table(columns=names,
                                                                          filter=flt)
    except (pa.ArrowException, ValueError, TypeError, KeyError, OSError):
        return None
