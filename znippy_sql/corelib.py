"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from . import _native
from .errors import FormatError, PackError, ZnippyError
from .native import guard


def version() -> str:
    """The compiled core's version (its crate's)."""
    with guard(ZnippyError, "the native core"):
        return str(_native.version())


# -- git packs (native/src/git) ------------------------------------------------------------------
class PackIndex(Protocol):
    """One pack indexed by the core (``native/src/git/mod.rs``), its columns held there."""

    @property
    def external_bases(self) -> int:
        """REF deltas resolved against objects of earlier packs."""

    @property
    def idx_mismatch(self) -> str | None:
        """Why the ``.idx`` given was not used (the pack was parsed whole instead)."""

    def objects(self) -> tuple[bytes, bytes, bytes]:
        """``(ids, types, offsets)`` in entry order: 20-byte ids, u8, u64 LE."""

    def graph(self) -> tuple[bytes, ...]:
        """``commit_ids, tree_of, parent_counts, parent_ids, times, tree_ids, edge_tree,
        edge_sub, edge_ids`` (ids joined, integers little-endian)."""


def git_index_pack(pack: bytes | memoryview, idx: bytes | None, *, name: str,
                   external: Callable[[bytes], tuple[int, bytes] | None] | None = None
                   ) -> PackIndex:
    """A pack indexed from its checked ``.idx`` (``idx``), else parsed whole; ``external``
    gives a REF delta's base outside the pack. A damaged pack is a ``PackError``."""
    with guard(PackError, f"pack {name} cannot be indexed"):
        return cast(PackIndex, _native.git_index_pack(pack, idx, name, external))


def git_pack_from_columns(ids: bytes, types: bytes, offsets: bytes, commit_ids: bytes,
                          tree_of: bytes, parent_counts: bytes, parent_ids: bytes,
                          times: bytes, tree_ids: bytes, edge_tree: bytes, edge_sub: bytes,
                          edge_ids: bytes) -> PackIndex:
    """A :class:`PackIndex` given as its columns (a writer that knows its objects)."""
    with guard(FormatError, "pack index columns"):
        return cast(PackIndex, _native.PackIndex.from_columns(
            ids, types, offsets, commit_ids, tree_of, parent_counts, parent_ids, times,
            tree_ids, edge_tree, edge_sub, edge_ids))


def git_sections(packs: Sequence[tuple[PackIndex, int]], prefer: bytes, walk_bound: int
                 ) -> dict[str, Any]:
    """The git sections' columns (little-endian bytes) of ``(pack, lookup row)``s."""
    with guard(FormatError, "the git sections cannot be built"):
        return dict(_native.git_sections(list(packs), prefer, walk_bound))


def git_tree_entries(content: bytes) -> list[tuple[bool, bytes]]:
    """A tree's ``(is subtree, child id)`` entries as the import reads them."""
    with guard(FormatError, "a tree cannot be parsed"):
        return [(bool(s), bytes(i)) for s, i in _native.git_tree_entries(content)]


def git_serialize_runs(runs: Sequence[tuple[int, int]]) -> bytes:
    """The stored-bitmap bytes (Roaring portable) of ``[start, end)`` runs of positions."""
    with guard(FormatError, "a bitmap cannot be written"):
        return bytes(_native.git_serialize_runs(list(runs)))
