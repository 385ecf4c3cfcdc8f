"""The three git sections of a sealed archive, from its parsed packs (docs/git-sections.md).

``__gunnar_oid__`` lists every object of every live pack once (the first pack that holds it,
in pack-ordinal order, wins); ``__gunnar_graph__`` has one row per commit, ``__gunnar_reach__``
one Roaring bitmap per *selected* commit (see :func:`bitmapped`). Rows are in oid order, so
the sections depend on the objects only, not on the order packs were pushed in.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ..format.gitindex import encode_oid_index
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..format.sections import ReservedSection
from .graph import Commit, Tree, generations, reach_bitmaps, topo_order
from .pack import ParsedPack

OID = pa.binary(20)
GRAPH_SCHEMA = pa.schema([
    pa.field("oid", OID, nullable=False),
    pa.field("parents", pa.list_(pa.field("item", OID, nullable=False)), nullable=False),
    pa.field("tree", OID, nullable=False),
    pa.field("generation", pa.uint32(), nullable=False),
    pa.field("commit_time", pa.int64(), nullable=False),
    pa.field("corrected_date", pa.int64(), nullable=False),
])
REACH_SCHEMA = pa.schema([
    pa.field("oid", OID, nullable=False),
    pa.field("bitmap", pa.binary(), nullable=False),
])
#: a commit gets a stored bitmap when its generation is a multiple of this, or it has no
#: children (a tip); the others are completed from their nearest bitmapped ancestors
BITMAP_EVERY = 32


def bitmapped(generation: int, is_tip: bool, every: int = BITMAP_EVERY) -> bool:
    return every <= 1 or is_tip or generation % every == 0


def git_sections(packs: Sequence[tuple[int, ParsedPack]], *, every: int = BITMAP_EVERY
                 ) -> list[ReservedSection]:
    """``(pack's lookup row, parsed pack)`` in pack-ordinal order → the three sections."""
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
    ordinal = {oid: i for i, oid in enumerate(sorted(objects))}
    order = topo_order(commits)
    gen, corrected = generations(commits, order)
    has_child = {p for c in commits.values() for p in c[1]}
    sets = reach_bitmaps(commits, order, trees, ordinal,
                         lambda oid: bitmapped(gen[oid], oid not in has_child, every))
    ids = sorted(commits)
    graph = pa.table([
        pa.array(ids, OID),
        pa.array([list(commits[c][1]) for c in ids], GRAPH_SCHEMA.field("parents").type),
        pa.array([commits[c][0] for c in ids], OID),
        pa.array([gen[c] for c in ids], pa.uint32()),
        pa.array([commits[c][2] for c in ids], pa.int64()),
        pa.array([corrected[c] for c in ids], pa.int64()),
    ], schema=GRAPH_SCHEMA)
    kept = sorted(sets)
    reach = pa.table([pa.array(kept, OID),
                      pa.array([sets[c].serialize() for c in kept], pa.binary())],
                     schema=REACH_SCHEMA)
    return [ReservedSection(GIT_OID, encode_oid_index(objects.values())),
            ReservedSection(GIT_GRAPH, graph), ReservedSection(GIT_REACH, reach)]
