"""The fleet catalog's tables as parts for an engine: pyiceberg plans, workers read.

:class:`CatalogScan` plans a scan of ``files`` (or ``archives``, ``paths``) on the driver with
pyiceberg's evaluators (partition pruning, min/max statistics, delete files attached to their
data files; manifests decoded once per process, :mod:`znippy_sql.catalog.planning`); a path
filter goes through the path index ``paths`` as ``Catalog.sql``'s does. Each part is a list of
pyiceberg ``FileScanTask`` s and the table's metadata location, so a worker reads it from the
metadata file alone (no catalog database needed there): local Parquet files whose names are
ids by one pyarrow dataset scan (:mod:`znippy_sql.catalog.fastread`), anything else with
pyiceberg's ``ArrowScan``. The ``content`` column is read from the archives afterwards
(:func:`~znippy_sql.engines.parts.contents`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..catalog.planning import plan_files
from ..errors import CatalogError
from ..native import guard
from .parts import CONTENT, contents
from .predicates import Conjunct

#: data files per part
FILES_PER_PART = 8


@dataclass(frozen=True)
class CatalogPart:
    metadata_location: str
    tasks: tuple[Any, ...]  # pyiceberg FileScanTask


@dataclass(frozen=True)
class CatalogScan:
    warehouse: str
    table: str = "files"
    catalog: Mapping[str, Any] | None = None
    namespace: str = "fleet"
    content: bool = False
    storage_options: Mapping[str, Any] | None = None
    io_properties: Mapping[str, Any] = field(default_factory=dict)

    def _catalog(self) -> Any:
        from ..catalog import open_catalog

        if self.table not in ("files", "archives", "paths"):
            raise ValueError("the catalog has tables files, archives and paths, not "
                             f"{self.table!r}")
        if self.content and self.table != "files":
            raise ValueError("content is read for the files table")
        return open_catalog(os.fspath(self.warehouse), catalog=self.catalog,
                            namespace=self.namespace)

    def _table(self) -> Any:
        return self._catalog().table(self.table)

    def schema(self) -> pa.Schema:
        out = self._table().schema().as_arrow()
        return out.append(CONTENT) if self.content else out

    def plan(self, conjuncts: Sequence[Conjunct] = (),
             columns: Sequence[str] | None = None) -> list[CatalogPart]:
        """The parts of a scan keeping the rows ``conjuncts`` may keep, for ``columns``
        (all when None). A ``files`` scan whose conjuncts bound ``relative_path`` goes
        through the path index as ``Catalog.sql``'s does: ``paths`` is read instead when
        ``columns`` are all its own, else ``files`` is pruned to the archives ``paths``
        lists."""
        cat = self._catalog()
        table = cat.table(self.table)
        flt = row_filter(conjuncts, table.schema())
        with guard(CatalogError, "planning a scan of the catalog", path=cat.warehouse):
            if self.table == "files" and cat.has_index:
                table, flt = _through_index(cat, table, flt, columns, self.content,
                                            {c for c, _op, _v in conjuncts})
            tasks = plan_files(table, flt)
        loc = table.metadata_location
        return [CatalogPart(loc, tuple(tasks[i:i + FILES_PER_PART]))
                for i in range(0, len(tasks), FILES_PER_PART)]

    def read(self, part: CatalogPart, columns: Sequence[str] | None = None,
             conjuncts: Sequence[Conjunct] = ()) -> Iterator[pa.RecordBatch]:
        from pyiceberg.io.pyarrow import ArrowScan
        from pyiceberg.table import StaticTable

        from ..catalog.fastread import read_tasks

        props = {**(self.catalog or {}), **self.io_properties}  # s3.* keys reach the FileIO
        table = StaticTable.from_metadata(part.metadata_location, properties=props)
        full = table.schema()
        names = list(columns) if columns is not None else [f.name for f in full.fields] + (
            [CONTENT.name] if self.content else [])
        want_content = self.content and CONTENT.name in names
        need = [n for n in names if n != CONTENT.name]
        if want_content:
            need = list(dict.fromkeys(need + ["archive_uri", "relative_path"]))
        projected = full.select(*need) if need else full.select(full.fields[0].name)
        flt = row_filter(conjuncts, full)
        with guard(CatalogError, "reading the catalog's data files",
                   path=part.metadata_location):
            # local Parquet files whose names are ids: one pyarrow dataset scan (fastread.py)
            fast = read_tasks(table, part.tasks, [f.name for f in projected.fields], flt)
        rows: Iterable[pa.RecordBatch] = fast.to_batches() if fast is not None else \
            ArrowScan(table.metadata, table.io, projected, flt).to_record_batches(part.tasks)
        for batch in _guarded(rows, part.metadata_location):
            if not batch.num_rows:
                continue
            cols = {n: batch.column(n) for n in need}
            if want_content:
                cols[CONTENT.name] = contents(cols["archive_uri"].to_pylist(),
                                              cols["relative_path"].to_pylist(),
                                              self.storage_options)
            yield pa.RecordBatch.from_arrays([cols[n] for n in names], names=names)


def _through_index(cat: Any, files: Any, flt: Any, columns: Sequence[str] | None,
                   content: bool, filtered: set[str]) -> tuple[Any, Any]:
    """(table, filter) to plan a ``files`` scan with: ``paths`` and ``flt`` when the
    columns read and filtered are all ``paths``'s, ``files`` pruned to the archives ``paths``
    lists when ``flt`` bounds the path, ``files`` and ``flt`` otherwise. ``filtered``: the
    columns the conjuncts test."""
    from pyiceberg.expressions import AlwaysFalse, And

    from ..catalog import index
    from ..catalog.query import archives_holding

    if index.path_filter(flt) is None:
        return files, flt
    paths = cat.table(index.PATHS)
    if columns is not None and not (content and CONTENT.name in columns) and index.covers(
            {c for c in columns if c != CONTENT.name} | filtered):
        return paths, flt
    uris = archives_holding(paths, flt)
    return files, (And(flt, index.is_in("archive_uri", uris)) if uris else AlwaysFalse())


def row_filter(conjuncts: Sequence[Conjunct], schema: Any) -> Any:
    """A pyiceberg row filter: the conjuncts on the table's columns, AND-ed (a prefix
    conjunct of several values: their ``startswith`` OR-ed)."""
    from pyiceberg.expressions import AlwaysTrue, And, In, Or, StartsWith

    known = {f.name for f in schema.fields}
    out: Any = AlwaysTrue()
    for column, op, values in conjuncts:
        if column not in known or not values or any(v is None for v in values):
            continue
        # pyiceberg's expressions take (term, literal(s)) positionally at run time; their
        # pydantic-generated signatures name them as keywords only, hence the ignores
        if op == "in":
            term: Any = In(column, set(values))  # type: ignore[call-arg, arg-type]  # above
        elif op == "prefix":
            term = StartsWith(column, values[0])  # type: ignore[call-arg, arg-type]  # above
            for v in values[1:]:
                term = Or(term, StartsWith(column, v))  # type: ignore[call-arg, arg-type]
        else:
            continue
        out = And(out, term)
    return out


def _guarded(batches: Iterable[pa.RecordBatch], where: str) -> Iterator[pa.RecordBatch]:
    """pyiceberg's batches, each taken under the native guard (its pyarrow paths raise
    foreign errors, and a panic below them is a BaseException)."""
    it = iter(batches)
    while True:
        with guard(CatalogError, "reading the catalog's data files", path=where):
            batch = next(it, None)
        if batch is None:
            return
        yield batch
