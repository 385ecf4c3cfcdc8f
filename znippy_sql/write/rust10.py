"""Archives for the Rust tool 0.9.1 … 0.10.6: ``compat="rust-0.10"`` (docs/interop.md).

A ``rust-0.8`` archive (:mod:`.compat`: data sub-indexes of one schema and the manifest) with
what the later Rust readers use besides: every data sub-index records
``znippy_format_version = 3`` (the Rust reader's version guard reads it from the first data
sub-index), and the sorted lookup and the fst trie follow the data sub-indexes under the Rust
names, ``__znippy_lookup__`` (the base columns, no schema metadata) and ``__znippy_trie__``,
with the Rust reserved ``pkg_type`` -128, so ``znippy get`` finds a file through the trie
instead of scanning the index; and ``__meta__`` (``meta=``, ``--meta``) as the Rust typed
``__znippy_meta__`` (every value a string, ``value_type`` 0; rows by key then path), which
``znippy meta`` searches. Besides, the walked tree's shape (``posix``) as the Rust
``__znippy_fsmeta__`` of 0.9.15+ (:func:`fsmeta_table`: every directory, the tree's most common
file mode once, each other file mode by path), which ``znippy decompress`` restores; a group
of this project's maven, cargo, pypi or npm module as the Rust plugin's
(:func:`rust_plugin_groups`: its ``pkg_type`` and its columns, named and typed as the plugin
declares them); and signatures (``signer=``) over the Rust digests, under the Rust names
(``provenance/sign.py`` ``signature_builder(rust=True)``, ``tail.py``).
``compat="rust-0.9"`` (:data:`RUST09`) is the same less what the readers of ``znippy-common``
0.9.11 and before (the binaries 0.9.1 … 0.9.5) do not know: no ``__znippy_meta__``, no
``__znippy_fsmeta__`` (they read both as data sub-indexes and fail) and no ``List<Utf8>``
plugin column (their cargo plugin writes ``crate_name, version``, their python plugin no
``requires_dist``). The Rust readers skip any other reserved name they do not know but read
every unknown non-reserved one as data; this project's own section names are not theirs,
which is why the default layout is not read by them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import stream_bytes
from ..format.kernels import call_function, numpy_of, one_array, take
from ..format.schema import BASE_NAMES, PKG_TYPE_FIELD, GroupKey
from ..interop.meta import TYPED_META_SCHEMA, is_typed
from ..interop.layouts import FSMETA, RUST_RESERVED_PKG_TYPE

RUST10 = "rust-0.10"
#: the 0.9.1 … 0.9.5 layout: :data:`RUST10`'s lookup, trie, plugin groups and signatures only
RUST09 = "rust-0.9"
#: the modes with the Rust-named lookup, trie, plugin groups and signatures
RUST_INDEXED = (RUST09, RUST10)
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
    """``__znippy_meta__`` of this project's ``__meta__`` rows (all strings), or of typed
    rows as they are (an append keeps their kinds: ``write/rustappend.py``)."""
    rows = sorted(meta.to_pylist(), key=lambda r: (r["key"].encode(),
                                                   (r["relative_path"] or "").encode()))
    if is_typed(meta.schema):
        table = pa.Table.from_pylist(rows, schema=TYPED_META_SCHEMA.with_metadata(
            FORMAT_METADATA))
        return GroupKey(RUST_RESERVED_PKG_TYPE, "", "__znippy_meta__"), stream_bytes(table), \
            len(rows)
    n = len(rows)
    cols = {"relative_path": [r["relative_path"] for r in rows],
            "key": [r["key"] for r in rows], "value_type": [0] * n,
            "v_str": [r["value"] for r in rows], "v_i64": [None] * n, "v_f64": [None] * n,
            "v_bool": [None] * n, "v_bytes": [None] * n}
    schema = TYPED_META_SCHEMA.with_metadata(FORMAT_METADATA)
    table = pa.table({f.name: pa.array(cols[f.name], f.type) for f in schema}, schema=schema)
    return GroupKey(RUST_RESERVED_PKG_TYPE, "", "__znippy_meta__"), stream_bytes(table), n


#: ``__znippy_fsmeta__``'s schema (``fsmeta.rs``, ``fsmeta_schema``): no column nullable
FSMETA_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                           pa.field("kind", pa.uint8(), nullable=False),
                           pa.field("mode", pa.uint32(), nullable=False)],
                          metadata=FORMAT_METADATA)
#: its row kinds: a directory, a file's own mode, the mode of every other file (empty path)
DIR, FILE, DEFAULT_FILE = 0, 1, 2


def fsmeta_table(files: list[tuple[str, int]], dirs: list[tuple[str, int]]) -> pa.Table | None:
    """``__znippy_fsmeta__`` of the written ``files`` and walked ``dirs`` (``(path, st_mode)``),
    as ``fsmeta.rs`` builds it: a row per directory, one ``DEFAULT_FILE`` row with the most
    common file mode (a tie: the lowest), a ``FILE`` row per file of another mode; modes are
    ``st_mode & 0o7777``; rows sorted by path bytes. None when there is nothing to record."""
    counts: dict[int, int] = {}
    for _, mode in files:
        counts[mode & 0o7777] = counts.get(mode & 0o7777, 0) + 1
    rows = [(path, DIR, mode & 0o7777) for path, mode in dirs if path]
    if counts:
        default = max(counts, key=lambda m: (counts[m], -m))
        rows.append(("", DEFAULT_FILE, default))
        rows += [(path, FILE, mode & 0o7777) for path, mode in files
                 if mode & 0o7777 != default]
    if not rows:
        return None
    rows.sort(key=lambda r: r[0].encode("utf-8", "surrogateescape"))
    paths, kinds, modes = zip(*rows)
    return pa.table([pa.array(paths, pa.utf8()), pa.array(kinds, pa.uint8()),
                     pa.array(modes, pa.uint32())], schema=FSMETA_SCHEMA)


def rust_fsmeta_section(table: pa.Table) -> tuple[GroupKey, bytes, int]:
    """The ``__znippy_fsmeta__`` manifest entry of :func:`fsmeta_table`'s rows."""
    return GroupKey(RUST_RESERVED_PKG_TYPE, "", FSMETA), stream_bytes(table), table.num_rows


