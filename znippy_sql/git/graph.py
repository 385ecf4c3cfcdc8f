"""Completing a reachability set by walking trees (iterative), for archives whose bitmaps
count ordinals (``__gunnar_oid__`` version 1).

The graph of an import — generations, corrected dates, git's bitmap selection, the bitmap
positions and the stored bitmaps — is computed by the core (``native/src/git/layout.rs``,
docs/git-sections.md); the readers complete a commit without a stored bitmap from its blocks
(git/objects.py), or, in a version-1 archive, with :func:`tree_closure`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from .roaring import BitMap

#: an object's key: its id, or its ordinal
K = TypeVar("K", bytes, int)
Tree = tuple[list[K], list[K]]                 # subtree keys, blob keys


def tree_closure(into: BitMap, root: bytes, trees: Mapping[bytes, Tree[bytes]],
                 ordinal: Callable[[bytes], int | None]) -> None:
    """Add ``root`` and every tree and blob under it to ``into``, skipping trees already in
    it (their closures are there too)."""
    todo = [root]
    while todo:
        tree = todo.pop()
        o = ordinal(tree)
        if o is None or o in into:
            continue
        into.add(o)
        entry = trees.get(tree)
        if entry is None:
            continue
        subtrees, blobs = entry
        into.update([b for b in (ordinal(x) for x in blobs) if b is not None])
        todo.extend(subtrees)
