"""The views read from the data sub-indexes, one group at a time: ``files``, ``chunks``,
``groups``.

``files``: one row per file. Columns, in order: ``relative_path``, ``repo``, ``pkg_type``
(Int8), ``pkg_type_name``, ``module_name``, ``size`` (sum of ``uncompressed_size``),
``stored_size`` (the file's share of the blobs its chunks point at, :mod:`.shares`: a sum
over any files is at most the bytes the archive spends on them), ``blob_size`` (sum of its
chunks' ``blob_size``: the bytes a read of the file fetches, a packed or dedup-shared blob
counted whole), ``chunks`` (UInt32), ``compressed`` (true when any chunk is stored compressed), ``digest`` (the file digest of FORMAT §4), then the package-type
modules' own columns taken from the ``chunk_seq = 0`` row (nullable; the union over the
archive's groups).

``chunks``: a sub-index's rows: its base columns, ``inner_offset`` in an archive with packed
blobs (FORMAT §3), the group's ``repo``, ``pkg_type``, ``pkg_type_name``, ``module_name``, then
its module columns (as ``files``).

``groups``: one row per data group: its manifest row (``pkg_type``, ``pkg_type_name``,
``repo``, ``module_name``, ``index_offset``, ``index_len``, ``row_count``) and what it holds
(``files``, ``size``, ``stored_size`` = the sum of its files' shares, ``compressed_chunks``);
the sub-index is read only when one of those is asked for (and every sub-index for
``stored_size``: a blob may be shared across groups).

A group's rows are in canonical order, so each file's chunks are contiguous and in
``chunk_seq`` order; the per-file sums are ``reduceat`` over the positions of the
``chunk_seq = 0`` rows. A sub-index whose rows are not in that shape is sorted first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format import build
from ..format.files import file_digests, file_starts
from ..format.kernels import call_function, one_array, take
from ..format.schema import BASE_FIELDS, BASE_NAMES, INNER, INNER_FIELD, GroupKey
from ..modules.pkgtypes import pkg_type_name
from ..format.validate import union_problem
from ..read.reader import Archive, group_what
from .base import Request, View
from .heads import group_schemas
from .shares import SHARE, group_shares, with_shares

#: the columns every row of a data group shares (a predicate on them prunes groups)
GROUP_FIELDS: tuple[pa.Field, ...] = (
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("pkg_type", pa.int8(), nullable=False),
    pa.field("pkg_type_name", pa.utf8(), nullable=False),
    pa.field("module_name", pa.utf8(), nullable=False),
)
GROUP_COLUMNS: tuple[str, ...] = tuple(f.name for f in GROUP_FIELDS)
FILES_FIELDS: tuple[pa.Field, ...] = (
    pa.field("relative_path", pa.utf8(), nullable=False),
    *GROUP_FIELDS,
    pa.field("size", pa.uint64(), nullable=False),
    pa.field("stored_size", pa.uint64(), nullable=False),
    pa.field("blob_size", pa.uint64(), nullable=False),
    pa.field("chunks", pa.uint32(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("digest", pa.binary(32), nullable=False),
)
FILES_NAMES: tuple[str, ...] = tuple(f.name for f in FILES_FIELDS)
GROUPS_SCHEMA = pa.schema([
    pa.field("pkg_type", pa.int8(), nullable=False),
    pa.field("pkg_type_name", pa.utf8(), nullable=False),
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("module_name", pa.utf8(), nullable=False),
    pa.field("index_offset", pa.uint64(), nullable=False),
    pa.field("index_len", pa.uint64(), nullable=False),
    pa.field("row_count", pa.uint64(), nullable=False),
    pa.field("files", pa.uint64(), nullable=False),
    pa.field("size", pa.uint64(), nullable=False),
    pa.field("stored_size", pa.uint64(), nullable=False),
    pa.field("compressed_chunks", pa.uint64(), nullable=False),
])
_GROUP_STATS = ("files", "size", "stored_size", "compressed_chunks")


def module_fields(schema: pa.Schema) -> list[pa.Field]:
    """A sub-index's module columns: everything after the base columns, ``inner_offset``
    (packed blobs) and ``pkg_type``."""
    return [f for f in schema if f.name not in BASE_NAMES and f.name not in (INNER, "pkg_type")]


def files_schema(extra: Sequence[pa.Field] = ()) -> pa.Schema:
    return pa.schema([*FILES_FIELDS, *extra])


def archive_module_fields(archive: Archive) -> list[pa.Field]:
    """The module columns of an archive's groups (nullable, first appearance order),
    refused when two groups disagree on a column's type."""
    keys = archive.groups
    schemas = group_schemas(archive, keys)
    problem = union_problem((group_what(k), s) for k, s in zip(keys, schemas))
    if problem is not None:
        raise FormatError(problem, path=archive.path)
    extra: dict[str, pa.Field] = {}
    for schema in schemas:
        for f in module_fields(schema):
            extra.setdefault(f.name, f.with_nullable(True))
    return list(extra.values())


