"""An Iceberg-backed archive of the Rust tool (feature ``iceberg``), read with pyiceberg.

``znippy compress --meta-format iceberg --warehouse W -o NAME.znippy`` (``znippy`` 0.10.1 with
``znippy-iceberg`` 0.2.0, docs/interop.md "Iceberg-backed archives") writes the blobs to
``NAME.znippy`` (no tail, no footer) and each sub-index as an Iceberg table of a skade
warehouse: a redb catalog ``W/catalog.redb`` (``skade-katalog``'s ``RedbCatalog``, catalog
name ``skade``) and the tables under ``W/warehouse/<namespace>/<table>/`` (``metadata/`` with
``NNNNN-<uuid>.metadata.json``, the Avro manifest list and manifests; ``data/`` with Parquet).
The namespace is the sidecar's file stem with every character outside ``[A-Za-z0-9]`` made
``_``, then leading and trailing ``_`` trimmed;
a table is ``idx_<pkg_type as a byte, 3 digits>[_<repo>][_<module>]_<n>`` (``n``: the
sub-index's place); ``idx_128…`` are reserved sections (``__znippy_fsmeta__``). Unsigned
columns are stored widened (``uint32`` as ``int``, ``uint64`` as ``long``, the same bits), the
checksum as ``binary``.

No Python client reads redb: a table's current metadata file is taken here as the
highest-numbered ``NNNNN-*.metadata.json`` whose location the catalog file names (the catalog
stores each commit's pointer as plain text; a metadata file no commit recorded is skipped), and
a table counts when the catalog names its key ``skade<US><namespace><US><table>``. The files
record absolute ``file://`` locations of the place the warehouse was written; a warehouse
moved elsewhere is read through :class:`RelocatedFileIO`, which maps that place onto the
directory given.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.ipc import stream_bytes
from ..format.kernels import call_function, filter_by
from ..format.rangeio import RangeSource
from ..format.schema import BASE_FIELDS, BASE_NAMES, GroupKey
from .layouts import FSMETA, RUST_RESERVED_PKG_TYPE
from .tail import make_tail
from .vsource import Piece, VirtualSource

CATALOG_FILE = "catalog.redb"
CATALOG_NAME = b"skade"
#: the unit separator between a skade table key's parts (``skade-katalog`` ``keys.rs``)
KEY_SEP = b"\x1f"
#: a reserved section's table (``pkg_type`` -128 as a byte)
RESERVED_PREFIX = "idx_128"
#: rows of one decoded batch (``skade`` ``read.rs`` ``SCAN_BATCH_ROWS``)
SCAN_BATCH_ROWS = 8192
_METADATA = re.compile(r"(\d+)-.*\.metadata\.json\Z")
_TABLE = re.compile(r"idx_(\d{3})(?:_(.*))?_\d+\Z")
#: ``__znippy_fsmeta__`` as ``fsmeta.rs`` types it (stored widened: ``int``, ``int``)
FSMETA_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                           pa.field("kind", pa.uint8(), nullable=False),
                           pa.field("mode", pa.uint32(), nullable=False)])
_FROM, _TO = "znippy.relocate.from", "znippy.relocate.to"


def namespace_of(sidecar: str | os.PathLike[str]) -> str:
    """The namespace ``znippy compress`` gives the sidecar's tables: its file stem with
    every character outside ``[A-Za-z0-9]`` made ``_``, then ``_`` trimmed from both ends
    (``qualified_table_name``)."""
    stem = os.path.splitext(os.path.basename(os.fspath(sidecar)))[0]
    return re.sub(r"[^A-Za-z0-9]", "_", stem).strip("_")


def is_rust_warehouse(warehouse: str | os.PathLike[str]) -> bool:
    """Whether ``warehouse`` is a skade warehouse (its redb catalog is there)."""
    return os.path.isfile(os.path.join(os.fspath(warehouse), CATALOG_FILE))


class RelocatedFileIO:
    """pyiceberg's ``PyArrowFileIO`` reading ``file://FROM…`` locations at ``file://TO…``
    (properties ``znippy.relocate.from``/``.to``): a warehouse read where it was not
    written. Made a subclass when first used, so importing this module imports no pyiceberg."""

    def __new__(cls, properties: dict[str, str] | None = None) -> Any:
        return _relocated_class()(properties or {})


@functools.cache
def _relocated_class() -> type:
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class _Relocated(PyArrowFileIO):
        def new_input(self, location: str) -> Any:
            src, dst = self.properties.get(_FROM, ""), self.properties.get(_TO, "")
            if src and location.startswith(src):
                location = dst + location[len(src):]
            return super().new_input(location)

    return _Relocated


@dataclass
class RustTable:
    """One table of an archive's namespace: its name, current metadata file, and rows."""

    name: str
    metadata: str
    table: Any  # pyiceberg StaticTable

    @property
    def reserved(self) -> bool:
        return self.name.startswith(RESERVED_PREFIX)

    @property
    def key(self) -> GroupKey:
        """The sub-index's manifest key, as far as the table name tells it: the package
        type (its byte read back as signed), the name's middle as ``module_name`` (a
        reserved one as ``__<middle>__``); the repo and the original spelling are not
        recorded (``qualified_table_name`` made them alphanumeric and joined them)."""
        m = _TABLE.match(self.name)
        if m is None:
            raise FormatError(f"table {self.name}: not a znippy sub-index's name",
                              path=self.metadata)
        byte = int(m.group(1))
        middle = m.group(2) or ""
        if self.reserved:
            return GroupKey(RUST_RESERVED_PKG_TYPE, "", f"__{middle}__")
        return GroupKey(byte - 256 if byte > 127 else byte, "", middle)

    def batches(self) -> list[pa.RecordBatch]:
        """The rows as stored, in the order the Rust reader decodes them: each data file
        in path order, in batches of at most 8192 rows. (The Rust reader's batches are these
        while a data file is one Parquet row group, up to 1,048,576 rows as skade writes
        them; a bigger file's row groups are decoded in runs cut by the host's core count,
        which may end a batch early: the same rows, other batch boundaries.)"""
        meta = self.table.metadata
        if len(meta.schemas) > 1:
            raise FormatError(f"table {self.name}: an evolved schema is not read here",
                              path=self.metadata)
        try:
            tasks = list(self.table.scan().plan_files())
        except Exception as exc:  # pyiceberg raises many kinds on a bad manifest
            raise FormatError(f"table {self.name}: {exc}", path=self.metadata) from None
        if any(t.delete_files for t in tasks):
            raise FormatError(f"table {self.name}: row deletes are not read here",
                              path=self.metadata)
        import pyarrow.parquet as pq

        schema = self.table.schema().as_arrow()
        out: list[pa.RecordBatch] = []
        for task in sorted(tasks, key=lambda t: t.file.file_path):
            try:
                with self.table.io.new_input(task.file.file_path).open() as fh:
                    data = pq.read_table(fh).select(schema.names)
            except (OSError, KeyError, pa.ArrowException) as exc:
                raise FormatError(f"table {self.name}: data file {task.file.file_path}: "
                                  f"{exc}", path=self.metadata) from None
            for batch in data.combine_chunks().to_batches(max_chunksize=SCAN_BATCH_ROWS):
                out.append(batch)
        return out

    def read(self) -> pa.Table:
        batches = self.batches()
        schema = self.table.schema().as_arrow() if not batches else batches[0].schema
        return pa.Table.from_batches(batches, schema=schema)


