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

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import corelib
from ..format import b3 as blake3
from .blobs import ChunkTag, GroupRows

#: files up to this size are packed [fixed in docs/format.md]
PACK_MEMBER_MAX = 256 << 10
#: a pack is closed once it holds this many bytes [docs/format.md; bench/results-packed.md:
#: 4 MiB brings a source tree under 1.05x its .tar.zst, 1 MiB left it at 1.068x]
PACK_TARGET = 4 << 20
#: zip-family files up to this size join directory packs [fixed in docs/format.md]
DIR_MEMBER_MAX = 32 << 20
#: a directory pack never holds more than this [docs/format.md; bench/results-packed.md:
#: on ~/.m2/repository 8/16/32/64 MiB give blobs of 0.873/0.789/0.751/0.751x its .tar.zst]
DIR_PACK_MAX = 32 << 20


class Member(NamedTuple):
    """One packed file: its row's tag, length, digest, and where its bytes are: ``inner``
    in this pack (``ref`` -1), or the dedup slot ``ref`` of a slice stored before."""

    tag: ChunkTag
    length: int
    digest: bytes
    inner: int
    ref: int
    #: the dedup slot entered for this member's content (-1: none)
    slot: int = -1


@dataclass
class Pack:
    """An open pack of one group."""

    rows: GroupRows
    members: list[Member] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)
    size: int = 0
    #: dedup slots entered for this pack's own members (settled when it is placed)
    slots: list[int] = field(default_factory=list)
    #: a directory pack (compressed with a long window), not a pack of small files
    directory: bool = False

    def data(self) -> bytes:
        return b"".join(self.parts)


def dir_key(path: str) -> str:
    """The directory key of a path: without its last two components ("" when it has fewer
    than three); the core's (``corelib.dir_key``), as :meth:`Packer.turn` is told it."""
    return corelib.dir_key(path)


class Packer:
    """Open packs by group; :meth:`add` returns the packs it closed."""

    def __init__(self, dedup: Any, *, target: int = PACK_TARGET) -> None:
        self.dedup = dedup
        self.target = target
        #: (id(GroupRows), directory?) → pack, in creation order
        self.open: dict[tuple[int, bool], Pack] = {}
        #: each file's turn, before it joins (the core's: ``native/src/create/turn.rs``):
        #: 0, 1 another directory key than the file before it, 2 another top-level tree
        self.step = corelib.Turns().step

    def turn(self, turn: int) -> list[Pack]:
        """The packs a file's :attr:`step` closes: every open pack when it starts another
        top-level tree than the file before it (2), else every open directory pack when it
        has another directory key (1)."""
        if turn == 1:
            return self._close([k for k in self.open if k[1]])
        return self.drain() if turn == 2 and self.open else []

    def add(self, tag: ChunkTag, data: bytes | memoryview, digest: bytes | None = None,
            *, directory: bool = False) -> list[Pack]:
        """``data`` joins the open pack (``directory``: the directory pack) of its group;
        returns the packs this closed (``digest``: its BLAKE3, when already taken)."""
        rows = tag.rows
        closed: list[Pack] = []
        n = len(data)
        pack = self.open.get((id(rows), directory))
        if directory and pack is not None and pack.size + n > DIR_PACK_MAX:
            closed += self._close([(id(rows), True)])
            pack = None
        if pack is None:
            pack = self.open[(id(rows), directory)] = Pack(rows, directory=directory)
        if digest is None:
            digest = blake3.blake3(data).digest()
        ref = slot = -1
        if self.dedup is not None:
            ref, slot = self.dedup.pack_member(digest, n, pack.slots)
        if ref >= 0:
            pack.members.append(Member(tag, n, digest, 0, ref))
        else:
            if slot >= 0:
                pack.slots.append(slot)
            pack.members.append(Member(tag, n, digest, pack.size, -1, slot))
            pack.parts.append(data)
            pack.size += n
        if not directory and pack.size >= self.target:
            closed += self._close([(id(rows), False)])
        return closed

    def _close(self, keys: list[tuple[int, bool]]) -> list[Pack]:
        packs = [self.open.pop(k) for k in keys]
        for pack in packs:
            self._closing(pack)
        return [p for p in packs if p.members]

    def _closing(self, pack: Pack) -> None:
        if self.dedup is not None:
            self.dedup.close(pack.slots)

    def drain(self) -> list[Pack]:
        """Every open pack (at the end of a write), in the order the groups opened."""
        packs = [p for p in self.open.values() if p.members]
        self.open.clear()
        for pack in packs:
            self._closing(pack)
        return packs