def group_constants(key: GroupKey, n: int, want: Request | None = None) -> dict[str, pa.Array]:
    values = {"repo": key.repo, "pkg_type": key.pkg_type,
              "pkg_type_name": pkg_type_name(key.pkg_type), "module_name": key.module_name}
    return {f.name: build.repeat(values[f.name], f.type, n) for f in GROUP_FIELDS
            if want is None or want.wants(f.name)}


# -- files ------------------------------------------------------------------------------------
def _numpy(col: Any) -> np.ndarray:
    return build.numpy_of(one_array(col))  # never to_numpy: it imports pandas


def _contiguous(table: pa.Table) -> pa.Table:
    """``table`` with each file's chunks contiguous and in order (sorted only if needed)."""
    seq = _numpy(table.column("chunk_seq"))
    n = len(seq)
    if n == 0:
        return table
    starts = file_starts(seq)
    if len(starts) == n:
        return table
    counts = np.diff(np.append(starts, n))
    expected = np.arange(n) - np.repeat(starts, counts) if len(starts) and starts[0] == 0 else None
    if expected is not None and np.array_equal(seq, expected):
        paths = one_array(table.column("relative_path"))
        first = take(paths, np.repeat(starts, counts))
        if bool(call_function("all", [call_function("equal", [paths, first])]).as_py()):
            return table
    return table.sort_by([("relative_path", "ascending"), ("chunk_seq", "ascending")])


def files_of_group(table: pa.Table, key: GroupKey, *, columns: Sequence[str] | None = None,
                   shares: np.ndarray | None = None) -> pa.Table:
    """The ``files`` rows of one group (``table`` = its sub-index rows), only ``columns``
    (in the view's order) if given; the one place a file row is computed. ``stored_size``
    needs ``shares``: the group's row shares (:func:`.shares.group_shares`)."""
    schema = files_schema(module_fields(table.schema))
    want = list(schema.names) if columns is None else [c for c in schema.names if c in columns]
    if "stored_size" in want:
        if shares is None:
            raise ValueError("stored_size needs the group's shares (views.shares)")
        table = with_shares(table, shares)
    table = _contiguous(table)
    n = table.num_rows
    starts = file_starts(table.column("chunk_seq"))
    single = len(starts) == n
    nfiles = len(starts)
    first = table if single else table.take(build.arrow_of(starts))
    consts = group_constants(key, nfiles)

    def summed(name: str) -> pa.Array:
        if single:
            return table.column(name)
        values = _numpy(table.column(name)).astype(np.uint64)
        return build.arrow_of(np.add.reduceat(values, starts) if nfiles else values[:0])

    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in want:
        if name in consts:
            out[name] = consts[name]
        elif name == "relative_path":
            out[name] = first.column(name)
        elif name == "size":
            out[name] = summed("uncompressed_size")
        elif name == "stored_size":
            out[name] = summed(SHARE)
        elif name == "blob_size":
            out[name] = summed("blob_size")
        elif name == "chunks":
            counts = np.diff(np.append(starts, n)) if nfiles else np.zeros(0)
            out[name] = build.arrow_of(counts.astype(np.uint32))
        elif name == "compressed":
            if single:
                out[name] = table.column("compressed")
            else:
                flags = _numpy(table.column("compressed")).astype(np.uint8)
                any_ = np.maximum.reduceat(flags, starts) if nfiles else flags[:0]
                out[name] = build.arrow_of(any_.astype(bool))
        elif name == "digest":
            out[name] = file_digests(first.column("relative_path"), table.column("checksum"),
                                     starts)
        else:
            out[name] = first.column(name)
    return pa.table(out, schema=pa.schema([schema.field(c) for c in want]))


