"""The ranges a write option's number may take (``WriteOptions`` checks them when made), and
the sizes of the files packed whole (``write/pack.py``), free of pyarrow: ``write/early.py``
builds the routing rule from them before the writer is imported."""

from __future__ import annotations

#: the compression levels OpenZL takes ("level must be less than 23")
LEVELS = range(1, 23)
#: a chunk's ``uncompressed_size`` is a uint32 (FORMAT §3)
MAX_BLOCK_SIZE = (1 << 32) - 1
#: files up to this size are packed [fixed in docs/format.md]
PACK_MEMBER_MAX = 256 << 10
#: zip-family files up to this size join directory packs [fixed in docs/format.md]
DIR_MEMBER_MAX = 32 << 20
