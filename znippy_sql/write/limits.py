"""The ranges a write option's number may take (``WriteOptions`` checks them when made)."""

from __future__ import annotations

#: the compression levels OpenZL takes ("level must be less than 23")
LEVELS = range(1, 23)
#: a chunk's ``uncompressed_size`` is a uint32 (FORMAT §3)
MAX_BLOCK_SIZE = (1 << 32) - 1
