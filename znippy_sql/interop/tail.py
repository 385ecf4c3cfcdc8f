"""A tail of this project's layout made in memory, for an archive laid anew (:mod:`.vsource`).

Each stream starts on a multiple of 64 (zero padding before it), then the manifest (no section
digests: the archive stays "another writer's", docs/format.md §10) and the footer. No
``__lookup__`` and no ``__trie__`` are made: the reader builds them in memory from the data
sub-indexes, as for any Rust archive without them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..format.footer import align_up, encode_footer
from ..format.manifest import ManifestRow, encode_manifest
from ..format.schema import GroupKey


def make_tail(start: int, streams: Sequence[tuple[GroupKey, bytes, int]]) -> bytes:
    """The bytes from ``start`` to the end: each ``(key, stream bytes, row count)`` laid out
    in order, the manifest, the footer."""
    out = bytearray()
    rows = []
    for key, data, count in streams:
        pad = align_up(start + len(out)) - (start + len(out))
        out += b"\0" * pad
        rows.append(ManifestRow(key, start + len(out), len(data), count))
        out += data
    out += b"\0" * (align_up(start + len(out)) - (start + len(out)))
    manifest_offset = start + len(out)
    out += encode_manifest(rows)
    out += encode_footer(manifest_offset)
    return bytes(out)
