"""The file digest of FORMAT §4: what ``verify``, signing, the catalog and the ``files`` view
(``znippy_sql/views/files.py``) compute for one file from its chunks' BLAKE3s."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import blake3

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
