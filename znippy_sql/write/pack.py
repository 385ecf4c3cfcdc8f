"""Packed blobs (FORMAT §3, docs/format.md "Packed blobs"): small files back to back in one frame.

The rule [docs/format.md]: a file of 1 to ``PACK_MEMBER_MAX`` bytes (and at most the block
size) that the codec would compress (not skip-listed, not cut at zip entries) joins the open
pack of its group; the pack is sent to the codec as one chunk when it holds ``PACK_TARGET``
bytes or more, and at the end of the write. Every open pack, of every group, is closed (in
the order the groups opened them) when a file whose first path component differs from the
previous file's arrives, packed or not (:meth:`Packer.turn`): an append, or a store's next
add, of a new top-level tree then places its blobs exactly where a one-shot write would. Everything depends on the input order only: the same files in the
same order give the same packs whatever the worker count.

Dedup (docs/dedup.md): a member's BLAKE3 is taken when it joins. Content that is already a
member of a pack of this write, or that an archive being appended to (or a store) holds
already, is not stored again: the member is a *reference* and its row points at that slice.
Content that only a non-packed chunk of this write holds (a skip-listed file of the same
bytes) is stored again in the pack: whether that chunk is placed yet depends on timing, and
the output must not.

When the pack's frame is not smaller than its bytes, the members are written as they are,
each its own raw blob (``inner_offset`` 0): the same bytes either way.

Directory packs [docs/format.md]: a zip-family file (``zipcut.is_zip_family``) of 1 to
``DIR_MEMBER_MAX`` bytes (and at most the block size) joins, whole and uncut, the open
*directory pack* of its group. Such a pack holds consecutive files (in input order) of one
*directory key*, the path without its last two components (a Maven artifact's
``groupId/artifactId``: its versions); it is closed when a file (packed or not) of another
key arrives, before a member would take it past ``DIR_PACK_MAX``, at a new top-level tree
and at the end, and is compressed with a long window and long-distance matching
(``codec.LONG_WINDOW_LOG``): the entries one version of an artifact shares with the one
before it are found wherever they are, which no per-file frame (deflated entries) can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import corelib
from .blobs import GroupRows
from .limits import DIR_MEMBER_MAX, PACK_MEMBER_MAX  # noqa: F401  (defined there: early.py)

#: a pack is closed once it holds this many bytes [docs/format.md; bench/results-packed.md:
#: 4 MiB brings a source tree under 1.05x its .tar.zst, 1 MiB left it at 1.068x]
PACK_TARGET = 4 << 20
#: a directory pack never holds more than this [docs/format.md; bench/results-packed.md:
#: on ~/.m2/repository 8/16/32/64 MiB give blobs of 0.873/0.789/0.751/0.751x its .tar.zst]
DIR_PACK_MAX = 32 << 20


@dataclass
class Pack:
    """A closed pack of one group, as the core assembled it (``native/src/create/pack.rs``):
    its bytes and, per member, its path and module columns, length, digest (back to back),
    offset in ``data`` (``inner``), the dedup slot of a slice stored before that it points
    at (``refs``, -1: its bytes are in ``data``) and the slot entered for it (``slots``)."""

    rows: GroupRows
    paths: list[str]
    extras: list[dict[str, Any] | None]
    directory: bool
    data: bytes
    lengths: list[int]
    digests: bytes
    inner: list[int]
    refs: list[int]
    slots: list[int]


def dir_key(path: str) -> str:
    """The directory key of a path: without its last two components ("" when it has fewer
    than three); the core's (``corelib.dir_key``), as :meth:`Packer.turn` is told it."""
    return corelib.dir_key(path)


class Packer:
    """The open packs of a write, assembled by the core (``native/src/create/pack.rs``); the
    rows' paths and module columns of each open pack are kept here (``held``)."""

    def __init__(self, dedup: Any, *, target: int = PACK_TARGET) -> None:
        self.dedup = dedup
        self._packs = corelib.Packs(target, DIR_PACK_MAX)
        #: ``join(group, directory, data, digest, dedup)`` → ``(serial, packs closed)``: a
        #: member joins the open pack of its group (``id`` of its GroupRows); its BLAKE3 is
        #: taken when ``digest`` is None (the core's method: no Python frame a file)
        self.join = self._packs.add
        #: each file's turn, before it joins (the core's: ``native/src/create/turn.rs``):
        #: 0, 1 another directory key than the file before it, 2 another top-level tree
        self.step = corelib.Turns().step
        #: serial → (rows, paths, module columns) of an open pack's members
        self.held: dict[int, tuple[GroupRows, list[str], list[dict[str, Any] | None]]] = {}

    def turn(self, turn: int) -> list[Pack]:
        """The packs a file's :attr:`step` closes: every open pack when it starts another
        top-level tree than the file before it (2), else every open directory pack when it
        has another directory key (1)."""
        if turn and self._packs.close(turn, self.dedup):
            return self.taken()
        return []

    def taken(self) -> list[Pack]:
        """The packs closed (by :attr:`join` or :meth:`turn`), oldest first."""
        out = []
        for serial, directory, parts, lengths, digests, inner, refs, slots in self._packs.take():
            rows, paths, extras = self.held.pop(serial)
            out.append(Pack(rows, paths, extras, directory, b"".join(parts), lengths, digests,
                            inner, refs, slots))
        return out

    def drain(self) -> list[Pack]:
        """Every open pack (at the end of a write), in the order the groups opened."""
        return self.turn(2)
