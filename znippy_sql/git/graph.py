"""The commit graph and the reachability bitmaps, computed iteratively (no recursion).

``generation`` is git's topological level (commit-graph CDAT): 1 for a commit without parents,
else 1 + the largest generation of its parents. ``corrected_date`` is git's generation number
v2: max(committer time, largest parent corrected_date + 1). Parents absent from the archive
(a shallow history) count as no parent.

A commit's reachability set is the ordinals of every object ``git rev-list --objects <commit>``
lists: the commit, its ancestors, their trees and blobs (not gitlinks). It is built from its
parents' sets: ``set(c) = {c} ∪ set(parents) ∪ tree closure``, and a tree already in the set is
not walked again (its closure is in the set with it), so the cost grows with what changed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping

from .roaring import BitMap

from ..errors import FormatError

Commit = tuple[bytes, tuple[bytes, ...], int]          # tree, parents, committer time
Tree = tuple[list[bytes], list[bytes]]                 # subtree oids, blob oids


def topo_order(commits: Mapping[bytes, Commit]) -> list[bytes]:
    """Every commit after all its parents (Kahn's algorithm, deterministic)."""
    waiting: dict[bytes, int] = {}
    children: dict[bytes, list[bytes]] = {}
    for oid in sorted(commits):
        present = {p for p in commits[oid][1] if p in commits}
        waiting[oid] = len(present)
        for p in sorted(present):
            children.setdefault(p, []).append(oid)
    ready = deque(oid for oid, n in waiting.items() if n == 0)
    order: list[bytes] = []
    while ready:
        oid = ready.popleft()
        order.append(oid)
        for child in children.get(oid, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if len(order) != len(commits):
        raise FormatError("the commits' parent links form a cycle")
    return order


def generations(commits: Mapping[bytes, Commit], order: Iterable[bytes]
                ) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """``(generation, corrected_date)`` of every commit, given a topological order."""
    gen: dict[bytes, int] = {}
    corrected: dict[bytes, int] = {}
    for oid in order:
        _tree, parents, when = commits[oid]
        present = [p for p in parents if p in gen]
        gen[oid] = 1 + max((gen[p] for p in present), default=0)
        corrected[oid] = max([when] + [corrected[p] + 1 for p in present])
    return gen, corrected


def tree_closure(into: BitMap, root: bytes, trees: Mapping[bytes, Tree],
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


def reach_bitmaps(commits: Mapping[bytes, Commit], order: list[bytes],
                  trees: Mapping[bytes, Tree], ordinal: Mapping[bytes, int],
                  keep: Callable[[bytes], bool]) -> dict[bytes, BitMap]:
    """The reachability set of every commit for which ``keep(oid)``; the others are built
    too (their children need them) and dropped once their last child has its set."""
    get = ordinal.get
    pending: dict[bytes, int] = {}
    for oid in order:
        for p in set(commits[oid][1]):
            if p in commits:
                pending[p] = pending.get(p, 0) + 1
    sets: dict[bytes, BitMap] = {}
    kept: dict[bytes, BitMap] = {}
    for oid in order:
        tree, parents, _when = commits[oid]
        present = [p for p in dict.fromkeys(parents) if p in commits]
        if not present:
            s = BitMap()
        elif len(present) == 1:
            s = sets[present[0]].copy()
        else:
            s = BitMap.union(*(sets[p] for p in present))
        own = get(oid)
        if own is not None:
            s.add(own)
        tree_closure(s, tree, trees, get)
        sets[oid] = s
        if keep(oid):
            kept[oid] = s
        for p in present:
            pending[p] -= 1
            if pending[p] == 0:
                del sets[p]
        if pending.get(oid, 0) == 0:
            sets.pop(oid, None)
    return kept
