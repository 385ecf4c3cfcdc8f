"""The lookup's rows as numpy columns, and the checks that turn a file's rows into chunks.

:class:`Columns` holds the ``__lookup__`` columns as numpy arrays (zero-copy where Arrow
allows), made once per open archive (or per decoded batch of a lookup in batches,
:mod:`.search`). :meth:`Columns.file_at` is the one place a file's rows become its
:class:`FileInfo`: each row checked against the one before (FORMAT §2), so a damaged lookup is
a :class:`~znippy_sql.errors.FormatError`, never a wrong read.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format.build import numpy_of
from ..format.kernels import one_array, utf8_parts
from ..format.schema import INNER, TRIE


@dataclass(frozen=True)
class Chunk:
    chunk_seq: int
    fdata_offset: int
    compressed: bool
    uncompressed_size: int
    blob_offset: int
    blob_size: int
    checksum: bytes
    #: where the chunk starts in its decoded blob (FORMAT §3, packed blobs; 0 otherwise)
    inner_offset: int = 0


@dataclass(frozen=True)
class FileInfo:
    relative_path: str
    lookup_row: int
    chunks: tuple[Chunk, ...]

    @property
    def size(self) -> int:
        return sum(c.uncompressed_size for c in self.chunks)

    @property
    def stored_size(self) -> int:
        """Stored bytes of the file's blobs; a packed blob shared with other files counts
        whole (docs/format.md, "Packed blobs")."""
        return sum(c.blob_size for c in self.chunks)


class Columns:
    """The lookup's columns as numpy arrays (zero-copy where Arrow allows), made once."""

    def __init__(self, lookup: pa.Table) -> None:
        n = self.n = lookup.num_rows
        cols = {name: one_array(lookup.column(name)) for name in lookup.column_names}
        self.path_offsets, self.path_data = utf8_parts(cols["relative_path"])
        self.chunk_seq = numpy_of(cols["chunk_seq"])  # never to_numpy: it imports pandas
        self.fdata_offset = numpy_of(cols["fdata_offset"])
        self.compressed = numpy_of(cols["compressed"])
        self.uncompressed_size = numpy_of(cols["uncompressed_size"])
        self.blob_offset = numpy_of(cols["blob_offset"])
        self.blob_size = numpy_of(cols["blob_size"])
        #: FORMAT §3: an archive with packed blobs has the column; others read zeros
        self.packed = INNER in cols
        self.inner_offset = (numpy_of(cols[INNER]) if self.packed
                             else np.zeros(n, dtype=np.uint64))
        sums = cols["checksum"]
        start = sums.offset * 32
        self.checksum = (memoryview(sums.buffers()[1]).cast("B")[start : start + n * 32]
                         if n else memoryview(b""))
        self.first_rows = np.flatnonzero(self.chunk_seq == 0)

    def run_end(self, row: int) -> int:
        """End of the run of rows starting at ``row`` (the next chunk_seq 0 row, or the end)."""
        i = int(np.searchsorted(self.first_rows, row, side="right"))
        return int(self.first_rows[i]) if i < len(self.first_rows) else self.n

    def path_bytes(self, row: int) -> bytes:
        return bytes(self.path_data[self.path_offsets[row] : self.path_offsets[row + 1]])

    def all_named(self, start: int, end: int, key: bytes) -> bool:
        """Rows ``[start, end)`` all have ``relative_path == key``."""
        if end - start == 1:
            return self.path_bytes(start) == key
        offs = self.path_offsets[start : end + 1]
        if not bool(np.all(np.diff(offs) == len(key))):
            return False
        return bytes(self.path_data[offs[0] : offs[-1]]) == key * (end - start)

    def chunk(self, row: int) -> Chunk:
        return Chunk(int(self.chunk_seq[row]), int(self.fdata_offset[row]),
                     bool(self.compressed[row]), int(self.uncompressed_size[row]),
                     int(self.blob_offset[row]), int(self.blob_size[row]),
                     bytes(self.checksum[row * 32 : row * 32 + 32]),
                     int(self.inner_offset[row]))

    def file_at(self, path: str, key: bytes, row: int, *, base: int = 0,
                archive: str | None = None) -> FileInfo:
        """The chunks of ``path`` (``key``: its UTF-8) from lookup row ``row`` on, each
        checked against the last (these columns hold lookup rows ``base`` on; ``archive``
        names the file in errors)."""
        first = row
        row -= base
        if not 0 <= row < self.n:
            raise FormatError(f"{TRIE} points {path!r} at row {row}, past the lookup",
                              path=archive)
        if self.chunk_seq[row] != 0:
            raise FormatError(f"{TRIE} points {path!r} at row {row}, not a first chunk",
                              path=archive)
        if row > 0 and self.path_bytes(row - 1) == key:
            raise FormatError(f"{path!r}: lookup row {row - 1} before its first chunk belongs "
                              "to it too (chunks out of order)", path=archive)
        nxt = row + 1
        if (self.fdata_offset[row] == 0 and self.path_bytes(row) == key
                and (nxt == self.n or (self.chunk_seq[nxt] == 0
                                       and self.path_bytes(nxt) != key))):
            return FileInfo(path, first, (self.chunk(row),))  # one chunk: what the loop finds
        end = self.run_end(row)
        while end < self.n and self.path_bytes(end) == key:  # a chunk_seq wrongly 0: below
            end = self.run_end(end)
        if not self.all_named(row, end, key):
            raise FormatError(f"{TRIE} points {path!r} at rows of another file", path=archive)
        chunks = []
        offset = 0
        for r in range(row, end):
            chunk = self.chunk(r)
            if chunk.chunk_seq != r - row or chunk.fdata_offset != offset:
                raise FormatError(f"{path!r}: chunk {chunk.chunk_seq} at {chunk.fdata_offset}, "
                                  f"expected chunk {r - row} at {offset}", path=archive)
            if chunk.uncompressed_size == 0 and end - row > 1:
                raise FormatError(f"{path!r}: chunk {chunk.chunk_seq} of {end - row} is empty",
                                  path=archive)
            offset += chunk.uncompressed_size
            chunks.append(chunk)
        return FileInfo(path, first, tuple(chunks))

    @cached_property
    def pack_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """Each compressed blob's offset (sorted, distinct) and the end of the furthest slice
        any row takes of it: a packed blob's decoded size, as its rows imply (FORMAT §3; the
        frame declares it too, and a frame that declares another size is not decoded by
        :mod:`.fileviews`)."""
        comp = np.flatnonzero(self.compressed)
        blobs = self.blob_offset[comp]
        ends = self.inner_offset[comp] + self.uncompressed_size[comp]
        order = np.argsort(blobs, kind="stable")
        blobs, ends = blobs[order], ends[order]
        if not len(blobs):
            return blobs, ends
        starts = np.flatnonzero(np.concatenate(([True], blobs[1:] != blobs[:-1])))
        return blobs[starts], np.maximum.reduceat(ends, starts)
