"""An archive's parts as Arrow tables that point into its memory map, checked cheaply.

``Archive.group_table`` validates every column, which touches every page of a sub-index. The
query layer must register an archive at a cost that does not grow with its rows, so it reads
each stream zero-copy and checks only what a scan needs to stay in bounds: the schema, the row
count against the manifest, each buffer's size, and that string offsets never run backwards
or past their data (4 bytes per row of each string column).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..reader import Archive
from ..schema import BASE_FIELDS, LOOKUP, LOOKUP_SCHEMA, RESERVED_PKG_TYPE, GroupKey

_STRINGS = (pa.utf8(), pa.binary())


def stream_table(archive: Archive, key: GroupKey, what: str) -> pa.Table:
    """The IPC stream of a manifest row, zero-copy, with bounds-relevant checks only."""
    row = archive.manifest_row(key)
    buf = archive.source.read(row.index_offset, row.index_len, what)
    try:
        table = pa.ipc.open_stream(buf).read_all()
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}",
                          path=archive.path) from None
    if table.num_rows != row.row_count:
        raise FormatError(f"{what} has {table.num_rows} rows, manifest says {row.row_count}",
                          path=archive.path)
    for name, column in zip(table.column_names, table.columns):
        for chunk in column.chunks:
            _check_array(chunk, f"{what} column {name!r}", archive.path)
    return table


def _check_array(arr: pa.Array, what: str, path: str) -> None:
    try:
        if arr.type in _STRINGS:
            _check_offsets(arr, what, path)
        else:
            arr.validate()
    except (pa.ArrowException, ValueError) as exc:
        raise FormatError(f"{what}: {exc}", path=path) from None


def _check_offsets(arr: pa.Array, what: str, path: str) -> None:
    validity, offsets, data = arr.buffers()
    n = len(arr)
    if validity is not None and validity.size * 8 < arr.offset + n:
        raise FormatError(f"{what}: validity bitmap too short", path=path)
    if n == 0:
        return
    if offsets is None or offsets.size < (arr.offset + n + 1) * 4:
        raise FormatError(f"{what}: offsets buffer too short", path=path)
    o = np.frombuffer(offsets, dtype="<i4", count=n + 1, offset=arr.offset * 4)
    limit = 0 if data is None else data.size
    if o[0] < 0 or o[-1] > limit or not bool((o[1:] >= o[:-1]).all()):
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
