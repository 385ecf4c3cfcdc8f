"""The checked bytes of one file of many chunks, from its lookup rows, in one go.

A cut jar is one file of hundreds of small chunks (the Maven repository: 2,887 files, 77,480
chunk rows). Read chunk by chunk, each costs a :class:`~.columns.Chunk` object, the row checks
of :meth:`~.core.ArchiveCore.file_at`, a frame parse and a decode call: ~100 µs of Python, more
than the bytes themselves. :func:`file_views` checks the file's rows with NumPy (the same
checks ``file_at`` makes), decodes its compressed frames in one call that holds the GIL only
before and after (``codec.Decoder.decode_views``), a packed blob once, and checks every
chunk's BLAKE3. Anything unusual (a row that fails a check, a frame of another shape, a
checksum that does not match, a file too big to hold at once) gives None: the caller then
reads the file chunk by chunk, which raises or words the problem as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ZnippyError
from ..format import b3 as blake3
from ..format import codec

if TYPE_CHECKING:
    from .core import ArchiveCore as Archive

#: a file is held whole only up to this many bytes (bigger ones stream chunk by chunk)
MAX_BYTES = 8 << 20
#: a packed blob at least this big is decoded through ``Archive.decoded_blob``, which keeps
#: the last one: the files that share it, read one after the other, decode it once
SHARED_PACK = 256 << 10


def file_views(archive: "Archive", path: str, row: int, end: int, *, verify: bool
               ) -> list[memoryview] | None:
    """The checked bytes of each chunk of ``path``, whose rows are ``[row, end)`` of the
    lookup, in order; None when the caller must read it chunk by chunk (see the module doc).
    The views are of the memory map or of decoded buffers: write them, do not keep them."""
    c = archive.lookup_columns
    n = end - row
    if not 0 <= row < end <= c.n:
        return None
    size = c.uncompressed_size[row:end]
    total = int(size.sum(dtype=np.uint64))
    if total > MAX_BYTES or (n > 1 and not bool(size.all())):
        return None
    if not (np.array_equal(c.chunk_seq[row:end], np.arange(n))
            and np.array_equal(c.fdata_offset[row:end], np.cumsum(size) - size)):
        return None
    key = path.encode("utf-8")
    if not c.all_named(row, end, key) or (row > 0 and c.path_bytes(row - 1) == key) \
            or (end < c.n and c.path_bytes(end) == key):
        return None
    blob, stored = c.blob_offset[row:end], c.blob_size[row:end]
    comp, inner = c.compressed[row:end], c.inner_offset[row:end]
    tail = archive.tail_offset
    if bool(np.any(stored > tail)) or bool(np.any(blob > tail - stored)):
        return None
    if bool(np.any(~comp & (stored != size))):
        return None
    if archive.packed and bool(comp.any()):
        offsets, ends = c.pack_ends
        expect = np.where(comp, ends[np.minimum(np.searchsorted(offsets, blob),
                                                len(offsets) - 1)], size)
    else:
        expect = size
    if bool(np.any(comp & ((expect > codec.STREAM_BYTES) | (inner + size > expect)))):
        return None
    whole = archive.mapped
    view = archive.source.view
    out: list[memoryview | None] = [None] * n
    frames: list[tuple[bytes | memoryview, int]] = []
    slot: dict[int, int] = {}  # blob offset → its frame in ``frames``
    members: list[tuple[int, int, int, int]] = []  # (chunk, frame, inner offset, size)
    fetched = 0
    for i, (b, s, u, p, k, e) in enumerate(zip(blob.tolist(), stored.tolist(), size.tolist(),
                                               comp.tolist(), inner.tolist(),
                                               expect.tolist())):
        if not p:
            out[i] = whole[b : b + s] if whole is not None else view(b, s)
            fetched += s
            continue
        if e > SHARED_PACK and (e != u or k != 0):
            try:
                pack = archive.decoded_blob(b, s)
            except ZnippyError:
                return None
            if k + u > pack.nbytes:
                return None
            out[i] = pack[k : k + u]  # (decoded_blob counts its bytes read)
            continue
        f = slot.get(b)
        if f is None:
            f = slot[b] = len(frames)
            frames.append((whole[b : b + s] if whole is not None else view(b, s), e))
            fetched += s
        members.append((i, f, k, u))
    archive.source.bytes_read += fetched
    if frames:
        decoded = codec.decoder().decode_views(frames)
        for i, f, k, u in members:
            d = decoded[f]
            if d is None or k + u > d.nbytes:
                return None
            out[i] = d[k : k + u]
    if verify:
        sums = c.checksum
        at = row * 32
        for got in out:
            if got is None or blake3.blake3(got).digest() != sums[at : at + 32]:
                return None
            at += 32
    return out  # type: ignore[return-value]  # every slot filled above
