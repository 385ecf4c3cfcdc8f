"""The values a write option may take: :func:`check`, run by ``WriteOptions`` when made."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import OptionError
from .compat import COMPAT_MODES

if TYPE_CHECKING:
    from .ingest import WriteOptions

#: the compression levels OpenZL takes ("level must be less than 23")
LEVELS = range(1, 23)
#: a chunk's ``uncompressed_size`` is a uint32 (FORMAT §3)
MAX_BLOCK_SIZE = (1 << 32) - 1


def check(options: WriteOptions) -> None:
    """Every field of ``options`` has a value a writer takes; else :class:`OptionError`
    naming it (run by ``WriteOptions`` when made)."""
    def refuse(name: str, why: str) -> None:
        value = getattr(options, name)
        raise OptionError(f"write option {name}={value!r}: {why}")

    for name in ("level", "block_size"):
        value = getattr(options, name)
        if not isinstance(value, int) or isinstance(value, bool):
            refuse(name, "not a whole number")
    if options.level not in LEVELS:
        refuse("level", f"out of range: OpenZL takes levels {LEVELS.start} to {LEVELS.stop - 1}")
    if not 0 < options.block_size <= MAX_BLOCK_SIZE:
        refuse("block_size", f"must be positive and at most {MAX_BLOCK_SIZE} bytes")
    workers = options.workers
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool)
                                or workers < 1):
        refuse("workers", "must be a positive whole number, or None for the CPU count")
    for name in ("dedup", "pack", "index_compression", "posix", "skip_unsafe",
                 "skip_unreadable", "fsync"):
        if not isinstance(getattr(options, name), bool):
            refuse(name, "must be True or False")
    if options.compat is not None:
        if options.compat not in COMPAT_MODES:
            refuse("compat", f"unknown compat mode; known: {', '.join(COMPAT_MODES)}")
        if options.posix:
            raise OptionError(f"write options compat={options.compat!r} and posix=True: a "
                              f"{options.compat} archive holds no __meta__ for POSIX facts")