def _groups(archive: Archive, request: Request) -> tuple[GroupKey, ...]:
    return tuple(archive.groups) if request.groups is None else request.groups


def _read_files(archive: Archive, request: Request) -> Iterator[pa.Table]:
    stored = request.wants("stored_size")
    for key in _groups(archive, request):
        yield files_of_group(archive.group_table(key), key, columns=request.columns,
                             shares=group_shares(archive, key) if stored else None)


def _group_cost(archive: Archive, groups: tuple[GroupKey, ...] | None) -> int:
    keys = archive.groups if groups is None else groups
    return sum(archive.manifest_row(k).index_len for k in keys)


FILES = View("files", lambda a: files_schema(archive_module_fields(a)), _read_files,
             grouped=True, cost=_group_cost, doc="one row per file")


# -- chunks -----------------------------------------------------------------------------------
def chunks_of_group(table: pa.Table, key: GroupKey, request: Request | None = None) -> pa.Table:
    """A sub-index's rows: base columns, ``inner_offset`` (packed blobs), the group's
    constant columns, module columns."""
    want = (lambda c: True) if request is None else request.wants
    n = table.num_rows
    consts = group_constants(key, n, request)
    cols: dict[str, Any] = {}
    fields = []
    inner = [INNER_FIELD] if INNER in table.schema.names else []
    for f in [*BASE_FIELDS, *inner, *GROUP_FIELDS, *module_fields(table.schema)]:
        if want(f.name):
            cols[f.name] = consts[f.name] if f.name in consts else table.column(f.name)
            fields.append(table.schema.field(f.name) if f.name in table.schema.names else f)
    return pa.table(cols, schema=pa.schema(fields))


def _read_chunks(archive: Archive, request: Request) -> Iterator[pa.Table]:
    for key in _groups(archive, request):
        yield chunks_of_group(archive.group_table(key), key, request)


def _chunks_schema(archive: Archive) -> pa.Schema:
    """Packed blobs (FORMAT §3): ``inner_offset`` after the base columns, when any group has it."""
    extra = archive_module_fields(archive)
    packed = any(INNER in s.names for s in group_schemas(archive, archive.groups))
    return pa.schema([*BASE_FIELDS, *([INNER_FIELD] if packed else []), *GROUP_FIELDS, *extra])


CHUNKS = View("chunks", _chunks_schema,
              _read_chunks, grouped=True, cost=_group_cost, doc="one row per chunk")


# -- groups -----------------------------------------------------------------------------------
def group_stats(table: pa.Table, shares: np.ndarray | None) -> dict[str, int]:
    """What a data group holds: files, bytes, stored bytes (the sum of its rows'
    ``shares``; 0 without them), compressed chunks."""
    seq = _numpy(table.column("chunk_seq"))
    return {"files": len(file_starts(seq)),
            "size": int(_numpy(table.column("uncompressed_size")).sum(dtype=np.uint64)),
            "stored_size": 0 if shares is None else int(shares.sum(dtype=np.uint64)),
            "compressed_chunks": int(np.count_nonzero(_numpy(table.column("compressed"))))}


def _read_groups(archive: Archive, request: Request) -> Iterator[pa.Table]:
    keys = _groups(archive, request)
    stats = any(request.wants(c) for c in _GROUP_STATS)
    rows: dict[str, list[Any]] = {f.name: [] for f in GROUPS_SCHEMA}
    for key in keys:
        row = archive.manifest_row(key)
        values: dict[str, Any] = {
            "pkg_type": key.pkg_type, "pkg_type_name": pkg_type_name(key.pkg_type),
            "repo": key.repo, "module_name": key.module_name, "index_offset": row.index_offset,
            "index_len": row.index_len, "row_count": row.row_count}
        shares = group_shares(archive, key) if request.wants("stored_size") else None
        values.update(group_stats(archive.group_table(key), shares) if stats
                      else dict.fromkeys(_GROUP_STATS, 0))
        for name, value in values.items():
            rows[name].append(value)
    # a few rows: not worth the Arrow pool's first reservation, nor pyarrow's converters (which
    # import pandas where it is installed: format/build.py)
    yield build.table(rows, GROUPS_SCHEMA, pa.system_memory_pool())


GROUPS = View("groups", lambda a: GROUPS_SCHEMA, _read_groups, grouped=True,
              cost=_group_cost, doc="one row per data group")
