"""The three git sections of a sealed archive, from its parsed packs (docs/git-sections.md).

``__gunnar_oid__`` lists every object of every live pack once (the first pack that holds it,
in pack-ordinal order, wins) and, since version 2, the bitmap position order;
``__gunnar_graph__`` has one row per commit (with its position and block; its schema
metadata ``znippy.git.absent_objects`` counts the ids its commits and trees name that the
archive lacks), ``__gunnar_reach__`` one Roaring bitmap of positions per *selected* commit
(git's selection plus what keeps every completing walk within ``walk_bound`` commits). Rows
are in oid order, so the sections depend on the objects only, not on the order packs were
pushed in.

The core computes and writes them (``native/src/git/layout.rs``: objects sorted and
deduplicated, ordinals, generations, git's selection, the positions and the bitmaps, all
iterative; ``native/src/git/seal.rs``: the section bytes, Arrow IPC streams written by
``native/src/ipcw.rs``), with the rest of the tail (git/seal.py).
"""

from __future__ import annotations

#: a commit is stored when completing it could walk more than this many unstored commits
WALK_BOUND = 1000
