"""An archive's parts as Arrow tables that point into its memory map, checked cheaply.

``Archive.group_table`` validates every column, which touches every page of a sub-index. The
query layer must register an archive at a cost that does not grow with its rows, so it reads
each stream zero-copy and checks only what a scan needs to stay in bounds: the schema, the row
count against the manifest, each buffer's size, and that string offsets never run backwards
or past their data (4 bytes per row of each string column).

The offsets are read through a second, short-lived memory map of the file that is unmapped
right after the check, so the pages they touch do not stay resident in this process: the
resident cost of registering an archive stays flat while the check itself is a linear read.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import names_problem, read_options
from ..read.reader import Archive
from ..format.schema import BASE_FIELDS, LOOKUP, LOOKUP_SCHEMA, RESERVED_PKG_TYPE, GroupKey

_STRINGS = (pa.utf8(), pa.binary())


def stream_table(archive: Archive, key: GroupKey, what: str) -> pa.Table:
    """The IPC stream of a manifest row, zero-copy, with bounds-relevant checks only."""
    row = archive.manifest_row(key)
    buf = archive.source.read(row.index_offset, row.index_len, what)
    try:
        table = pa.ipc.open_stream(buf, options=read_options(buf)).read_all()
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}",
                          path=archive.path) from None
    if table.num_rows != row.row_count:
        raise FormatError(f"{what} has {table.num_rows} rows, manifest says {row.row_count}",
                          path=archive.path)
    problem = names_problem(table.schema)
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=archive.path)
    with _side_map(archive) as view:
        for name, column in zip(table.column_names, table.columns):
            for chunk in column.chunks:
                _check_array(chunk, f"{what} column {name!r}", archive.path, view)
    return table


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
        if self.mm is not None and self.base is not None and 0 <= start and start + buf.size <= self.base.size \
                and len(self.mm) >= self.base.size:
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


def group_table(archive: Archive, key: GroupKey) -> pa.Table:
    what = f"sub-index {key.pkg_type}/{key.repo!r}/{key.module_name!r}"
    table = stream_table(archive, key, what)
    head = list(table.schema)[: len(BASE_FIELDS)]
    if len(head) < len(BASE_FIELDS) or not pa.schema(head).equals(LOOKUP_SCHEMA):
        raise FormatError(f"{what} does not start with the base columns", path=archive.path)
    return table


def section_table(archive: Archive, name: str) -> pa.Table:
    """An Arrow reserved section (``__lookup__``, ``__meta__``, ``__gunnar_graph__``, ...)."""
    table = stream_table(archive, GroupKey(RESERVED_PKG_TYPE, "", name), name)
    if name == LOOKUP and not table.schema.equals(LOOKUP_SCHEMA):
        raise FormatError(f"{LOOKUP} does not have the base columns", path=archive.path)
    return table
