"""Arrow IPC streams byte for byte as the Rust tool writes them (arrow-rs 59 ``StreamWriter``).

The Rust znippy writes every index stream with ``arrow_ipc::writer::StreamWriter::try_new``
(``IpcWriteOptions::default()``: metadata version 5, buffers aligned to 64 bytes, no body
compression), and those bytes differ from pyarrow's for the same table: arrow-rs writes a
validity bitmap of ones for a column without nulls (pyarrow an empty buffer), pads each
message and buffer to 64 bytes (pyarrow to 8), and its flatbuffers builder (the ``flatbuffers``
crate 25) lays the metadata out in the order arrow-rs adds each field. To seal a Rust hot
archive into the bytes its own seal writes (:mod:`.hotseal`), this module writes what
arrow-rs would, from the facts of those sources (``arrow-ipc`` 59.3.0 ``writer.rs``,
``convert.rs``, ``gen/``; ``flatbuffers`` 25.12.19 ``builder.rs``): :class:`_Builder` is that
builder's algorithm (back to front, a vtable written once per distinct bytes, defaults left
out), :func:`stream_bytes` the stream writer over it.

Only the types the Rust index streams use are written (``Utf8``, ``Binary``, ``Boolean``,
signed and unsigned integers, ``Float16/32/64``, ``FixedSizeBinary``, ``List`` of those);
another type raises ``ValueError``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa

ALIGNMENT = 64  # IpcWriteOptions::default().alignment
CONTINUATION = b"\xff\xff\xff\xff"
V5 = 4  # MetadataVersion::V5
SCHEMA_HEADER, BATCH_HEADER = 1, 3  # MessageHeader
TYPE_INT, TYPE_FLOAT, TYPE_BINARY, TYPE_UTF8, TYPE_BOOL = 2, 3, 4, 5, 6
TYPE_LIST, TYPE_FIXED_SIZE_BINARY = 12, 15
PRECISION = {16: 0, 32: 1, 64: 2}  # Precision::HALF, SINGLE, DOUBLE


class _Builder:
    """The ``flatbuffers`` crate's ``FlatBufferBuilder``, for what arrow-rs calls on it."""

    def __init__(self) -> None:
        self.buf = bytearray()  # the bytes written so far, front = last written
        self.min_align = 1
        self.fields: list[tuple[int, int]] = []  # (vtable slot, offset of the value)
        self.vtables: dict[bytes, int] = {}  # vtable bytes -> its offset (from the end)

    def used(self) -> int:
        return len(self.buf)

    def _prepend(self, data: bytes) -> None:
        self.buf[0:0] = data

    def align(self, length: int, alignment: int) -> None:
        self.min_align = max(self.min_align, alignment)
        self._prepend(bytes((-(self.used() + length)) & (alignment - 1)))

    def scalar(self, fmt: str, value: int) -> int:
        size = struct.calcsize(fmt)
        self.align(size, size)
        self._prepend(struct.pack(fmt, value))
        return self.used()

    def offset(self, target: int) -> int:
        """A uoffset to ``target`` (an earlier ``used()``), written here."""
        self.align(4, 4)
        self._prepend(struct.pack("<I", self.used() + 4 - target))
        return self.used()

    def string(self, text: str) -> int:
        data = text.encode("utf-8")
        self.align(len(data) + 1, 4)
        self._prepend(data + b"\0")
        self._prepend(struct.pack("<I", len(data)))  # (aligned: len(data) + 1 + pad + 4)
        return self.used()

    def offsets_vector(self, targets: Sequence[int]) -> int:
        self.align(4 * len(targets), 4)
        for target in reversed(targets):  # the last element first, each relative to itself
            self._prepend(struct.pack("<I", self.used() + 4 - target))
        return self.scalar("<I", len(targets))

    def structs_vector(self, items: Sequence[tuple[int, int]]) -> int:
        """A vector of ``{i64, i64}`` structs (``FieldNode``, ``Buffer``)."""
        self.align(16 * len(items), 8)
        self._prepend(b"".join(struct.pack("<qq", a, b) for a, b in items))
        return self.scalar("<I", len(items))

    def start(self) -> int:
        self.fields = []
        return self.used()

    def slot(self, vt: int, fmt: str, value: int, default: int | None = 0) -> None:
        if value != default:
            self.fields.append((vt, self.scalar(fmt, value)))

    def slot_offset(self, vt: int, target: int) -> None:
        self.fields.append((vt, self.offset(target)))

    def end(self, start: int) -> int:
        obj = self.scalar("<i", 0)  # the soffset to the vtable, filled below
        length = max([vt for vt, _ in self.fields], default=2) + 2
        table = bytearray(length)
        struct.pack_into("<HH", table, 0, length, obj - start)
        for vt, at in self.fields:
            struct.pack_into("<H", table, vt, obj - at)
        key = bytes(table)
        where = self.vtables.get(key)
        if where is None:
            self._prepend(key)
            where = self.vtables[key] = self.used()
        at = len(self.buf) - obj  # the table's position from the front
        struct.pack_into("<i", self.buf, at, where - obj)
        self.fields = []
        return obj

    def finish(self, root: int) -> bytes:
        self.align(4, self.min_align)
        self.offset(root)
        return bytes(self.buf)


