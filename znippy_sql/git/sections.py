"""The three git sections of a sealed archive, from its parsed packs (docs/git-sections.md).

``__gunnar_oid__`` lists every object of every live pack once (the first pack that holds it,
in pack-ordinal order, wins) and, since version 2, the bitmap position order;
``__gunnar_graph__`` has one row per commit (with its position and block),
``__gunnar_reach__`` one Roaring bitmap of positions per *selected* commit (git's selection,
:func:`~.graph.select_commits`, plus what keeps every completing walk within ``walk_bound``
commits, :func:`~.graph.reach_layout`). Rows are in oid order, so the sections depend on the
objects only, not on the order packs were pushed in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pyarrow as pa

from ..format.gitindex import encode_oid_index
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..format.sections import ReservedSection
from .graph import Commit, Tree, generations, reach_layout, select_commits, topo_order
from .pack import ParsedPack

OID = pa.binary(20)
GRAPH_SCHEMA = pa.schema([
    pa.field("oid", OID, nullable=False),
    pa.field("parents", pa.list_(pa.field("item", OID, nullable=False)), nullable=False),
    pa.field("tree", OID, nullable=False),
    pa.field("generation", pa.uint32(), nullable=False),
    pa.field("commit_time", pa.int64(), nullable=False),
    pa.field("corrected_date", pa.int64(), nullable=False),
    pa.field("position", pa.uint32(), nullable=False),
    pa.field("block", pa.uint32(), nullable=False),
])
REACH_SCHEMA = pa.schema([
    pa.field("oid", OID, nullable=False),
    pa.field("bitmap", pa.binary(), nullable=False),
])
#: a commit is stored when completing it could walk more than this many unstored commits
WALK_BOUND = 1000
#: schema metadata of ``__gunnar_graph__``: ids the archive's commits and trees name that it
#: does not hold (a partial clone's missing blobs, a shallow history's parents)
ABSENT_KEY = b"znippy.git.absent_objects"


def git_sections(packs: Sequence[tuple[int, ParsedPack]], *, walk_bound: int = WALK_BOUND,
                 prefer: Collection[bytes] = ()) -> list[ReservedSection]:
    """``(pack's lookup row, parsed pack)`` in pack-ordinal order → the three sections.
    ``walk_bound = 0`` stores every commit's bitmap; ``prefer``: commits refs name (git's
    selection takes them first in a window)."""
    objects: dict[bytes, tuple[bytes, int, int, int]] = {}
    commits: dict[bytes, Commit] = {}
    trees: dict[bytes, Tree] = {}
    for row, pack in packs:
        for oid, kind, offset in zip(pack.oids, pack.types, pack.offsets):
            if oid not in objects:
                objects[oid] = (oid, row, offset, kind)
        for oid, commit in pack.commits.items():
            commits.setdefault(oid, commit)
        for oid, tree in pack.trees.items():
            trees.setdefault(oid, tree)
    order = topo_order(commits)
    gen, corrected = generations(commits, order)
    chosen = set(commits) if walk_bound <= 0 else select_commits(commits, prefer)
    layout = reach_layout(commits, trees, objects, gen, chosen=chosen,
                          bound=max(walk_bound, 1))
    ids = sorted(commits)
    graph = pa.table([
        pa.array(ids, OID),
        pa.array([list(commits[c][1]) for c in ids], GRAPH_SCHEMA.field("parents").type),
        pa.array([commits[c][0] for c in ids], OID),
        pa.array([gen[c] for c in ids], pa.uint32()),
        pa.array([commits[c][2] for c in ids], pa.int64()),
        pa.array([corrected[c] for c in ids], pa.int64()),
        pa.array([layout.blocks[c][0] for c in ids], pa.uint32()),
        pa.array([layout.blocks[c][1] for c in ids], pa.uint32()),
    ], schema=GRAPH_SCHEMA.with_metadata({ABSENT_KEY: str(layout.absent).encode()}))
    kept = sorted(layout.kept)
    reach = pa.table([pa.array(kept, OID),
                      pa.array([layout.kept[c].serialize() for c in kept], pa.binary())],
                     schema=REACH_SCHEMA)
    return [ReservedSection(GIT_OID, encode_oid_index(objects.values(),
                                                      positions=layout.positions)),
            ReservedSection(GIT_GRAPH, graph), ReservedSection(GIT_REACH, reach)]