def _current_metadata(folder: str, catalog: mmap.mmap) -> tuple[str, str] | None:
    """The highest-numbered metadata file of a table whose location the catalog names, and
    the table location it records."""
    found = []
    for name in os.listdir(folder):
        m = _METADATA.match(name)
        if m:
            found.append((int(m.group(1)), name))
    for _, name in sorted(found, reverse=True):
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as fh:
                location = json.load(fh)["location"]
        except (OSError, ValueError, KeyError, TypeError):
            raise FormatError("not an Iceberg table metadata file", path=path) from None
        if catalog.find(f"{location}/metadata/{name}".encode()) >= 0:
            return path, location
    return None


def rust_tables(warehouse: str | os.PathLike[str], namespace: str) -> list[RustTable]:
    """The tables of ``namespace`` in the skade ``warehouse``, in the order the Rust
    catalog lists them (by name), each loaded with pyiceberg from its current metadata."""
    root = os.path.abspath(os.fspath(warehouse))
    try:
        with open(os.path.join(root, CATALOG_FILE), "rb") as fh:
            catalog = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as exc:  # (ValueError: an empty file)
        raise ZnippyError(f"not a skade warehouse ({CATALOG_FILE}: "
                          f"{getattr(exc, 'strerror', None) or exc})", path=root) from None
    try:
        return _tables(root, namespace, catalog)
    finally:
        catalog.close()


