"""The bitmap layout and selection of the core (``native/src/git/layout.rs``) on synthetic
commit graphs (no git needed): git's selection windows, the walk bound, runs, irregular
commits, generations."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

import numpy as np

from znippy_sql import corelib
from znippy_sql.git.roaring import deserialize

Commits = dict[bytes, tuple[bytes, tuple[bytes, ...], int]]
Trees = dict[bytes, tuple[list[bytes], list[bytes]]]


@dataclass
class Layout:
    positions: list[bytes]
    kept: dict[bytes, set[int]]
    kept_bytes: dict[bytes, bytes]
    generation: dict[bytes, int]
    irregular: int
    absent: int


def layout(commits: Commits, trees: Trees, objects: set[bytes], *, walk_bound: int,
           prefer: tuple[bytes, ...] = ()) -> Layout:
    """The core's sections of one pack holding ``objects`` (commits, trees, blobs)."""
    ids = sorted(objects)
    types = bytes(1 if o in commits else 2 if o in trees else 3 for o in ids)
    cs = sorted(c for c in commits if c in objects)
    ts = sorted(t for t in trees if t in objects)
    edges = [(k, sub, x) for k, t in enumerate(ts)
             for sub, xs in ((1, trees[t][0]), (0, trees[t][1])) for x in xs]
    core = corelib.git_pack_from_columns(
        b"".join(ids), types, np.arange(12, 12 + len(ids), dtype="<u8").tobytes(),
        b"".join(cs), b"".join(commits[c][0] for c in cs),
        np.array([len(commits[c][1]) for c in cs], dtype="<u4").tobytes(),
        b"".join(p for c in cs for p in commits[c][1]),
        np.array([commits[c][2] for c in cs], dtype="<i8").tobytes(),
        b"".join(ts), np.array([e[0] for e in edges], dtype="<u4").tobytes(),
        bytes(e[1] for e in edges), b"".join(e[2] for e in edges))
    cols = corelib.git_sections([(core, 0)], b"".join(prefer), walk_bound)
    got = np.frombuffer(cols["ids"], dtype=np.uint8).reshape(-1, 20)
    order = np.frombuffer(cols["order"], dtype="<u4")
    kept_ids = cols["reach_ids"]
    bounds = np.frombuffer(cols["reach_offsets"], dtype="<i4")
    raw = {kept_ids[20 * i:20 * i + 20]: cols["reach_data"][bounds[i]:bounds[i + 1]]
           for i in range(len(bounds) - 1)}
    commit_ids = cols["commit_ids"]
    gens = np.frombuffer(cols["generation"], dtype="<u4").tolist()
    return Layout([got[o].tobytes() for o in order],
                  {c: set(deserialize(b, path="t")) for c, b in raw.items()}, raw,
                  {commit_ids[20 * i:20 * i + 20]: g for i, g in enumerate(gens)},
                  cols["irregular"], cols["absent"])


def oid(*parts: object) -> bytes:
    return hashlib.sha1(repr(parts).encode()).digest()


def history(n: int, seed: int = 1, merge_every: int = 7):
    """A main line with side branches merged back; every commit has its own blob and tree."""
    rnd = random.Random(seed)
    commits, trees, objects = {}, {}, set()
    main = []
    when = 1_000
    for i in range(n):
        when += 10
        tree = oid("tree", i)
        blob = oid("blob", i)
        trees[tree] = ([], [blob])
        objects |= {tree, blob}
        parents: tuple[bytes, ...] = (main[-1],) if main else ()
        if main and i % merge_every == 0 and len(main) > 3:
            side = oid("side", i)
            stree, sblob = oid("stree", i), oid("sblob", i)
            trees[stree] = ([], [sblob])
            objects |= {side, stree, sblob}
            commits[side] = (stree, (main[-rnd.randint(2, 3)],), when - 5)
            parents = (main[-1], side)
        c = oid("commit", i)
        commits[c] = (tree, parents, when)
        objects.add(c)
        main.append(c)
    return commits, trees, objects, main


