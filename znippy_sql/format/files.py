"""The file digest of FORMAT §4: what ``verify``, signing, the catalog and the ``files`` view
(``znippy_sql/views/files.py``) compute for one file from its chunks' BLAKE3s."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .. import corelib
from . import b3 as blake3
from .build import numpy_of
from .kernels import one_array, utf8_parts

#: FORMAT §4: the file digest starts with this domain-separation prefix.
FILE_DIGEST_PREFIX = b"znippy-file-v1\0"


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


def file_starts(chunk_seq: Any) -> np.ndarray:
    """The rows where a file starts: its ``chunk_seq = 0`` row (FORMAT §2, §3), in rows where
    each file's chunks are contiguous and in order (a sub-index, the lookup). ``chunk_seq``:
    an Arrow column or a NumPy array."""
    seq = chunk_seq if isinstance(chunk_seq, np.ndarray) else numpy_of(one_array(chunk_seq))
    return np.flatnonzero(seq == 0)


def binary_view(arr: Any) -> pa.Array:
    """A string or binary Array (or ``binary(32)``) without nulls as ``large_binary``, its data
    buffer shared: 64-bit offsets, so a joined message column never overflows."""
    if isinstance(arr, pa.ChunkedArray):
        arr = one_array(arr)
    if arr.null_count:
        raise ValueError("a file digest needs a path and checksums for every file")
    n = len(arr)
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        return arr.view(pa.large_binary())
    if pa.types.is_fixed_size_binary(arr.type):
        width = arr.type.byte_width
        offsets = np.arange(arr.offset * width, (arr.offset + n + 1) * width, width,
                            dtype=np.int64)
    else:  # string or binary: the same offsets, widened
        offsets = utf8_parts(arr)[0].astype(np.int64)
    data = arr.buffers()[-1]
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                        data if data is not None
                                                        else pa.py_buffer(b"")])


def _path_buffers(paths: Any) -> tuple[memoryview, Any]:
    """A string or binary column's offsets (int64, one more than its values) and bytes."""
    view = binary_view(paths)
    offsets = np.frombuffer(view.buffers()[1], dtype=np.int64, count=len(view) + 1,
                            offset=view.offset * 8)
    data = view.buffers()[2]
    raw = memoryview(data if data is not None else b"").cast("B")
    return memoryview(offsets.data).cast("B"), raw


def _digest_bytes(arr: Any) -> memoryview:
    """The 32 bytes a value of a ``binary(32)`` column, in order."""
    arr = one_array(arr) if isinstance(arr, pa.ChunkedArray) else arr
    return np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=len(arr) * 32,
                         offset=arr.offset * 32).data


def file_digests(paths: Any, checksums: Any, starts: np.ndarray,
                 seqs: np.ndarray | None = None) -> pa.FixedSizeBinaryArray:
    """:func:`file_digest` of many files at once: ``paths`` one per file, ``checksums`` one per
    chunk row (``binary(32)``), file i's chunks at rows ``starts[i]`` up to the next start (or
    the end; rows before the first start belong to no file). ``seqs`` are the rows'
    ``chunk_seq`` (by default their place in their file). One call of the compiled core
    (``native/src/digests.rs``) lays out and hashes every file's message."""
    if len(starts) == 0:
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), 0, [None, pa.py_buffer(b"")])
    offsets, data = _path_buffers(paths)
    sums = _digest_bytes(checksums)
    starts = np.ascontiguousarray(starts, dtype="<i8")
    if seqs is not None:
        seqs = np.ascontiguousarray(seqs, dtype="<i8")
    digest = corelib.file_digests(FILE_DIGEST_PREFIX, offsets, data, sums,
                                  memoryview(starts.data).cast("B"),
                                  None if seqs is None else memoryview(seqs.data).cast("B"))
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), len(starts),
                                                [None, pa.py_buffer(digest)])


def root_digest(tag: bytes, paths: Any, digests: Any) -> bytes:
    """BLAKE3 over ``tag``, then every path, NUL and file digest (FORMAT §4's archive root)."""
    offsets, data = _path_buffers(paths)
    return corelib.root_digest(tag, offsets, data, _digest_bytes(digests))
