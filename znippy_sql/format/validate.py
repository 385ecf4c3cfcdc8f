"""What a reader accepts in a data sub-index and the lookup, beyond a valid Arrow stream.

docs/format.md, "What a reader accepts", states these rules; this module is their one
implementation, called by every read path (``read/reader.py``, the DuckDB and Polars layers,
``verify``, ``append``), so each refuses the same things with the same words.

- :func:`subindex_schema_problem`: the set of sub-index schemas — the base columns exactly
  once, in order, with their types (then the ``OPTIONAL_BASE_FIELDS`` present); then
  optionally ``pkg_type`` (Int8); then at most ``MAX_MODULE_COLUMNS`` module columns named
  in ASCII, none named like a column of a view (case-insensitively, as DuckDB compares
  names), of any Arrow type nested at most ``MAX_NESTING`` deep (another writer's lists,
  structs, dictionaries, maps: kept and shown, read through :func:`portable`); schema
  metadata valid UTF-8, with sound values for the keys this project reads.
- :func:`union_problem`: module columns of the same name have one type in every group.
- :func:`rows_problem`: the unsigned values views and readers do arithmetic on are in range.
- :func:`lookup_problem`: the lookup is sorted, each path once, its chunks ``0..n-1`` with
  contiguous ``fdata_offset``s and, in a file of several chunks, none empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from .build import numpy_of
from .kernels import call_function, filter_by, one_array
from .schema import (BASE_FIELDS, BASE_NAMES, INNER, INNER_FIELD, LOOKUP_SCHEMA, META_SCHEMA,
                     PACKED_LOOKUP_SCHEMA, GroupKey)

#: The largest chunk a reader decodes [fixed here]: a frame's declared size is an untrusted
#: length, so it is capped before anything is allocated for it. Writers cut at 10 MiB.
MAX_CHUNK_BYTES = 1 << 30
MAX_MODULE_COLUMNS = 64
#: Distinct module columns over all the groups of one archive (the width of its views).
MAX_UNION_COLUMNS = 256
MAX_NAME = 64
#: Sums of sizes over a table stay below this (DuckDB casts them to UBIGINT, Polars to UInt64).
MAX_TOTAL = 1 << 62

#: Names a module column may not take: every column of the files, chunks and lookup views
#: and of ``read_files`` (lower case; DuckDB does not tell ``Repo`` from ``repo``).
VIEW_COLUMNS = frozenset({
    *BASE_NAMES, INNER, "pkg_type", "pkg_type_name", "repo", "module", "module_name", "size",
    "stored_size", "chunks", "digest", "archive", "content",
})
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: The Arrow types a module column may have.
MODULE_TYPES: frozenset[pa.DataType] = frozenset({
    pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
    pa.uint32(), pa.uint64(), pa.float32(), pa.float64(), pa.utf8(), pa.large_utf8(),
    pa.binary(), pa.large_binary(), pa.date32(),
    *(pa.timestamp(unit, tz) for unit in ("s", "ms", "us") for tz in (None, "UTC")),
})
#: Schema metadata keys this project reads, and the integer range of each value.
_INT_KEYS = {"znippy.block_size": (1, MAX_CHUNK_BYTES),
             "znippy.openzl.level": (-(1 << 17), 22),
             "znippy.openzl.format_version": (0, 1 << 16)}


def schema_metadata(schema: pa.Schema) -> tuple[dict[str, str], str | None]:
    """The schema's metadata as text, and what is wrong with it (or None)."""
    out: dict[str, str] = {}
    for key, value in (schema.metadata or {}).items():
        try:
            k, v = key.decode("utf-8"), value.decode("utf-8")
        except UnicodeDecodeError:
            return out, "has schema metadata that is not valid UTF-8"
        if k in _INT_KEYS:
            lo, hi = _INT_KEYS[k]
            if not re.fullmatch(r"-?[0-9]{1,12}", v) or not lo <= int(v) <= hi:
                return out, f"has schema metadata {k}={v[:40]!r}, not an integer in {lo}..{hi}"
        out[k] = v
    return out, None


