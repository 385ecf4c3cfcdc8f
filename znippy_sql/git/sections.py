"""The three git sections of a sealed archive, from its parsed packs (docs/git-sections.md).

``__gunnar_oid__`` lists every object of every live pack once (the first pack that holds it,
in pack-ordinal order, wins) and, since version 2, the bitmap position order;
``__gunnar_graph__`` has one row per commit (with its position and block),
``__gunnar_reach__`` one Roaring bitmap of positions per *selected* commit (git's selection
plus what keeps every completing walk within ``walk_bound`` commits). Rows are in oid order,
so the sections depend on the objects only, not on the order packs were pushed in.

The columns are computed by the core (``native/src/git/layout.rs``: objects sorted and
deduplicated, ordinals, generations, git's selection, the positions and the bitmaps, all
iterative) and come back as little-endian buffers that pyarrow wraps without a copy.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .. import corelib
from ..format.gitindex import encode_sorted
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..format.sections import ReservedSection
from .pack import ParsedPack

OID = 20
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


@dataclass
class GitSections:
    sections: list[ReservedSection]
    objects: int
    commits: int


def git_sections(packs: Sequence[tuple[int, ParsedPack]], *, walk_bound: int = WALK_BOUND,
                 prefer: Collection[bytes] = ()) -> GitSections:
    """``(pack's lookup row, parsed pack)`` in pack-ordinal order → the three sections (and
    how many objects and commits they hold). ``walk_bound = 0`` stores every commit's bitmap;
    ``prefer``: commits refs name (git's selection takes them first in a window)."""
    return _git_sections(packs, walk_bound=walk_bound, prefer=prefer)


def _git_sections(packs: Sequence[tuple[int, ParsedPack]], *, walk_bound: int,
                  prefer: Collection[bytes]) -> GitSections:
    cols = corelib.git_sections([(p.core, row) for row, p in packs],
                                b"".join([o for o in prefer if len(o) == OID]), walk_bound)
    ids = np.frombuffer(cols["ids"], dtype=np.uint8).reshape(-1, OID)
    c = len(cols["generation"]) // 4
    parents = pa.Array.from_buffers(
        GRAPH_SCHEMA.field("parents").type, c, [None, pa.py_buffer(cols["parent_offsets"])],
        children=[_fixed(cols["parent_ids"])])
    graph = pa.Table.from_arrays([
        _fixed(cols["commit_ids"]),
        parents,
        _fixed(cols["tree_of"]),
        _plain(pa.uint32(), cols["generation"]),
        _plain(pa.int64(), cols["times"]),
        _plain(pa.int64(), cols["corrected"]),
        _plain(pa.uint32(), cols["position"]),
        _plain(pa.uint32(), cols["block"]),
    ], schema=GRAPH_SCHEMA.with_metadata({ABSENT_KEY: str(cols["absent"]).encode()}))
    kept = len(cols["reach_ids"]) // OID
    reach = pa.Table.from_arrays([
        _fixed(cols["reach_ids"]),
        pa.Array.from_buffers(pa.binary(), kept, [None, pa.py_buffer(cols["reach_offsets"]),
                                                  pa.py_buffer(cols["reach_data"])])],
        schema=REACH_SCHEMA)
    oid = encode_sorted(ids, np.frombuffer(cols["pack_rows"], dtype="<u4"),
                        np.frombuffer(cols["offsets"], dtype="<u8"),
                        np.frombuffer(cols["types"], dtype=np.uint8),
                        order=np.frombuffer(cols["order"], dtype="<u4"))
    return GitSections([ReservedSection(GIT_OID, oid), ReservedSection(GIT_GRAPH, graph),
                        ReservedSection(GIT_REACH, reach)], len(ids), c)


def _fixed(raw: bytes) -> pa.Array:
    """Joined 20-byte ids → a FixedSizeBinary(20) array over the same bytes."""
    return pa.Array.from_buffers(OID_TYPE, len(raw) // OID, [None, pa.py_buffer(raw)])


def _plain(kind: pa.DataType, raw: bytes) -> pa.Array:
    """A little-endian buffer of ``kind`` values as an array over the same bytes."""
    return pa.Array.from_buffers(kind, len(raw) // (kind.bit_width // 8),
                                 [None, pa.py_buffer(raw)])
