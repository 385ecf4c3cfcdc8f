"""Reading git objects out of a sealed archive: by id, through ``__gunnar_oid__``.

An id is found with the fanout table and a binary search (no decode of the whole section);
its entry is read from the pack's bytes in the blob region (a view of the memory map) and its
delta chain applied; REF bases are found by id again, in any pack. Every object read is
checked against its id (SHA-1 of header and content), so a damaged pack cannot pass as data.
"""

from __future__ import annotations

import heapq
import zlib
from functools import cached_property

from pyroaring import BitMap

from ..errors import ChecksumError, FormatError, NotFoundError, ZnippyError
from ..format.gitindex import TYPE_NAMES, OidIndex
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..read.reader import Archive
from .graph import tree_closure
from .pack import (OFS_DELTA, REF_DELTA, TREE, PackError, entry_header, object_id, ofs_distance,
                   read_object, tree_entries, tree_links)

HEX = frozenset("0123456789abcdef")


class GitObjects:
    """The git objects of one open archive."""

    def __init__(self, archive: Archive) -> None:
        if not archive.has_section(GIT_OID):
            raise FormatError("no git sections: not an archive of git packs", path=archive.path)
        self.archive = archive
        self.index = OidIndex(archive.section(GIT_OID), path=archive.path)
        self._packs: dict[int, tuple[memoryview, str]] = {}

    # -- ids --------------------------------------------------------------------------------
    def resolve(self, name: str) -> bytes:
        """A full id from 40 hex digits or a unique prefix of at least 4."""
        text = name.strip().lower()
        if not 4 <= len(text) <= 2 * self.index.oid_len or not set(text) <= HEX:
            raise ZnippyError(f"{name!r} is not an object id (4 to 40 hex digits)",
                              path=self.archive.path)
        if len(text) == 2 * self.index.oid_len:
            oid = bytes.fromhex(text)
            if self.index.find(oid) is None:
                raise NotFoundError(f"no object {text} in the archive", path=self.archive.path)
            return oid
        hits = self.index.with_prefix(text)
        if not hits:
            raise NotFoundError(f"no object {text} in the archive", path=self.archive.path)
        if len(hits) > 1:
            raise ZnippyError(f"object id prefix {text} is ambiguous", path=self.archive.path)
        return self.index.oid(hits[0])

    def _ordinal(self, oid: bytes) -> int:
        i = self.index.find(oid)
        if i is None:
            raise NotFoundError(f"no object {oid.hex()} in the archive", path=self.archive.path)
        return i

    def _pack(self, row: int) -> tuple[memoryview, str]:
        hit = self._packs.get(row)
        if hit is None:
            lookup = self.archive.lookup
            if row >= lookup.num_rows:
                raise FormatError(f"{GIT_OID}: pack_row {row} is past the lookup",
                                  path=self.archive.path)
            name = lookup.column("relative_path")[row].as_py()
            offset = lookup.column("blob_offset")[row].as_py()
            size = lookup.column("blob_size")[row].as_py()
            if offset + size > self.archive.tail_offset:
                raise FormatError(f"pack {name} runs into the index tail", path=self.archive.path)
            view = memoryview(self.archive.source.read(offset, size, name)).cast("B")
            hit = self._packs[row] = (view, name)
        return hit

    # -- objects ----------------------------------------------------------------------------
    def type_of(self, oid: bytes) -> str:
        return TYPE_NAMES[int(self.index.types[self._ordinal(oid)])]

    def size_of(self, oid: bytes) -> int:
        """The object's size, from its entry header (a delta's from its target-size field)."""
        i = self._ordinal(oid)
        view, name = self._pack(int(self.index.pack_rows[i]))
        at = int(self.index.offsets[i])
        try:
            kind, size, pos = entry_header(view, at, len(view) - 20)
            if kind not in (OFS_DELTA, REF_DELTA):
                return size
            pos = ofs_distance(view, pos, len(view))[1] if kind == OFS_DELTA else pos + 20
            return delta_sizes(view, pos, len(view) - 20)[1]
        except (IndexError, zlib.error):
            raise PackError(f"pack {name}: object at offset {at} is damaged",
                            path=self.archive.path) from None

    def read(self, oid: bytes) -> tuple[str, bytes]:
        """``(type, content)`` of one object, checked against its id."""
        kind, content = self._read(oid)
        return TYPE_NAMES[kind], content

    def _read(self, oid: bytes) -> tuple[int, bytes]:
        i = self._ordinal(oid)
        view, name = self._pack(int(self.index.pack_rows[i]))
        try:
            kind, content = read_object(view, int(self.index.offsets[i]), name=name,
                                        external=self._external)
        except PackError as exc:
            raise PackError(exc.problem, path=self.archive.path) from None
        if object_id(kind, content) != oid:
            raise ChecksumError(f"object {oid.hex()} in {name} does not hash to its id",
                                path=self.archive.path)
        return kind, content

    def _external(self, oid: bytes) -> tuple[int, bytes] | None:
        return self._read(oid) if self.index.find(oid) is not None else None

    def pretty(self, oid: bytes) -> bytes:
        """What ``git cat-file -p`` prints: a tree as ``ls-tree`` lines, others as they are."""
        kind, content = self._read(oid)
        if kind != TREE:
            return content
        lines = []
        for mode, name, child in tree_entries(content):
            what = "tree" if mode == 0o40000 else "commit" if mode == 0o160000 else "blob"
            lines.append(b"%06o %s %s\t%s\n" % (mode, what.encode(), child.hex().encode(),
                                                 quote_path(name)))
        return b"".join(lines)

    # -- history ----------------------------------------------------------------------------
    @cached_property
    def _graph(self) -> dict[bytes, tuple[bytes, list[bytes], int]]:
        if not self.archive.has_section(GIT_GRAPH):
            raise FormatError(f"no {GIT_GRAPH} section", path=self.archive.path)
        t = self.archive.section(GIT_GRAPH)
        assert not isinstance(t, memoryview)
        return {o: (tr, ps, when) for o, tr, ps, when in zip(
            t.column("oid").to_pylist(), t.column("tree").to_pylist(),
            t.column("parents").to_pylist(), t.column("commit_time").to_pylist())}

    @cached_property
    def _bitmaps(self) -> dict[bytes, bytes]:
        if not self.archive.has_section(GIT_REACH):
            return {}
        t = self.archive.section(GIT_REACH)
        assert not isinstance(t, memoryview)
        return dict(zip(t.column("oid").to_pylist(), t.column("bitmap").to_pylist()))

    def _commit(self, oid: bytes) -> tuple[bytes, list[bytes], int]:
        hit = self._graph.get(oid)
        if hit is None:
            raise NotFoundError(f"{oid.hex()} is not a commit of the archive",
                                path=self.archive.path)
        return hit

    def log(self, oid: bytes) -> list[bytes]:
        """Commits reachable from ``oid`` in ``git log``'s order: newest committer time
        first, ties in the order they were met (git's date-ordered walk)."""
        self._commit(oid)
        graph = self._graph
        seen = {oid}
        heap = [(-graph[oid][2], 0, oid)]
        count = 1
        out = []
        while heap:
            _t, _n, cur = heapq.heappop(heap)
            out.append(cur)
            for p in graph[cur][1]:
                if p not in seen and p in graph:
                    seen.add(p)
                    heapq.heappush(heap, (-graph[p][2], count, p))
                    count += 1
        return out

    def reachable(self, oid: bytes) -> BitMap:
        """Ordinals of every object ``git rev-list --objects <oid>`` lists: a stored bitmap,
        or the union of the nearest bitmapped ancestors' and a walk of the commits between."""
        self._commit(oid)
        stored = self._bitmaps
        if oid in stored:
            return BitMap.deserialize(stored[oid])
        result = BitMap()
        walked: list[bytes] = []
        seen = {oid}
        todo = [oid]
        while todo:
            cur = todo.pop()
            if cur in stored:
                result |= BitMap.deserialize(stored[cur])
                continue
            walked.append(cur)
            for p in self._graph[cur][1]:
                if p not in seen and p in self._graph:
                    seen.add(p)
                    todo.append(p)
        trees = _TreeReader(self)
        for cur in walked:
            own = self.index.find(cur)
            if own is not None:
                result.add(own)
            tree_closure(result, self._graph[cur][0], trees, self.index.find)
        return result