#: Columns that may follow the base columns, each optional, in this order, with their exact
#: types (a column of the base part added by a later format revision goes here):
#: ``inner_offset`` of packed blobs (FORMAT §3).
OPTIONAL_BASE_FIELDS: tuple[pa.Field, ...] = (INNER_FIELD,)
#: Nesting of an extra column's type (list of struct of ...) beyond which it is refused.
MAX_NESTING = 8


def _leading_problem(schema: pa.Schema) -> tuple[str | None, int]:
    """The base columns, then the optional base columns present: what is wrong with them,
    and how many leading columns they are."""
    n = len(BASE_FIELDS)
    if len(schema) < n or not pa.schema(list(schema)[:n]).equals(LOOKUP_SCHEMA):
        from .ipc import describe

        return f"does not start with the base columns (has {describe(schema)})", n
    for want in OPTIONAL_BASE_FIELDS:
        if n < len(schema) and schema.field(n).name == want.name:
            if not schema.field(n).equals(want):
                nullable = "" if want.nullable else "non-nullable "
                return f"has {want.name} of type {schema.field(n).type}, expected " \
                       f"{nullable}{want.type}", n
            n += 1
    return None, n


def subindex_schema_problem(schema: pa.Schema) -> str | None:
    """What keeps ``schema`` out of the closed set of sub-index schemas, or None."""
    problem, n = _leading_problem(schema)
    if problem is not None:
        return problem
    rest = list(schema)[n:]
    if rest and rest[0].name == "pkg_type":
        if rest[0].type != pa.int8():
            return f"has pkg_type of type {rest[0].type}, expected int8"
        rest = rest[1:]
    if len(rest) > MAX_MODULE_COLUMNS:
        return f"has {len(rest)} module columns (at most {MAX_MODULE_COLUMNS})"
    seen: set[str] = set()
    for f in rest:
        low = f.name.lower()
        if low in VIEW_COLUMNS or low in seen:
            return f"has a second column named {f.name!r}"
        seen.add(low)
        if len(f.name) > MAX_NAME or not _MODULE_NAME.match(f.name):
            return (f"has a module column named {f.name[:MAX_NAME]!r} (expected ASCII "
                    f"letters, digits and '_', at most {MAX_NAME})")
        if f.type not in MODULE_TYPES and _nesting(f.type) > MAX_NESTING:
            return f"has column {f.name!r} of a type nested more than {MAX_NESTING} deep"
    return schema_metadata(schema)[1]


def module_type_problem(t: pa.DataType) -> str | None:
    """Why a writer refuses a module column of type ``t`` (None: it writes it). Every other
    Arrow type is read through every path (:func:`portable`); a union is not written
    (pyarrow builds none from values; another writer's is read as its text), nor a type
    nested deeper than readers accept."""
    if _has(t, pa.types.is_union):
        return "a union type cannot be written (declare one column per alternative)"
    if _nesting(t) > MAX_NESTING:
        return f"nested more than {MAX_NESTING} deep"
    return None


def _has(t: pa.DataType, pred: Any) -> bool:
    """Whether ``t`` or a type inside it satisfies ``pred``."""
    if pred(t):
        return True
    if pa.types.is_dictionary(t) or pa.types.is_run_end_encoded(t):
        return _has(t.value_type, pred)
    return any(_has(t.field(i).type, pred) for i in range(t.num_fields))


def lookup_schema_problem(schema: pa.Schema) -> str | None:
    """``__lookup__`` has the base columns, and ``inner_offset`` in an archive with packed
    blobs (FORMAT §3, §4)."""
    if schema.equals(LOOKUP_SCHEMA) or schema.equals(PACKED_LOOKUP_SCHEMA):
        return None
    from .ipc import describe

    return f"has columns {describe(schema)}, expected {describe(PACKED_LOOKUP_SCHEMA)}"


def _nesting(t: pa.DataType) -> int:
    """How deep ``t`` nests (a list of int: 2); dictionaries count their value type."""
    if pa.types.is_dictionary(t):
        return 1 + _nesting(t.value_type)
    if t.num_fields == 0:
        return 1
    return 1 + max(_nesting(t.field(i).type) for i in range(t.num_fields))


