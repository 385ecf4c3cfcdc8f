"""``Catalog.sql``: pyiceberg scans (pruned by the query's simple predicates) → Arrow → DuckDB.

Only the tables the query names are loaded and scanned, only the columns it names are read, and
each scan is planned once with the row filter :mod:`.pushdown` found (partition pruning, then
min/max statistics per data file, then row groups), from manifests decoded once per process
(:mod:`.planning`), and read by one pyarrow dataset scan where that reads what pyiceberg's
``ArrowScan`` would (:mod:`.fastread`). A ``files`` scan whose filter bounds ``relative_path`` goes through the path
index (:mod:`.index`): read from ``paths`` when the query names only its columns, else pruned to
the archives ``paths`` lists. DuckDB then runs the whole query over the Arrow tables registered
as ``files`` and ``archives``, in a cursor of one in-memory database kept by the process (a new
DuckDB database costs ~30 ms of CPU; a cursor nothing).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import CatalogError
from ..native import guard
from . import index as _index
from .duckread import view_sql
from .opened import OpenCatalog
from .fastread import read_tasks
from .planning import plan_files
from .pushdown import Columns, Use, analyse, parse
from .schema import ARCHIVES, FILES


#: the column a scan reads when the query names none of the table's (``count(*)``)
_CHEAPEST = {FILES: "pkg_type", ARCHIVES: "size"}


@dataclass
class Scan:
    """One table's scan for a query: what was pushed, and the data files it plans."""

    name: str
    table: Any  # pyiceberg.table.Table: the one read (``paths`` for an indexed files scan)
    use: Use
    tasks: list[Any]
    #: how the path index served a files scan: "" (not used), "read" or "pruned"
    index: str = ""
    #: the table's own filter when the index pruned it (``use.filter`` is then the pruned one)
    notes: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"filter": repr(self.use.filter),
                "columns": None if self.use.columns is None else sorted(self.use.columns),
                "data_files": len(self.tasks),
                "table_files": _file_count(self.table),
                "index": self.index,
                "reader": "duckdb" if DIRECT[0] and self.view_sql() is not None else "arrow",
                **self.notes}

    def to_arrow(self) -> pa.Table:
        from pyiceberg.io.pyarrow import ArrowScan

        scan = self._scan()
        fields = None if scan.selected_fields == ("*",) else scan.selected_fields
        fast = read_tasks(self.table, self.tasks, fields, self.use.filter)
        if fast is not None:
            return fast
        where = str(getattr(self.table.metadata, "location", "") or "") or None
        with guard(CatalogError, f"reading the {self.name} table failed", path=where):
            return ArrowScan(self.table.metadata, self.table.io, scan.projection(),
                             scan.row_filter).to_table(self.tasks)

    def view_sql(self) -> str | None:
        """A ``SELECT`` DuckDB reads the planned files with, or None (:mod:`.duckread`)."""
        fields = self._fields()
        return view_sql(self.table, self.tasks, None if fields == ("*",) else fields,
                        self.use.filter)

    def _fields(self) -> tuple[str, ...]:
        cols = self.use.columns
        return ("*",) if cols is None else tuple(sorted(cols)) or (_CHEAPEST[self.name],)

    def _scan(self) -> Any:
        return self.table.scan(row_filter=self.use.filter, selected_fields=self._fields())

    def plan(self) -> "Scan":
        self.tasks = plan_files(self.table, self.use.filter)
        return self


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


#: whether DuckDB may read the planned files itself (:mod:`.duckread`); tests and the
#: benchmark switch it off to compare with the Arrow path
DIRECT = [True]

_DB: list[Any] = []
_DB_LOCK = threading.Lock()


def _cursor() -> Any:
    """A new cursor of the process's in-memory DuckDB database (its own temporary views)."""
    import duckdb

    with _DB_LOCK:
        if not _DB:
            db = duckdb.connect()
            db.execute("SET parquet_metadata_cache = true")  # data files never change
            _DB.append(db)
        return _DB[0].cursor()


def _named(tree: Any) -> set[str]:
    """The catalog tables a parse tree reads (lower case), all of them without a tree."""
    if tree is None:
        return {FILES, ARCHIVES}
    from .pushdown import _nodes

    return {str(n.get("table_name", "")).lower() for n in _nodes(tree)
            if n.get("type") == "BASE_TABLE"} & {FILES, ARCHIVES}


def plan_query(cat: OpenCatalog, query: str, *, con: Any = None) -> dict[str, Scan]:
    """The scans ``query`` needs, planned (no data read yet)."""
    parser = con if con is not None else _cursor()
    try:
        tree = parse(parser, query)
        tables = {name: cat.table_for_read(name) for name in sorted(_named(tree))}
        uses = analyse(parser, query, {n: table_columns(t) for n, t in tables.items()},
                       tree=tree)
    finally:
        if con is None:
            parser.close()
    out = {}
    for name, use in uses.items():
        scan = None
        if name == FILES and cat.has_index:
            scan = _indexed(cat, use, tables[FILES])
        out[name] = scan if scan is not None else Scan(name, tables[name], use, []).plan()
    return out


def _indexed(cat: OpenCatalog, use: Use, files: Any) -> Scan | None:
    """A files scan through the path index, or None when its filter does not bound the path."""
    from pyiceberg.expressions import AlwaysFalse, And

    paths_filter = _index.path_filter(use.filter)
    if paths_filter is None:
        return None
    paths = cat.table_for_read(_index.PATHS)
    if _index.covers(use.columns):
        return Scan(FILES, paths, use, [], index="read").plan()
    uris = archives_holding(paths, use.filter)
    pruned = Use(use.columns, And(use.filter, _index.is_in("archive_uri", uris)) if uris
                 else AlwaysFalse())
    return Scan(FILES, files, pruned, [], index="pruned",
                notes={"archives": len(uris)}).plan()


def archives_holding(paths: Any, row_filter: Any) -> list[str]:
    """The archives (sorted URIs) whose rows in the path index ``paths`` (a loaded table)
    match what ``row_filter`` says of ``paths``'s columns: every archive with a ``files`` row
    that ``row_filter`` keeps is among them when the filter bounds the path."""
    lookup = _index.restrict(row_filter) or _index.path_filter(row_filter)
    if lookup is None:
        raise ValueError("the filter does not bound relative_path")
    hits = Scan(FILES, paths, Use({"archive_uri"}, lookup), []).plan().to_arrow()
    return sorted(set(hits.column("archive_uri").to_pylist()))


def run_sql(cat: OpenCatalog, query: str, *, con: Any = None) -> pa.Table:
    """The query's result as Arrow. ``con``: a DuckDB connection to run it in (the tables
    are registered there as ``files`` and ``archives``); a cursor of the process's in-memory
    database otherwise."""
    import duckdb

    own = con is None
    con = _cursor() if own else con
    try:
        for name, scan in plan_query(cat, query, con=con).items():
            view = scan.view_sql() if DIRECT[0] else None
            if view is not None:
                try:
                    con.execute(f'CREATE OR REPLACE TEMPORARY VIEW "{name}" AS {view}')
                    continue
                except duckdb.Error:  # a file DuckDB cannot read as we expect: Arrow
                    pass
            try:  # a view of ours from an earlier query in ``con`` (register cannot replace it)
                con.execute(f'DROP VIEW IF EXISTS temp."{name}"')
            except duckdb.Error:
                pass
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
