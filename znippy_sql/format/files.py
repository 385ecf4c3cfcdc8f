"""The per-file ``files`` table: one row per file, built from a group's chunk rows.

Columns, in order: ``relative_path``, ``repo``, ``pkg_type`` (Int8), ``pkg_type_name``,
``module``, ``size`` (sum of ``uncompressed_size``), ``stored_size`` (sum of ``blob_size``),
``chunks`` (UInt32), ``compressed`` (true when any chunk is stored compressed), ``digest``
(the file digest of FORMAT §4), then the module's own columns taken from the ``chunk_seq = 0``
row.

A group's rows are in canonical order, so each file's chunks are contiguous and in
``chunk_seq`` order; the per-file sums are ``reduceat`` over the positions of the
``chunk_seq = 0`` rows. A sub-index whose rows are not in that shape is sorted first.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import blake3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .kernels import one_array
from .schema import BASE_NAMES, INNER, GroupKey, pkg_type_name

#: FORMAT §4: the file digest starts with this domain-separation prefix.
FILE_DIGEST_PREFIX = b"znippy-file-v1\0"

FILES_FIELDS: tuple[pa.Field, ...] = (
    pa.field("relative_path", pa.utf8(), nullable=False),
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("pkg_type", pa.int8(), nullable=False),
    pa.field("pkg_type_name", pa.utf8(), nullable=False),
    pa.field("module", pa.utf8(), nullable=False),
    pa.field("size", pa.uint64(), nullable=False),
    pa.field("stored_size", pa.uint64(), nullable=False),
    pa.field("chunks", pa.uint32(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("digest", pa.binary(32), nullable=False),
)
FILES_NAMES: tuple[str, ...] = tuple(f.name for f in FILES_FIELDS)
#: Columns that are the same for every row of a group: a predicate on them prunes groups.
GROUP_COLUMNS: tuple[str, ...] = ("repo", "pkg_type", "pkg_type_name", "module")


def file_digest(path: str, checksums: Sequence[bytes]) -> bytes:
    """BLAKE3 over the prefix, the path, NUL, the chunk count, then (chunk_seq, checksum)s."""
    h = blake3.blake3(FILE_DIGEST_PREFIX)
    h.update(path.encode("utf-8"))
    h.update(b"\0")
    h.update(struct.pack("<I", len(checksums)))
    for seq, checksum in enumerate(checksums):
        h.update(struct.pack("<I", seq))
        h.update(checksum)
    return h.digest()


def module_fields(schema: pa.Schema) -> list[pa.Field]:
    """A sub-index's module columns: everything after the base columns, ``inner_offset``
    (packed blobs) and ``pkg_type``."""
    return [f for f in schema if f.name not in BASE_NAMES and f.name not in (INNER, "pkg_type")]


def files_schema(extra: Sequence[pa.Field] = ()) -> pa.Schema:
    return pa.schema([*FILES_FIELDS, *extra])


def _contiguous(table: pa.Table) -> pa.Table:
    """``table`` with each file's chunks contiguous and in order (sorted only if needed)."""
    seq = _numpy(table.column("chunk_seq"))
    n = len(seq)
    if n == 0:
        return table
    starts = np.flatnonzero(seq == 0)
    if len(starts) == n:
        return table
    counts = np.diff(np.append(starts, n))
    expected = np.arange(n) - np.repeat(starts, counts) if len(starts) and starts[0] == 0 else None
    if expected is not None and np.array_equal(seq, expected):
        paths = table.column("relative_path")
        first = pc.take(paths, pa.array(np.repeat(starts, counts)))
        if pc.all(pc.equal(paths, first)).as_py():
            return table
    return table.sort_by([("relative_path", "ascending"), ("chunk_seq", "ascending")])


def _numpy(col: pa.ChunkedArray) -> np.ndarray:
    arr = one_array(col)
    return arr.to_numpy(zero_copy_only=False)


def files_table(table: pa.Table, key: GroupKey, *, columns: Sequence[str] | None = None
                ) -> pa.Table:
    """The files of one group (``table`` = its sub-index rows), only ``columns`` if given."""
    extra = module_fields(table.schema)
    schema = files_schema(extra)
    want = list(schema.names) if columns is None else [c for c in schema.names if c in columns]
    table = _contiguous(table)
    n = table.num_rows
    seq = _numpy(table.column("chunk_seq"))
    starts = np.flatnonzero(seq == 0)
    single = len(starts) == n
    nfiles = len(starts)
    first = table if single else table.take(pa.array(starts))

    def summed(name: str) -> pa.Array:
        if single:
            return table.column(name)
        values = _numpy(table.column(name)).astype(np.uint64)
        return pa.array(np.add.reduceat(values, starts) if nfiles else values[:0], pa.uint64())

    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in want:
        if name == "relative_path":
            out[name] = first.column(name)
        elif name == "repo":
            out[name] = pa.repeat(pa.scalar(key.repo, pa.utf8()), nfiles)
        elif name == "pkg_type":
            out[name] = pa.repeat(pa.scalar(key.pkg_type, pa.int8()), nfiles)
        elif name == "pkg_type_name":
            out[name] = pa.repeat(pa.scalar(pkg_type_name(key.pkg_type), pa.utf8()), nfiles)
        elif name == "module":
            out[name] = pa.repeat(pa.scalar(key.module_name, pa.utf8()), nfiles)
        elif name == "size":
            out[name] = summed("uncompressed_size")
        elif name == "stored_size":
            out[name] = summed("blob_size")
        elif name == "chunks":
            counts = np.diff(np.append(starts, n)) if nfiles else np.zeros(0)
            out[name] = pa.array(counts.astype(np.uint32), pa.uint32())
        elif name == "compressed":
            if single:
                out[name] = table.column("compressed")
            else:
                flags = _numpy(table.column("compressed")).astype(np.uint8)
                any_ = np.maximum.reduceat(flags, starts) if nfiles else flags[:0]
                out[name] = pa.array(any_.astype(bool), pa.bool_())
        elif name == "digest":
            out[name] = pa.array(_digests(first.column("relative_path"),
                                          table.column("checksum"), starts, n), pa.binary(32))
        else:
            out[name] = first.column(name)
    return pa.table(out, schema=pa.schema([schema.field(c) for c in want]))


def _digests(paths: pa.ChunkedArray, checksums: pa.ChunkedArray, starts: np.ndarray,
             n: int) -> list[bytes]:
    """The file digest of every file: ``starts`` are the rows where each file begins."""
    names = paths.to_pylist()
    sums = checksums.combine_chunks()
    raw = sums.buffers()[1]
    blob = b"" if raw is None else raw.to_pybytes()[sums.offset * 32 : (sums.offset + n) * 32]
    ends = np.append(starts[1:], n)
    return [
        file_digest(name, [blob[r * 32 : r * 32 + 32] for r in range(int(s), int(e))])
        for name, s, e in zip(names, starts, ends)
    ]