def _tables(root: str, namespace: str, catalog: mmap.mmap) -> list[RustTable]:
    from pyiceberg.table import StaticTable

    ns_dir = os.path.join(root, "warehouse", namespace)
    names = sorted(os.listdir(ns_dir), key=str.encode) if os.path.isdir(ns_dir) else []
    out = []
    for name in names:
        key = KEY_SEP.join([CATALOG_NAME, namespace.encode(), name.encode()])
        folder = os.path.join(ns_dir, name, "metadata")
        if catalog.find(key) < 0 or not os.path.isdir(folder):
            continue
        current = _current_metadata(folder, catalog)
        if current is None:
            continue
        metadata, recorded = current
        actual = "file://" + os.path.join(ns_dir, name)
        props = {"py-io-impl": f"{__name__}.RelocatedFileIO", _FROM: recorded, _TO: actual}
        try:
            table = StaticTable.from_metadata(metadata, properties=props)
        except Exception as exc:  # pyiceberg raises many kinds on a bad file
            raise FormatError(f"table {namespace}.{name}: {exc}", path=metadata) from None
        out.append(RustTable(name, metadata, table))
    if not out:
        present = sorted(os.listdir(os.path.join(root, "warehouse"))) if os.path.isdir(
            os.path.join(root, "warehouse")) else []
        raise ZnippyError(f"no table of namespace {namespace!r} in the warehouse (it has: "
                          f"{', '.join(present) or 'none'})", path=root)
    return out


def _unwiden(batch: pa.RecordBatch, table: RustTable) -> pa.RecordBatch:
    """A data table's batch as the base columns (``skade::unwiden``: the same bits)."""
    missing = [n for n in BASE_NAMES if n not in batch.schema.names]
    if missing:
        raise FormatError(f"table {table.name} lacks the column {missing[0]}",
                          path=table.metadata)
    columns = [_narrow(batch.column(f.name), f.type, table) for f in BASE_FIELDS]
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(BASE_FIELDS))


def _once_each(rows: pa.Table, namespace: str, root: str | os.PathLike[str]) -> None:
    """Refuse rows holding a chunk twice: a second ``compress`` into the same warehouse and
    name appends its rows to the first one's tables (and overwrites the sidecar), and the
    Rust seal writes both (a lookup listing each path twice)."""
    if not rows.num_rows:
        return
    keys = rows.select(["relative_path", "chunk_seq"]).group_by(
        ["relative_path", "chunk_seq"]).aggregate([("chunk_seq", "count")])
    if keys.num_rows != rows.num_rows:
        twice = filter_by(keys, call_function("greater", [keys.column("chunk_seq_count"),
                                                          pa.scalar(1, pa.int64())]))
        raise FormatError(f"namespace {namespace!r} holds {twice.num_rows} chunk(s) more than "
                          f"once, e.g. {twice.column('relative_path')[0].as_py()!r} (compressed "
                          "into this warehouse under the same name twice?)",
                          path=os.fspath(root))


