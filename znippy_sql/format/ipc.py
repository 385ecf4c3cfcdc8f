"""Arrow IPC streams: write one to bytes, read one from a checked byte range, zero-copy.

Streams may start at any offset (FORMAT §1: the Rust writer puts them back to back after the
blobs). A stream whose bytes start 8-byte aligned is read without a copy; otherwise only the
buffers whose type needs more alignment than they have (integer data, string offsets) are
copied, by Arrow, while booleans, UTF-8 bytes and fixed-size binaries stay views of the map.

Reading is defensive (FORMAT §7): the schema is compared before any batch is read, record
batches whose bodies are compressed are refused (their buffers would be allocated at sizes
read from the file), every array is validated in full (offsets inside their buffers, valid
UTF-8) and a column declared non-nullable must hold no nulls.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pyarrow as pa

from ..errors import FormatError
from .rangeio import RangeSource

#: What pyarrow may raise for bytes that are not a valid stream.
EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # continuation marker, then length 0
_ARROW_ERRORS = (pa.ArrowException, ValueError, OSError, TypeError, NotImplementedError,
                 IndexError, KeyError, OverflowError, struct.error, MemoryError)


#: Arrow body buffers are padded to 8 bytes: a stream starting on a multiple of 8 is aligned.
_ALIGNED = 8
_COPY_MISALIGNED = pa.ipc.IpcReadOptions(ensure_alignment=pa.ipc.Alignment.DataTypeSpecific)


def read_options(buf: pa.Buffer) -> pa.ipc.IpcReadOptions | None:
    """Options to read a stream held in ``buf``: None (zero-copy) when it starts 8-byte
    aligned, else copy exactly the buffers that are misaligned for their type."""
    return None if buf.address % _ALIGNED == 0 else _COPY_MISALIGNED


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
    check_schema: Callable[[pa.Schema], str | None] | None = None,
) -> pa.Table:
    """Read a stream from ``[offset, offset+length)``; its buffers point into the memory map.

    ``schema``: the exact schema required. ``check_schema``: returns a problem or None.
    """
    buf = src.read(offset, length, what)
    if length < len(EOS) or buf.slice(length - len(EOS)).to_pybytes() != EOS:
        raise FormatError(f"{what} does not end with the Arrow end-of-stream marker",
                          path=src.path)
    try:
        _refuse_compressed_bodies(buf)
        reader = pa.ipc.open_stream(buf, options=read_options(buf))
        problem = _schema_problem(reader.schema, schema, check_schema)
        if problem is not None:
            raise FormatError(f"{what} {problem}", path=src.path)
        table = reader.read_all()
        table.validate(full=True)
    except FormatError as exc:
        if exc.path is None:
            raise FormatError(f"{what}: {exc.problem}", path=src.path) from None
        raise
    except _ARROW_ERRORS as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}", path=src.path) from None
    for i, f in enumerate(table.schema):
        if not f.nullable and table.column(i).null_count:
            raise FormatError(f"{what}: non-nullable column {f.name!r} holds nulls",
                              path=src.path)
    return table


def _schema_problem(got: pa.Schema, want: pa.Schema | None,
                    check: Callable[[pa.Schema], str | None] | None) -> str | None:
    problem = names_problem(got)
    if problem is not None:
        return problem
    if want is not None and not got.equals(want):
        return f"has columns {describe(got)}, expected {describe(want)}"
    return check(got) if check is not None else None


def names_problem(schema: pa.Schema) -> str | None:
    """What is wrong with a schema's column names (not UTF-8, which pyarrow finds only when
    it decodes them; or one name twice), or None."""
    try:
        names = schema.names
    except UnicodeDecodeError:
        return "has a column name that is not UTF-8"
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        return f"has column {twice[0]!r} more than once"
    return None


def metadata_text(schema: pa.Schema) -> dict[str, str]:
    """A schema's key/value metadata as text, in the order written; bytes that are not UTF-8
    are shown as escapes (the keys are another writer's, or damaged)."""
    return {k.decode("utf-8", "backslashreplace"): v.decode("utf-8", "backslashreplace")
            for k, v in (schema.metadata or {}).items()}


def describe(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}:{f.type}{'' if f.nullable else ' not null'}" for f in schema)


# -- compressed bodies ---------------------------------------------------------------------
# Arrow's Message flatbuffer: field 2 = header (a union: RecordBatch or DictionaryBatch).
# RecordBatch field 3 = compression; DictionaryBatch field 1 = data (a RecordBatch).
_MSG_HEADER, _RB_COMPRESSION, _DICT_DATA = 2, 3, 1
_U16, _U32, _I32 = struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<i")


def _refuse_compressed_bodies(buf: pa.Buffer) -> None:
    reader = pa.ipc.MessageReader.open_stream(buf)
    while True:
        try:
            msg = reader.read_next_message()
        except StopIteration:
            return
        if msg.type not in ("record batch", "dictionary batch"):
            continue
        meta = memoryview(msg.metadata)
        table = _table_at(meta, _U32.unpack_from(meta, 0)[0])
        header = _field_table(meta, table, _MSG_HEADER)
        if header is not None and msg.type == "dictionary batch":
            header = _field_table(meta, header, _DICT_DATA)
        if header is not None and _field_pos(meta, header, _RB_COMPRESSION) is not None:
            raise FormatError("a record batch has a compressed body (not allowed)")


def _table_at(meta: memoryview, pos: int) -> int:
    if not 0 <= pos <= len(meta) - 4:
        raise FormatError("message metadata points outside itself")
    return pos


def _field_pos(meta: memoryview, table: int, index: int) -> int | None:
    vtable = table - _I32.unpack_from(meta, table)[0]
    if not 0 <= vtable <= len(meta) - 4:
        raise FormatError("message metadata points outside itself")
    vt_len = _U16.unpack_from(meta, vtable)[0]
    slot = 4 + 2 * index
    if slot + 2 > vt_len or vtable + slot + 2 > len(meta):
        return None
    off = _U16.unpack_from(meta, vtable + slot)[0]
    return table + off if off else None


def _field_table(meta: memoryview, table: int, index: int) -> int | None:
    pos = _field_pos(meta, table, index)
    if pos is None:
        return None
    return _table_at(meta, pos + _U32.unpack_from(meta, _table_at(meta, pos))[0])
