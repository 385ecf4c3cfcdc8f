"""Archives for the Rust tool: ``compat="rust-0.8"`` (FORMAT §8, docs/format.md §10).

The Rust 0.8 reader (``read_multi_index`` in ``znippy-common/src/index.rs``) reads *every*
manifest row as an Arrow IPC stream and concatenates all their batches column by column under
the first stream's schema. So an archive for it holds data sub-indexes and the manifest only
(no ``__lookup__``, ``__trie__`` or any other reserved section: a raw section is no stream, and
the lookup's rows would be read twice), and every sub-index has one and the same schema.

:func:`one_schema` gives every group that schema: the base columns, then, when any group has
module columns, ``pkg_type`` and every module column of every group (in group order, each
once), null where a group has no such column. Frames, blobs and the layout of the tail are the
writer's own: format version 8 decodes in every OpenZL release (its ``ZL_MIN_FORMAT_VERSION``
is 8 from 0.1.0 to 0.3.0), and sections still start on multiples of 64 (the Rust reader reads
them by their manifest ranges, wherever they are).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ZnippyError

if TYPE_CHECKING:  # pyarrow is imported by one_schema: `create` parses its options without it
    import pyarrow as pa

    from ..format.schema import GroupKey

Compat = Literal["rust-0.8", "rust-0.9", "rust-0.10"]
#: ``rust-0.10`` (:mod:`.rust10`) adds the Rust-named lookup and trie of the 0.9.1+ readers;
#: ``rust-0.9`` the same without the facts the 0.9.1 … 0.9.5 readers take for data
COMPAT_MODES: tuple[str, ...] = ("rust-0.8", "rust-0.9", "rust-0.10")
#: recorded on every sub-index of such an archive, beside the writer's codec keys
COMPAT_KEY = "znippy.compat"


def check_compat(compat: str | None, *, sections: Any = (), builders: Any = (),
                 meta: Any = None, signer: Any = None) -> None:
    """Refuse what a ``rust-0.8`` archive cannot hold beside the write options (the mode
    itself and ``posix`` are checked by ``WriteOptions``); run once, by ``ArchiveWriter``."""
    if compat is None:
        return
    if compat == "rust-0.9" and meta:  # signatures the Rust way, facts nowhere
        raise ZnippyError("compat 'rust-0.9' writes no __znippy_meta__ (the Rust 0.9.1 to 0.9.5 "
                          "readers take it for a data sub-index): meta cannot be written")
    rust10 = compat == "rust-0.10"  # its facts and signatures the Rust way (write/rust10.py)
    signed = compat in ("rust-0.9", "rust-0.10")
    given = [what for what, value in (("meta", None if rust10 else meta),
                                      ("a signer", None if signed else signer),
                                      ("reserved sections", sections),
                                      ("section builders", builders)) if value]
    if given:
        raise ZnippyError(f"compat {compat!r} writes data sub-indexes and the manifest only: "
                          f"{', '.join(given)} cannot be written (the Rust 0.8 reader would read "
                          "every section as an index)")


def one_schema(groups: Mapping[GroupKey, pa.Table]) -> dict[GroupKey, pa.Table]:
    """Every group's rows under the one schema all of them can be concatenated with."""
    import pyarrow as pa

    from ..format.schema import BASE_FIELDS, BASE_NAMES, PKG_TYPE_FIELD

    extra: dict[str, pa.Field] = {}
    for key in sorted(groups):
        for f in groups[key].schema:
            if f.name in BASE_NAMES or f.name == PKG_TYPE_FIELD.name:
                continue
            seen = extra.get(f.name)
            if seen is not None and not seen.type.equals(f.type):
                raise ZnippyError(f"column {f.name!r} is {seen.type} in one group and {f.type} "
                                  "in another: no one schema for the Rust 0.8 reader")
            extra.setdefault(f.name, f.with_nullable(True))
    fields = [*BASE_FIELDS, *([PKG_TYPE_FIELD, *extra.values()] if extra else [])]
    schema = pa.schema(fields)
    out = {}
    for key, table in groups.items():
        cols = [table.column(f.name) if f.name in table.schema.names
                else pa.nulls(table.num_rows, f.type) for f in fields]
        out[key] = pa.Table.from_arrays(cols, schema=schema)
    return out