def _field_type(b: _Builder, typ: pa.DataType) -> tuple[int, int, int]:
    """``get_fb_field_type``: (type id, type table, children vector), made in its order."""
    if pa.types.is_integer(typ):
        children = b.offsets_vector([])
        start = b.start()
        b.slot(6, "<B", 1 if pa.types.is_signed_integer(typ) else 0)  # add_is_signed
        b.slot(4, "<i", typ.bit_width)  # add_bitWidth
        return TYPE_INT, b.end(start), children
    if pa.types.is_floating(typ):
        children = b.offsets_vector([])
        start = b.start()
        b.slot(4, "<h", PRECISION[typ.bit_width])  # add_precision
        return TYPE_FLOAT, b.end(start), children
    if pa.types.is_list(typ):
        child = _field(b, typ.value_field)
        table = b.end(b.start())
        return TYPE_LIST, table, b.offsets_vector([child])
    if pa.types.is_fixed_size_binary(typ):
        start = b.start()
        b.slot(4, "<i", typ.byte_width)
        table = b.end(start)
        return TYPE_FIXED_SIZE_BINARY, table, b.offsets_vector([])
    simple = {pa.utf8(): TYPE_UTF8, pa.binary(): TYPE_BINARY, pa.bool_(): TYPE_BOOL}
    for known, type_id in simple.items():
        if typ.equals(known):
            table = b.end(b.start())
            return type_id, table, b.offsets_vector([])
    raise ValueError(f"arrow-rs stream bytes: type {typ} is not written here")


def _field(b: _Builder, field: pa.Field) -> int:
    """``build_field``: the name, the type (its children first), then the field table."""
    if field.metadata:
        raise ValueError("arrow-rs stream bytes: field metadata is not written here")
    name = b.string(field.name)
    type_id, type_table, children = _field_type(b, field.type)
    start = b.start()
    b.slot_offset(4, name)  # add_name
    b.slot(8, "<B", type_id)  # add_type_type
    b.slot(6, "<B", 1 if field.nullable else 0)  # add_nullable
    b.slot_offset(14, children)  # add_children
    b.slot_offset(10, type_table)  # add_type_
    return b.end(start)


def _metadata(b: _Builder, metadata: dict[str, str]) -> int:
    """``metadata_to_fb``: key/value tables in key order, then their vector."""
    tables = []
    for key in sorted(metadata):
        k, v = b.string(key), b.string(metadata[key])
        start = b.start()
        b.slot_offset(4, k)
        b.slot_offset(6, v)
        tables.append(b.end(start))
    return b.offsets_vector(tables)


def _message(b: _Builder, header_type: int, header: int, body_length: int) -> bytes:
    start = b.start()
    b.slot(4, "<h", V5)  # add_version
    b.slot(6, "<B", header_type)  # add_header_type
    b.slot(10, "<q", body_length)  # add_bodyLength
    b.slot_offset(8, header)  # add_header
    return b.finish(b.end(start))


def schema_message(schema: pa.Schema) -> bytes:
    """The flatbuffer of the schema message (``schema_to_bytes_with_dictionary_tracker``)."""
    b = _Builder()
    field_list = b.offsets_vector([_field(b, field) for field in schema])
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    meta_list = _metadata(b, meta) if meta else None
    start = b.start()
    b.slot_offset(6, field_list)  # add_fields
    if meta_list is not None:
        b.slot_offset(8, meta_list)  # add_custom_metadata
    return _message(b, SCHEMA_HEADER, b.end(start), 0)


