"""The bitmap layout and selection on synthetic commit graphs (no git needed): git's
selection windows, the walk bound, runs, and irregular commits."""

from __future__ import annotations

import hashlib
import random

from znippy_sql.git.graph import (generations, next_commit_index, reach_layout,
                                  select_commits, topo_order)


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
    assert [next_commit_index(i) for i in (0, 100, 101, 150, 200, 20_000, 20_001, 30_000)] == [
        0, 0, 1, 50, 100, 100, 100, 5000]
    commits, _trees, _objects, main = history(2000, merge_every=10**9)   # a straight line
    chosen = select_commits(commits)
    newest = main[::-1]
    assert set(newest[:101]) <= chosen                    # each of the 101 newest
    picked = sorted(newest.index(c) for c in chosen)
    gaps = [b - a for a, b in zip(picked, picked[1:])]
    assert max(gaps) <= 101 and gaps[-1] > 50             # then one per window of up to 100
    assert select_commits(dict(list(commits.items())[:99])) == set(list(commits)[:99])
    prefer = {newest[150]}
    assert newest[150] in select_commits(commits, prefer)   # a ref's commit wins its window


def test_every_completing_walk_stays_within_the_bound() -> None:
    commits, trees, objects, _main = history(600)
    gen, _ = generations(commits, topo_order(commits))
    for bound in (1, 5, 40):
        layout = reach_layout(commits, trees, objects, gen, chosen=set(), bound=bound)
        assert max(walk(commits, layout.kept, c) for c in commits) <= bound
        assert len(layout.positions) == len(objects) == len(set(layout.positions))


def test_sets_are_runs_and_equal_the_closure() -> None:
    commits, trees, objects, _main = history(300)
    gen, _ = generations(commits, topo_order(commits))
    layout = reach_layout(commits, trees, objects, gen, chosen=set(commits), bound=1000)
    at = {o: i for i, o in enumerate(layout.positions)}
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
        assert set(layout.kept[c]) == want, c
    runs = sum(len(b.serialize()) for b in layout.kept.values()) / len(layout.kept)
    assert runs < 40                      # a few runs each, not a bitset


def test_a_commit_reaching_a_non_ancestors_object_is_irregular() -> None:
    blob, t1, t2 = oid("b"), oid("t1"), oid("t2")
    a, b, c = oid("a"), oid("b-branch"), oid("c")
    trees = {t1: ([], [blob]), t2: ([], [blob])}
    # a and b are both roots; b's tree shares a's blob, placed with a first
    commits = {a: (t1, (), 10), b: (t2, (), 20), c: (t1, (a,), 30)}
    objects = {blob, t1, t2, a, b, c}
    gen, _ = generations(commits, topo_order(commits))
    layout = reach_layout(commits, trees, objects, gen, chosen=set(), bound=1000)
    first = layout.positions.index(blob)
    odd = b if layout.positions.index(a) < layout.positions.index(b) else c
    assert first < layout.positions.index(odd)
    assert odd in layout.kept and layout.irregular >= 1
    assert layout.absent == 0


def test_generations_by_index_equal_the_mapping_walk() -> None:
    """``generations_of`` (the import's, over commit indices) gives :func:`generations` over
    :func:`topo_order`, a shallow parent (absent) counting as none."""
    from znippy_sql.git.graph import commit_links, generations_of

    commits, _trees, _objects, main = history(400, seed=3)
    ordinal = {c: i for i, c in enumerate(sorted(commits))}
    by_int = {ordinal[c]: (0, tuple(ordinal[p] for p in ps), when)
              for c, (_t, ps, when) in sorted(commits.items())}
    cut = ordinal[main[10]]
    del by_int[cut]                                   # its children keep naming it: absent
    assert generations_of(commit_links(by_int)) == generations(by_int, topo_order(by_int))
    assert commit_links(by_int).absent == {cut}