def union_problem(schemas: Iterable[tuple[str, pa.Schema]]) -> str | None:
    """Module columns of one name (case-insensitively) must have one type in every group
    (``schemas``: each group's name, as errors should say it, and its schema)."""
    types: dict[str, tuple[str, pa.DataType, str]] = {}
    for where, schema in schemas:
        for f in list(schema)[len(BASE_FIELDS):]:
            if f.name in ("pkg_type", INNER):
                continue
            low = f.name.lower()
            had = types.setdefault(low, (f.name, f.type, where))
            if had[0] != f.name or had[1] != f.type:
                return (f"module column {f.name!r} ({f.type}) of {where} does not match "
                        f"{had[0]!r} ({had[1]}) of {had[2]}")
    if len(types) > MAX_UNION_COLUMNS:
        return f"sub-indexes have {len(types)} distinct module columns (at most " \
               f"{MAX_UNION_COLUMNS})"
    return None


def _u64(table: pa.Table, name: str) -> np.ndarray:
    return numpy_of(one_array(table.column(name)))


def rows_problem(table: pa.Table, tail_offset: int) -> str | None:
    """What is out of range in the base columns of ``table`` (a sub-index or the lookup).

    Every blob lies in ``[0, tail_offset)``; a raw chunk is as long as its blob and a
    compressed one declares at most ``MAX_CHUNK_BYTES``; offsets and the sums of sizes stay
    below ``MAX_TOTAL``, so no view's cast or reader's arithmetic can overflow.
    """
    if table.num_rows == 0:
        return None
    off, size = _u64(table, "blob_offset"), _u64(table, "blob_size")
    usz, fdo = _u64(table, "uncompressed_size"), _u64(table, "fdata_offset")
    packed = numpy_of(one_array(table.column("compressed")))
    tail = np.uint64(max(tail_offset, 0))
    bad = (size > tail) | (off > tail - np.minimum(size, tail))
    if bad.any():
        return _row_problem(table, bad, "has a blob that runs past the blob region into "
                                        f"the index tail at {tail_offset}")
    bad = packed & (usz > MAX_CHUNK_BYTES)
    if bad.any():
        return _row_problem(table, bad, "has a compressed chunk whose size exceeds the "
                                        f"{MAX_CHUNK_BYTES}-byte chunk limit")
    bad = ~packed & (usz != size)
    if bad.any():
        return _row_problem(table, bad, "has a raw chunk whose blob_size is not its "
                                        "uncompressed_size")
    if INNER in table.schema.names:
        inner = _u64(table, INNER)
        bad = (inner > 0) & ~packed
        if bad.any():
            return _row_problem(table, bad, f"has a raw chunk with a non-zero {INNER}")
        bad = (inner > MAX_CHUNK_BYTES) | (inner + usz > MAX_CHUNK_BYTES)
        if bad.any():
            return _row_problem(table, bad, f"has a slice past the {MAX_CHUNK_BYTES}-byte "
                                            "limit of a decoded blob")
    if bool((fdo >= MAX_TOTAL).any()) or float(usz.sum(dtype=np.float64)) >= MAX_TOTAL \
            or float(size.sum(dtype=np.float64)) >= MAX_TOTAL:
        return "has sizes or offsets too large to add up"
    return None


def _row_problem(table: pa.Table, bad: np.ndarray, text: str) -> str:
    row = int(np.flatnonzero(bad)[0])
    path = one_array(table.column("relative_path"))[row].as_py()
    return f"{text} ({path!r} chunk {one_array(table.column('chunk_seq'))[row].as_py()})"


