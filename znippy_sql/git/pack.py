"""Git packfiles: parsed and checked whole at push, one object read back at an offset.

Pack layout (git's ``Documentation/gitformat-pack.txt``)::

    0        4     b"PACK"
    4        4     version u32 BE (2 or 3)
    8        4     object count u32 BE
    12       ...   entries: a type+size varint header, then
                     OFS_DELTA (6): a base offset varint (distance back to the base entry)
                     REF_DELTA (7): the base's 20-byte object id
                   then a zlib stream that inflates to exactly ``size`` bytes
    end-20   20    SHA-1 of everything before it

:func:`parse_pack` inflates every entry once (to find where it ends), hashes the full objects,
and resolves the deltas base first along each delta chain, so each object's bytes exist once
at a time. Delta instructions are applied by dulwich's C ``apply_delta``. Every problem is a
:class:`PackError` naming the pack and the object (its index and offset).
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from dulwich.errors import ApplyDeltaError

try:                                   # the C function alone: dulwich.pack costs 20 ms more
    from dulwich._pack import apply_delta
except ImportError:                    # a dulwich built without its extension
    from dulwich.pack import apply_delta

from ..errors import PackError
from .bulk import PackGraph, pack_graph
from .bulk import tree_links as tree_links  # re-exported: readers parse one tree with it

COMMIT, TREE, BLOB, TAG, OFS_DELTA, REF_DELTA = 1, 2, 3, 4, 6, 7
TYPE_NAMES = {COMMIT: b"commit", TREE: b"tree", BLOB: b"blob", TAG: b"tag"}
HEADER_LEN, TRAILER_LEN = 12, 20

#: ``(oid) -> (type, content)`` of a delta base outside this pack, or ``None``.
ExternalBase = Callable[[bytes], "tuple[int, bytes] | None"]
#: called once per resolved object: ``(oid, type, content)``.
Visit = Callable[[bytes, int, bytes], None]


def object_id(kind: int, content: bytes) -> bytes:
    """git's object id: SHA-1 of ``b"<type> <size>\\0" + content``."""
    h = hashlib.sha1(b"%s %d\0" % (TYPE_NAMES[kind], len(content)))
    h.update(content)
    return h.digest()


@dataclass
class ParsedPack:
    """Every object of one pack: id, resolved type and entry offset, in entry order."""

    name: str
    oids: list[bytes] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    external_bases: int = 0  # REF deltas resolved against objects of earlier packs
    #: its commits (tree, parents, committer time) and trees (subtrees, blobs; gitlinks left
    #: out, as ``rev-list`` does), as arrays: filled by :func:`index_pack`
    graph: PackGraph = field(default_factory=PackGraph.empty)


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


def check_header(data: memoryview, name: str) -> int:
    """The object count, after checking length, magic and version."""
    if len(data) < HEADER_LEN + TRAILER_LEN:
        raise PackError(f"pack {name}: {len(data)} bytes, too short for a pack")
    if bytes(data[:4]) != b"PACK":
        raise PackError(f"pack {name}: wrong magic {bytes(data[:4])!r} (not a git pack)")
    version = int.from_bytes(data[4:8], "big")
    if version not in (2, 3):
        raise PackError(f"pack {name}: unsupported pack version {version}")
    return int.from_bytes(data[8:12], "big")


def check_trailer(data: memoryview, name: str) -> None:
    """The trailing SHA-1 over everything before it (checked after the objects, so a
    truncated pack is reported at the object it cuts)."""
    if hashlib.sha1(data[:-TRAILER_LEN]).digest() != bytes(data[-TRAILER_LEN:]):
        raise PackError(f"pack {name}: trailing SHA-1 does not match its bytes (damaged)")


