"""The commit graph and the reachability bitmaps, computed iteratively (no recursion).

``generation`` is git's topological level (commit-graph CDAT): 1 for a commit without parents,
else 1 + the largest generation of its parents. ``corrected_date`` is git's generation number
v2: max(committer time, largest parent corrected_date + 1). Parents absent from the archive
(a shallow history) count as no parent.

A commit's reachability set is every object ``git rev-list --objects <commit>`` lists: the
commit, its ancestors, their trees and blobs (not gitlinks), counted in bitmap positions
(:func:`reach_layout`): its parents' sets plus its block, a tree already in the set not walked
again (its closure is in the set with it), so the cost grows with what changed.
:func:`tree_closure` completes a commit of an older archive (bitmaps over ordinals).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from .roaring import BitMap

from ..errors import FormatError

Commit = tuple[bytes, tuple[bytes, ...], int]          # tree, parents, committer time
Tree = tuple[list[bytes], list[bytes]]                 # subtree oids, blob oids


def post_order(commits: Mapping[bytes, Commit], roots: Iterable[bytes]) -> list[bytes]:
    """Depth-first post-order from ``roots``, first parent first (iterative): every commit
    after all its parents. A commit no root reaches (only in a cycle) is left out."""
    seen: set[bytes] = set()
    out: list[bytes] = []
    for root in roots:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, 0)]
        while stack:
            oid, i = stack[-1]
            parents = commits[oid][1]
            while i < len(parents) and (parents[i] in seen or parents[i] not in commits):
                i += 1
            if i < len(parents):
                stack[-1] = (oid, i + 1)
                seen.add(parents[i])
                stack.append((parents[i], 0))
            else:
                stack.pop()
                out.append(oid)
    return out


def tips(commits: Mapping[bytes, Commit]) -> list[bytes]:
    """Commits no other commit names as a parent, in oid order."""
    has_child = {p for c in commits.values() for p in c[1]}
    return sorted(c for c in commits if c not in has_child)


def topo_order(commits: Mapping[bytes, Commit]) -> list[bytes]:
    """Every commit after all its parents (deterministic: post-order from the tips)."""
    order = post_order(commits, tips(commits))
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


# -- positions: a traversal order in which reachable sets are runs ------------------------------

@dataclass
class Layout:
    """Bitmap positions and the stored bitmaps (docs/git-sections.md, "Positions")."""

    positions: list[bytes]                 #: every object once, in position order
    blocks: dict[bytes, tuple[int, int]]   #: commit → (its position, its block's length)
    kept: dict[bytes, BitMap]              #: stored commits → reachable positions (runs)
    irregular: int                         #: commits stored because their block is not enough
    absent: int                            #: ids commits and trees name, absent from the archive


def reach_layout(commits: Mapping[bytes, Commit], trees: Mapping[bytes, Tree],
                 objects: Collection[bytes], gen: Mapping[bytes, int], *,
                 chosen: Collection[bytes], bound: int) -> Layout:
    """Place every object and keep the bitmaps of the commits to store.

    Commits are placed in depth-first post-order from the tips (largest generation first,
    first parent first), each followed by the trees and blobs its tree reaches that are not
    placed yet: its *block*. A commit's set is then its parents' sets plus its block — runs —
    unless its tree reaches an object placed by a commit that is not its ancestor; such a
    commit is *irregular* and always stored. A commit is stored when ``chosen`` names it, when
    it is irregular, or when completing it could walk more than ``bound`` unstored commits
    (counted as 1 + the sum over its parents, an upper bound). So a walk that completes an
    unstored commit visits at most ``bound`` commits and reads no tree.
    """
    where: dict[bytes, int] = {}
    positions: list[bytes] = []
    blocks: dict[bytes, tuple[int, int]] = {}
    kept: dict[bytes, BitMap] = {}
    pending: dict[bytes, int] = {}
    for c in commits.values():
        for p in set(c[1]):
            if p in commits:
                pending[p] = pending.get(p, 0) + 1
    sets: dict[bytes, BitMap] = {}
    est: dict[bytes, int] = {}
    irregular = 0
    absent: set[bytes] = set()

    def place(oid: bytes) -> None:
        where[oid] = len(positions)
        positions.append(oid)

    def emit(oid: bytes) -> None:
        nonlocal irregular
        tree, parents, _when = commits[oid]
        present = [p for p in dict.fromkeys(parents) if p in commits]
        if len(present) < len(parents):
            absent.update(p for p in parents if p not in commits)
        s = (BitMap() if not present else sets[present[0]].copy() if len(present) == 1
             else BitMap.union(*(sets[p] for p in present)))
        start = len(positions)
        place(oid)
        odd = False
        todo = [tree]
        while todo:
            t = todo.pop()
            at = where.get(t)
            if at is None:
                if t not in objects:
                    absent.add(t)               # a partial clone's: not listed
                    continue
                place(t)
            elif at >= start or at in s:
                continue                        # its closure is in the set already
            else:
                odd = True                      # placed by a commit that is not an ancestor
                s.add(at)
            entry = trees.get(t)
            if entry is None:
                continue
            subtrees, blobs = entry
            for b in blobs:
                at = where.get(b)
                if at is None:
                    if b in objects:
                        place(b)
                    else:
                        absent.add(b)
                elif at < start and at not in s:
                    odd = True
                    s.add(at)
            todo.extend(reversed(subtrees))
        s.add_range(start, len(positions))
        s.run_optimize()
        blocks[oid] = (start, len(positions) - start)
        walk = 1 + sum(est[p] for p in present)
        if odd or oid in chosen or walk > bound:
            kept[oid] = s
            walk = 0
            irregular += odd
        est[oid] = walk
        sets[oid] = s
        for p in present:
            pending[p] -= 1
            if pending[p] == 0:
                del sets[p]
        if pending.get(oid, 0) == 0:
            del sets[oid]

    for oid in post_order(commits, sorted(tips(commits), key=lambda c: -gen[c])):
        emit(oid)
    if len(blocks) != len(commits):
        raise FormatError("the commits' parent links form a cycle")
    rest = sorted(o for o in objects if o not in where)   # tags, unreachable objects
    positions.extend(rest)
    return Layout(positions, blocks, kept, irregular, len(absent))


# -- which commits get a stored bitmap: git's selection (pack-bitmap-write.c) ------------------

MUST_REGION, MIN_REGION, MIN_COMMITS, MAX_COMMITS = 100, 20_000, 100, 5_000


def next_commit_index(idx: int) -> int:
    """git's ``next_commit_index``: how many commits to skip after the ``idx``-th newest."""
    if idx <= MUST_REGION:
        return 0
    if idx <= MIN_REGION:
        return min(idx - MUST_REGION, MIN_COMMITS)
    return max(min(idx - MIN_REGION, MAX_COMMITS), MIN_COMMITS)


def select_commits(commits: Mapping[bytes, Commit], prefer: Collection[bytes] = ()
                   ) -> set[bytes]:
    """git's ``bitmap_writer_select_commits``: commits newest (committer time) first; each of
    the 100 newest, then one in every window of up to 100 (up to 20,000), then windows
    growing to 5,000. In a window the first commit a ref names wins, else the last merge,
    else the window's last commit."""
    ordered = sorted(commits, key=lambda c: (-commits[c][2], c))
    n = len(ordered)
    if n < MUST_REGION:
        return set(ordered)
    chosen: set[bytes] = set()
    i = 0
    while True:
        step = next_commit_index(i)
        if i + step >= n:
            break
        if step == 0:
            pick = ordered[i]
        else:
            pick = ordered[i + step]
            for j in range(step + 1):
                cm = ordered[i + j]
                if cm in prefer:
                    pick = cm
                    break
                if len(commits[cm][1]) > 1:
                    pick = cm
        chosen.add(pick)
        i += step + 1
    return chosen
