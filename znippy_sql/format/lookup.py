"""The sorted lookup (FORMAT §4 ``__lookup__``): every data row, base columns, in path order.

Writers store it as a section; a reader of an archive without one (the Rust tool's layout) and
``verify`` build it from the data sub-indexes with the same function.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from .kernels import SortOptions, call_function
from .schema import BASE_NAMES, LOOKUP_SCHEMA, GroupKey


def build_lookup(groups: Mapping[GroupKey, pa.Table]) -> pa.Table:
    """All data rows, base columns only, sorted by (relative_path bytes, chunk_seq)."""
    parts = [pa.Table.from_arrays([groups[k].column(n) for n in BASE_NAMES], schema=LOOKUP_SCHEMA)
             for k in sorted(groups)]
    if not parts:
        return LOOKUP_SCHEMA.empty_table()
    table = pa.concat_tables(parts).combine_chunks()
    # Arrow orders utf8 by bytes, which is what the fst trie requires.
    order = call_function("sort_indices", [table], SortOptions(
        sort_keys=[("relative_path", "ascending"), ("chunk_seq", "ascending")]))
    return call_function("take", [table, order]).combine_chunks()  # type: ignore[no-any-return]
