"""Many chunks' checked bytes at once: the compressed frames decoded in one call without the
GIL, the row checks vectorised (:func:`one_chunk_views`: many small files; :func:`chunk_views`:
many chunks of one file, a cut jar). Anything a check refuses, or a frame the batch cannot
decode, is left to ``chunk_view``, which raises or words the error: the result is what
reading chunk by chunk gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, cast

import numpy as np

from ..format import b3 as blake3
from ..format import codec
from .columns import Chunk, Columns
from .packs import slice_packs
from .stream import ChunkSource


class BulkSource(ChunkSource, Protocol):
    """A :class:`~.stream.ChunkSource` with the lookup's columns and, for a local file,
    the whole map."""

    @property
    def lookup_columns(self) -> Columns: ...
    @property
    def mapped(self) -> memoryview | None: ...


def one_chunk_views(a: BulkSource, items: Sequence[tuple[str, int]], *,
                    verify: bool | None = None) -> list[memoryview | None]:
    """The checked bytes of many small files at once: for each ``(path, first lookup
    row)``, the file's bytes when it is exactly that one row and every check of
    ``file_at`` and ``chunk_view`` holds; None where the caller must ask those (another
    layout, or something wrong: they say what). The row checks are vectorised and the
    compressed chunks decoded in one call without the GIL, so a small file costs one hash
    and a few slices of Python."""
    c = a.lookup_columns
    out: list[memoryview | None] = [None] * len(items)
    rows = np.fromiter((r for _, r in items), dtype=np.int64, count=len(items))
    ok = (rows >= 0) & (rows < c.n)
    if not bool(ok.any()):
        return out
    picks = np.flatnonzero(ok)
    rows = rows[picks]
    nxt = np.minimum(rows + 1, c.n - 1)
    tail = a.tail_offset
    size, blob, stored = c.uncompressed_size[rows], c.blob_offset[rows], c.blob_size[rows]
    packed = c.compressed[rows]
    good = ((c.chunk_seq[rows] == 0) & (c.fdata_offset[rows] == 0)
            & ((rows + 1 == c.n) | (c.chunk_seq[nxt] == 0))
            & (stored <= tail) & (blob <= tail - np.minimum(stored, tail))
            & np.where(packed, size <= codec.STREAM_BYTES, stored == size))
    offs, names, sums = c.path_offsets, c.path_data, c.checksum
    starts, ends = offs[rows].tolist(), offs[rows + 1].tolist()
    nexts = offs[np.minimum(rows + 2, c.n)].tolist()
    prevs = offs[np.maximum(rows - 1, 0)].tolist()
    whole = a.mapped
    source = a.source
    frames: list[tuple[bytes | memoryview, int]] = []
    at: list[int] = []  # item of each frame
    n = c.n
    fetched = 0  # bytes of the blobs viewed (packed ones counted once, below)
    inner = c.inner_offset[rows].tolist() if c.packed else None
    blobs: dict[int, list[tuple[int, int, int]]] = {}  # packed: blob → (item, inner, size)
    blob_views: dict[int, memoryview] = {}
    for k, (i, row, g, p, b, s, u) in enumerate(zip(
            picks.tolist(), rows.tolist(), good.tolist(), packed.tolist(), blob.tolist(),
            stored.tolist(), size.tolist())):
        if not g:
            continue
        key = items[i][0].encode("utf-8")
        if names[starts[k]:ends[k]] != key or (row + 1 < n and names[ends[k]:nexts[k]] == key) \
                or (row > 0 and names[prevs[k]:starts[k]] == key):
            continue  # another layout, or chunks out of order: file_at says which
        if p and inner is not None:  # each packed blob fetched and decoded once
            if b not in blob_views:
                blob_views[b] = whole[b : b + s] if whole is not None else source.view(b, s)
            blobs.setdefault(b, []).append((i, inner[k], u))
            continue
        view = whole[b : b + s] if whole is not None else source.view(b, s)
        fetched += s
        if p:
            frames.append((view, u))
            at.append(i)
        else:
            out[i] = view
    source.bytes_read += fetched + sum(v.nbytes for v in blob_views.values())
    for i, decoded in zip(at, codec.decoder().decode_views(frames)):
        out[i] = decoded
    if blobs:
        slice_packs(blob_views, blobs, out)
    if a.verify_checksums if verify is None else verify:
        for i, got in enumerate(out):
            if got is not None:
                row = items[i][1] * 32
                if blake3.blake3(got).digest() != sums[row : row + 32]:
                    out[i] = None  # chunk_view says what is wrong
    return out


def chunk_views(a: BulkSource, path: str, chunks: Sequence[Chunk], *,
                verify: bool | None = None) -> list[bytes | memoryview]:
    """``chunk_view`` of many chunks of one file at once: the same checks, the compressed
    frames decoded in one call without the GIL (a cut jar is many small chunks)."""
    if a.packed:  # a packed blob is decoded once (kept by decoded_blob)
        return [a.chunk_view(path, ch, verify=verify) for ch in chunks]
    tail = a.tail_offset
    whole = a.mapped
    out: list[bytes | memoryview | None] = [None] * len(chunks)
    frames: list[tuple[bytes | memoryview, int]] = []
    at: list[int] = []
    slow: list[int] = []
    fetched = 0
    for i, ch in enumerate(chunks):
        b, s, u = ch.blob_offset, ch.blob_size, ch.uncompressed_size
        if b + s > tail or (u > codec.STREAM_BYTES if ch.compressed else s != u):
            slow.append(i)
            continue
        fetched += s
        view = whole[b : b + s] if whole is not None else a.source.view(b, s)
        if ch.compressed:
            frames.append((view, u))
            at.append(i)
        else:
            out[i] = view
    a.source.bytes_read += fetched
    for i, decoded in zip(at, codec.decoder().decode_views(frames)):
        if decoded is None:
            slow.append(i)
        else:
            out[i] = decoded
    if a.verify_checksums if verify is None else verify:
        for i, got in enumerate(out):
            if got is not None and blake3.blake3(got).digest() != chunks[i].checksum:
                slow.append(i)
    for i in slow:  # raises for a bad chunk; decodes one the batch could not
        out[i] = a.chunk_view(path, chunks[i], verify=verify)
    return cast("list[bytes | memoryview]", out)  # every slot filled above