def walk(commits, kept, start: bytes) -> int:
    seen, todo, n = {start}, [start], 0
    while todo:
        cur = todo.pop()
        if cur in kept:
            continue
        n += 1
        for p in commits[cur][1]:
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return n


def test_git_selection_windows() -> None:
    commits, trees, objects, main = history(2000, merge_every=10**9)   # a straight line
    chosen = set(layout(commits, trees, objects, walk_bound=10**9).kept)
    newest = main[::-1]
    assert set(newest[:101]) <= chosen                    # each of the 101 newest
    picked = sorted(newest.index(c) for c in chosen)
    gaps = [b - a for a, b in zip(picked, picked[1:])]
    assert max(gaps) <= 101 and gaps[-1] > 50             # then one per window of up to 100
    few = set(list(commits)[:99])
    small = {o for o in objects if o not in commits or o in few}
    assert set(layout(commits, trees, small, walk_bound=10**9).kept) == few
    prefer = (newest[150],)                               # a ref's commit wins its window
    assert newest[150] not in chosen
    assert newest[150] in layout(commits, trees, objects, walk_bound=10**9, prefer=prefer).kept


def test_every_completing_walk_stays_within_the_bound() -> None:
    commits, trees, objects, _main = history(600)
    for bound in (1, 5, 40):
        got = layout(commits, trees, objects, walk_bound=bound)
        assert max(walk(commits, got.kept, c) for c in commits) <= bound
        assert len(got.positions) == len(objects) == len(set(got.positions))


def test_sets_are_runs_and_equal_the_closure() -> None:
    commits, trees, objects, _main = history(300)
    got = layout(commits, trees, objects, walk_bound=0)   # every commit stored
    at = {o: i for i, o in enumerate(got.positions)}
    assert set(got.kept) == set(commits)
    for c in commits:                     # the closure computed naively, in positions
        want, todo = set(), [c]
        while todo:
            cur = todo.pop()
            if at[cur] in want:
                continue
            want.add(at[cur])
            tree = commits[cur][0]
            want.add(at[tree])
            want |= {at[b] for b in trees[tree][1]}
            todo.extend(commits[cur][1])
        assert got.kept[c] == want, c
    runs = sum(len(b) for b in got.kept_bytes.values()) / len(got.kept)
    assert runs < 40                      # a few runs each, not a bitset


def test_a_commit_reaching_a_non_ancestors_object_is_irregular() -> None:
    blob, t1, t2 = oid("b"), oid("t1"), oid("t2")
    a, b, c = oid("a"), oid("b-branch"), oid("c")
    trees = {t1: ([], [blob]), t2: ([], [blob])}
    # a and b are both roots; b's tree shares a's blob, placed with a first
    commits = {a: (t1, (), 10), b: (t2, (), 20), c: (t1, (a,), 30)}
    objects = {blob, t1, t2, a, b, c}
    got = layout(commits, trees, objects, walk_bound=1000)
    first = got.positions.index(blob)
    odd = b if got.positions.index(a) < got.positions.index(b) else c
    assert first < got.positions.index(odd)
    assert odd in got.kept and got.irregular >= 1
    assert got.absent == 0


def test_generations_and_absent_parents() -> None:
    """The core's generations equal git's definition computed naively here; a shallow
    parent (absent from the objects) counts as none and once as absent."""
    commits, trees, objects, main = history(400, seed=3)
    cut = main[10]
    got = layout(commits, trees, objects - {cut}, walk_bound=1000)
    want: dict[bytes, int] = {}
    todo = [c for c in commits if c != cut]
    while todo:                                   # parents first, whatever the order
        rest = []
        for c in todo:
            ps = [p for p in commits[c][1] if p != cut]
            if all(p in want for p in ps):
                want[c] = 1 + max((want[p] for p in ps), default=0)
            else:
                rest.append(c)
        todo = rest
    assert got.generation == want
    assert got.absent == 1
