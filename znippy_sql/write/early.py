"""A directory's create started before pyarrow is imported.

``znippy-sql create`` imports pyarrow and numpy (~0.25 s of one core) before its first file.
:func:`start` starts the native walk of the source first (listing, and the read-ahead and
BLAKE3 of the files the routing rule packs whole: ``native/src/create/``, threads without
the GIL), so the import overlaps that work; the writer's :class:`~.source.Walk` takes the
started walk when it asks for the same one (same root, options, exclusions and rule: see
``Walk.start``), else starts its own. Nothing here imports pyarrow or numpy.

:func:`rule_for` is the routing rule of a write's options, one object for equal settings
(``Ingest`` asks for it too, so an early walk and the writer's agree by identity).
"""

from __future__ import annotations

import os

from .. import corelib
from ..format import codec
from . import limits
from .source import Walk, discard_started
from .staging import staging_prefix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .options import WriteOptions

_RULES: dict[tuple[bool, bool, int, int], Any] = {}


def member_limits(options: WriteOptions) -> tuple[int, int]:
    """The largest small-pack and directory-pack members of a write (``write/pack.py``)."""
    return (min(limits.PACK_MEMBER_MAX, options.block_size),  # read at call time: a bench
            min(limits.DIR_MEMBER_MAX, options.block_size))  # may set them (bench_dirpack)


def rule_for(options: WriteOptions) -> Any:
    """The routing rule (``corelib.router``) of ``options``: the same object for the same
    settings."""
    pack_max, dir_max = member_limits(options)
    key = (options.pack, options.dedup, pack_max, dir_max)
    rule = _RULES.get(key)
    if rule is None:
        rule = _RULES[key] = corelib.router(codec.SKIP_SUFFIXES, codec.ZIP_SUFFIXES,
                                            packing=options.pack, dedup=options.dedup,
                                            pack_max=pack_max, dir_max=dir_max)
    return rule


def start(source: str, out: str, options: WriteOptions) -> None:
    """Start the walk ``write_archive(out, source, options=options)`` will ask for: of a
    local output (its own file and staging siblings left out), reading ahead what the rule
    packs (only when packing)."""
    if "://" in out:  # staged elsewhere: the writer's walk is another one
        return
    path = os.fspath(out)
    walk = Walk(source, posix=options.posix, exclude=[path],
                exclude_prefixes=[staging_prefix(path)],
                skip_unreadable=options.skip_unreadable)
    if options.pack:
        walk.read_ahead(rule_for(options))
    walk.start()


def discard() -> None:
    """Stop a started walk no writer took (an error came first)."""
    discard_started()
