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
from typing import Generic, TypeVar

from .roaring import BitMap

from ..errors import FormatError

#: an object's key: its id, or (git/sections.py) its ordinal, an absent id a negative code
K = TypeVar("K", bytes, int)
Commit = tuple[K, tuple[K, ...], int]          # tree, parents, committer time
Tree = tuple[list[K], list[K]]                 # subtree keys, blob keys


def post_order(commits: Mapping[K, Commit[K]], roots: Iterable[K]) -> list[K]:
    """Depth-first post-order from ``roots``, first parent first (iterative): every commit
    after all its parents. A commit no root reaches (only in a cycle) is left out."""
    seen: set[K] = set()
    out: list[K] = []
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


def tips(commits: Mapping[K, Commit[K]]) -> list[K]:
    """Commits no other commit names as a parent, in oid order."""
    has_child = {p for c in commits.values() for p in c[1]}
    return sorted(c for c in commits if c not in has_child)


def topo_order(commits: Mapping[K, Commit[K]]) -> list[K]:
    """Every commit after all its parents (deterministic: post-order from the tips)."""
    order = post_order(commits, tips(commits))
    if len(order) != len(commits):
        raise FormatError("the commits' parent links form a cycle")
    return order


def generations(commits: Mapping[K, Commit[K]], order: Iterable[K]
                ) -> tuple[dict[K, int], dict[K, int]]:
    """``(generation, corrected_date)`` of every commit, given a topological order."""
    gen: dict[K, int] = {}
    corrected: dict[K, int] = {}
    for oid in order:
        _tree, parents, when = commits[oid]
        present = [p for p in parents if p in gen]
        gen[oid] = 1 + max((gen[p] for p in present), default=0)
        corrected[oid] = max([when] + [corrected[p] + 1 for p in present])
    return gen, corrected


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


# -- positions: a traversal order in which reachable sets are runs ------------------------------

@dataclass
class Layout(Generic[K]):
    """Bitmap positions and the stored bitmaps (docs/git-sections.md, "Positions")."""

    positions: list[K]                     #: every object once, in position order
    blocks: dict[K, tuple[int, int]]       #: commit → (its position, its block's length)
    kept: dict[K, BitMap]                  #: stored commits → reachable positions (runs)
    irregular: int                         #: commits stored because their block is not enough
    absent: int                            #: ids commits and trees name, absent from the archive


def reach_layout(commits: Mapping[bytes, Commit[bytes]], trees: Mapping[bytes, Tree[bytes]],
                 objects: Collection[bytes], gen: Mapping[bytes, int], *,
                 chosen: Collection[bytes], bound: int) -> Layout[bytes]:
    """:func:`layout_ordinals` keyed by object id: objects get their oid-order ordinals, an
    id not in ``objects`` an absent code, and the layout is given back in ids."""
    ids = sorted(objects)
    ordinal = {o: i for i, o in enumerate(ids)}
    absent: dict[bytes, int] = {}

    def key(oid: bytes) -> int:
        hit = ordinal.get(oid)
        return hit if hit is not None else -2 - absent.setdefault(oid, len(absent))

    got = layout_ordinals(
        len(ids),
        {key(c): (key(t), tuple(key(p) for p in ps), when)
         for c, (t, ps, when) in commits.items()},
        {key(t): ([key(x) for x in subs], [key(x) for x in blobs])
         for t, (subs, blobs) in trees.items()},
        {key(c): g for c, g in gen.items()}, chosen={key(c) for c in chosen}, bound=bound)
    return Layout([ids[o] for o in got.positions], {ids[c]: v for c, v in got.blocks.items()},
                  {ids[c]: v for c, v in got.kept.items()}, got.irregular, got.absent)


def layout_ordinals(count: int, commits: Mapping[int, Commit[int]],
                    trees: Mapping[int, Tree[int]], gen: Mapping[int, int], *,
                    chosen: Collection[int], bound: int,
                    links: CommitLinks | None = None) -> Layout[int]:
    """Place every object and keep the bitmaps of the commits to store.

    Objects are ordinals ``0 .. count-1``; a negative key is an id the archive does not hold
    (counted in ``absent``, never placed). Commits are placed in depth-first post-order from
    the tips (largest generation first, first parent first), each followed by the trees and
    blobs its tree reaches that are not placed yet: its *block*. A commit's set is then its
    parents' sets plus its block — runs — unless its tree reaches an object placed by a commit
    that is not its ancestor; such a commit is *irregular* and always stored. A commit is
    stored when ``chosen`` names it, when it is irregular, or when completing it could walk
    more than ``bound`` unstored commits (counted as 1 + the sum over its parents, an upper
    bound). So a walk that completes an unstored commit visits at most ``bound`` commits and
    reads no tree.
    """
    links = links if links is not None else commit_links(commits)
    keys, par, children, n = links.keys, links.parents, links.children, len(links.keys)
    absent = set(links.absent)
    tree_of = [commits[c][0] for c in keys]
    order = _post_order(par, sorted((k for k in range(n) if not children[k]),
                                    key=lambda k: (-gen[keys[k]], keys[k])))
    if len(order) != n:
        raise FormatError("the commits' parent links form a cycle")
    by_ordinal: list[Tree[int] | None] = [None] * count
    for t, links_of_t in trees.items():
        if t >= 0:
            by_ordinal[t] = links_of_t
    where = [-1] * count                 # ordinal → position; -1: not placed yet
    positions: list[int] = []
    place = positions.append
    blocks: dict[int, tuple[int, int]] = {}
    kept: dict[int, BitMap] = {}
    pending = children[:]                # children not placed yet: a set is kept until 0
    sets: list[BitMap | None] = [None] * n
    est = [0] * n
    irregular = 0
    for k in order:
        oid = keys[k]
        present = par[k]
        s = (BitMap() if not present else _kept(sets, present[0]).copy() if len(present) == 1
             else BitMap.union(*(_kept(sets, p) for p in present)))
        start = len(positions)
        where[oid] = start
        place(oid)
        odd = False
        todo = [tree_of[k]]
        while todo:
            t = todo.pop()
            if t < 0:
                absent.add(t)                   # a partial clone's: not listed
                continue
            at = where[t]
            if at < 0:
                where[t] = len(positions)
                place(t)
            elif at >= start or at in s:
                continue                        # its closure is in the set already
            else:
                odd = True                      # placed by a commit that is not an ancestor
                s.add(at)
            entry = by_ordinal[t]
            if entry is None:
                continue
            subtrees, blobs = entry
            for b in blobs:
                if b < 0:
                    absent.add(b)
                    continue
                at = where[b]
                if at < 0:
                    where[b] = len(positions)
                    place(b)
                elif at < start and at not in s:
                    odd = True
                    s.add(at)
            if subtrees:
                todo.extend(reversed(subtrees))
        end = len(positions)
        s.add_range(start, end)
        s.run_optimize()
        blocks[oid] = (start, end - start)
        walk = 1
        for p in present:
            walk += est[p]
            pending[p] -= 1
            if not pending[p]:
                sets[p] = None
        if odd or oid in chosen or walk > bound:
            kept[oid] = s
            walk = 0
            irregular += odd
        est[k] = walk
        if pending[k]:
            sets[k] = s
    positions.extend(o for o in range(count) if where[o] < 0)   # tags, unreachable objects
    return Layout(positions, blocks, kept, irregular, len(absent))


