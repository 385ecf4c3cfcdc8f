"""Arrow IPC streams: write one to bytes, read one from a checked byte range, zero-copy."""

from __future__ import annotations

import pyarrow as pa

from .errors import FormatError
from .rangeio import RangeSource


def stream_bytes(table: pa.Table) -> bytes:
    """A complete IPC stream (schema, batches, end-of-stream) of ``table``, deterministically."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches():
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def read_stream(
    src: RangeSource,
    offset: int,
    length: int,
    what: str,
    schema: pa.Schema | None = None,
    *,
    full: bool = False,
) -> pa.Table:
    """Read a stream from ``[offset, offset+length)``; its buffers point into the memory map."""
    buf = src.read(offset, length, what)
    try:
        reader = pa.ipc.open_stream(buf)
        table = reader.read_all()
        table.validate(full=full)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}", path=src.path) from None
    if schema is not None and not table.schema.equals(schema):
        raise FormatError(
            f"{what} has columns {_describe(table.schema)}, expected {_describe(schema)}",
            path=src.path,
        )
    return table


def _describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}:{f.type}{'' if f.nullable else ' not null'}" for f in schema)
