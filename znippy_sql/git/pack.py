"""Git packfiles: indexed by the compiled core at push and import, one object read back here.

Pack layout (git's ``Documentation/gitformat-pack.txt``)::

    0        4     b"PACK"
    4        4     version u32 BE (2 or 3)
    8        4     object count u32 BE
    12       ...   entries: a type+size varint header, then
                     OFS_DELTA (6): a base offset varint (distance back to the base entry)
                     REF_DELTA (7): the base's 20-byte object id
                   then a zlib stream that inflates to exactly ``size`` bytes
    end-20   20    SHA-1 of everything before it

:func:`index_pack` hands a pack to the core (``native/src/git``, through
``znippy_sql.corelib``): from its checked ``.idx`` when it has one, else parsed whole (every
entry inflated, the deltas resolved base first along each chain, every object hashed). The
core keeps the ids, types, offsets, commits and trees as columns (:class:`ParsedPack`);
every problem is a :class:`PackError` naming the pack and the object (its index and offset).
:func:`read_object` reads one object at an offset (cat-file, thin-pack bases).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from functools import cached_property

from .. import corelib
from ..errors import PackError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

COMMIT, TREE, BLOB, TAG, OFS_DELTA, REF_DELTA = 1, 2, 3, 4, 6, 7
TYPE_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob", TAG: b"tag"}
HEADER_LEN, TRAILER_LEN = 12, 20

#: ``(oid) -> (type, content)`` of a delta base outside this pack, or ``None``.
ExternalBase = Callable[[bytes], "tuple[int, bytes] | None"]


def object_id(kind: int, content: bytes) -> bytes:
    """git's object id: SHA-1 of ``b"<type> <size>\\0" + content``."""
    import hashlib  # here: hashlib loads OpenSSL, which ``git import`` never needs

    h = hashlib.sha1(b"%s %d\0" % (TYPE_NAMES[kind], len(content)))
    h.update(content)
    return h.digest()