@dataclass
class CommitLinks:
    """Commits by index (``keys``: in the mapping's order), each one's parents present among
    them as indices (no repeats, in order), how many children each has, their committer
    times, and the parent keys absent from the mapping (a shallow history's)."""

    keys: list[int]
    parents: list[list[int]]
    children: list[int]
    times: list[int]
    absent: set[int]


def commit_links(commits: Mapping[int, Commit[int]]) -> CommitLinks:
    keys = list(commits)
    index = {c: k for k, c in enumerate(keys)}
    absent: set[int] = set()
    par: list[list[int]] = []
    times: list[int] = []
    children = [0] * len(keys)
    for c in keys:
        _tree, parents, when = commits[c]
        times.append(when)
        got: list[int] = []
        for p in parents:
            k = index.get(p)
            if k is None:
                absent.add(p)
            elif k not in got:
                got.append(k)
                children[k] += 1
        par.append(got)
    return CommitLinks(keys, par, children, times, absent)


def generations_of(links: CommitLinks) -> tuple[dict[int, int], dict[int, int]]:
    """:func:`generations` over :func:`topo_order` (the same numbers), on commit indices."""
    keys, par = links.keys, links.parents
    n = len(keys)
    order = _post_order(par, sorted((k for k in range(n) if not links.children[k]),
                                    key=keys.__getitem__))
    if len(order) != n:
        raise FormatError("the commits' parent links form a cycle")
    gen = [0] * n
    corrected = [0] * n
    times = links.times
    for k in order:
        g, c = 1, times[k]
        for p in par[k]:
            if gen[p] >= g:
                g = gen[p] + 1
            if corrected[p] >= c:
                c = corrected[p] + 1
        gen[k] = g
        corrected[k] = c
    return dict(zip(keys, gen)), dict(zip(keys, corrected))


def _post_order(parents: list[list[int]], roots: Iterable[int]) -> list[int]:
    """:func:`post_order` over commit indices (``parents``: each one's, present, no
    repeats)."""
    seen = bytearray(len(parents))
    out: list[int] = []
    for root in roots:
        if seen[root]:
            continue
        seen[root] = 1
        stack = [(root, 0)]
        while stack:
            k, i = stack[-1]
            ps = parents[k]
            while i < len(ps) and seen[ps[i]]:
                i += 1
            if i < len(ps):
                stack[-1] = (k, i + 1)
                seen[ps[i]] = 1
                stack.append((ps[i], 0))
            else:
                stack.pop()
                out.append(k)
    return out


def _kept(sets: list[BitMap | None], k: int) -> BitMap:
    s = sets[k]
    assert s is not None                 # kept while a child is still to be placed
    return s


# -- which commits get a stored bitmap: git's selection (pack-bitmap-write.c) ------------------

MUST_REGION, MIN_REGION, MIN_COMMITS, MAX_COMMITS = 100, 20_000, 100, 5_000


def next_commit_index(idx: int) -> int:
    """git's ``next_commit_index``: how many commits to skip after the ``idx``-th newest."""
    if idx <= MUST_REGION:
        return 0
    if idx <= MIN_REGION:
        return min(idx - MUST_REGION, MIN_COMMITS)
    return max(min(idx - MIN_REGION, MAX_COMMITS), MIN_COMMITS)


def select_commits(commits: Mapping[K, Commit[K]], prefer: Collection[K] = ()) -> set[K]:
    """git's ``bitmap_writer_select_commits``: commits newest (committer time) first; each of
    the 100 newest, then one in every window of up to 100 (up to 20,000), then windows
    growing to 5,000. In a window the first commit a ref names wins, else the last merge,
    else the window's last commit."""
    ordered = sorted(commits, key=lambda c: (-commits[c][2], c))
    n = len(ordered)
    if n < MUST_REGION:
        return set(ordered)
    chosen: set[K] = set()
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
