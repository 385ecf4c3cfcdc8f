"""Live views of a dynamic store: the same ``<name>_files``, ``<name>_chunks``, ... as an archive.

A store has no tail; :func:`snapshot` makes one. It reads every group's committed rows through
pyiceberg (canonical order, exact types) and writes the tail a seal would write into a small
temporary file whose blob region is a hole (no bytes on disk). The result, a
:class:`StoreArchive`, is an ordinary :class:`~znippy_sql.read.reader.Archive` over that file, except
that blob ranges are read from the sidecar. So the archive query layer is reused whole:
``register_store`` is :func:`znippy_sql.duckdb.register` of the snapshot, ``scan_store`` is
:func:`znippy_sql.polars.scan` of it, and file contents (``read``, ``znippy_cat``) come from the
sidecar, verified against their BLAKE3.

A snapshot is a point in time: call ``register_store`` again to see later commits. Blob bytes
below a snapshot's ``blob_end`` never change (the store only appends, and only truncates
orphans past its committed end), so a snapshot stays readable while the store grows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa

from ..errors import FormatError
from ..format.rangeio import MappedSource, RangeSource
from ..format.schema import GroupKey
from ..read.reader import Archive
from ..write.options import WriteOptions
from ..write.tail import write_tail

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class Store(Protocol):
    """What a snapshot reads of a live store (:class:`~znippy_sql.store.dynamic.Store` is
    one)."""

    namespace: str
    sidecar: str
    options: WriteOptions

    def group_rows(self) -> dict[GroupKey, pa.Table]: ...


#: name → the snapshot its DuckDB views read (kept alive while registered)
_REGISTERED: dict[tuple[int, str], "StoreArchive"] = {}


class _SplitSource:
    """Blob ranges from the sidecar, everything else (the tail) from the snapshot file."""

    def __init__(self, tail: RangeSource, sidecar: str, blob_end: int) -> None:
        self.tail = tail
        self.blobs = MappedSource(sidecar)
        if self.blobs.size < blob_end:
            raise FormatError(f"sidecar is {self.blobs.size} bytes, its rows reach {blob_end}",
                              path=sidecar)
        self.blob_end = blob_end
        self.path = tail.path
        self.size = tail.size
        self._counted = 0  # what the callers of view() counted

    @property
    def bytes_read(self) -> int:
        return self.tail.bytes_read + self.blobs.bytes_read + self._counted

    @bytes_read.setter
    def bytes_read(self, value: int) -> None:  # the reader adds what it viewed
        self._counted += value - self.bytes_read

    def check(self, offset: int, length: int, what: str) -> None:
        self.tail.check(offset, length, what)

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        if 0 <= offset and offset + length <= self.blob_end and length >= 0:
            return self.blobs.read(offset, length, what)
        return self.tail.read(offset, length, what)

    fetches = False

    def view(self, offset: int, length: int) -> memoryview:
        if 0 <= offset and offset + length <= self.blob_end and length >= 0:
            return self.blobs.view(offset, length)
        return self.tail.view(offset, length)

    def prefetch(self, offsets: object, lengths: object, *, keep: bool = False) -> None:
        pass

    def release(self, offset: int, length: int) -> None:
        self.blobs.release(offset, length)

    def close(self) -> None:
        self.tail.close()
        self.blobs.close()


class StoreArchive(Archive):
    """A store snapshot as an :class:`Archive`; ``close()`` removes its temporary tail file."""

    def __init__(self, path: str, sidecar: str, blob_end: int, *,
                 verify_checksums: bool = True) -> None:
        super().__init__(path, verify_checksums=verify_checksums)
        self.sidecar = sidecar
        self.source = _SplitSource(self.source, sidecar, blob_end)
        self._cleanup = weakref.finalize(self, shutil.rmtree, os.path.dirname(path), True)

    def close(self) -> None:
        super().close()
        self._cleanup()


def snapshot(store: "Store", *, name: str | None = None) -> StoreArchive:
    """The store's committed state as an archive view (see the module docstring)."""
    groups = store.group_rows()
    blob_end = 0
    for t in groups.values():
        ends = pa.compute.add(t.column("blob_offset"), t.column("blob_size"))
        blob_end = max(blob_end, int(pa.compute.max(ends).as_py()))
    folder = tempfile.mkdtemp(prefix="znippy-store-")
    path = os.path.join(folder, f"{name or store.namespace}.znippy")
    try:
        with open(path, "w+b") as fh:
            os.ftruncate(fh.fileno(), blob_end)  # a hole: the blobs stay in the sidecar
            write_tail(fh, blob_end, groups, schema_metadata=store.options.schema_metadata(),
                       fsync=False)
        return StoreArchive(path, store.sidecar, blob_end)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def register_store(con: "duckdb.DuckDBPyConnection", store: "Store",
                   name: str | None = None) -> str:
    """Create ``<name>_files``, ``<name>_chunks``, ... over the store's committed rows.

    The views are those :func:`znippy_sql.duckdb.register` makes for an archive; ``name``
    defaults to the store's namespace. Returns the name used.
    """
    from ..query import duckdb as zduckdb

    view_name = zduckdb.sanitize_name(name or store.namespace)
    snap = snapshot(store, name=view_name)
    try:
        zduckdb.register(con, snap.path, view_name)
    except BaseException:
        snap.close()
        raise
    _bind_content(snap)
    old = _REGISTERED.pop((id(con), view_name), None)
    _REGISTERED[(id(con), view_name)] = snap
    if old is not None:
        old.close()
    return view_name


def _bind_content(snap: StoreArchive) -> None:
    """Point the content UDFs (``znippy_read`` ...) for the snapshot's path at the snapshot,
    whose blobs come from the sidecar (a plain open of the file would see the hole)."""
    from znippy_sql.udfs import archive_udfs

    archive_udfs.bind_archive(snap.path, snap)


def scan_store(store: "Store", section: str = "files") -> "pl.LazyFrame":
    """A Polars lazy scan of the store's ``files`` (or ``chunks``, ``lookup``, ...)."""
    from ..query import polars as zpolars

    return zpolars.scan(snapshot(store), section)  # type: ignore[arg-type]  # checked there


def unregister_store(con: "duckdb.DuckDBPyConnection", name: str) -> None:
    """Drop the views and the snapshot ``register_store`` made for ``name``."""
    from ..query import duckdb as zduckdb

    zduckdb.unregister(con, name)
    snap = _REGISTERED.pop((id(con), name), None)
    if snap is not None:
        snap.close()
