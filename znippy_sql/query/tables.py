"""An archive's parts as Arrow sources for DuckDB and Polars: checked cheaply when registered,
in full the first time a query scans them, and refused once the file has changed.

Registering must cost little whatever the archive's size, so :func:`stream_table` reads each
stream zero-copy and checks only what a scan needs to stay in bounds: the messages (no
compressed body, buffers inside their body: ``format/ipc.py``), the schema (the closed set of
``format/validate.py``), the row count against the manifest, and that string offsets never
run backwards or past their data (4 bytes per row). The offsets are read through a second,
short-lived memory map of the file that is unmapped right after the check, so the pages they
touch do not stay resident in this process.

The rows reach DuckDB through an :class:`ArrowPart`, an Arrow PyCapsule source: DuckDB asks
for its schema when it binds a query and for its stream only when it scans it (a group pruned
by a filter is never asked). At that moment the part checks that the file is still the one
registered (:class:`Stamp`: inode, size, mtime, footer), then takes the table from the
:class:`~znippy_sql.read.reader.Archive`, which checks the range's BLAKE3 (when recorded),
validates every array in full (UTF-8 included) and the ranges of its values, once.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.footer import FOOTER_LEN
from ..format.ipc import ARROW_ERRORS, checked_reader
from ..format.schema import LOOKUP, RESERVED_PKG_TYPE, GroupKey
from ..format.validate import (lookup_schema_problem, portable, portable_schema,
                               subindex_schema_problem)
from ..read.foreign import noted
from ..read.reader import Archive, group_what

_STRINGS = (pa.utf8(), pa.binary())
CHANGED = "archive changed since it was registered; register it again"


@dataclass(frozen=True)
class Stamp:
    """What identifies the bytes of an archive file: inode, size, mtime and its footer.

    An in-place append rewrites the tail and the footer; a rename puts another inode in place.
    """

    path: str
    ino: int
    size: int
    mtime_ns: int
    footer: bytes

    @classmethod
    def of(cls, path: str) -> "Stamp":
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                footer = os.pread(fh.fileno(), FOOTER_LEN, max(st.st_size - FOOTER_LEN, 0))
        except OSError as exc:
            raise ZnippyError(f"cannot read: {exc.strerror or exc}", path=path) from None
        return cls(path, st.st_ino, st.st_size, st.st_mtime_ns, footer)

    def check(self) -> None:
        """Raise when the file is no longer the one this stamp was taken of."""
        try:
            now = Stamp.of(self.path)
        except ZnippyError:
            raise ZnippyError(CHANGED + " (it is gone)", path=self.path) from None
        if now != self:
            raise ZnippyError(CHANGED, path=self.path)


class ArrowPart:
    """One table of a registered archive, as an Arrow PyCapsule source (see the module
    docstring): ``load`` runs at the first scan, after the stamp check, and is kept."""

    def __init__(self, schema: pa.Schema, load: Callable[[], pa.Table], stamp: Stamp | None,
                 what: str) -> None:
        self.schema = schema
        self._load = load
        self._table: pa.Table | None = None
        self._lock = threading.Lock()  # DuckDB may scan one source from two threads at once
        self.stamp = stamp
        self.what = what

    def table(self) -> pa.Table:
        if self.stamp is not None:
            self.stamp.check()
        with self._lock:
            if self._table is None:
                table = self._load()
                if not table.schema.equals(self.schema):
                    raise FormatError(f"{self.what}: its schema changed since it was "
                                      "registered", path=self.stamp.path if self.stamp else None)
                self._table = table
            return self._table

    def __arrow_c_schema__(self) -> Any:
        return self.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.table().__arrow_c_stream__(requested_schema)


def stream_table(archive: Archive, key: GroupKey, what: str,
                 check: Callable[[pa.Schema], str | None] | None = None) -> pa.Table:
    """The IPC stream of a manifest row, zero-copy, with bounds-relevant checks only."""
    row = archive.manifest_row(key)
    buf = archive.source.read(row.index_offset, row.index_len, what)
    try:
        table = checked_reader(buf, what, archive.path, check_schema=check).read_all()
    except FormatError:
        raise
    except ARROW_ERRORS as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}",
                          path=archive.path) from None
    if table.num_rows != row.row_count:
        raise FormatError(f"{what} has {table.num_rows} rows, manifest says {row.row_count}",
                          path=archive.path)
    with _side_map(archive) as view:
        for name, column in zip(table.column_names, table.columns):
            for chunk in column.chunks:
                _check_array(chunk, f"{what} column {name!r}", archive.path, view)
    return table


def group_table(archive: Archive, key: GroupKey) -> pa.Table:
    """A sub-index checked cheaply (see the module docstring)."""
    try:
        return portable(stream_table(archive, key, group_what(key), subindex_schema_problem))
    except ZnippyError as exc:  # on a newer writer's archive, the error names its version
        raise noted(archive, exc) from None


def section_table(archive: Archive, name: str) -> pa.Table:
    """An Arrow reserved section (``__lookup__``, ``__meta__``, ``__gunnar_graph__``, ...)."""
    def exact(schema: pa.Schema) -> str | None:
        if name == LOOKUP and lookup_schema_problem(schema) is not None:
            return "does not have the base columns"
        return None

    return stream_table(archive, GroupKey(RESERVED_PKG_TYPE, "", name), name, exact)


@contextmanager
def _side_map(archive: Archive) -> Iterator["_View"]:
    """A throw-away read-only map of the archive, for reading offsets without keeping them."""
    base = getattr(archive.source, "buffer", None)
    if base is None or archive.source.size == 0:  # another kind of source: check in place
        yield _View(None, base)
        return
    with open(archive.path, "rb") as fh, \
            mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = _View(mm, base)
        try:
            yield view
        finally:
            view.mm = None


class _View:
    def __init__(self, mm: mmap.mmap | None, base: pa.Buffer | None) -> None:
        self.mm = mm
        self.base = base

    def int32s(self, buf: pa.Buffer, first: int, count: int) -> np.ndarray:
        """``count`` int32 values of ``buf`` from element ``first``, via the side map."""
        start = buf.address - self.base.address if self.base is not None else -1
        if self.mm is not None and self.base is not None and 0 <= start \
                and start + buf.size <= self.base.size and len(self.mm) >= self.base.size:
            return np.frombuffer(self.mm, dtype="<i4", count=count, offset=start + first * 4)
        return np.frombuffer(buf, dtype="<i4", count=count, offset=first * 4)


_BLOCK = 1 << 16


def _offsets_ok(o: np.ndarray, n: int, limit: int) -> bool:
    """Non-decreasing, from >= 0 to <= limit; scanned in blocks (no row-sized temporaries).
    Returns a plain bool so no view of the side map outlives this call."""
    if int(o[0]) < 0 or int(o[-1]) > limit:
        return False
    for start in range(0, n, _BLOCK):
        block = o[start : start + _BLOCK + 1]
        if not bool((block[1:] >= block[:-1]).all()):
            return False
    return True


def _check_array(arr: pa.Array, what: str, path: str, view: _View) -> None:
    try:
        if arr.type in _STRINGS:
            _check_offsets(arr, what, path, view)
        else:
            arr.validate()
    except (pa.ArrowException, ValueError) as exc:
        raise FormatError(f"{what}: {exc}", path=path) from None


def _check_offsets(arr: pa.Array, what: str, path: str, view: _View) -> None:
    validity, offsets, data = arr.buffers()
    n = len(arr)
    if validity is not None and validity.size * 8 < arr.offset + n:
        raise FormatError(f"{what}: validity bitmap too short", path=path)
    if n == 0:
        return
    if offsets is None or offsets.size < (arr.offset + n + 1) * 4:
        raise FormatError(f"{what}: offsets buffer too short", path=path)
    limit = 0 if data is None else data.size
    if not _offsets_ok(view.int32s(offsets, arr.offset, n + 1), n, limit):
        raise FormatError(f"{what}: string offsets out of order or past their data", path=path)