#: ``List<Utf8>`` as ``plugin.rs`` declares it (``Col::Utf8List``: a nullable ``item``)
STR_LIST = pa.list_(pa.field("item", pa.utf8(), nullable=True))
#: this project's module groups (by its pkg_type) as the Rust plugins write them: the
#: plugin's ``type_id`` and its columns in declared order, each ``(name, type, ours)``,
#: ``ours`` the column of this project's module that fills it (None: left null). From
#: ``znippy-plugin-maven`` 0.10.1 ``row.rs`` (``MAVEN_SCHEMA``), ``znippy-common`` 0.10.6
#: ``plugins/native/cargo_native.rs`` and ``npm_native.rs``, ``znippy-plugin-python`` 0.10.0
#: ``native.rs``.
RUST_PLUGINS: dict[int, tuple[int, tuple[tuple[str, pa.DataType, str | None], ...]]] = {
    1: (3, (("group_id", pa.utf8(), "maven_group_id"),
            ("artifact_id", pa.utf8(), "maven_artifact_id"),
            ("version", pa.utf8(), "maven_version"),
            ("packaging", pa.utf8(), "maven_packaging"),
            ("classifier", pa.utf8(), "maven_classifier"))),
    2: (1, (("crate_name", pa.utf8(), "cargo_name"), ("version", pa.utf8(), "cargo_version"),
            ("deps", STR_LIST, None))),
    3: (6, (("name", pa.utf8(), "npm_name"), ("version", pa.utf8(), "npm_version"))),
    4: (2, (("name", pa.utf8(), "pypi_name"), ("version", pa.utf8(), "pypi_version"),
            ("python_tag", pa.utf8(), "pypi_python_tag"),
            ("abi_tag", pa.utf8(), "pypi_abi_tag"),
            ("platform_tag", pa.utf8(), "pypi_platform_tag"),
            ("build_tag", pa.utf8(), "pypi_build_tag"),
            ("requires_dist", STR_LIST, None))),
}


def rust_plugin_groups(groups: dict[GroupKey, pa.Table],
                       compat: str = RUST10) -> dict[GroupKey, pa.Table]:
    """Each module group of :data:`RUST_PLUGINS` as the Rust plugin's (``rust-0.9``: without
    the ``List<Utf8>`` columns the 0.9.1 … 0.9.5 plugins do not declare): the group and the
    rows it claims take the plugin's ``pkg_type`` (``module_name`` empty, as the Rust
    compress writes it), the module's columns become the plugin's, and, as the Rust index
    does, every chunk of a claimed file carries the file's values (this project fills its
    first chunk only). Any other group is kept as it is."""
    out: dict[GroupKey, pa.Table] = {}
    for key, table in groups.items():
        plugin = RUST_PLUGINS.get(key.pkg_type)
        names = table.schema.names
        if plugin is None or PKG_TYPE_FIELD.name not in names or \
                not any(ours in names for _, _, ours in plugin[1]):
            out[key] = table  # not a module group of ours (or already the plugin's: append)
            continue
        type_id, columns = plugin
        columns = tuple(c for c in columns if compat == RUST10 or c[1] != STR_LIST)
        first = _first_chunk_rows(table)
        claimed = take(call_function("is_valid", [table.column(PKG_TYPE_FIELD.name)]), first)
        arrays = [table.column(n) for n in BASE_NAMES]
        fields = [table.schema.field(n) for n in BASE_NAMES]
        arrays.append(call_function("if_else", [claimed, pa.scalar(type_id, pa.int8()),
                                                pa.scalar(None, pa.int8())]))
        fields.append(PKG_TYPE_FIELD)
        for name, typ, ours in columns:
            arrays.append(take(table.column(ours), first) if ours in names
                          else pa.nulls(table.num_rows, typ))
            fields.append(pa.field(name, typ, nullable=True))
        rust_key = GroupKey(type_id, key.repo, "")
        if rust_key in out or rust_key in groups:
            raise FormatError(f"compat {compat}: two groups would both be the Rust group "
                              f"{tuple(rust_key)}")
        out[rust_key] = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    return out


def _first_chunk_rows(table: pa.Table) -> pa.Array:
    """For each row, the row of its file's chunk 0 (a file's rows are consecutive)."""
    seqs = numpy_of(one_array(table.column("chunk_seq")))
    starts = np.where(seqs == 0, np.arange(len(seqs), dtype=np.int64), 0)
    return np.maximum.accumulate(starts) if len(starts) else starts
