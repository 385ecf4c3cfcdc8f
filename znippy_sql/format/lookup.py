"""The sorted lookup (FORMAT §4 ``__lookup__``): every data row, base columns, in path order.

Writers store it as a section; a reader of an archive without one (the Rust tool's layout) and
``verify`` build it from the data sub-indexes with the same function.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from .build import numpy_of
from .kernels import SortOptions, call_function
import numpy as np

from .schema import BASE_FIELDS, BASE_NAMES, INNER, INNER_FIELD, LOOKUP_SCHEMA, \
    PACKED_LOOKUP_SCHEMA, GroupKey


def has_packs(table: pa.Table) -> bool:
    """Whether ``table`` (a sub-index or the lookup) has the ``inner_offset`` column."""
    return INNER in table.schema.names


def unify_inner(groups: Mapping[GroupKey, pa.Table]) -> dict[GroupKey, pa.Table]:
    """FORMAT §3: every data sub-index has ``inner_offset`` right after the base columns when
    any row of the archive is a slice inside a packed blob (a non-zero value), and none has
    it otherwise. Groups without it get zeros; the column is dropped where none is needed."""
    packed = False
    for t in groups.values():
        if has_packs(t) and t.num_rows and any(
                len(c) and int(np.max(numpy_of(c))) > 0 for c in t.column(INNER).chunks):
            packed = True
            break
    n = len(BASE_FIELDS)
    out: dict[GroupKey, pa.Table] = {}
    for key, t in groups.items():
        there = has_packs(t)
        if packed and not there:
            t = t.add_column(n, INNER_FIELD, _zeros(t.num_rows))
        elif there and not packed:
            t = t.drop_columns([INNER])
        out[key] = t
    return out


def _zeros(n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(bytes(8 * n))])


def with_inner(*groups: Mapping[GroupKey, pa.Table]) -> list[dict[GroupKey, pa.Table]]:
    """The tables of every mapping, each with ``inner_offset`` (zeros where it had none)
    when any of them has it: an append merges old rows with new ones under one schema."""
    if not any(has_packs(t) for g in groups for t in g.values()):
        return [dict(g) for g in groups]
    n = len(BASE_FIELDS)
    return [{k: t if has_packs(t) else t.add_column(
                n, INNER_FIELD, _zeros(t.num_rows))
             for k, t in g.items()} for g in groups]


def build_lookup(groups: Mapping[GroupKey, pa.Table]) -> pa.Table:
    """All data rows, base columns (and ``inner_offset`` when the groups have it), sorted by
    (relative_path bytes, chunk_seq)."""
    inner = any(has_packs(t) for t in groups.values())
    names, schema = ((*BASE_NAMES, INNER), PACKED_LOOKUP_SCHEMA) if inner \
        else (BASE_NAMES, LOOKUP_SCHEMA)
    parts = [pa.Table.from_arrays([groups[k].column(n) for n in names], schema=schema)
             for k in sorted(groups)]
    if not parts:
        return schema.empty_table()
    table = pa.concat_tables(parts).combine_chunks()
    # Arrow orders utf8 by bytes, which is what the fst trie requires.
    order = call_function("sort_indices", [table], SortOptions(
        sort_keys=[("relative_path", "ascending"), ("chunk_seq", "ascending")]))
    return call_function("take", [table, order]).combine_chunks()
