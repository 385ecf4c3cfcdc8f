"""``open_catalog`` and :class:`Catalog`: the ``archives`` and ``files`` tables of many archives.

``add`` reads each archive's tail (:mod:`.rows`), skips an archive whose size and ETag/mtime
the catalog already has, and commits the rest in batches: per batch one transaction on
``files`` (delete every row of the batch's URIs, evolve the schema for new module columns,
append), then one on the path index ``paths`` (:mod:`.index`), then one on ``archives`` (the
same). A commit that loses an optimistic race is redone on the reloaded table. ``remove``
deletes ``archives`` rows first, then ``paths``, then ``files`` rows. The order and why it loses
and duplicates nothing are in docs/catalog.md.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import random
import time
import warnings
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pyiceberg.expressions import AlwaysTrue

from ..errors import CatalogError, StoreError, ZnippyError
from ..store.iceberg import CATALOG_NAME, open_catalog as _open_iceberg
from . import index as _index
from .planning import plan_files
from .rows import ARCHIVES_ARROW, ArchiveRows, archive_uri, local_identity, read_rows
from .schema import ARCHIVES, FILES, FORMAT, NAMESPACE, PROP_FORMAT, table_spec
from .tablecache import load_for_read
from .schema import upgrade

PathLike = str | os.PathLike[str]
DEFAULT_BATCH_ARCHIVES = 100
DEFAULT_BATCH_ROWS = 1_000_000
DEFAULT_RETRIES = 20


@dataclass
class CatalogAddReport:
    added: int = 0          # archives new to the catalog
    replaced: int = 0       # archives whose rows were rewritten (changed since their add)
    unchanged: int = 0      # same size and ETag/mtime: nothing read, nothing written
    rows: int = 0           # files rows written
    commits: int = 0        # commits made on the two tables
    conflicts: int = 0      # commits redone after losing an optimistic race
    seconds: float = 0.0
    uris: list[str] = field(default_factory=list)  # archives written, in commit order
    #: archives that could not be read, and why (the others are added all the same)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class RemoveReport:
    removed: int = 0        # archives that had an ``archives`` row
    unknown: list[str] = field(default_factory=list)  # archives given that had none
    rows: int = 0           # their files rows, as recorded
    commits: int = 0
    conflicts: int = 0
    seconds: float = 0.0


#: what pyiceberg raises on damaged metadata (JSON, Avro manifests, pydantic validation)
#: (a truncated deflate-coded Avro manifest: zlib.error)
_METADATA_ERRORS = (ValueError, TypeError, KeyError, IndexError, EOFError, OSError,
                    AttributeError, ArithmeticError, pa.ArrowException, zlib.error)


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    """A catalog method whose damaged Iceberg metadata is a CatalogError naming the warehouse,
    never pyiceberg's traceback (found by the fuzzer: tests/_fuzz_more.py)."""
    @functools.wraps(method)
    def call(self: "Catalog", *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except ZnippyError:
            raise
        except Exception as exc:  # noqa: BLE001  (sorted below: ours or pyiceberg's)
            if not isinstance(exc, _METADATA_ERRORS) and not type(exc).__module__.startswith(
                    ("pyiceberg", "pydantic", "fastavro")):
                raise
            text = str(exc).strip()
            first = text.splitlines()[0][:200] if text else ""
            raise CatalogError(f"cannot read the catalog's Iceberg metadata: "
                               f"{type(exc).__name__}: {first}", path=self.warehouse) from None
    return call


def open_catalog(warehouse: PathLike, *, catalog: Mapping[str, Any] | None = None,
                 namespace: str = NAMESPACE, create: bool = False) -> "Catalog":
    """The catalog in ``warehouse`` (the embedded SQLite catalog there, or the pyiceberg
    catalog ``catalog`` describes). ``create`` makes the warehouse, namespace and tables."""
    return Catalog(warehouse, catalog=catalog, namespace=namespace, create=create)


class Catalog:
    """The two tables of a fleet of archives. Use :func:`open_catalog`."""

    def __init__(self, warehouse: PathLike, *, catalog: Mapping[str, Any] | None,
                 namespace: str, create: bool) -> None:
        self.warehouse = os.fspath(warehouse)
        self.namespace = namespace
        try:
            self.iceberg = _open_iceberg(self.warehouse, catalog, create=create)
        except StoreError as exc:
            raise CatalogError(exc.problem, path=exc.path) from None
        self.name = catalog.get("name", CATALOG_NAME) if catalog else CATALOG_NAME
        #: whether the path index ``paths`` exists (made by ``create``, or by ``reindex``)
        self.has_index = False
        _guarded(Catalog._ensure)(self, create)

    # -- tables -----------------------------------------------------------------------------
    def _ensure(self, create: bool) -> None:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, TableAlreadyExistsError

        if "." in self.namespace and type(self.iceberg).__name__ == "SqlCatalog":
            raise CatalogError(f"namespace {self.namespace!r}: the SQL catalog takes one-level "
                               "namespaces (no '.')", path=self.warehouse)
        for name in (FILES, ARCHIVES):
            ident = self.ident(name)
            if self.iceberg.table_exists(ident):
                continue
            if not create:
                raise CatalogError(f"no catalog table {ident} (run 'znippy-sql catalog init')",
                                   path=self.warehouse)
            try:
                self.iceberg.create_namespace_if_not_exists(self.namespace)
            except NamespaceAlreadyExistsError:  # another process, just now
                pass
            try:
                self.iceberg.create_table(ident, **table_spec(name))
            except TableAlreadyExistsError:
                pass
        for name in (FILES, ARCHIVES):
            props = self.table(name).properties
            if props.get(PROP_FORMAT) != FORMAT:
                raise CatalogError(f"table {self.ident(name)} is not a znippy catalog table "
                                   f"({PROP_FORMAT}={props.get(PROP_FORMAT)!r})",
                                   path=self.warehouse)
        upgrade(self.table(FILES), self.warehouse)  # old column names (schema.RENAMED)
        self.has_index = self.iceberg.table_exists(self.ident(_index.PATHS)) and {
            f.name for f in self.table(_index.PATHS).schema().fields} == set(_index.COLUMNS)
        if create and not self.has_index:  # none, or one of other column names: rebuilt
            self.reindex()

    @_guarded
    def reindex(self) -> int:
        """(Re)build the path index ``paths`` from ``files`` in one commit, creating the
        table if needed: for a catalog made before the index existed, or to compact an index
        grown from many small adds. → rows written."""
        from pyiceberg.exceptions import TableAlreadyExistsError

        ident = self.ident(_index.PATHS)
        if self.iceberg.table_exists(ident) and {
                f.name for f in self.table(_index.PATHS).schema().fields} != set(_index.COLUMNS):
            self.iceberg.drop_table(ident)  # columns named otherwise (an older index)
        try:
            self.iceberg.create_table(ident, **_index.table_spec())
        except TableAlreadyExistsError:
            pass
        self.has_index = True
        files = self.table(FILES)
        rows = (files.scan(selected_fields=_index.COLUMNS).to_arrow()
                if files.current_snapshot() is not None else None)
        table = self.table(_index.PATHS)
        snap = table.current_snapshot()
        had = bool(snap and int((snap.summary or {}).get("total-records", 0) or 0))
        with table.transaction() as tx:
            if had:
                tx.delete(AlwaysTrue())
            if rows is not None and rows.num_rows:
                tx.append(_conform(_index.rows(rows), table.schema(), ident))
        return 0 if rows is None else rows.num_rows

    def ident(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def table(self, name: str) -> Any:
        """The pyiceberg table ``files`` or ``archives``, loaded now (its newest snapshot)."""
        return self.iceberg.load_table(self.ident(name))

    def table_for_read(self, name: str) -> Any:
        """As :meth:`table`, reusing a table loaded before while the catalog still names the
        same metadata file (the query path; never give it to a transaction)."""
        return load_for_read(self.iceberg, self.ident(name))

    @property
    def files_table(self) -> Any:
        return self.table(FILES)

    @property
    def archives_table(self) -> Any:
        return self.table(ARCHIVES)

    @_guarded
    def archives(self, columns: Iterable[str] | None = None) -> pa.Table:
        """The ``archives`` table as Arrow, sorted by ``archive_uri``."""
        scan = self.table(ARCHIVES).scan(selected_fields=tuple(columns) if columns else ("*",))
        return scan.to_arrow().sort_by("archive_uri")

    def _known(self) -> dict[str, tuple[int, str, int]]:
        """``archive_uri`` → (size, etag_or_mtime, files) of every archive in the catalog."""
        t = self.archives(("archive_uri", "size", "etag_or_mtime", "files"))
        return {u: (s, e, f) for u, s, e, f in zip(*(t.column(c).to_pylist() for c in (
            "archive_uri", "size", "etag_or_mtime", "files")))}

    # -- add --------------------------------------------------------------------------------
    @_guarded
    def add(self, archives: Iterable[PathLike], *, batch_archives: int = DEFAULT_BATCH_ARCHIVES,
            batch_rows: int = DEFAULT_BATCH_ROWS, retries: int = DEFAULT_RETRIES,
            open_options: Mapping[str, Any] | None = None,
            progress: Callable[[str, str], None] | None = None,
            skip_unreadable: bool = False) -> CatalogAddReport:
        """Add (or refresh) archives: local paths or URLs. ``progress(uri, what)`` is called
        with ``what`` in added/replaced/unchanged as each archive is decided. An archive that
        cannot be read (missing, not an archive) raises, or with ``skip_unreadable`` is left
        out and named in ``report.failed`` while the others are added."""
        t0 = time.perf_counter()
        report = CatalogAddReport()
        known = self._known()
        batch: list[ArchiveRows] = []
        rows = 0
        seen: set[str] = set()
        for given in archives:
            uri = archive_uri(given)
            if uri in seen:
                continue
            seen.add(uri)
            try:
                ident = local_identity(uri)
            except ZnippyError as exc:
                if not skip_unreadable:
                    raise
                report.failed[uri] = exc.problem
                continue
            old = known.get(uri)
            if ident is not None and old is not None and (old[0], old[1]) == ident:
                report.unchanged += 1
                if progress:
                    progress(uri, "unchanged")
                continue
            try:
                got = read_rows(uri, identity=ident, open_options=dict(open_options or {}))
            except ZnippyError as exc:
                if not skip_unreadable:
                    raise
                report.failed[uri] = exc.problem
                continue
            if ident is None and old is not None and (old[0], old[1]) == (got.size,
                                                                          got.etag_or_mtime):
                report.unchanged += 1
                if progress:
                    progress(uri, "unchanged")
                continue
            if old is None:
                report.added += 1
            else:
                report.replaced += 1
            if progress:
                progress(uri, "added" if old is None else "replaced")
            batch.append(got)
            rows += got.files.num_rows
            if len(batch) >= batch_archives or rows >= batch_rows:
                self._commit_batch(batch, report, retries)
                batch, rows = [], 0
        if batch:
            self._commit_batch(batch, report, retries)
        report.seconds = time.perf_counter() - t0
        return report

    def _commit_batch(self, batch: list[ArchiveRows], report: CatalogAddReport,
                      retries: int) -> None:
        uris = [b.uri for b in batch]
        try:
            files = pa.concat_tables([b.files for b in batch], promote_options="default")
        except (pa.ArrowException, ValueError, TypeError) as exc:
            raise CatalogError(f"archives have conflicting module columns: {exc}",
                               path=batch[0].uri) from None
        now = _dt.datetime.now(_dt.timezone.utc)
        records = pa.Table.from_pylist([b.record(now) for b in batch], schema=ARCHIVES_ARROW)
        lost, had = self._replace(FILES, uris, files, retries)
        report.conflicts += lost
        if self.has_index:  # its rows are a subset of files': only those can be there
            report.conflicts += self._replace(_index.PATHS, uris, _index.rows(files), retries,
                                              delete=had)[0]
            report.commits += 1
        report.conflicts += self._replace(ARCHIVES, uris, records, retries)[0]
        report.commits += 2
        report.rows += files.num_rows
        report.uris.extend(uris)

    def _replace(self, name: str, uris: list[str], rows: pa.Table | None, retries: int, *,
                 delete: bool | None = None) -> tuple[int, bool]:
        """One commit on table ``name``: every row of ``uris`` deleted, ``rows`` appended;
        redone on the reloaded table while it loses an optimistic race. ``delete``: whether
        rows of ``uris`` may be there (None: look). → (conflicts met, whether it deleted)."""
        from pyiceberg.exceptions import CommitFailedException
        from sqlalchemy.exc import OperationalError

        for attempt in range(retries + 1):
            try:
                table = self.table(name)
                with table.transaction() as tx:
                    if rows is not None and name == FILES:
                        _evolve(tx, rows.schema)
                    gone = _index.is_in("archive_uri", uris)
                    found = bool(plan_files(table, gone)) if delete is None else delete
                    if found:
                        with warnings.catch_warnings():  # planned files may hold none of them
                            warnings.filterwarnings("ignore", "Delete operation did not match")
                            tx.delete(gone)
                    if rows is not None and rows.num_rows:
                        tx.append(_conform(rows, tx.table_metadata.schema(), self.ident(name)))
                return attempt, found
            except (CommitFailedException, OperationalError):
                if attempt == retries:
                    break
                time.sleep(min(2.0, 0.02 * 2 ** attempt) * random.uniform(0.5, 1.5))
        raise CatalogError(f"{self.ident(name)}: gave up after {retries + 1} commits lost to "
                           "concurrent writers", path=self.warehouse)

    # -- remove -----------------------------------------------------------------------------
    @_guarded
    def remove(self, archives: Iterable[PathLike], *, retries: int = DEFAULT_RETRIES
               ) -> RemoveReport:
        """Remove archives' rows (the archive files themselves need not exist)."""
        t0 = time.perf_counter()
        uris = list(dict.fromkeys(archive_uri(a) for a in archives))
        report = RemoveReport()
        if not uris:
            return report
        known = self._known()
        report.removed = sum(u in known for u in uris)
        report.unknown = [u for u in uris if u not in known]
        if not report.removed:
            report.seconds = time.perf_counter() - t0
            return report
        report.rows = sum(known[u][2] for u in uris if u in known)
        report.conflicts += self._replace(ARCHIVES, uris, None, retries)[0]
        if self.has_index:
            report.conflicts += self._replace(_index.PATHS, uris, None, retries)[0]
        report.conflicts += self._replace(FILES, uris, None, retries)[0]
        report.commits = 3 if self.has_index else 2
        report.seconds = time.perf_counter() - t0
        return report

    # -- query, extract, verify -------------------------------------------------------------
    @_guarded
    def sql(self, query: str, *, con: Any = None) -> pa.Table:
        """Run one DuckDB query over ``files`` and ``archives`` (see :mod:`.query`)."""
        from .query import run_sql

        return run_sql(self, query, con=con)

    @_guarded
    def plan(self, query: str) -> dict[str, Any]:
        """Per table the query reads: the pushed filter, columns and data files planned."""
        from .query import plan_query

        return {name: scan.describe() for name, scan in plan_query(self, query).items()}

    @_guarded
    def extract(self, result: Any, dest: PathLike, *, flat: bool = False,
                workers: int | None = None,
                open_options: Mapping[str, Any] | None = None) -> Any:
        """Extract the files of a query result (``archive_uri``, ``relative_path``);
        ``open_options`` go to each ``open_archive`` (``storage_options``, ``cache``)."""
        from .extract import extract_result

        return extract_result(self, result, os.fspath(dest), flat=flat, workers=workers,
                              open_options=open_options)

    @_guarded
    def verify(self, *, open_options: Mapping[str, Any] | None = None) -> Any:
        """Every archive's tail against the catalog's rows (see :mod:`.verify`)."""
        from .verify import verify_catalog

        return verify_catalog(self, open_options=open_options)

    def __repr__(self) -> str:
        return f"<Catalog {self.name}.{self.namespace} in {self.warehouse!r}>"


def _evolve(tx: Any, schema: pa.Schema) -> None:
    """Add the module columns ``schema`` has and the table lacks (nullable), in the same
    transaction as the rows that bring them."""
    current = tx.table_metadata.schema()
    names = {f.name for f in current.fields}
    new = [f for f in schema if f.name not in names]
    if new:
        with tx.update_schema() as update:
            update.union_by_name(pa.schema([pa.field(f.name, f.type, nullable=True)
                                            for f in new]))


def _cast(col: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    """``col`` as ``to``. A nested column (another writer's list, struct or map, whose
    Iceberg type names its children and their nullability differently) is rebuilt from its
    values, which checks them: pyarrow's ``cast`` between such types aborts the process on a
    child it cannot take (``ValidateChildData``), where building raises."""
    if col.type == to:
        return col
    if _lists_of_same(col.type, to):  # list -> large_list of the very same element field
        return col.cast(to)
    if pa.types.is_nested(to) or pa.types.is_nested(col.type):
        return pa.chunked_array([pa.array(col.to_pylist(), type=to)], type=to)
    return col.cast(to)


def _lists_of_same(a: pa.DataType, b: pa.DataType) -> bool:
    """Both list types (plain or large) of an equal element field: name, type, nullability."""
    def is_list(t: pa.DataType) -> bool:
        return pa.types.is_list(t) or pa.types.is_large_list(t)
    return is_list(a) and is_list(b) and a.value_field.equals(b.value_field)


def _conform(rows: pa.Table, schema: Any, ident: str) -> pa.Table:
    """``rows`` in the table's exact Arrow schema: its types, its order, NULL where a row
    lacks a module column."""
    target = schema.as_arrow()
    cols = []
    for f in target:
        if f.name in rows.column_names:
            col = rows.column(f.name)
            try:
                cols.append(_cast(col, f.type))
            except (pa.ArrowException, ValueError, TypeError) as exc:
                raise CatalogError(f"column {f.name!r} has type {col.type}, the table has "
                                   f"{f.type}: {exc}", path=ident) from None
        else:
            cols.append(pa.nulls(rows.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=target)
