"""Arrow sub-index rows ⇄ Iceberg-typed rows, exactly.

Iceberg has no unsigned or 8/16-bit integers. On the way in: ``uint64`` is bit-cast to ``int64``
(so 2^64-1 is stored as -1 and survives), ``uint32`` widens to ``int64``, ``int8``/``int16``/
``uint8``/``uint16`` widen to ``int32``; ``FixedSizeBinary(32)`` is Iceberg ``fixed[32]``,
everything else is kept. A column ``znippy_ordinal`` (int64: the row's place in production
order over the whole store) is appended. On the way out the group's own Arrow schema, kept in
the table's properties (:func:`encode_schema`), puts every column back to its exact type.
"""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.compute as pc

ORDINAL = "znippy_ordinal"
ORDINAL_FIELD = pa.field(ORDINAL, pa.int64(), nullable=False)

_WIDEN_TO_INT32 = (pa.types.is_int8, pa.types.is_int16, pa.types.is_uint8, pa.types.is_uint16)


def iceberg_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_uint64(t) or pa.types.is_uint32(t):
        return pa.int64()
    if any(test(t) for test in _WIDEN_TO_INT32):
        return pa.int32()
    if pa.types.is_large_string(t):
        return pa.utf8()
    return t


def iceberg_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema the Iceberg table is created from: converted types, then the ordinal."""
    if ORDINAL in schema.names:
        raise ValueError(f"column name {ORDINAL!r} is reserved by the store")
    fields = [pa.field(f.name, iceberg_type(f.type), nullable=f.nullable) for f in schema]
    return pa.schema([*fields, ORDINAL_FIELD])


def to_iceberg(table: pa.Table, ordinals: pa.Array) -> pa.Table:
    """``table`` (a group's rows) in Iceberg types, with its ordinals appended."""
    cols = []
    for f, col in zip(table.schema, table.columns):
        arr = col.combine_chunks()
        if pa.types.is_uint64(f.type):
            arr = arr.view(pa.int64())  # bit-cast: 2^64-1 becomes -1
        else:
            arr = arr.cast(iceberg_type(f.type))
        cols.append(arr)
    cols.append(ordinals.cast(pa.int64()))
    return pa.Table.from_arrays(cols, schema=iceberg_schema(table.schema))


def from_iceberg(table: pa.Table, schema: pa.Schema) -> tuple[pa.Table, pa.Array]:
    """Rows read back from Iceberg → (rows in the group's exact ``schema``, their ordinals)."""
    cols = []
    for f in schema:
        arr = table.column(f.name).combine_chunks()
        if pa.types.is_uint64(f.type):
            arr = arr.cast(pa.int64()).view(pa.uint64())  # bit-cast back
        elif arr.type != f.type:
            arr = arr.cast(f.type)  # checked: a value out of range raises
        cols.append(arr)
    ordinals = table.column(ORDINAL).combine_chunks().cast(pa.int64())
    return pa.Table.from_arrays(cols, schema=schema), ordinals


def in_order(table: pa.Table, ordinals: pa.Array) -> tuple[pa.Table, pa.Array]:
    """Rows sorted by ordinal (canonical order), as one chunk."""
    order = pc.sort_indices(ordinals)
    return table.take(order).combine_chunks(), ordinals.take(order)


def encode_schema(schema: pa.Schema) -> str:
    """A group's Arrow schema as a table-property string (base64 of its IPC form)."""
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def decode_schema(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))
