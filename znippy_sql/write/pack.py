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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..format import b3 as blake3
from .blobs import ChunkTag, GroupRows

#: files up to this size are packed [fixed in docs/format.md]
PACK_MEMBER_MAX = 256 << 10
#: a pack is closed once it holds this many bytes [docs/format.md; bench/results-packed.md:
#: 4 MiB brings a source tree under 1.05x its .tar.zst, 1 MiB left it at 1.068x]
PACK_TARGET = 4 << 20


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

    def data(self) -> bytes:
        return b"".join(self.parts)


def top_component(path: str) -> str:
    slash = path.find("/")
    return path if slash < 0 else path[:slash]


class Packer:
    """Open packs by group; :meth:`add` returns the packs it closed."""

    def __init__(self, dedup: Any, *, target: int = PACK_TARGET) -> None:
        self.dedup = dedup
        self.target = target
        self.open: dict[int, Pack] = {}  # id(GroupRows) → pack, in creation order
        #: the first path component of the last file seen (:meth:`turn`)
        self.top: str | None = None

    def turn(self, path: str) -> list[Pack]:
        """Every open pack when ``path`` starts another top-level tree than the file before
        it (then closed); else none."""
        top = top_component(path)
        if top == self.top:
            return []
        self.top = top
        return self.drain() if self.open else []

    def add(self, tag: ChunkTag, data: bytes | memoryview, digest: bytes | None = None
            ) -> list[Pack]:
        """``data`` joins its group's pack (``digest``: its BLAKE3, when already taken)."""
        rows = tag.rows
        pack = self.open.get(id(rows))
        closed: list[Pack] = []
        if pack is None:
            pack = self.open[id(rows)] = Pack(rows)
        n = len(data)
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
        if pack.size >= self.target:
            closed.append(pack)
            self._closing(pack)
            del self.open[id(rows)]
        return closed

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
