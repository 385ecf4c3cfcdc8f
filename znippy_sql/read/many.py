"""Many files' contents at once: ``Archive.read_many(paths)`` and ``Archive.iter_files(rows)``.

Plan, then read (the per-file work runs in the compiled core: ``native/src/extract/memory.rs``,
the extract's reader writing into memory; docs/design.md, "The native core"):

1. Every path is found in the lookup first (an unknown path raises
   :class:`~znippy_sql.errors.NotFoundError`, a file whose rows fail a check its
   :class:`~znippy_sql.errors.FormatError`, before anything is read or yielded).
2. The files are put in **blob order** (by the offset of their first blob; files that share
   it keep the order they were given), unless ``ordered=True`` keeps the given order.
3. They are cut into units of consecutive files: up to ``unit_bytes`` of original bytes or 256
   files; a bigger file is a unit of its own.
4. Worker threads read, decode and check the units: a remote archive first fetches each
   unit's blob ranges in one go (:func:`fetch_blobs`: neighbouring ranges coalesced into few
   ranged GETs, released after the unit); a packed blob is decoded once for its members;
   every chunk is checked against its BLAKE3 (unless ``verify=False`` or the archive was
   opened without checksums). A file the core cannot read is read again by the Python reader
   (``Archive.read``), which raises its error as it words it.
5. ``(path, bytes)`` pairs are yielded unit by unit in that order. At most ``workers + 1``
   units are decoded ahead of the consumer, so memory stays bounded by about
   ``(workers + 2) * unit_bytes`` (a file bigger than that is held whole: use
   ``Archive.open`` to stream one).

A path given twice is yielded twice. Stopping early (``close()`` of the iterator, or a break
that drops it) drops the units not started and waits for the running ones. The iterator is
the core's (its ``__next__`` is C): no Python function runs per file.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .. import corelib
from ..errors import FormatError
from ..format.validate import MAX_CHUNK_BYTES

if TYPE_CHECKING:
    from .core import ArchiveCore as Archive

#: original bytes per unit of work
UNIT_BYTES = 8 << 20
UNIT_FILES = 256


def lookup_buffers(archive: "Archive") -> list[bytes]:
    """The lookup's columns as the core's readers take them (``native/src/extract/plan.rs``
    ``Cols``): little-endian u64 ``chunk_seq``, ``fdata_offset``, ``uncompressed_size``,
    ``blob_offset``, ``blob_size``, ``inner_offset``; u8 ``compressed``; the checksums; u64
    path offsets and the path bytes."""
    import numpy as np

    c = archive.lookup_columns
    u8 = "<u8"
    cols = [np.ascontiguousarray(x, dtype=u8).tobytes() for x in (
        c.chunk_seq, c.fdata_offset, c.uncompressed_size, c.blob_offset, c.blob_size,
        c.inner_offset)]
    return cols + [np.ascontiguousarray(c.compressed, dtype=np.uint8).tobytes(),
                   bytes(c.checksum), np.ascontiguousarray(c.path_offsets, dtype=u8).tobytes(),
                   bytes(c.path_data)]


def local_path(archive: "Archive") -> str | None:
    """The archive file the core reads with ``pread``; None: blobs come through
    :func:`fetch_blobs` (a remote or relaid source)."""
    from ..format.rangeio import MappedSource

    source = archive.source
    return source.path if type(source) is MappedSource else None


def fetch_blobs(archive: "Archive", offsets: bytes, sizes: bytes) -> list[bytes]:
    """The bytes of these blobs (little-endian u64 offsets and sizes) of a source that is not
    a local file: fetched together (a remote source coalesces neighbouring ranges into few
    GETs), released once copied: a unit of blobs of the native extract and read_many."""
    import numpy as np

    src = archive.source
    offs = np.frombuffer(offsets, dtype="<u8").tolist()
    lens = np.frombuffer(sizes, dtype="<u8").tolist()
    if src.fetches and offs:
        src.prefetch(offs, lens)
    try:
        got = list(map(bytes, map(src.view, offs, lens)))
        src.bytes_read += sum(lens)
        return got
    finally:
        if src.fetches and offs:
            start = min(offs)
            src.release(start, max(map(sum, zip(offs, lens))) - start)


def decode_frame(frame: bytes, n: int) -> memoryview:
    """A frame not of our two shapes (the Rust tool's OpenZL graphs) through the binding:
    ``n`` bytes, or (``n`` -1, a packed blob) what it declares, bounded first."""
    from ..format import codec

    if n < 0:
        n = codec.content_size(frame)
        if n > MAX_CHUNK_BYTES:
            raise FormatError(f"blob declares {n} bytes, more than the {MAX_CHUNK_BYTES}-byte "
                              "limit")
    return codec.decoder().decode_view(memoryview(frame), n)


def read_many(archive: "Archive", paths: Iterable[str], *, verify: bool | None = None,
              workers: int | None = None, ordered: bool = False,
              unit_bytes: int = UNIT_BYTES) -> Iterator[tuple[str, bytes]]:
    """``(path, bytes)`` of every path, read as the module docstring says."""
    paths = list(paths)
    local = local_path(archive)
    fetch = None if local is not None else functools.partial(fetch_blobs, archive)
    source = archive.source

    def fail(k: int) -> bytes:  # a file the core could not read: the Python reader words why
        return archive.read(paths[k], verify=verify)

    def done(read: int) -> None:
        if local is not None:
            source.bytes_read += read

    reader = corelib.read_many(
        lookup_buffers(archive), archive.tail_offset, bool(archive.lookup_columns.packed),
        local, fetch, decode_frame, paths, fail,
        archive.verify_checksums if verify is None else verify, ordered, unit_bytes, UNIT_FILES,
        workers or os.cpu_count() or 1, done, archive=archive.path)
    for k in reader.suspects():  # not found, or rows that fail a check: raised as find words it
        reader.set_row(k, archive.must_find(paths[k]).lookup_row)
    return reader


def rows_paths(rows: Any) -> list[str]:
    """The ``relative_path`` column of an Arrow table, record batch or reader (the rows of a
    ``files`` view), or the ``relative_path`` of each mapping of an iterable."""
    if hasattr(rows, "read_all"):  # a RecordBatchReader
        rows = rows.read_all()
    if hasattr(rows, "column") and hasattr(rows, "schema"):
        return [p for p in rows.column("relative_path").to_pylist()]
    return [row["relative_path"] for row in rows]