def parse_pack(data: bytes | memoryview, *, name: str, external: ExternalBase | None = None,
               visit: Visit | None = None) -> ParsedPack:
    """Parse and check a whole pack; ``visit`` sees every object once, bases first."""
    view = memoryview(data).cast("B")
    count = check_header(view, name)
    end = len(view) - TRAILER_LEN
    pack = ParsedPack(name)
    kinds: list[int] = []          # entry type as stored (6/7 for deltas)
    deltas: dict[int, bytes] = {}  # entry -> inflated delta instructions
    by_offset: dict[int, int] = {}
    ofs_children: dict[int, list[int]] = defaultdict(list)   # base entry -> delta entries
    ref_children: dict[bytes, list[int]] = defaultdict(list)  # base oid -> delta entries
    ref_base: dict[int, bytes] = {}
    oids: list[bytes | None] = []
    types: list[int] = []
    pos = HEADER_LEN

    def fail(i: int, at: int, why: str) -> PackError:
        return PackError(f"pack {name}: object {i} at offset {at}: {why}")

    for i in range(count):
        at = pos
        if pos >= end:
            raise fail(i, at, f"the pack ends before it (truncated: the header says {count} "
                              "objects)")
        try:
            kind, size, pos = entry_header(view, pos, end)
            base: int | bytes | None = None
            if kind == OFS_DELTA:
                dist, pos = ofs_distance(view, pos, end)
                base = at - dist
            elif kind == REF_DELTA:
                if pos + 20 > end:
                    raise IndexError
                base = bytes(view[pos:pos + 20])
                pos += 20
            elif kind not in TYPE_NAMES:
                raise PackEntryError(f"unknown object type {kind}")
            content, pos = inflate(view, pos, end, size)
        except IndexError:
            raise fail(i, at, "entry header runs past the end of the pack (truncated)") from None
        except PackEntryError as exc:
            raise fail(i, at, str(exc)) from None
        except zlib.error as exc:
            raise fail(i, at, f"bad zlib stream ({exc})") from None
        by_offset[at] = i
        pack.offsets.append(at)
        kinds.append(kind)
        if kind == OFS_DELTA:
            assert isinstance(base, int)
            if base not in by_offset:
                raise fail(i, at, f"its delta base offset {base} is not an object before it "
                                  "in this pack")
            ofs_children[by_offset[base]].append(i)
            deltas[i] = content
            oids.append(None)
            types.append(0)
        elif kind == REF_DELTA:
            assert isinstance(base, bytes)
            ref_children[base].append(i)
            ref_base[i] = base
            deltas[i] = content
            oids.append(None)
            types.append(0)
        else:
            oid = object_id(kind, content)
            oids.append(oid)
            types.append(kind)
            if visit is not None:
                visit(oid, kind, content)
    if pos != end:
        raise PackError(f"pack {name}: {end - pos} bytes after its last object "
                        f"(the header says {count} objects)")
    check_trailer(view, name)

    def resolve(seeds: list[tuple[int, int, bytes]]) -> None:
        """Apply the deltas of ``(entry, type, base content)``, then theirs, depth first."""
        todo = seeds
        while todo:
            c, kind, base = todo.pop()
            try:
                out = apply_delta(base, deltas.pop(c))
            except (ApplyDeltaError, ValueError) as exc:
                raise fail(c, pack.offsets[c], f"delta does not apply to its base ({exc})"
                           ) from None
            data_c = out[0] if len(out) == 1 else b"".join(out)
            oid = object_id(kind, data_c)
            oids[c], types[c] = oid, kind
            if visit is not None:
                visit(oid, kind, data_c)
            todo.extend((g, kind, data_c) for g in children(c))

    def children(i: int) -> list[int]:
        kids = ofs_children.pop(i, [])
        oid = oids[i]
        if oid is not None and oid in ref_children:
            kids = kids + ref_children.pop(oid)
        return kids

    for i in range(count):
        if kinds[i] in TYPE_NAMES and (i in ofs_children or oids[i] in ref_children):
            _kind, size, start = entry_header(view, pack.offsets[i], end)
            base_content = inflate(view, start, end, size)[0]
            resolve([(c, kinds[i], base_content) for c in children(i)])
    for base_oid in sorted(ref_children):
        if base_oid not in ref_children:
            continue  # resolved meanwhile, as a delta of an external base
        found = external(base_oid) if external is not None else None
        if found is None:
            continue
        kids = ref_children.pop(base_oid)
        pack.external_bases += len(kids)
        resolve([(c, found[0], found[1]) for c in kids])
    missing = [i for i in range(count) if oids[i] is None]
    if missing:
        i = missing[0]
        base = ref_base.get(i)
        why = (f"its delta base {base.hex()} is in neither this pack nor an earlier one"
               if base is not None and base in ref_children
               else "its delta chain never reaches a full object")
        raise fail(i, pack.offsets[i], why)
    pack.oids = oids  # type: ignore[assignment]  # every entry resolved
    pack.types = types
    return pack


def read_object(data: memoryview, offset: int, *, name: str,
                external: ExternalBase | None = None) -> tuple[int, bytes]:
    """``(type, content)`` of the entry at ``offset``, its delta chain applied."""
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


def index_pack(data: bytes | memoryview, *, name: str, external: ExternalBase | None = None
               ) -> ParsedPack:
    """:func:`parse_pack`, keeping each commit's links and each tree's children."""
    commits: list[tuple[bytes, bytes]] = []
    trees: list[tuple[bytes, bytes]] = []

    def visit(oid: bytes, kind: int, content: bytes) -> None:
        if kind == COMMIT:
            commits.append((oid, content))
        elif kind == TREE:
            trees.append((oid, content))

    pack = parse_pack(data, name=name, external=external, visit=visit)
    pack.graph = pack_graph(commits, trees, name=name)
    return pack
