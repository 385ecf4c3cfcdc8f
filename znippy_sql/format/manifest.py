"""The manifest: one Arrow IPC stream, one row per sub-index or reserved section (FORMAT §2)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..errors import FormatError
from .footer import FOOTER_LEN
from .ipc import read_stream, stream_bytes
from .rangeio import RangeSource
from .schema import MANIFEST_SCHEMA, RESERVED_PKG_TYPE, GroupKey, is_reserved


@dataclass(frozen=True)
class ManifestRow:
    key: GroupKey
    index_offset: int
    index_len: int
    row_count: int


def encode_manifest(rows: list[ManifestRow]) -> bytes:
    table = pa.table(
        {
            "pkg_type": pa.array([r.key.pkg_type for r in rows], pa.int8()),
            "repo": pa.array([r.key.repo for r in rows], pa.utf8()),
            "module_name": pa.array([r.key.module_name for r in rows], pa.utf8()),
            "index_offset": pa.array([r.index_offset for r in rows], pa.uint64()),
            "index_len": pa.array([r.index_len for r in rows], pa.uint64()),
            "row_count": pa.array([r.row_count for r in rows], pa.uint64()),
        },
        schema=MANIFEST_SCHEMA,
    )
    return stream_bytes(table)


def decode_manifest(src: RangeSource, manifest_offset: int) -> tuple[pa.Table, list[ManifestRow]]:
    """Read and check the manifest: exact schema, ranges inside the tail, disjoint. Offsets
    need not be 64-byte aligned: that is a rule for writers (FORMAT §1; the Rust tool's
    streams follow each other directly)."""
    end = src.size - FOOTER_LEN
    if not 0 <= manifest_offset < end:
        raise FormatError(f"manifest offset {manifest_offset} is outside the file", path=src.path)
    table = read_stream(src, manifest_offset, end - manifest_offset, "manifest", MANIFEST_SCHEMA)
    cols = table.to_pydict()
    rows = [
        ManifestRow(GroupKey(int(p), r, m), int(o), int(n), int(c))
        for p, r, m, o, n, c in zip(
            cols["pkg_type"], cols["repo"], cols["module_name"], cols["index_offset"],
            cols["index_len"], cols["row_count"],
        )
    ]
    seen: set[GroupKey] = set()
    prev_end = None
    for row in sorted(rows, key=lambda r: r.index_offset):
        what = f"manifest row {row.key.module_name or row.key.repo or row.key.pkg_type!r}"
        if row.key in seen:
            raise FormatError(f"{what}: group listed twice", path=src.path)
        seen.add(row.key)
        if row.index_offset + row.index_len > manifest_offset:
            raise FormatError(f"{what}: range ends past the manifest start", path=src.path)
        if prev_end is not None and row.index_offset < prev_end:
            raise FormatError(f"{what}: range overlaps the previous section", path=src.path)
        prev_end = row.index_offset + row.index_len
        reserved = is_reserved(row.key.module_name)
        if reserved != (row.key.pkg_type == RESERVED_PKG_TYPE):
            raise FormatError(f"{what}: pkg_type {row.key.pkg_type} does not match its name",
                              path=src.path)
    return table, rows
