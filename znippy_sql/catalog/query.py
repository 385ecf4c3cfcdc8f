"""``Catalog.sql``: pyiceberg scans (pruned by the query's simple predicates) → Arrow → DuckDB.

Only the tables the query names are scanned, only the columns it names are read, and each scan
is planned once with the row filter :mod:`.pushdown` found (partition pruning, then min/max
statistics per data file, then row groups). DuckDB then runs the whole query over the Arrow
tables registered as ``files`` and ``archives``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import CatalogError
from ..native import guard
from .pushdown import Columns, Use, analyse
from .schema import ARCHIVES, FILES

if TYPE_CHECKING:
    from .fleet import Catalog

#: the column a scan reads when the query names none of the table's (``count(*)``)
_CHEAPEST = {FILES: "pkg_type", ARCHIVES: "size"}


@dataclass
class Scan:
    """One table's scan for a query: what was pushed, and the data files it plans."""

    name: str
    table: Any  # pyiceberg.table.Table
    use: Use
    tasks: list[Any]

    def describe(self) -> dict[str, Any]:
        return {"filter": repr(self.use.filter),
                "columns": None if self.use.columns is None else sorted(self.use.columns),
                "data_files": len(self.tasks),
                "table_files": _file_count(self.table)}

    def to_arrow(self) -> pa.Table:
        from pyiceberg.io.pyarrow import ArrowScan

        scan = self._scan()
        where = str(getattr(self.table.metadata, "location", "") or "") or None
        with guard(CatalogError, f"reading the {self.name} table failed", path=where):
            return ArrowScan(self.table.metadata, self.table.io, scan.projection(),
                             scan.row_filter).to_table(self.tasks)

    def _scan(self) -> Any:
        cols = self.use.columns
        fields = ("*",) if cols is None else tuple(sorted(cols)) or (_CHEAPEST[self.name],)
        return self.table.scan(row_filter=self.use.filter, selected_fields=fields)


def _file_count(table: Any) -> int:
    snap = table.current_snapshot()
    return int(snap.summary.get("total-data-files", 0)) if snap and snap.summary else 0


def table_columns(table: Any) -> Columns:
    """The table's top-level columns for :func:`~.pushdown.analyse`: lower-case name →
    (name, the kind of constant it compares with)."""
    from pyiceberg.types import BooleanType, IntegerType, LongType, StringType

    out: dict[str, tuple[str, str]] = {}
    for f in table.schema().fields:
        t = f.field_type
        kind = ("str" if isinstance(t, StringType) else
                "int" if isinstance(t, (IntegerType, LongType)) else
                "bool" if isinstance(t, BooleanType) else "")
        out[f.name.lower()] = (f.name, kind)
    return out


def plan_query(cat: "Catalog", query: str, *, con: Any = None) -> dict[str, Scan]:
    """The scans ``query`` needs, planned (no data read yet)."""
    import duckdb

    tables = {name: cat.table(name) for name in (FILES, ARCHIVES)}
    parser = con if con is not None else duckdb.connect()
    try:
        uses = analyse(parser, query, {n: table_columns(t) for n, t in tables.items()})
    finally:
        if con is None:
            parser.close()
    out = {}
    for name, use in uses.items():
        scan = Scan(name, tables[name], use, [])
        scan.tasks = list(scan._scan().plan_files())
        out[name] = scan
    return out


def run_sql(cat: "Catalog", query: str, *, con: Any = None) -> pa.Table:
    """The query's result as Arrow. ``con``: a DuckDB connection to run it in (the tables
    are registered there as ``files`` and ``archives``); a new one otherwise."""
    import duckdb

    own = con is None
    con = duckdb.connect() if own else con
    try:
        for name, scan in plan_query(cat, query, con=con).items():
            con.register(name, scan.to_arrow())
        try:
            rel = con.sql(query)
        except duckdb.Error as exc:
            raise CatalogError(f"query failed: {_why(exc)}", path=cat.warehouse) from None
        return rel.to_arrow_table() if rel is not None else pa.table({})
    finally:
        if own:
            con.close()


_NO_TABLE = re.compile(r"Table with name (\S+) does not exist!")


def _why(exc: Exception) -> str:
    """DuckDB's message on one line; a table that does not exist gets the catalog's own
    tables as the suggestion (DuckDB would offer its system tables, e.g. pg_index)."""
    text = " ".join(str(exc).split())
    missing = _NO_TABLE.search(text)
    if missing is not None:
        return (f"no table {missing.group(1)!r}: the catalog's tables are {FILES} and "
                f"{ARCHIVES}")
    return text
