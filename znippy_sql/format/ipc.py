"""Arrow IPC streams: write one to bytes, read one from a checked byte range, zero-copy.

Streams may start at any offset (FORMAT §1: the Rust writer puts them back to back after the
blobs). A stream whose bytes start 8-byte aligned is read without a copy; otherwise only the
buffers whose type needs more alignment than they have (integer data, string offsets) are
copied, by Arrow, while booleans, UTF-8 bytes and fixed-size binaries stay views of the map.

Every reader of this package opens a stream through :func:`read_table` (or
:func:`checked_reader`), so one rule holds for the core API, DuckDB and Polars (FORMAT §7):

1. the messages are walked before pyarrow builds anything: a schema first, then record
   batches and dictionary batches only (another writer's extra columns may be dictionaries,
   docs/format.md §11), no compressed body (its buffers would be allocated at sizes read from the file), every
   buffer and every field node inside its message's body, and the end-of-stream marker
   exactly at the end of the range;
2. the schema is compared before any batch is read;
3. every array is validated in full (offsets inside their buffers, valid UTF-8) and a column
   declared non-nullable must hold no nulls.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pyarrow as pa

from ..errors import FormatError
from .rangeio import RangeSource

EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # continuation marker, then length 0
#: What pyarrow may raise for bytes that are not a valid stream.
ARROW_ERRORS = (pa.ArrowException, ValueError, OSError, TypeError, NotImplementedError,
                IndexError, KeyError, OverflowError, struct.error, MemoryError)
SchemaCheck = Callable[[pa.Schema], "str | None"]
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
    check_schema: SchemaCheck | None = None,
) -> pa.Table:
    """Read a stream from ``[offset, offset+length)``; its buffers point into the memory map.

    ``schema``: the exact schema required. ``check_schema``: returns a problem or None.
    """
    return read_table(src.read(offset, length, what), what, src.path, schema,
                      check_schema=check_schema)


def read_table(buf: pa.Buffer, what: str, path: str | None, schema: pa.Schema | None = None,
               *, check_schema: SchemaCheck | None = None) -> pa.Table:
    """The table of the stream that is exactly ``buf``, checked as the module says."""
    try:
        reader = checked_reader(buf, what, path, schema, check_schema=check_schema)
        table = reader.read_all()
        table.validate(full=True)
    except FormatError:
        raise
    except ARROW_ERRORS as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}", path=path) from None
    for i, f in enumerate(table.schema):
        if not f.nullable and table.column(i).null_count:
            raise FormatError(f"{what}: non-nullable column {f.name!r} holds nulls", path=path)
    return table


def checked_reader(buf: pa.Buffer, what: str, path: str | None,
                   schema: pa.Schema | None = None, *,
                   check_schema: SchemaCheck | None = None) -> pa.RecordBatchStreamReader:
    """A stream reader over ``buf`` once its messages and its schema have passed the checks
    (steps 1 and 2 of the module docstring; the caller validates the arrays it reads)."""
    if buf.size < len(EOS) or buf.slice(buf.size - len(EOS)).to_pybytes() != EOS:
        raise FormatError(f"{what} does not end with the Arrow end-of-stream marker", path=path)
    try:
        problem = _message_problem(buf)
        if problem is None:
            reader = pa.ipc.open_stream(buf, options=read_options(buf))
            problem = schema_problem(reader.schema, schema, check_schema)
    except FormatError as exc:  # from the walk: the metadata of a message points outside it
        raise FormatError(f"{what}: {exc.problem}", path=path) from None
    except ARROW_ERRORS as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}", path=path) from None
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=path)
    return reader


def read_schema(buf: pa.Buffer, what: str, path: str | None) -> pa.Schema:
    """The schema message at the start of ``buf`` (the bytes of that message only), its
    names and metadata valid UTF-8."""
    try:
        schema = pa.ipc.read_schema(pa.BufferReader(buf))
    except ARROW_ERRORS as exc:
        raise FormatError(f"{what}: unreadable schema: {exc}", path=path) from None
    problem = text_problem(schema)
    if problem is not None:
        raise FormatError(f"{what} {problem}", path=path)
    return schema


def text_problem(schema: pa.Schema) -> str | None:
    """Column names and metadata (of the schema and of every field, nested ones included)
    must be valid UTF-8: Python, DuckDB and Polars decode them (Polars panics otherwise)."""
    def fields(items: list[pa.Field]) -> str | None:
        for f in items:
            try:
                f.name  # noqa: B018  (decoding it is the check)
                _decode(f.metadata)
            except UnicodeDecodeError:
                return "has a column name or column metadata that is not valid UTF-8"
            inner = [f.type.field(i) for i in range(f.type.num_fields)]
            problem = fields(inner) if inner else None
            if problem is not None:
                return problem
        return None

    try:
        _decode(schema.metadata)
    except UnicodeDecodeError:
        return "has schema metadata that is not valid UTF-8"
    return fields(list(schema))


def _decode(meta: dict[bytes, bytes] | None) -> None:
    for key, value in (meta or {}).items():
        key.decode("utf-8")
        value.decode("utf-8")


def schema_problem(got: pa.Schema, want: pa.Schema | None,
                   check: SchemaCheck | None) -> str | None:
    problem = text_problem(got) or names_problem(got)
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
    text = ", ".join(f"{f.name}:{f.type}{'' if f.nullable else ' not null'}"
                     for f in list(schema)[:20])
    return text + (f", ... ({len(schema)} columns)" if len(schema) > 20 else "")


# -- the message walk ----------------------------------------------------------------------
# Arrow's Message flatbuffer (Message.fbs): field 2 = header (a union; its type in field 1),
# field 3 = bodyLength. RecordBatch: 0 length, 1 nodes [FieldNode{length, null_count}],
# 2 buffers [Buffer{offset, length}], 3 compression. Every struct is two int64s.
_MSG_HEADER, _MSG_BODY_LEN = 2, 3
_RB_LENGTH, _RB_NODES, _RB_BUFFERS, _RB_COMPRESSION = 0, 1, 2, 3
_DB_DATA = 1  # DictionaryBatch: 0 id, 1 data (a RecordBatch), 2 isDelta
_U16, _U32, _I32, _I64 = (struct.Struct("<H"), struct.Struct("<I"), struct.Struct("<i"),
                          struct.Struct("<q"))
_PAIR = struct.Struct("<qq")


def _message_problem(buf: pa.Buffer) -> str | None:
    """What is wrong with the sequence of messages in ``buf``, or None."""
    stream = pa.BufferReader(buf)
    reader = pa.ipc.MessageReader.open_stream(stream)
    first = True
    while True:
        try:
            msg = reader.read_next_message()
        except StopIteration:
            break
        if first != (msg.type == "schema"):
            return "does not start with one schema message"
        first = False
        if msg.type == "schema":
            continue
        if msg.type not in ("record batch", "dictionary"):
            return f"holds a {msg.type} message (only record and dictionary batches are " \
                   "allowed)"
        problem = _batch_problem(memoryview(msg.metadata).cast("B"),
                                 0 if msg.body is None else msg.body.size,
                                 dictionary=msg.type == "dictionary")
        if problem is not None:
            return problem
    if first:
        return "holds no schema message"
    if stream.tell() != buf.size:
        return "has bytes after its end-of-stream marker"
    return None


def _batch_problem(meta: memoryview, body_len: int, *, dictionary: bool = False
                   ) -> str | None:
    """A record batch's (or a dictionary batch's record batch's) body and nodes."""
    root = _table_at(meta, _u32(meta, 0))
    header = _field_table(meta, root, _MSG_HEADER)
    if header is not None and dictionary:
        header = _field_table(meta, header, _DB_DATA)
    if header is None:
        return "has a record batch message without a header"
    declared = _field_i64(meta, root, _MSG_BODY_LEN)
    if declared != body_len:
        return "has a record batch whose body length does not match its bytes"
    if _field_pos(meta, header, _RB_COMPRESSION) is not None:
        return "has a record batch with a compressed body (not allowed)"
    length = _field_i64(meta, header, _RB_LENGTH)
    if length < 0:
        return "has a record batch of negative length"
    for offset, size in _structs(meta, header, _RB_BUFFERS):
        if offset < 0 or size < 0 or offset > body_len or size > body_len - offset:
            return (f"has a buffer [{offset}, {offset + size}) outside its record batch body "
                    f"({body_len} bytes)")
    for count, nulls in _structs(meta, header, _RB_NODES):
        if count < 0 or nulls < 0 or nulls > count:
            return "has a field node with an impossible length or null count"
    return None


def _u32(meta: memoryview, pos: int) -> int:
    if not 0 <= pos <= len(meta) - 4:
        raise FormatError("message metadata points outside itself")
    return int(_U32.unpack_from(meta, pos)[0])


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
    return None if pos is None else _table_at(meta, pos + _u32(meta, pos))


def _field_i64(meta: memoryview, table: int, index: int) -> int:
    pos = _field_pos(meta, table, index)
    if pos is None:
        return 0  # flatbuffers leave a default (0) out
    if not 0 <= pos <= len(meta) - 8:
        raise FormatError("message metadata points outside itself")
    return int(_I64.unpack_from(meta, pos)[0])


def _structs(meta: memoryview, table: int, index: int) -> list[tuple[int, int]]:
    """A vector of (int64, int64) structs."""
    pos = _field_pos(meta, table, index)
    if pos is None:
        return []
    vec = pos + _u32(meta, pos)
    count = _u32(meta, vec)
    start = vec + 4
    if count > (len(meta) - start) // 16:
        raise FormatError("message metadata points outside itself")
    return [_PAIR.unpack_from(meta, start + 16 * i) for i in range(count)]
