"""The seal: a dynamic store frozen into an ordinary static archive.

The sidecar's blob region ``[0, blob_end)`` is copied verbatim (``copy_file_range``: no
decompression, no hashing), so every row keeps its ``blob_offset``; the rows come back from
Iceberg in canonical order and :func:`~znippy_sql.write.tail.write_tail` writes the tail a one-shot
writer would write. Staging sibling (``write/staging.py``: those a killed seal left are
removed first), fsync, atomic rename, parent-directory fsync: the output name never holds a
half-written archive.

``blob_end`` is the end of the last live blob. Sidecar bytes past it (orphans of a crashed add)
are skipped; dead bytes inside it (replaced files, orphans of a crash between two table
commits) are copied like any blob region bytes and reported. Only a store whose live rows
cover ``[0, blob_end)`` without gaps — e.g. one that received A, then B, no path twice — seals
byte-identical to ``write_archive(A then B)``; with gaps the blob offsets differ from any
one-shot's (docs/lifecycle.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc

from ..errors import StoreError
from ..write.dedup import distinct_blob_bytes
from ..write.tail import write_tail
from ..format.fsio import copy_range
from ..write.ingest import WriteOptions
from ..write.options import Provenance, resolve
from ..write.staging import Staging
from ..write.writer import check_output, optional_sections
from .dynamic import Store


@dataclass(frozen=True)
class SealReport:
    path: str
    files_sealed: int
    rows_sealed: int
    #: rows whose blob was copied verbatim (every sealed row), and the bytes of their
    #: distinct blobs (a blob shared by several rows counted once)
    blobs_reused: int
    blob_bytes_reused: int
    #: bytes of [0, blob_end) no live row points at (replaced files, crash leftovers)
    dead_bytes: int
    #: sidecar bytes past the last live blob, not copied
    orphan_bytes_skipped: int
    blob_end: int
    bytes_written: int
    seconds: float


def seal(sidecar: str | os.PathLike[str], warehouse: str | os.PathLike[str], namespace: str,
         out: str | os.PathLike[str], *, catalog: Mapping[str, Any] | None = None,
         options: WriteOptions | None = None, provenance: Provenance | None = None,
         meta: Any = None, signer: Any = None, fsync: bool | None = None) -> SealReport:
    """Write the store's live content as a static archive at ``out``.

    ``provenance`` (or ``meta=``, ``signer=``) adds the ``__meta__`` and signature sections,
    as for :func:`~znippy_sql.write_archive`. The blobs are the store's, copied verbatim: of
    ``options`` (a :class:`~znippy_sql.WriteOptions`) only ``fsync`` applies (``fsync=False``
    skips the file and directory fsyncs: for scratch output only). The store may keep growing
    while it is sealed: the seal takes each table's committed snapshot and copies only bytes
    those rows reference.
    """
    started = time.perf_counter()
    fsync = resolve(options, what="seal", fsync=fsync)[0].fsync
    provenance = resolve(None, provenance, what="seal", meta=meta, signer=signer)[1]
    out = os.fspath(out)
    check_output(out)  # a directory or a missing parent: refused before any work
    store = Store(sidecar, warehouse, namespace, catalog, writable=False)
    try:
        groups = store.group_rows()
        options = store.options
    finally:
        store.close()
    blob_end = 0
    rows = files = 0
    for t in groups.values():
        ends = pc.add(t.column("blob_offset"), t.column("blob_size"))
        blob_end = max(blob_end, int(pc.max(ends).as_py()))
        rows += t.num_rows
        files += int(pc.sum(pc.equal(t.column("chunk_seq"), 0)).as_py())
    live_bytes = distinct_blob_bytes(groups.values())
    sidecar = os.fspath(sidecar)
    size = os.path.getsize(sidecar)
    if size < blob_end:
        raise StoreError(f"sidecar is {size} bytes, its rows reach {blob_end}", path=sidecar)
    sections, builders = optional_sections(provenance.meta, provenance.signer)
    with Staging(out) as staged:
        with open(sidecar, "rb") as src, open(staged.name, "w+b") as fh:
            try:
                copy_range(src.fileno(), fh.fileno(), blob_end, writeback=fsync)
            except EOFError:
                raise StoreError(f"sidecar is shorter than its rows' blob end {blob_end}",
                                 path=os.fspath(sidecar)) from None
            tail = write_tail(fh, blob_end, groups, sections=sections, section_builders=builders,
                              schema_metadata=options.schema_metadata(), fsync=fsync,
                              index_compression=options.index_compression)
        staged.commit(fsync=fsync)
    return SealReport(
        path=out, files_sealed=files, rows_sealed=rows, blobs_reused=rows,
        blob_bytes_reused=live_bytes, dead_bytes=blob_end - live_bytes,
        orphan_bytes_skipped=size - blob_end, blob_end=blob_end, bytes_written=tail.file_size,
        seconds=time.perf_counter() - started,
    )
