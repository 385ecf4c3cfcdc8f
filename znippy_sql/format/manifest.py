"""The manifest: one Arrow IPC stream, one row per sub-index or reserved section (FORMAT §2).

The manifest's schema metadata ``znippy.section_blake3`` holds the BLAKE3 of every row's byte
range, hex, in row order, joined by ``,`` (docs/format.md section 3). Readers that do not know
the key (the Rust tool) ignore it; an archive without it is read without those checks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from ..errors import FormatError
from . import build
from .footer import FOOTER_LEN
from .ipc import read_stream, stream_bytes
from .rangeio import RangeSource
from .schema import MANIFEST_SCHEMA, RESERVED_PKG_TYPE, GroupKey, is_reserved

#: Manifest schema metadata key: the BLAKE3 of each row's bytes (hex, row order, ``,``).
SECTION_BLAKE3 = "znippy.section_blake3"
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


@dataclass(frozen=True)
class ManifestRow:
    key: GroupKey
    index_offset: int
    index_len: int
    row_count: int
    #: BLAKE3 of the row's byte range, when the writer recorded it
    blake3: bytes | None = None


def encode_manifest(rows: list[ManifestRow]) -> bytes:
    """The manifest stream; the digests go into its schema metadata when every row has one."""
    schema = MANIFEST_SCHEMA
    digests = [r.blake3 for r in rows if r.blake3 is not None]
    if rows and len(digests) == len(rows):
        schema = schema.with_metadata({SECTION_BLAKE3: ",".join(d.hex() for d in digests)})
    table = build.table(
        {
            "pkg_type": [r.key.pkg_type for r in rows],
            "repo": [r.key.repo for r in rows],
            "module_name": [r.key.module_name for r in rows],
            "index_offset": [r.index_offset for r in rows],
            "index_len": [r.index_len for r in rows],
            "row_count": [r.row_count for r in rows],
        },
        schema,
    )
    return stream_bytes(table)


def _digests(table: pa.Table, path: str) -> list[bytes | None]:
    raw = (table.schema.metadata or {}).get(SECTION_BLAKE3.encode())
    if raw is None:
        return [None] * table.num_rows
    try:
        parts = raw.decode("ascii").split(",") if raw else []
    except UnicodeDecodeError:
        parts = []
    if len(parts) != table.num_rows or not all(_HEX64.match(p) for p in parts):
        raise FormatError(f"manifest: {SECTION_BLAKE3} does not hold one BLAKE3 per row",
                          path=path)
    return [bytes.fromhex(p) for p in parts]


def decode_manifest(src: RangeSource, manifest_offset: int, *,
                    adapt: Callable[[list[ManifestRow]], list[ManifestRow]] | None = None
                    ) -> tuple[pa.Table, list[ManifestRow]]:
    """Read and check the manifest: exact schema, ranges inside the tail, disjoint. Offsets
    need not be 64-byte aligned: that is a rule for writers (FORMAT §1; the Rust tool's
    streams follow each other directly). ``adapt``: turns the rows as written into this
    reader's terms before they are checked (the Rust 0.9+ names, ``interop/layouts.py``)."""
    end = src.size - FOOTER_LEN
    if not 0 <= manifest_offset < end:
        raise FormatError(f"manifest offset {manifest_offset} is outside the file", path=src.path)
    table = read_stream(src, manifest_offset, end - manifest_offset, "manifest", MANIFEST_SCHEMA)
    cols = table.to_pydict()
    rows = [
        ManifestRow(GroupKey(int(p), r, m), int(o), int(n), int(c), d)
        for p, r, m, o, n, c, d in zip(
            cols["pkg_type"], cols["repo"], cols["module_name"], cols["index_offset"],
            cols["index_len"], cols["row_count"], _digests(table, src.path),
        )
    ]
    if adapt is not None:
        rows = adapt(rows)
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
        if not reserved and not 0 <= row.key.pkg_type <= 127:
            raise FormatError(f"{what}: pkg_type {row.key.pkg_type} of a data group is not in "
                              "0..127", path=src.path)
        if reserved and row.key.repo:
            raise FormatError(f"{what}: a reserved section with repo {row.key.repo!r}",
                              path=src.path)
    return table, rows
