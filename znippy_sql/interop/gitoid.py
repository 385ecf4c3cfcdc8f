"""The Rust ``__gunnar_oid__`` (``znippy-plugin-git`` 0.2.4, ``oid_index.rs``) as a table.

A raw section, little-endian, written by ``build_section`` for the loose-object tier (each
object one data entry, named by its oid in lowercase hex)::

     0  magic b"ZNPYGOID"                              8
     8  u32 version (3; the Rust reader wants it exactly)  4
    12  u8  hash code (1 sha1, 2 sha256)               1
    13  u8  oid_len (20 or 32)                         1
    14  u16 header_len (>= 24)                         2
    16  u64 count                                      8
    24  zero padding up to header_len
    HL  i64 keys[count]   (the oid's first 8 bytes big-endian, sign bit flipped: oid order)
        u64 rows[count]   (the first lookup row of the object's entry)
        u32 ords[count]   (the object's ordinal, oid-lexicographic)
        u8  oids[count * oid_len]

Read here as ``oid`` (binary), ``ordinal``, ``lookup_row``, in the section's (oid) order; the
``git_objects`` view adds each row's ``relative_path`` (``git/views.py``).
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format.schema import GIT_OID

MAGIC = b"ZNPYGOID"
VERSION = 3
HEADER = struct.Struct("<8sIBBHQ")  # magic, version, hash code, oid_len, header_len, count
OID_LENS = {1: 20, 2: 32}


def is_rust_oid_index(data: bytes | memoryview) -> bool:
    return bytes(data[:8]) == MAGIC


def decode_rust_oid_index(data: bytes | memoryview, *, lookup_rows: int,
                          path: str | None = None) -> pa.Table:
    """The objects of a Rust ``__gunnar_oid__`` (module docstring), each row checked:
    the oid length of its hash, rows inside the lookup, keys that are the oids' own."""
    buf = bytes(data)
    if len(buf) < HEADER.size:
        raise FormatError(f"{GIT_OID} is {len(buf)} bytes, shorter than its header",
                          path=path)
    magic, version, code, oid_len, header_len, count = HEADER.unpack_from(buf)
    if version != VERSION:
        raise FormatError(f"{GIT_OID} is version {version}; this reader reads the Rust "
                          f"version {VERSION}", path=path)
    if OID_LENS.get(code) != oid_len or header_len < HEADER.size:
        raise FormatError(f"{GIT_OID}: hash code {code}, oid length {oid_len}, header "
                          f"{header_len} bytes do not fit together", path=path)
    if len(buf) != header_len + count * (8 + 8 + 4 + oid_len):
        raise FormatError(f"{GIT_OID}: {len(buf)} bytes do not hold {count} entries",
                          path=path)
    at = header_len
    keys = np.frombuffer(buf, "<i8", count, at)
    rows = np.frombuffer(buf, "<u8", count, at + 8 * count)
    ords = np.frombuffer(buf, "<u4", count, at + 16 * count)
    oids = np.frombuffer(buf, np.uint8, count * oid_len, at + 20 * count).reshape(count, oid_len)
    if count and int(rows.max()) >= lookup_rows:
        raise FormatError(f"{GIT_OID}: a row points past the lookup's {lookup_rows} rows",
                          path=path)
    first = np.zeros((count, 8), np.uint8)
    first[:, :min(8, oid_len)] = oids[:, :8]
    own = (first.view(">u8").ravel() ^ np.uint64(1 << 63)).astype("<u8").view("<i8")
    if not np.array_equal(own, keys):
        raise FormatError(f"{GIT_OID}: a key is not its oid's", path=path)
    return pa.table({
        "oid": pa.array([r.tobytes() for r in oids], pa.binary(oid_len)),
        "ordinal": pa.array(ords, pa.uint32()),
        "lookup_row": pa.array(rows, pa.uint64()),
    })
