"""Rewrite an archive's tail with some sections replaced, using pyarrow and blake3 only.

For tests and ``bench/fuzz.py``: start from a real archive, swap the bytes of a sub-index or a
section for hostile ones, and lay the tail out again (64-byte aligned, manifest, footer), with
the manifest's ``znippy.section_blake3`` recomputed (a forger's archive: the digests match the
hostile bytes), kept as they were, or dropped (an archive of a writer that records none).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Literal

import blake3
import pyarrow as pa

DIGESTS = b"znippy.section_blake3"


def key_name(row: Mapping[str, Any]) -> str:
    """A manifest row's name here: a reserved section's name, else ``pkg_type/repo/module``."""
    if row["pkg_type"] == -1:
        return str(row["module_name"])
    return f"{row['pkg_type']}/{row['repo']}/{row['module_name']}"


def manifest(data: bytes) -> pa.Table:
    off = struct.unpack("<Q", data[-8:])[0]
    return pa.ipc.open_stream(pa.py_buffer(data[off:-16])).read_all()


def sections(data: bytes) -> dict[str, bytes]:
    """Every manifest row's bytes, by :func:`key_name`, in manifest order."""
    return {key_name(r): data[r["index_offset"] : r["index_offset"] + r["index_len"]]
            for r in manifest(data).to_pylist()}


def stream(table: pa.Table, *, compression: str | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as w:
        for batch in table.to_batches():
            w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def rebuild(data: bytes, replace: Mapping[str, bytes] | None = None, *,
            digests: Literal["recompute", "keep", "drop"] = "recompute",
            rows_edit: Callable[[list[dict[str, Any]]], None] | None = None,
            drop: tuple[str, ...] = ()) -> bytes:
    """The archive with ``replace``'s sections swapped in (by :func:`key_name`), ``drop``'s
    removed, the tail laid out again after the blob region."""
    replace = dict(replace or {})
    table = manifest(data)
    rows = table.to_pylist()
    old = (table.schema.metadata or {}).get(DIGESTS, b"").decode().split(",")
    tail = min((r["index_offset"] for r in rows), default=len(data) - 16)
    out = bytearray(data[:tail])
    kept, kept_digests = [], []
    for i, r in enumerate(rows):
        name = key_name(r)
        if name in drop:
            continue
        payload = replace.get(name, data[r["index_offset"] : r["index_offset"] + r["index_len"]])
        out += bytes(-len(out) % 64)
        r = dict(r, index_offset=len(out), index_len=len(payload))
        out += payload
        kept.append(r)
        kept_digests.append(old[i] if i < len(old) else "")
    if rows_edit is not None:
        rows_edit(kept)
    out += bytes(-len(out) % 64)
    moff = len(out)
    schema = table.schema.remove_metadata()
    if digests == "recompute":
        schema = schema.with_metadata({DIGESTS: ",".join(
            blake3.blake3(out[r["index_offset"] : r["index_offset"] + r["index_len"]]).hexdigest()
            for r in kept)})
    elif digests == "keep" and any(kept_digests):
        schema = schema.with_metadata({DIGESTS: ",".join(kept_digests)})
    out += stream(pa.Table.from_pylist(kept, schema=schema))
    out += b"ZNPYMIDX" + struct.pack("<Q", moff)
    return bytes(out)
