"""Packed blobs (FORMAT §3): many small files' chunks in one compressed blob, each file a
slice of its decoded bytes at ``inner_offset``. :func:`slice_packs` decodes each pack once
(one GIL-free call for all) and gives every member its slice.
"""

from __future__ import annotations

from ..errors import CodecError
from ..format import codec
from ..format.validate import MAX_CHUNK_BYTES


def slice_packs(views: dict[int, memoryview], members: dict[int, list[tuple[int, int, int]]],
                out: list[memoryview | None]) -> None:
    """Decode each packed blob (``views``: blob offset → its stored bytes) once and set
    ``out[i]`` to each member's slice (``members``: blob offset → (i, inner offset, size));
    a member whose slice does not fit is left None, for ``chunk_view`` to say so."""
    keys: list[int] = []
    frames: list[tuple[bytes | memoryview, int]] = []
    for b, view in views.items():
        try:
            size = codec.content_size(view)
        except CodecError:
            continue
        if size <= MAX_CHUNK_BYTES:
            keys.append(b)
            frames.append((view, size))
    for b, decoded in zip(keys, codec.decoder().decode_views(frames)):
        if decoded is None:
            continue
        for i, inner, u in members[b]:
            if inner + u <= decoded.nbytes:
                out[i] = decoded[inner : inner + u]