def lookup_problem(lookup: pa.Table) -> str | None:
    """The lookup's shape (FORMAT §4): sorted by (path as UTF-8 bytes, chunk_seq), each
    path's rows one run with ``chunk_seq`` 0..n-1 and contiguous ``fdata_offset``s."""
    n = lookup.num_rows
    if n == 0:
        return None
    paths = one_array(lookup.column("relative_path"))
    seq = _u64(lookup, "chunk_seq").astype(np.int64)
    fdo, usz = _u64(lookup, "fdata_offset"), _u64(lookup, "uncompressed_size")
    same = np.zeros(n, dtype=bool)  # same[i]: row i continues the file of row i - 1
    if n > 1:
        eq = call_function("equal", [paths.slice(0, n - 1), paths.slice(1)])
        same[1:] = numpy_of(eq)
        less = call_function("less", [paths.slice(0, n - 1), paths.slice(1)])
        order = numpy_of(less) | same[1:]
        if not order.all():
            return _row_problem(lookup, np.append(False, ~order), "is not sorted by path")
    first = ~same
    bad = np.where(first, (seq != 0) | (fdo != 0), False)
    if n > 1:
        cont = (seq[1:] == seq[:-1] + 1) & (fdo[1:] == fdo[:-1] + usz[:-1])
        bad[1:] |= same[1:] & ~cont
        # a file of several chunks has no empty one: every byte it holds is read
        multi = same.copy()
        multi[:-1] |= same[1:]
        empty = multi & (usz == 0)
        if empty.any():
            return _row_problem(lookup, empty, "has an empty chunk in a file of several "
                                               "chunks")
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        want_seq, want_off = (int(seq[i - 1]) + 1, int(fdo[i - 1]) + int(usz[i - 1])) \
            if same[i] else (0, 0)
        return (f"holds {paths[i].as_py()!r}: chunk {int(seq[i])} at {int(fdo[i])}, expected "
                f"chunk {want_seq} at {want_off}")
    return None


def meta_problem(table: object) -> str | None:
    """What keeps a ``__meta__`` section from being read as facts: the names and types of
    ``META_SCHEMA`` (``key``/``value`` may be declared nullable, a table given to the writer
    is stored as given, but hold no nulls)."""
    if not isinstance(table, pa.Table) or [(f.name, f.type) for f in table.schema] != [
            (f.name, f.type) for f in META_SCHEMA]:
        got = table.schema if isinstance(table, pa.Table) else "raw bytes"
        return f"has schema {got}, expected {META_SCHEMA}"
    if table.column("key").null_count or table.column("value").null_count:
        return ": a fact without a key or a value"
    return None


def duplicate_paths(groups: Iterable[tuple[GroupKey, pa.Table]]) -> list[str]:
    """Paths whose first chunk appears more than once over the given groups."""
    firsts = []
    for _, table in groups:
        seq = _u64(table, "chunk_seq")
        paths = one_array(table.column("relative_path"))
        firsts.append(filter_by(paths, seq == 0))
    if not firsts:
        return []
    allp = pa.concat_arrays(firsts) if len(firsts) > 1 else firsts[0]
    counts = call_function("value_counts", [allp])
    many = numpy_of(counts.field("counts")) > 1
    return sorted(filter_by(counts.field("values"), many).to_pylist())


