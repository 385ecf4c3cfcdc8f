"""Is a file to write already stored, unchanged? Same size, same chunk checksums.

An append (or a store add) of a tree it holds already would otherwise compress and store every
file again and leave the old blobs dead. A file is unchanged when its path is stored in the
same group, and its bytes, cut where the stored chunks are cut (``block_size`` pieces, or a
zip's entry boundaries when dedup cut it), have the stored chunks' BLAKE3 checksums. Reading and hashing is what compression
would cost at least, and BLAKE3 runs at several GB/s: cheap next to compressing again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..format import b3 as blake3

from .source import Entry


def same_content(entry: Entry, sizes: Sequence[int], checksums: Sequence[bytes], *,
                 block_size: int) -> bool:
    """Whether ``entry``'s bytes have exactly these chunk ``sizes`` and ``checksums``."""
    try:
        size = entry.size()
    except Exception:  # noqa: BLE001  (unreadable: the writer reports it when it reads)
        return False
    # the stored cuts must tile the file (fixed pieces, or a cut zip's spans: any boundaries)
    if size == 0:
        if list(sizes) != [0]:
            return False
    elif sum(sizes) != size or not all(0 < n <= block_size for n in sizes):
        return False
    if entry.data is not None:
        view = memoryview(entry.data)
        pos = 0
        for n, digest in zip(sizes, checksums):
            if blake3.blake3(view[pos:pos + n]).digest() != digest:
                return False
            pos += n
        return True
    try:
        with open(os.fspath(entry.file), "rb", buffering=0) as fh:  # type: ignore[arg-type]
            for n, digest in zip(sizes, checksums):
                data = fh.read(n)
                if len(data) != n or blake3.blake3(data).digest() != digest:
                    return False
            return fh.read(1) == b""
    except OSError:
        return False
