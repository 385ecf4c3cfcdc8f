"""The Rust tool's typed ``__znippy_meta__`` as this project's ``__meta__`` (docs/interop.md).

``znippy-common`` 0.9.13+ (``meta_index.rs``, ``meta_schema``) writes one row per fact:
``relative_path`` (utf8, null for a fact of the archive), ``key`` (utf8), ``value_type`` (int8:
0 str, 1 i64, 2 f64, 3 bool, 4 bytes) and one nullable column per kind, ``v_str`` (utf8),
``v_i64`` (int64), ``v_f64`` (float64), ``v_bool`` (bool), ``v_bytes`` (binary), exactly the
one ``value_type`` names filled; rows sorted by (key, relative_path); the schema metadata holds
``znippy_format_version``. This project's ``__meta__`` holds text values
(``relative_path``, ``key``, ``value``): a typed row reads as its text — a string as it is,
an integer in decimal, a float as Python's ``repr`` (the shortest text that reads back to the
same double), ``true``/``false``, bytes as lowercase hex.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import FormatError
from ..format import build
from ..format.schema import META_SCHEMA

KINDS = ("v_str", "v_i64", "v_f64", "v_bool", "v_bytes")
TYPED_META_SCHEMA = pa.schema([
    pa.field("relative_path", pa.utf8(), nullable=True),
    pa.field("key", pa.utf8(), nullable=False),
    pa.field("value_type", pa.int8(), nullable=False),
    pa.field("v_str", pa.utf8(), nullable=True),
    pa.field("v_i64", pa.int64(), nullable=True),
    pa.field("v_f64", pa.float64(), nullable=True),
    pa.field("v_bool", pa.bool_(), nullable=True),
    pa.field("v_bytes", pa.binary(), nullable=True),
])


def is_typed(schema: pa.Schema) -> bool:
    """The Rust tool's typed layout (names and types; nullability is not checked)."""
    return [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in TYPED_META_SCHEMA]


def _text(kind: int, value: object) -> str:
    if kind == 3:
        return "true" if value else "false"
    if kind == 4:
        return bytes(value).hex()  # type: ignore[call-overload]
    if kind == 2:
        return repr(float(value))  # type: ignore[arg-type]
    return str(value)


def as_text(table: pa.Table, path: str | None = None) -> pa.Table:
    """A typed ``__znippy_meta__`` table as ``__meta__`` rows (``META_SCHEMA``)."""
    cols = table.to_pydict()
    values = []
    for i, kind in enumerate(cols["value_type"]):
        if not 0 <= kind < len(KINDS):
            raise FormatError(f"__meta__ row {i}: value_type {kind} is not 0..4", path=path)
        value = cols[KINDS[kind]][i]
        if value is None:
            raise FormatError(f"__meta__ row {i}: its {KINDS[kind]} is null", path=path)
        values.append(_text(kind, value))
    return build.table({"relative_path": cols["relative_path"], "key": cols["key"],
                        "value": values}, META_SCHEMA)


def as_typed(table: pa.Table, like: pa.Table | None = None) -> pa.Table:
    """``__meta__`` rows (``META_SCHEMA``) as typed ``__znippy_meta__`` rows: a fact that
    ``like`` (a typed table) holds with the same path, key and text (:func:`as_text`) keeps
    its typed row, so an append keeps each old value's kind; any other fact is a string
    (``value_type`` 0)."""
    kept: dict[tuple[str | None, str, str], list[dict[str, object]]] = {}
    if like is not None:
        for typed, text in zip(like.to_pylist(), as_text(like).to_pylist()):
            kept.setdefault((text["relative_path"], text["key"], text["value"]), []).append(typed)
    rows = []
    for r in table.to_pylist():
        same = kept.get((r["relative_path"], r["key"], r["value"]))
        rows.append(same.pop(0) if same else
                    {"relative_path": r["relative_path"], "key": r["key"], "value_type": 0,
                     "v_str": r["value"], "v_i64": None, "v_f64": None, "v_bool": None,
                     "v_bytes": None})
    return pa.Table.from_pylist(rows, schema=TYPED_META_SCHEMA)
