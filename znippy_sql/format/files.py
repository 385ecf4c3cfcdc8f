"""The file digest of FORMAT §4: what ``verify``, signing, the catalog and the ``files`` view
(``znippy_sql/views/files.py``) compute for one file from its chunks' BLAKE3s."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from . import b3 as blake3
from .build import binary, numpy_of
from .kernels import call_function, one_array, utf8_parts

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


def joined(parts: Sequence[Any]) -> tuple[np.ndarray, Any]:
    """The element-wise concatenation of ``parts`` (each a ``large_binary`` Array of the same
    length, or a bytes constant): (offsets as NumPy, data buffer)."""
    args = [binary([p], large=True)[0] if isinstance(p, bytes) else p for p in parts]
    out = call_function("binary_join_element_wise", [*args, binary([b""], large=True)[0]])
    _, obuf, dbuf = out.buffers()
    bounds = np.frombuffer(obuf, dtype=np.int64, count=len(out) + 1, offset=out.offset * 8)
    return bounds, (dbuf if dbuf is not None else b"")


def file_digests(paths: Any, checksums: Any, starts: np.ndarray,
                 seqs: np.ndarray | None = None) -> pa.FixedSizeBinaryArray:
    """:func:`file_digest` of many files at once: ``paths`` one per file, ``checksums`` one per
    chunk row (``binary(32)``), file i's chunks at rows ``starts[i]`` up to the next start (or
    the end). ``seqs`` are the rows' ``chunk_seq`` (by default their place in their file).
    Arrow lays the messages out (prefix, path, then NUL, count and the chunk block); then one
    BLAKE3 call per file."""
    checksums = one_array(checksums) if isinstance(checksums, pa.ChunkedArray) else checksums
    paths = one_array(paths) if isinstance(paths, pa.ChunkedArray) else paths
    rows = len(checksums)
    nfiles = len(starts)
    if nfiles == 0:
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), 0, [None, pa.py_buffer(b"")])
    starts = np.asarray(starts, dtype=np.int64)
    if starts[0]:  # rows before the first file's first chunk belong to no file (a damaged
        skip = int(starts[0])  # index; verify finds it): as the digest of one file skips them
        checksums, starts, rows = checksums.slice(skip), starts - skip, rows - skip
        seqs = None if seqs is None else np.asarray(seqs)[skip:]
    counts = np.diff(np.append(starts, rows))
    if seqs is None:
        seqs = np.arange(rows, dtype=np.int64) - np.repeat(starts, counts)
    sums = np.frombuffer(checksums.buffers()[1], dtype=np.uint8, count=rows * 32,
                         offset=checksums.offset * 32)
    block = np.empty((rows, 36), np.uint8)  # (chunk_seq LE u32, checksum) of every row
    block[:, :4] = np.asarray(seqs, dtype="<u4").view(np.uint8).reshape(rows, 4)
    block[:, 4:] = sums.reshape(rows, 32)
    head = np.zeros((nfiles, 5), np.uint8)  # NUL, then the chunk count LE u32
    head[:, 1:] = counts.astype("<u4").view(np.uint8).reshape(nfiles, 4)
    if rows == nfiles:  # one chunk to a file: each tail is 41 bytes
        tail_data = np.concatenate([head, block], axis=1).reshape(-1)
    else:
        tail_data = np.insert(block.reshape(-1), np.repeat(starts * 36, 5), head.reshape(-1))
    tail_offsets = np.zeros(nfiles + 1, np.int64)
    np.cumsum(5 + 36 * counts, out=tail_offsets[1:])
    tails = pa.Array.from_buffers(pa.large_binary(), nfiles,
                                  [None, pa.py_buffer(tail_offsets), pa.py_buffer(tail_data)])
    bounds, data = joined([FILE_DIGEST_PREFIX, binary_view(paths), tails])
    digest = blake3.digests(data, bounds)
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), nfiles,
                                                [None, pa.py_buffer(digest)])


def root_digest(tag: bytes, paths: Any, digests: Any) -> bytes:
    """BLAKE3 over ``tag``, then every path, NUL and file digest (FORMAT §4's archive root)."""
    h = blake3.blake3(tag)
    if len(paths):
        bounds, data = joined([binary_view(paths), b"\0", binary_view(digests)])
        h.update(memoryview(data)[int(bounds[0]):int(bounds[-1])])
    return h.digest()
