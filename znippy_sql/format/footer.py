"""The 16-byte footer: ``b"ZNPYMIDX"`` then the manifest offset as u64 little-endian (FORMAT §1)."""

from __future__ import annotations

import struct

MAGIC = b"ZNPYMIDX"
FOOTER_LEN = 16
ALIGN = 64  # every sub-index, section and the manifest starts on a multiple of 64 [fixed here]
_U64 = struct.Struct("<Q")


def align_up(offset: int, align: int = ALIGN) -> int:
    return (offset + align - 1) // align * align


def encode_footer(manifest_offset: int) -> bytes:
    return MAGIC + _U64.pack(manifest_offset)


def decode_footer(tail16: bytes) -> int | None:
    """The manifest offset, or None when the 16 bytes are not a footer."""
    if len(tail16) != FOOTER_LEN or tail16[:8] != MAGIC:  # bytes [-16..-8]: magic
        return None
    return int(_U64.unpack(tail16[8:])[0])  # bytes [-8..]: manifest offset


def footer_left(end: bytes) -> int:
    """How many bytes of a footer a cut file still ends with (4 to 15), else 0: its last
    bytes are the magic's start, or the whole magic and part of the offset."""
    for k in range(min(len(end), FOOTER_LEN - 1), 3, -1):
        piece = end[len(end) - k :]
        if piece[: min(k, len(MAGIC))] == MAGIC[: min(k, len(MAGIC))]:
            return k
    return 0
