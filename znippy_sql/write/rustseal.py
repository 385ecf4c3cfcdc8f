"""Seal a Rust hot archive here into the bytes the Rust ``HotArchive::seal`` writes.

A Rust hot archive (``znippy-common`` 0.9.13+, ``hot.rs``; read as it stands by
:mod:`znippy_sql.interop.hot`) is sealed by the Rust tool as follows, and so here:
``HotArchive::open`` takes the journal's live rows (every segment in number order, the last
row of a path at the place the path first appeared), cuts the blob file at the end of the
last live blob (``max(blob_offset + blob_size)``; a torn append's orphan bytes go), and
``seal`` writes after it, with ``ArrowIpcSink`` (``meta_sink.rs``): the rows as one data
sub-index ``(0, "", "")`` (skipped when there are none) under the journal's schema and its
schema metadata (``data_subindex_schema``: the writing host's configuration), the lookup
``__znippy_lookup__`` (the base columns, no schema metadata, sorted by path bytes then
``chunk_seq``), the fst ``__znippy_trie__`` (each path → its first lookup row), the manifest
stream, ``ZNPYMIDX`` and the manifest's offset (u64 LE), every stream right after the last,
written as arrow-rs writes it (:mod:`znippy_sql.interop.arrowrs`); then it removes the
journal segments. The file is written in place, as the Rust seal writes it, and made durable
before the segments go: a seal cut short leaves the journal, and the hot archive reads (and
seals) as before.
"""

from __future__ import annotations

import os
import struct

import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.footer import MAGIC as FOOTER_MAGIC
from ..format.fsio import write_all
from ..format.kernels import SortOptions, call_function, take
from ..format.schema import BASE_NAMES
from ..interop.arrowrs import stream_bytes
from ..interop.hot import blob_end, hot_rows, journal_segments
from ..interop.layouts import RUST_RESERVED_PKG_TYPE
from .tail import build_trie

#: the manifest's schema (``index.rs`` ``manifest_schema``)
MANIFEST_SCHEMA = pa.schema([pa.field("pkg_type", pa.int8(), nullable=False),
                             pa.field("repo", pa.utf8(), nullable=False),
                             pa.field("module_name", pa.utf8(), nullable=False),
                             pa.field("index_offset", pa.uint64(), nullable=False),
                             pa.field("index_len", pa.uint64(), nullable=False),
                             pa.field("row_count", pa.uint64(), nullable=False)])


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """``table`` as the one record batch the Rust sink writes (empty: a batch of no rows)."""
    table = table.combine_chunks()
    batches = table.to_batches()
    if batches:
        return batches[0]
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in table.schema],
                                      schema=table.schema)


def sealed_tail(rows: pa.Table, start: int) -> bytes:
    """What the Rust seal writes after the blobs ending at ``start``, for the live ``rows``
    (the journal's schema)."""
    parts: list[bytes] = []
    entries: list[tuple[int, str, int, int, int]] = []
    cursor = start

    def put(pkg_type: int, name: str, data: bytes, count: int) -> None:
        nonlocal cursor
        parts.append(data)
        entries.append((pkg_type, name, cursor, len(data), count))
        cursor += len(data)

    base = rows.select(list(BASE_NAMES))
    if rows.num_rows:
        data_schema = pa.schema([rows.schema.field(n) for n in BASE_NAMES],
                                metadata=rows.schema.metadata)
        # one record batch per chunk of ``rows`` (the hot journal's rows come as one; an
        # Iceberg-backed archive's as each table's decoded batches: write/rusticeberg.py)
        put(0, "", stream_bytes(base.cast(data_schema)), rows.num_rows)
    order = call_function("sort_indices", [base], SortOptions(
        [("relative_path", "ascending"), ("chunk_seq", "ascending")]))
    lookup = take(base, order).replace_schema_metadata(None)
    put(RUST_RESERVED_PKG_TYPE, "__znippy_lookup__", stream_bytes(_one_batch(lookup)),
        lookup.num_rows)
    put(RUST_RESERVED_PKG_TYPE, "__znippy_trie__", build_trie(lookup), 0)
    manifest = pa.table({
        "pkg_type": pa.array([e[0] for e in entries], pa.int8()),
        "repo": pa.array([""] * len(entries), pa.utf8()),
        "module_name": pa.array([e[1] for e in entries], pa.utf8()),
        "index_offset": pa.array([e[2] for e in entries], pa.uint64()),
        "index_len": pa.array([e[3] for e in entries], pa.uint64()),
        "row_count": pa.array([e[4] for e in entries], pa.uint64())}, schema=MANIFEST_SCHEMA)
    return b"".join([*parts, stream_bytes(_one_batch(manifest)), FOOTER_MAGIC,
                     struct.pack("<Q", cursor)])


def seal_rust_hot(path: str | os.PathLike[str]) -> int:
    """Seal the Rust hot archive at ``path`` as ``HotArchive::seal`` does (the module's
    docstring); the sealed archive's size. A file with no journal beside it is refused."""
    where = os.fspath(path)
    segments = journal_segments(where)
    if not segments or not os.path.isfile(where):
        raise ZnippyError("not a hot archive: no journal segment beside it", path=where)
    rows = hot_rows(where)
    if rows is None:
        raise FormatError("the journal holds no readable rows", path=where)
    end = blob_end(rows)
    try:
        if os.path.getsize(where) < end:
            raise FormatError(f"the journal's rows point past the blobs ({end} bytes)",
                              path=where)
        tail = sealed_tail(rows, end)
        fd = os.open(where, os.O_RDWR)
        try:
            os.ftruncate(fd, end)
            write_all(fd, tail, end)
            os.fsync(fd)
        finally:
            os.close(fd)
        for segment in segments:
            os.unlink(segment)
        folder = os.open(os.path.dirname(os.path.abspath(where)), os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        raise ZnippyError(f"cannot seal: {exc.strerror or exc}", path=where) from None
    return end + len(tail)
