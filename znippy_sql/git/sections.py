"""The three git sections of a sealed archive, from its parsed packs (docs/git-sections.md).

``__gunnar_oid__`` lists every object of every live pack once (the first pack that holds it,
in pack-ordinal order, wins) and, since version 2, the bitmap position order;
``__gunnar_graph__`` has one row per commit (with its position and block),
``__gunnar_reach__`` one Roaring bitmap of positions per *selected* commit (git's selection,
:func:`~.graph.select_commits`, plus what keeps every completing walk within ``walk_bound``
commits, :func:`~.graph.layout_ordinals`). Rows are in oid order, so the sections depend on the
objects only, not on the order packs were pushed in.

The packs' ids stay ``uint8[n, 20]`` arrays (git/bulk.py): objects are sorted and deduplicated
with numpy, and the graph functions run over object *ordinals* (ints); an id a commit or tree
names that the archive does not hold gets a negative code of its own (``-2 - k``), so it is
counted once as absent and is never a key of the commits or trees.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..format.gitindex import encode_sorted, id_order
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..format.sections import ReservedSection
from .bulk import OID, PackGraph, ids_of
from .graph import (Commit, Tree, commit_links, generations_of, layout_ordinals,
                    select_commits)
from .pack import ParsedPack

OID_TYPE = pa.binary(20)
GRAPH_SCHEMA = pa.schema([
    pa.field("oid", OID_TYPE, nullable=False),
    pa.field("parents", pa.list_(pa.field("item", OID_TYPE, nullable=False)), nullable=False),
    pa.field("tree", OID_TYPE, nullable=False),
    pa.field("generation", pa.uint32(), nullable=False),
    pa.field("commit_time", pa.int64(), nullable=False),
    pa.field("corrected_date", pa.int64(), nullable=False),
    pa.field("position", pa.uint32(), nullable=False),
    pa.field("block", pa.uint32(), nullable=False),
])
REACH_SCHEMA = pa.schema([
    pa.field("oid", OID_TYPE, nullable=False),
    pa.field("bitmap", pa.binary(), nullable=False),
])
#: a commit is stored when completing it could walk more than this many unstored commits
WALK_BOUND = 1000
#: schema metadata of ``__gunnar_graph__``: ids the archive's commits and trees name that it
#: does not hold (a partial clone's missing blobs, a shallow history's parents)
ABSENT_KEY = b"znippy.git.absent_objects"


class OidTable:
    """Ids sorted and unique (``uint8[n, 20]``), looked up many at a time."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids
        self.key, self.rest = _key(ids), _rest(ids)
        self._absent: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def find(self, query: np.ndarray) -> np.ndarray:
        """Ordinals of ``uint8[m, 20]`` ids; an id not held gets its absent code."""
        n = len(self.ids)
        if not len(query):
            return np.zeros(0, dtype=np.int64)
        want = _key(query)
        at = np.searchsorted(self.key, want)
        near = np.minimum(at, max(n - 1, 0))
        if n:
            rest = _rest(query)
            hit = ((at < n) & (self.key[near] == want) & (self.rest[0][near] == rest[0])
                   & (self.rest[1][near] == rest[1]))
        else:
            hit = np.zeros(len(query), dtype=bool)
        out = np.where(hit, at, -1).astype(np.int64)
        for i in np.flatnonzero(~hit).tolist():      # absent (or a rare shared 8-byte key)
            j, oid = int(at[i]), query[i].tobytes()
            while j < n and int(self.key[j]) == int(want[i]):
                if self.ids[j].tobytes() == oid:
                    out[i] = j
                    break
                j += 1
            else:
                out[i] = -2 - self._absent.setdefault(oid, len(self._absent))
        return out