def _pad(n: int) -> int:
    return -n % ALIGNMENT


def _write_array(array: pa.Array, nodes: list[tuple[int, int]],
                 places: list[tuple[int, int]], body: bytearray) -> None:
    """``write_array_data``: the array's node, its buffers, then its child's, each buffer
    padded to the alignment. A slice is copied first, as arrow-rs re-bases a sliced array's
    offsets and bits (and a list's child to the range its offsets cover)."""
    if array.offset:
        array = pa.concat_arrays([array])
    nodes.append((len(array), array.null_count))
    buffers, child = _buffers(array)
    for data in buffers:
        places.append((len(body), len(data)))
        body += data + bytes(_pad(len(data)))
    if child is not None:
        _write_array(child, nodes, places, body)


def _buffers(array: pa.Array) -> tuple[list[bytes], pa.Array | None]:
    """One array's own buffers (offset 0), and a list's child as arrow-rs slices it."""
    n = len(array)
    typ = array.type
    raw = array.buffers()
    bitmap_len = (n + 7) // 8
    validity = b"\xff" * bitmap_len if array.null_count == 0 or raw[0] is None else \
        raw[0].to_pybytes()[:bitmap_len]
    if pa.types.is_list(typ):
        list_offsets = array.offsets  # (absolute: the child is not sliced)
        first, last = list_offsets[0].as_py(), list_offsets[n].as_py()
        rebased = struct.pack(f"<{n + 1}i", *(o - first for o in list_offsets.to_pylist()))
        return [validity, rebased], array.values.slice(first, last - first)
    if pa.types.is_string(typ) or pa.types.is_binary(typ):
        offsets = raw[1].to_pybytes()[:4 * (n + 1)] if n else b"\0\0\0\0"
        end = struct.unpack_from("<i", offsets, 4 * n)[0] if n else 0
        values = raw[2].to_pybytes()[:end] if raw[2] is not None else b""
        return [validity, offsets, values], None
    if pa.types.is_boolean(typ):
        return [validity, raw[1].to_pybytes()[:bitmap_len]], None
    if not (pa.types.is_integer(typ) or pa.types.is_floating(typ)
            or pa.types.is_fixed_size_binary(typ)):
        raise ValueError(f"arrow-rs stream bytes: type {typ} is not written here")
    width = typ.byte_width if pa.types.is_fixed_size_binary(typ) else typ.bit_width // 8
    return [validity, raw[1].to_pybytes()[:n * width]], None


def batch_message(batch: pa.RecordBatch) -> tuple[bytes, bytes]:
    """The flatbuffer and the body of one record batch message (``record_batch_to_bytes``)."""
    nodes: list[tuple[int, int]] = []
    places: list[tuple[int, int]] = []
    body = bytearray()
    for column in batch.columns:
        _write_array(column, nodes, places, body)
    b = _Builder()
    buffers = b.structs_vector(places)
    node_list = b.structs_vector(nodes)
    start = b.start()
    b.slot(4, "<q", batch.num_rows)  # add_length
    b.slot_offset(6, node_list)  # add_nodes
    b.slot_offset(8, buffers)  # add_buffers
    return _message(b, BATCH_HEADER, b.end(start), len(body)), bytes(body)


def _framed(message: bytes) -> bytes:
    padded = len(message) + 8 + _pad(len(message) + 8) - 8
    return CONTINUATION + struct.pack("<i", padded) + message + bytes(padded - len(message))


def stream_bytes(table: pa.Table | pa.RecordBatch) -> bytes:
    """A whole stream, as ``StreamWriter::try_new``, one ``write`` per record batch and
    ``finish`` write it: the schema message, each batch, the end-of-stream marker."""
    batches = [table] if isinstance(table, pa.RecordBatch) else table.to_batches()
    out = bytearray(_framed(schema_message(table.schema)))
    for batch in batches:
        message, body = batch_message(batch)
        out += _framed(message) + body
    return bytes(out + CONTINUATION + b"\0\0\0\0")