def rust_iceberg_rows(warehouse: str | os.PathLike[str], namespace: str) -> pa.Table:
    """The base rows the Rust seal takes (``scan_base_batches_57``): every data table of
    ``namespace`` in name order, reserved tables skipped, each table's batches kept."""
    batches: list[pa.RecordBatch] = []
    for table in rust_tables(warehouse, namespace):
        if table.reserved:
            continue
        for batch in table.batches():
            if batch.num_rows:
                batches.append(_unwiden(batch, table))
    rows = pa.Table.from_batches(batches, schema=pa.schema(BASE_FIELDS))
    _once_each(rows, namespace, warehouse)
    return rows


def _narrow(column: pa.Array, typ: pa.DataType, table: RustTable) -> pa.Array:
    """``column`` as ``typ`` (``skade::unwiden``): the same bits for a type of the stored
    width, a checked cast for a narrower one."""
    if column.type == typ:
        return column
    if pa.types.is_integer(typ) and column.type.bit_width == typ.bit_width:
        return column.view(typ)
    try:
        return column.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise FormatError(f"table {table.name}: a value that is no {typ}",
                          path=table.metadata) from None


def _as_written(table: RustTable) -> pa.Table | None:
    """A table's rows typed as the inline Arrow-IPC sink would have written them: the base
    columns unsigned again, ``pkg_type`` an ``int8``, text ``utf8``; ``__znippy_fsmeta__``
    as ``fsmeta.rs`` types it; None for another reserved table (not read here)."""
    batches = table.batches()
    if table.reserved:
        if table.key.module_name != FSMETA:
            return None
        rows = pa.Table.from_batches(batches, schema=batches[0].schema) if batches else None
        if rows is None:
            return FSMETA_SCHEMA.empty_table()
        return pa.table([_narrow(rows.column(f.name).combine_chunks(), f.type, table)
                         for f in FSMETA_SCHEMA], schema=FSMETA_SCHEMA)
    out = []
    for batch in batches:
        base = _unwiden(batch, table)
        columns, fields = list(base.columns), list(base.schema)
        for field in batch.schema:
            if field.name in BASE_NAMES:
                continue
            column = batch.column(field.name)
            typ = field.type
            if field.name == "pkg_type":
                typ = pa.int8()
            elif pa.types.is_large_string(typ):
                typ = pa.utf8()
            columns.append(_narrow(column, typ, table))
            fields.append(pa.field(field.name, typ, nullable=True))
        out.append(pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields)))
    return pa.Table.from_batches(out) if out else None


def rust_iceberg_source(src: RangeSource, path: str, warehouse: str | os.PathLike[str],
                        namespace: str | None = None) -> VirtualSource:
    """The Iceberg-backed archive whose blobs are ``src`` (the sidecar at ``path``) and
    whose tables are ``namespace`` (default: the one ``znippy compress`` named after the
    sidecar, :func:`namespace_of`) in ``warehouse``, as the archive the inline sink would
    have written: the sidecar's bytes, then a tail made in memory with one data sub-index
    per data table (its plugin columns kept) and ``__znippy_fsmeta__``."""
    ns = namespace or namespace_of(path)
    streams: list[tuple[GroupKey, bytes, int]] = []
    end = 0
    for table in rust_tables(warehouse, ns):
        rows = _as_written(table)
        if rows is None:
            continue
        if not table.reserved and rows.num_rows:
            _once_each(rows, ns, warehouse)
            last = max(o + n for o, n in zip(rows.column("blob_offset").to_pylist(),
                                              rows.column("blob_size").to_pylist()))
            end = max(end, last)
        streams.append((table.key, stream_bytes(rows), rows.num_rows))
    if end > src.size:
        raise FormatError(f"the tables of {ns!r} point past the sidecar's end ({end} > "
                          f"{src.size} bytes): not this archive's warehouse?", path=path)
    tail = make_tail(src.size, streams)
    pieces = [Piece(0, src.size, file_offset=0),
              Piece(src.size, len(tail), data=pa.py_buffer(tail))]
    return VirtualSource(src, pieces if src.size else pieces[1:], "iceberg")
