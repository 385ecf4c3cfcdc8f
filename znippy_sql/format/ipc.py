"""Arrow IPC streams: write one to bytes, read one from a checked byte range, zero-copy.

Streams may start at any offset (FORMAT §1: the Rust writer puts them back to back after the
blobs). A stream whose bytes start 8-byte aligned is read without a copy; otherwise only the
buffers whose type needs more alignment than they have (integer data, string offsets) are
copied, by Arrow, while booleans, UTF-8 bytes and fixed-size binaries stay views of the map.

Every reader of this package opens a stream through :func:`read_table` (or
:func:`checked_reader`), so one rule holds for the core API, DuckDB and Polars (FORMAT §7):

1. the messages are walked before pyarrow builds anything: a schema first, then record
   batches and dictionary batches only (another writer's extra columns may be dictionaries,
   docs/format.md §11), every buffer and every field node inside its message's body, and
   the end-of-stream marker exactly at the end of the range; a compressed body (FORMAT §1,
   "Compressed index streams": ZSTD or LZ4_FRAME) is bounded before pyarrow allocates
   anything for it: each buffer's declared uncompressed length (its 8-byte prefix) must be
   at most what the field node's length and the column's type allow (:func:`_buffer_bounds`;
   a dictionary batch: not bounded by type) and at most ``MAX_EXPANSION`` times the buffer's
   stored bytes (the codec's own limit: a ZSTD block of 128 KiB takes at least 4 bytes, an
   LZ4 sequence at most 255 bytes per input byte), and the batch's declared bytes in all at
   most ``MAX_BATCH_RATIO`` times its body;
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


def stream_bytes(table: pa.Table, *, compress: bool = False,
                 batch_rows: int | None = None) -> bytes:
    """A complete IPC stream (schema, batches, end-of-stream) of ``table``, deterministically.

    ``compress``: ZSTD body compression when it pays (docs/format.md, "Compressed index
    streams": the plain stream is at least ``COMPRESS_MIN`` bytes and the compressed one at
    most ``COMPRESS_GAIN`` of it, and every buffer within the reader's bounds); else the plain
    stream. ``batch_rows``: record batches of at most that many rows (the lookup's, so one
    row costs one small decode)."""
    plain = _stream(table, None, batch_rows)
    if not compress or len(plain) < COMPRESS_MIN:
        return plain
    packed = _stream(table, "zstd", batch_rows)
    if len(packed) > COMPRESS_GAIN * len(plain):
        return plain
    if _message_problem(pa.py_buffer(packed)) is not None:  # a buffer past the bounds
        return plain
    return packed


#: docs/format.md "Compressed index streams": a stream is compressed when its plain bytes are
#: at least this many and the compressed ones at most ``COMPRESS_GAIN`` of them
COMPRESS_MIN = 4096
COMPRESS_GAIN = 0.9
#: the record batch rows of a compressed ``__lookup__`` (one point read decodes one batch)
LOOKUP_BATCH_ROWS = 16384
#: the most a compressed buffer may expand: ZSTD's limit (an RLE block of 128 KiB is 4 bytes)
#: rounded up, and far above LZ4's 255
MAX_EXPANSION = 1 << 15
#: [docs/format.md] a compressed batch declares at most this many times its body's bytes (plus
#: ``BATCH_SLACK``) in all: index rows hold 32-byte checksums and paths, so true batches
#: stay far below (the writer stores a stream plain rather than past it)
MAX_BATCH_RATIO = 256
BATCH_SLACK = 1 << 16


def _stream(table: pa.Table, compression: str | None, batch_rows: int | None) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        if batch_rows is None:
            for batch in table.to_batches():
                writer.write_batch(batch)
        else:
            for batch in table.combine_chunks().to_batches(max_chunksize=batch_rows):
                writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def read_stream(
    src: RangeSource,
    offset: int,
    length: int,
    what: str,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """Read a stream from ``[offset, offset+length)``; its buffers point into the memory map.

    ``schema``: the exact schema required.
    """
    return read_table(src.read(offset, length, what), what, src.path, schema)


def read_table(buf: pa.Buffer, what: str, path: str | None, schema: pa.Schema | None = None,
               *, check_schema: SchemaCheck | None = None) -> pa.Table:
    """The table of the stream that is exactly ``buf``, checked as the module says."""
    return _validated(lambda: checked_reader(buf, what, path, schema,
                                             check_schema=check_schema).read_all(), what, path)


def _validated(build: Callable[[], pa.Table], what: str, path: str | None) -> pa.Table:
    """``build()`` validated in full, its Arrow errors as FormatError, and no non-nullable
    column holding nulls."""
    try:
        table = build()
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


def batch_index(buf: pa.Buffer, what: str, path: str | None,
                check_schema: SchemaCheck | None = None
                ) -> tuple[pa.Schema, list[tuple[int, int, pa.ipc.Message]]]:
    """The schema of the stream that is exactly ``buf`` and, per record batch, ``(first row,
    rows, message)``, walked without decoding a body (a compressed lookup's batches are then
    decoded one at a time: :func:`read_batch`). The stream's messages pass the walk of the
    module docstring first."""
    checked_reader(buf, what, path, check_schema=check_schema)  # the walk and the schema
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.BufferReader(buf))
        schema = pa.ipc.read_schema(reader.read_next_message())
        out: list[tuple[int, int, pa.ipc.Message]] = []
        start = 0
        while True:
            try:
                msg = reader.read_next_message()
            except StopIteration:
                break
            meta = memoryview(msg.metadata).cast("B")
            header = _field_table(meta, _table_at(meta, _u32(meta, 0)), _MSG_HEADER)
            n = _field_i64(meta, header, _RB_LENGTH) if header is not None else -1
            out.append((start, n, msg))
            start += n
    except FormatError as exc:
        raise FormatError(f"{what}: {exc.problem}", path=path) from None
    except ARROW_ERRORS as exc:
        raise FormatError(f"{what} is not a valid Arrow IPC stream: {exc}", path=path) from None
    return schema, out


def read_batch(schema: pa.Schema, msg: pa.ipc.Message, what: str, path: str | None
               ) -> pa.Table:
    """One record batch message of a stream :func:`batch_index` walked, as a table checked
    like :func:`read_table`'s (bounded before decompressing, validated in full)."""
    def build() -> pa.Table:
        problem = _batch_problem(memoryview(msg.metadata).cast("B"),
                                 0 if msg.body is None else msg.body.size, msg.body, schema)
        if problem is not None:
            raise FormatError(f"{what} {problem}", path=path)
        return pa.Table.from_batches([pa.ipc.read_record_batch(msg, schema)])
    return _validated(build, what, path)


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
    schema: pa.Schema | None = None
    while True:
        try:
            msg = reader.read_next_message()
        except StopIteration:
            break
        if first != (msg.type == "schema"):
            return "does not start with one schema message"
        first = False
        if msg.type == "schema":
            schema = pa.ipc.read_schema(msg)
            continue
        if msg.type not in ("record batch", "dictionary"):
            return f"holds a {msg.type} message (only record and dictionary batches are " \
                   "allowed)"
        problem = _batch_problem(memoryview(msg.metadata).cast("B"),
                                 0 if msg.body is None else msg.body.size, msg.body, schema,
                                 dictionary=msg.type == "dictionary")
        if problem is not None:
            return problem
    if first:
        return "holds no schema message"
    if stream.tell() != buf.size:
        return "has bytes after its end-of-stream marker"
    return None


def _batch_problem(meta: memoryview, body_len: int, body: pa.Buffer | None = None,
                   schema: pa.Schema | None = None, *, dictionary: bool = False
                   ) -> str | None:
    """A record batch's (or a dictionary batch's record batch's) body and nodes; a
    compressed one bounded against ``schema`` (a dictionary batch's buffers by the codec's
    expansion and the batch ratio only: its value type is not looked up by id)."""
    root = _table_at(meta, _u32(meta, 0))
    header = _field_table(meta, root, _MSG_HEADER)
    if header is not None and dictionary:
        header = _field_table(meta, header, _DB_DATA)
    if header is None:
        return "has a record batch message without a header"
    declared = _field_i64(meta, root, _MSG_BODY_LEN)
    if declared != body_len:
        return "has a record batch whose body length does not match its bytes"
    compression = _field_table(meta, header, _RB_COMPRESSION)
    length = _field_i64(meta, header, _RB_LENGTH)
    if length < 0:
        return "has a record batch of negative length"
    buffers = _structs(meta, header, _RB_BUFFERS)
    for offset, size in buffers:
        if offset < 0 or size < 0 or offset > body_len or size > body_len - offset:
            return (f"has a buffer [{offset}, {offset + size}) outside its record batch body "
                    f"({body_len} bytes)")
    nodes = _structs(meta, header, _RB_NODES)
    for count, nulls in nodes:
        if count < 0 or nulls < 0 or nulls > count:
            return "has a field node with an impossible length or null count"
    if compression is None:
        return None
    codec = _field_u8(meta, compression, _BC_CODEC)
    if codec not in (_LZ4_FRAME, _ZSTD) or _field_u8(meta, compression, _BC_METHOD) != 0:
        return "has a record batch compressed with an unknown codec or method"
    if body is None or schema is None:
        return "has a compressed record batch this reader cannot bound"
    bounds: list[int | None] | None = [None] * len(buffers) if dictionary \
        else _buffer_bounds(schema, nodes, length)
    if bounds is None or len(bounds) != len(buffers):
        return "has a compressed record batch whose buffers do not match its columns"
    data = memoryview(body).cast("B")
    total = 0
    for (offset, size), most in zip(buffers, bounds):
        if size == 0:
            continue
        if size < 8:
            return "has a compressed buffer without its 8-byte length"
        # bytes [offset, offset + 8): the buffer's uncompressed length (-1: stored as is)
        n = int(_I64.unpack_from(data, offset)[0])
        if n == -1:
            total += size - 8
            continue
        if n < 0 or n > MAX_EXPANSION * (size - 8) or (most is not None and n > most):
            allowed = "its codec's expansion" if most is None or n <= most else \
                f"{most} bytes for its rows and type"
            return (f"has a compressed buffer declaring {n} bytes from {size - 8} stored "
                    f"(more than {allowed})")
        total += n
    if total > MAX_BATCH_RATIO * body_len + BATCH_SLACK:
        return (f"has a compressed record batch declaring {total} bytes from a {body_len}-byte "
                f"body (more than {MAX_BATCH_RATIO} times it)")
    return None


# BodyCompression (Message.fbs): 0 codec (LZ4_FRAME 0, ZSTD 1), 1 method (BUFFER 0)
_BC_CODEC, _BC_METHOD = 0, 1
_LZ4_FRAME, _ZSTD = 0, 1
#: Arrow pads buffers to 8 bytes and may to 64: a bound is rounded up to this
_PAD = 64


def _field_u8(meta: memoryview, table: int, index: int) -> int:
    pos = _field_pos(meta, table, index)
    if pos is None:
        return 0
    if not 0 <= pos < len(meta):
        raise FormatError("message metadata points outside itself")
    return int(meta[pos])


def _buffer_bounds(schema: pa.Schema, nodes: list[tuple[int, int]], length: int
                   ) -> list[int | None] | None:
    """The most bytes each buffer of a batch may hold uncompressed, in IPC buffer order
    (fields depth first; None: not bounded by the type, the codec's expansion only), from
    the field nodes' lengths (a column's must be the batch's ``length``); None for a type
    this walk does not know or a column of another length."""
    out: list[int | None] = []
    pos = [0]

    def up(n: int) -> int:
        return -(-n // _PAD) * _PAD

    def walk(t: pa.DataType) -> bool:
        if pos[0] >= len(nodes):
            return False
        n = nodes[pos[0]][0]
        pos[0] += 1
        bits = up(-(-n // 8))
        if pa.types.is_null(t):
            return True
        if pa.types.is_dictionary(t):  # a batch holds the indices (docs/format.md §11)
            t = t.index_type
        out.append(bits)  # validity
        if pa.types.is_boolean(t):
            out.append(bits)
        elif pa.types.is_fixed_size_binary(t):
            out.append(up(n * t.byte_width))
        elif pa.types.is_primitive(t):
            out.append(up(n * (t.bit_width // 8)))
        elif pa.types.is_string(t) or pa.types.is_binary(t):
            out.extend([up((n + 1) * 4), None])
        elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            out.extend([up((n + 1) * 8), None])
        elif pa.types.is_list(t) or pa.types.is_large_list(t):
            out.append(up((n + 1) * (4 if pa.types.is_list(t) else 8)))
            return walk(t.value_type)
        elif pa.types.is_map(t):  # list<struct<key, item>>
            out.append(up((n + 1) * 4))
            return walk(pa.struct([t.key_field, t.item_field]))
        elif pa.types.is_fixed_size_list(t):
            return walk(t.value_type)
        elif pa.types.is_struct(t):
            return all(walk(t.field(i).type) for i in range(t.num_fields))
        else:
            return False
        return True

    for f in schema:
        if pos[0] >= len(nodes) or nodes[pos[0]][0] != length or not walk(f.type):
            return None
    return out


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