class ParsedPack:
    """Every object of one pack: id, resolved type and entry offset, in entry order, and its
    commits and trees, held by the core (``corelib.PackIndex``) as columns."""

    def __init__(self, name: str, core: corelib.PackIndex) -> None:
        self.name = name
        self.core = core

    @property
    def external_bases(self) -> int:
        """REF deltas resolved against objects of earlier packs."""
        return int(self.core.external_bases)

    @cached_property
    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids uint8[n, 20], types uint8[n], offsets uint64[n])``, in entry order."""
        import numpy as np  # here: ``git import`` imports it beside the parse (importer.py)

        ids, types, offsets = self.core.objects()
        return (np.frombuffer(ids, dtype=np.uint8).reshape(-1, 20),
                np.frombuffer(types, dtype=np.uint8), np.frombuffer(offsets, dtype="<u8"))

    @property
    def oids(self) -> list[bytes]:
        raw = self.columns[0].tobytes()
        return [raw[i:i + 20] for i in range(0, len(raw), 20)]

    @property
    def types(self) -> list[int]:
        return list(self.columns[1].tolist())

    @property
    def offsets(self) -> list[int]:
        return list(self.columns[2].tolist())


def entry_header(data: memoryview, pos: int, end: int) -> tuple[int, int, int]:
    """``(type, size, position after the varint)`` of the entry at ``pos``."""
    if pos >= end:
        raise IndexError
    c = data[pos]
    kind, size, shift = (c >> 4) & 7, c & 15, 4
    pos += 1
    while c & 0x80:
        if pos >= end or shift > 63:
            raise IndexError
        c = data[pos]
        size |= (c & 0x7F) << shift
        shift += 7
        pos += 1
    return kind, size, pos


def ofs_distance(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """OFS_DELTA's base distance (git's offset encoding) and the position after it."""
    if pos >= end:
        raise IndexError
    c = data[pos]
    dist = c & 0x7F
    pos += 1
    while c & 0x80:
        if pos >= end or dist > 1 << 56:
            raise IndexError
        c = data[pos]
        dist = ((dist + 1) << 7) | (c & 0x7F)
        pos += 1
    return dist, pos


def inflate(data: memoryview, pos: int, end: int, size: int) -> tuple[bytes, int]:
    """The zlib stream at ``pos`` inflated (it must give exactly ``size`` bytes) and the
    position just after it. Fed in growing windows, so no copy of the rest of the pack."""
    d = zlib.decompressobj()
    parts: list[bytes] = []
    got, at, window = 0, pos, max(512, size // 2 + 64)
    while True:
        if at >= end:
            raise PackEntryError("zlib stream is truncated")
        chunk = data[at:min(end, at + window)]
        out = d.decompress(chunk, size + 1 - got)
        if d.unconsumed_tail:
            raise PackEntryError(f"inflates to more than the {size} bytes its header says")
        got += len(out)
        parts.append(out)
        at += len(chunk)
        if d.eof:
            break
        window *= 2
    if got != size:
        raise PackEntryError(f"inflates to {got} bytes, its header says {size}")
    return (parts[0] if len(parts) == 1 else b"".join(parts)), at - len(d.unused_data)


class PackEntryError(Exception):
    """A problem found at one entry; :func:`parse_pack` adds the pack and entry to it."""


def read_object(data: memoryview, offset: int, *, name: str,
                external: ExternalBase | None = None) -> tuple[int, bytes]:
    """``(type, content)`` of the entry at ``offset``, its delta chain applied."""
    from dulwich.errors import ApplyDeltaError  # here: ``git import`` reads no object back

    try:                                   # the C function alone: dulwich.pack costs 20 ms more
        from dulwich._pack import apply_delta
    except ImportError:                    # a dulwich built without its extension
        from dulwich.pack import apply_delta
    end = len(data) - TRAILER_LEN
    chain: list[bytes] = []
    at = offset
    try:
        while True:
            kind, size, pos = entry_header(data, at, end)
            if kind == OFS_DELTA:
                dist, pos = ofs_distance(data, pos, end)
                chain.append(inflate(data, pos, end, size)[0])
                if dist <= 0 or at - dist < HEADER_LEN:
                    raise PackEntryError(f"delta base offset {at - dist} is outside the pack")
                at -= dist
                continue
            if kind == REF_DELTA:
                base_oid = bytes(data[pos:pos + 20])
                chain.append(inflate(data, pos + 20, end, size)[0])
                found = external(base_oid) if external is not None else None
                if found is None:
                    raise PackEntryError(f"delta base {base_oid.hex()} is not in the archive")
                kind, content = found
                break
            if kind not in TYPE_NAMES:
                raise PackEntryError(f"unknown object type {kind}")
            content = inflate(data, pos, end, size)[0]
            break
        for delta in reversed(chain):
            out = apply_delta(content, delta)
            content = out[0] if len(out) == 1 else b"".join(out)
    except IndexError:
        raise PackError(f"pack {name}: object at offset {at}: entry runs past the end") from None
    except PackEntryError as exc:
        raise PackError(f"pack {name}: object at offset {at}: {exc}") from None
    except zlib.error as exc:
        raise PackError(f"pack {name}: object at offset {at}: bad zlib stream ({exc})") from None
    except (ApplyDeltaError, ValueError) as exc:
        raise PackError(f"pack {name}: object at offset {offset}: delta does not apply "
                        f"({exc})") from None
    return kind, content


def parse_commit(content: bytes) -> tuple[bytes, tuple[bytes, ...], int]:
    """``(tree, parents, committer time)`` of a commit object's bytes."""
    head = content.split(b"\n\n", 1)[0]
    tree, parents, when = b"", [], 0
    for line in head.split(b"\n"):
        if line.startswith(b"tree "):
            tree = bytes.fromhex(line[5:45].decode("ascii"))
        elif line.startswith(b"parent "):
            parents.append(bytes.fromhex(line[7:47].decode("ascii")))
        elif line.startswith(b"committer "):
            when = int(line.rsplit(b" ", 2)[1])
    if len(tree) != 20:
        raise ValueError("commit has no tree line")
    return tree, tuple(parents), when


def tree_entries(content: bytes) -> list[tuple[int, bytes, bytes]]:
    """``(mode, name, oid)`` of every entry of a tree object's bytes."""
    out = []
    pos, n = 0, len(content)
    while pos < n:
        sp = content.index(b" ", pos)
        nul = content.index(b"\0", sp)
        if nul + 21 > n:
            raise ValueError("tree entry runs past the end")
        out.append((int(content[pos:sp], 8), content[sp + 1:nul], content[nul + 1:nul + 21]))
        pos = nul + 21
    return out


def index_pack(data: bytes | memoryview, *, name: str, idx: bytes | None = None,
               external: ExternalBase | None = None) -> ParsedPack:
    """One pack indexed by the core: from its ``.idx`` when given and it describes the pack
    (checked: docs/git-sections.md), else parsed whole. ``external(oid)``: a REF delta's base
    outside this pack (a thin push). A damaged pack is a :class:`PackError` naming it."""
    return ParsedPack(name, corelib.git_index_pack(data, idx, name=name, external=external))


_ENTRY = re.compile(rb"([0-7]+) [^\x00]*\x00(.{20})", re.S)


def tree_links(content: bytes) -> tuple[list[bytes], list[bytes]]:
    """``(subtree oids, blob oids)`` of a tree object's bytes; gitlinks (mode 160000, a
    commit of another repository) left out, as ``git rev-list --objects`` leaves them (the
    core's import reads trees the same way, ``native/src/git/parse.rs``)."""
    subtrees, blobs = [], []
    for mode, oid in _ENTRY.findall(content):
        if mode == b"40000":
            subtrees.append(oid)
        elif mode != b"160000":
            blobs.append(oid)
    return subtrees, blobs
