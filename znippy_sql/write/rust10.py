"""Archives for the Rust tool 0.9.1 … 0.10.6: ``compat="rust-0.10"`` (docs/interop.md).

A ``rust-0.8`` archive (:mod:`.compat`: data sub-indexes of one schema and the manifest) with
what the later Rust readers use besides: every data sub-index records
``znippy_format_version = 3`` (the Rust reader's version guard reads it from the first data
sub-index), and the sorted lookup and the fst trie follow the data sub-indexes under the Rust
names, ``__znippy_lookup__`` (the base columns, no schema metadata) and ``__znippy_trie__``,
with the Rust reserved ``pkg_type`` -128, so ``znippy get`` finds a file through the trie
instead of scanning the index; and ``__meta__`` (``meta=``, ``--meta``) as the Rust typed
``__znippy_meta__`` (every value a string, ``value_type`` 0; rows by key then path), which
``znippy meta`` searches. Signatures are still refused (the Rust digests are not written).
The Rust readers skip any other reserved name they do not know but read every unknown
non-reserved one as data; this project's own section names are not theirs, which is why the
default layout is not read by them.
"""

from __future__ import annotations

import pyarrow as pa

from ..format.ipc import stream_bytes
from ..format.schema import BASE_NAMES, GroupKey
from ..interop.meta import TYPED_META_SCHEMA
from ..interop.layouts import RUST_RESERVED_PKG_TYPE

RUST10 = "rust-0.10"
#: the data sub-indexes' schema metadata the Rust readers check
FORMAT_METADATA = {"znippy_format_version": "3"}


def rust_index_sections(lookup: pa.Table, trie: bytes) -> list[tuple[GroupKey, bytes, int]]:
    """``__znippy_lookup__`` and ``__znippy_trie__`` of the sorted ``lookup`` and its fst
    ``trie`` (the same map as ``__trie__``'s)."""
    base = lookup.select(list(BASE_NAMES)).replace_schema_metadata(None)
    return [(GroupKey(RUST_RESERVED_PKG_TYPE, "", "__znippy_lookup__"), stream_bytes(base),
             base.num_rows),
            (GroupKey(RUST_RESERVED_PKG_TYPE, "", "__znippy_trie__"), trie, 0)]


def rust_meta_section(meta: pa.Table) -> tuple[GroupKey, bytes, int]:
    """``__znippy_meta__`` of this project's ``__meta__`` rows (all strings)."""
    rows = sorted(meta.to_pylist(), key=lambda r: (r["key"].encode(),
                                                   (r["relative_path"] or "").encode()))
    n = len(rows)
    cols = {"relative_path": [r["relative_path"] for r in rows],
            "key": [r["key"] for r in rows], "value_type": [0] * n,
            "v_str": [r["value"] for r in rows], "v_i64": [None] * n, "v_f64": [None] * n,
            "v_bool": [None] * n, "v_bytes": [None] * n}
    schema = TYPED_META_SCHEMA.with_metadata(FORMAT_METADATA)
    table = pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)
    return GroupKey(RUST_RESERVED_PKG_TYPE, "", "__znippy_meta__"), stream_bytes(table), n