def _portable_type(t: pa.DataType) -> pa.DataType | None:
    """What an extra column of type ``t`` is read as so that pyarrow's kernels, DuckDB,
    Polars, Spark and Daft all take it (None: as it is), at any depth: a string or binary view
    as its plain kind, a half float as a float, a time32 as a time64, a date64 as a date32, a
    list view as a list, a 32/64/256-bit decimal of at most 38 digits as a 128-bit one and a
    wider decimal as its text, a timestamp in a time zone no tz database knows in UTC (the
    instants are the same; only the label goes), a dictionary or a run-end encoded column as
    its values, an extension type (UUID, JSON) as its storage; a type no engine takes
    everywhere (a union, an interval: Polars has neither), and a run-end encoding inside
    another type, makes the whole column its JSON text (:func:`_as_text`)."""
    if _text_only(t, top=True):
        return pa.utf8()
    if pa.types.is_run_end_encoded(t):
        return _portable_type(t.value_type) or t.value_type
    if pa.types.is_dictionary(t):  # Daft takes none
        return _portable_type(t.value_type) or t.value_type
    if isinstance(t, pa.BaseExtensionType):  # UUID, JSON, ...: Spark and Daft take none
        return _portable_type(t.storage_type) or t.storage_type
    if pa.types.is_map(t):
        key, item = _portable_type(t.key_type), _portable_type(t.item_type)
        if key is None and item is None:
            return None
        return pa.map_(t.key_field.with_type(key or t.key_type),
                       t.item_field.with_type(item or t.item_type), t.keys_sorted)
    leaf = _portable_leaf(t)
    if leaf is not None or t.num_fields == 0:
        return leaf
    kids = [t.field(i) for i in range(t.num_fields)]
    mapped = [_portable_type(f.type) for f in kids]
    if all(m is None for m in mapped):
        return None
    fields = [f.with_type(m or f.type) for f, m in zip(kids, mapped)]
    if pa.types.is_struct(t):
        return pa.struct(fields)
    if pa.types.is_fixed_size_list(t):
        return pa.list_(fields[0], t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(fields[0])
    return pa.list_(fields[0])


def _portable_leaf(t: pa.DataType) -> pa.DataType | None:
    if t == pa.string_view():
        return pa.utf8()
    if t == pa.binary_view():
        return pa.binary()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_time32(t):  # Spark and Daft take time64 only
        return pa.time64("us")
    if pa.types.is_date64(t):  # Spark takes date32 only
        return pa.date32()
    if pa.types.is_decimal32(t) or pa.types.is_decimal64(t):  # Daft takes decimal128
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(_portable_type(t.value_type) or t.value_type))
    if pa.types.is_large_list_view(t):
        return pa.large_list(t.value_field.with_type(_portable_type(t.value_type)
                                                     or t.value_type))
    if pa.types.is_decimal(t) and t.precision > 38:
        return pa.utf8()
    if pa.types.is_decimal256(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_timestamp(t) and t.tz not in (None, "UTC") and not _known_zone(t.tz):
        return pa.timestamp(t.unit, "UTC")
    return None


def _text_only(t: pa.DataType, top: bool = False) -> bool:
    """Whether ``t`` holds a type no cast makes portable (see :func:`_portable_type`)."""
    if pa.types.is_union(t) or pa.types.is_interval(t):
        return True
    if pa.types.is_run_end_encoded(t):
        return not top or _text_only(t.value_type)
    if pa.types.is_dictionary(t):
        return _text_only(t.value_type)
    return any(_text_only(t.field(i).type) for i in range(t.num_fields))


def _as_text(col: pa.ChunkedArray) -> pa.Array:
    """Each value as JSON text (null stays null): what a column of a type no engine takes
    everywhere is read as."""
    import json

    def text(v: object) -> str:
        return json.dumps(v, ensure_ascii=False, default=str)

    return pa.array([None if v is None else text(v) for v in col.to_pylist()], pa.utf8())


def _portable_column(col: pa.ChunkedArray, t: pa.DataType, new: pa.DataType
                     ) -> pa.ChunkedArray | pa.Array:
    if _text_only(t, top=True):
        return _as_text(col)
    if _has_list_view(t):  # pyarrow's cast from a list view can lose values: rebuilt
        return pa.array(col.to_pylist(), new)
    if pa.types.is_run_end_encoded(t):
        from .kernels import call_function

        col = pa.chunked_array([call_function("run_end_decode", [c]) for c in col.chunks],
                               t.value_type)
    return col.cast(new)


def _has_list_view(t: pa.DataType) -> bool:
    return _has(t, lambda k: pa.types.is_list_view(k) or pa.types.is_large_list_view(k))


def _known_zone(name: str) -> bool:
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return re.fullmatch(r"[+-][0-9]{2}:[0-9]{2}", name) is not None  # a fixed offset
    return True


def portable_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with each extra column's type as :func:`portable` reads it."""
    fields = [f.with_type(_portable_type(f.type) or f.type) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def portable(table: pa.Table) -> pa.Table:
    """A checked sub-index with its extra columns in types every engine takes (a no-op, and
    no copy, for every schema this project or the Rust tool 0.8 writes)."""
    for i, f in enumerate(table.schema):
        new = _portable_type(f.type)
        if new is not None:
            table = table.set_column(i, f.with_type(new),
                                     _portable_column(table.column(i), f.type, new))
    return table