class _TreeReader:
    """``tree oid -> (subtrees, blobs)`` read from the packs on demand (for tree_closure)."""

    def __init__(self, objects: GitObjects) -> None:
        self.objects = objects

    def get(self, oid: bytes) -> tuple[list[bytes], list[bytes]] | None:
        kind, content = self.objects._read(oid)
        return tree_links(content) if kind == TREE else None


#: the two size varints that open a delta take at most this many bytes (64-bit sizes)
_DELTA_HEAD_MAX = 20


def delta_sizes(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """``(source size, target size)`` of the delta whose zlib stream starts at ``pos``.

    Inflated incrementally, as much as the two varints need: a dynamic-Huffman block can
    spend a hundred bytes or more on its code tables before the first output byte, so no
    fixed input window is enough. IndexError: the stream ends (or the pack does) before the
    varints are complete."""
    d = zlib.decompressobj()
    head = b""
    at, window = pos, 64
    while True:
        sizes = _varints(head)
        if sizes is not None:
            return sizes
        if d.unconsumed_tail:
            chunk = d.unconsumed_tail
        elif d.eof or at >= end:
            raise IndexError
        else:
            chunk = data[at:min(end, at + window)]
            at += len(chunk)
            window *= 2
        head += d.decompress(chunk, _DELTA_HEAD_MAX + 1 - len(head))


def _varints(data: bytes) -> tuple[int, int] | None:
    """The two size varints that open a delta (source size, target size), or None while
    ``data`` ends before both are complete."""
    out, pos = [], 0
    for _ in range(2):
        value = shift = 0
        while True:
            if pos >= len(data):
                if len(data) > _DELTA_HEAD_MAX:
                    raise IndexError  # a varint longer than any 64-bit size: damaged
                return None
            c = data[pos]
            pos += 1
            value |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                break
        out.append(value)
    return out[0], out[1]


_C_ESCAPES = {7: b"\\a", 8: b"\\b", 9: b"\\t", 10: b"\\n", 11: b"\\v", 12: b"\\f", 13: b"\\r",
              34: b'\\"', 92: b"\\\\"}


def quote_path(name: bytes) -> bytes:
    """A tree entry's name as git prints it (``core.quotePath`` on): C-quoted when it has a
    control character, a quote, a backslash or a byte >= 0x80."""
    if all(0x20 <= c < 0x7F and c not in (34, 92) for c in name):
        return name
    out = bytearray(b'"')
    for c in name:
        if c in _C_ESCAPES:
            out += _C_ESCAPES[c]
        elif c < 0x20 or c >= 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    return bytes(out + b'"')