def _key(ids: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each id as a number (big-endian: ordered as the ids are)."""
    return ids[:, :8].copy().view(">u8")[:, 0].astype(np.uint64)


def _rest(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The other 12 bytes of each id, as two numbers (compared, not ordered)."""
    return ids[:, 8:16].copy().view("<u8")[:, 0], ids[:, 16:20].copy().view("<u4")[:, 0]


@dataclass
class GraphInput:
    """Every object once, and the commits and trees in ordinals (module doc)."""

    table: OidTable
    rows: np.ndarray          #: int64[n]: each object's pack (index into the packs given)
    offsets: np.ndarray       #: int64[n]
    types: np.ndarray         #: int64[n]
    commits: dict[int, Commit]
    trees: dict[int, Tree]
    commit_rows: np.ndarray   #: int64[c]: the commits' ordinals, ascending (graph rows)
    tree_of: np.ndarray       #: uint8[c, 20]: in graph row order
    parent_offsets: np.ndarray  #: int64[c + 1]: into ``parent_ids``
    parent_ids: np.ndarray    #: uint8[p, 20]: every parent as the commit names it
    times: np.ndarray         #: int64[c]


def graph_input(packs: Sequence[ParsedPack]) -> GraphInput:
    """The objects, commits and trees of ``packs`` (earlier packs win a shared id)."""
    ids = ids_of(b"".join(b"".join(p.oids) for p in packs))
    which = np.concatenate([np.full(len(p.oids), k, dtype=np.int64)
                            for k, p in enumerate(packs)] or [np.zeros(0, dtype=np.int64)])
    offsets = np.concatenate([np.asarray(p.offsets, dtype=np.int64) for p in packs]
                             or [np.zeros(0, dtype=np.int64)])
    types = np.concatenate([np.asarray(p.types, dtype=np.int64) for p in packs]
                           or [np.zeros(0, dtype=np.int64)])
    order = id_order(ids)                               # stable: the earlier pack first
    ids = ids[order]
    first = np.ones(len(ids), dtype=bool)
    if len(ids) > 1:
        first[1:] = (ids[1:] != ids[:-1]).any(axis=1)
    keep = order[first]
    table = OidTable(ids[first])

    graphs = [p.graph for p in packs]
    commit_ids = np.concatenate([g.commit_ids for g in graphs]) if graphs else ids[:0]
    ordinals = table.find(commit_ids)
    rows, firsts = np.unique(ordinals, return_index=True)   # ascending, first pack wins
    counts = np.concatenate([g.parent_counts for g in graphs]) if graphs else rows[:0]
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    all_parents = np.concatenate([g.parent_ids for g in graphs]) if graphs else ids[:0]
    picked = counts[firsts]
    parent_offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(picked, out=parent_offsets[1:])
    take = (np.repeat(starts[firsts] - parent_offsets[:-1], picked)
            + np.arange(int(parent_offsets[-1])))
    parent_ids = all_parents[take]
    tree_of = (np.concatenate([g.tree_of for g in graphs]) if graphs else ids[:0])[firsts]
    times = (np.concatenate([g.times for g in graphs]) if graphs else rows[:0])[firsts]
    tree_codes = table.find(tree_of).tolist()
    parent_codes = table.find(parent_ids).tolist()
    bounds = parent_offsets.tolist()
    when = times.tolist()
    commits: dict[int, Commit] = {
        c: (tree_codes[k], tuple(parent_codes[bounds[k]:bounds[k + 1]]), when[k])
        for k, c in enumerate(rows.tolist())}
    return GraphInput(table, which[keep], offsets[keep], types[keep], commits,
                      _trees(table, graphs), rows, tree_of, parent_offsets, parent_ids, times)


def _trees(table: OidTable, graphs: list[PackGraph]) -> dict[int, Tree]:
    """tree ordinal → (subtree codes, blob codes), entry order (earlier packs win)."""
    trees: dict[int, Tree] = {}
    for g in graphs:
        if not len(g.tree_ids):
            continue
        owners = table.find(g.tree_ids).tolist()
        fresh = np.array([t not in trees for t in owners], dtype=bool)
        edges = fresh[g.edge_tree]
        tree_k, sub = g.edge_tree[edges], g.edge_sub[edges]
        codes = table.find(g.edge_ids[edges])
        # each tree's entries are together, in entry order: split them, order kept
        subs, blobs = codes[sub].tolist(), codes[~sub].tolist()
        sub_end = np.cumsum(np.bincount(tree_k[sub], minlength=len(owners))).tolist()
        blob_end = np.cumsum(np.bincount(tree_k[~sub], minlength=len(owners))).tolist()
        a = b = 0
        for t, ok, x, y in zip(owners, fresh.tolist(), sub_end, blob_end):
            if ok:
                trees[t] = (subs[a:x], blobs[b:y])
            a, b = x, y
    return trees


@dataclass
class GitSections:
    sections: list[ReservedSection]
    objects: int
    commits: int


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """The cyclic collector paused: building the graph makes ~10^5 lists and tuples that all
    live to the end, and each collection would walk them again (measured: the tree lists of
    psf/requests took 170 ms with it, 20 without). Nothing made here forms a cycle."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def git_sections(packs: Sequence[tuple[int, ParsedPack]], *, walk_bound: int = WALK_BOUND,
                 prefer: Collection[bytes] = ()) -> GitSections:
    """``(pack's lookup row, parsed pack)`` in pack-ordinal order → the three sections (and
    how many objects and commits they hold). ``walk_bound = 0`` stores every commit's bitmap;
    ``prefer``: commits refs name (git's selection takes them first in a window)."""
    with no_gc():
        return _git_sections(packs, walk_bound=walk_bound, prefer=prefer)


def _git_sections(packs: Sequence[tuple[int, ParsedPack]], *, walk_bound: int,
                  prefer: Collection[bytes]) -> GitSections:
    got = graph_input([p for _row, p in packs])
    table, commits = got.table, got.commits
    links = commit_links(commits)
    gen, corrected = generations_of(links)
    if walk_bound <= 0:
        chosen: Collection[int] = commits
    else:
        wanted = table.find(ids_of(b"".join(o for o in prefer if len(o) == OID)))
        chosen = select_commits(commits, {c for c in wanted.tolist() if c in commits})
    layout = layout_ordinals(len(table), commits, got.trees, gen, chosen=chosen,
                             bound=max(walk_bound, 1), links=links)
    rows = got.commit_rows.tolist()
    lists = pa.ListArray.from_arrays(pa.array(got.parent_offsets.astype(np.int32)),
                                     _fixed(got.parent_ids),
                                     type=GRAPH_SCHEMA.field("parents").type)
    graph = pa.Table.from_arrays([
        _fixed(table.ids[got.commit_rows]),
        lists,
        _fixed(got.tree_of),
        pa.array(np.array([gen[c] for c in rows], dtype=np.uint32)),
        pa.array(got.times),
        pa.array(np.array([corrected[c] for c in rows], dtype=np.int64)),
        pa.array(np.array([layout.blocks[c][0] for c in rows], dtype=np.uint32)),
        pa.array(np.array([layout.blocks[c][1] for c in rows], dtype=np.uint32)),
    ], schema=GRAPH_SCHEMA.with_metadata({ABSENT_KEY: str(layout.absent).encode()}))
    kept = sorted(layout.kept)
    reach = pa.Table.from_arrays([
        _fixed(table.ids[np.array(kept, dtype=np.int64)].reshape(-1, OID)),
        pa.array([layout.kept[c].serialize() for c in kept], pa.binary())],
        schema=REACH_SCHEMA)
    pack_rows = np.array([row for row, _p in packs], dtype=np.int64)
    oid = encode_sorted(table.ids, pack_rows[got.rows], got.offsets, got.types,
                        order=np.array(layout.positions, dtype=np.int64))
    return GitSections([ReservedSection(GIT_OID, oid), ReservedSection(GIT_GRAPH, graph),
                        ReservedSection(GIT_REACH, reach)], len(table), len(rows))


def _fixed(ids: np.ndarray) -> pa.Array:
    """``uint8[n, 20]`` → a FixedSizeBinary(20) array without a Python object per id."""
    data = np.ascontiguousarray(ids)
    return pa.Array.from_buffers(OID_TYPE, len(data), [None, pa.py_buffer(data.tobytes())])
