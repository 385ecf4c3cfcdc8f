"""Reading git objects out of a sealed archive: by id, through ``__gunnar_oid__``.

An id is found with the fanout table and a binary search (no decode of the whole section);
its entry is read from the pack's bytes in the blob region (a view of the memory map) and its
delta chain applied; REF bases are found by id again, in any pack. Every object read is
checked against its id (SHA-1 of header and content), so a damaged pack cannot pass as data.

Beneath the commands, one seam: an archive whose ``__gunnar_oid__`` the Rust
``znippy-plugin-git`` wrote (its loose-object tier: one entry per object) is read through
:class:`~znippy_sql.interop.gitloose.LooseTier` (the object by ordinal, the graph, the
bitmaps in this project's shapes); one whose data entries are the Rust pack tier's
``pack-<id>.pack``/``.idx`` (no oid section) through
:class:`~znippy_sql.interop.gitpack.PackTier` (the packs indexed here, laid out as this
project's sections in memory); every command above (``cat-file``, ``show-ref``, the
``git_log``/``git_reachable``/``git_cat`` macros, name resolution) is the same code for both.
"""

from __future__ import annotations

import heapq
import zlib
from collections.abc import Mapping
from functools import cached_property
from typing import cast

import numpy as np
import pyarrow as pa

from ..errors import ChecksumError, FormatError, NotFoundError, ZnippyError
from ..format.build import numpy_of
from ..format.gitindex import TYPE_NAMES, OidIndex
from ..format.kernels import one_array
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from ..interop.gitloose import LooseTier, is_rust_oid_index
from ..interop.gitpack import PackTier, pack_entries
from ..read.reader import Archive
from .graph import Tree, tree_closure
from .roaring import BitMap, deserialize
from .pack import (OFS_DELTA, REF_DELTA, TREE, PackError, entry_header, object_id, ofs_distance,
                   read_object, tree_entries, tree_links)

HEX = frozenset("0123456789abcdef")


def require_git(archive: Archive) -> None:
    """A ``FormatError`` unless the archive holds git sections (every git command checks)."""
    if not archive.has_section(GIT_OID) and not pack_entries(archive.lookup):
        raise FormatError("no git sections: not an archive of git packs", path=archive.path)


class GitObjects:
    """The git objects of one open archive."""

    def __init__(self, archive: Archive) -> None:
        require_git(archive)
        self.archive = archive
        self._packs: dict[int, tuple[memoryview, str]] = {}
        #: the Rust loose-object tier (``interop/gitloose.py``), or None: this project's packs
        self.loose: LooseTier | None = None
        #: the Rust pack tier (``interop/gitpack.py``): no oid section, sections built here
        self.tier: PackTier | None = None
        if not archive.has_section(GIT_OID):
            self.tier = PackTier(archive)
            self.index: OidIndex = self.tier.index
            return
        data = archive.section(GIT_OID)
        if is_rust_oid_index(data):
            self.loose = LooseTier(archive)
            self.index = self.loose.index
        else:
            self.index = OidIndex(data, path=archive.path)

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
            if self.tier is not None:
                hit = self._packs[row] = (self.tier.pack(row), name)
                return hit
            if offset + size > self.archive.tail_offset:
                raise FormatError(f"pack {name} runs into the index tail", path=self.archive.path)
            view = memoryview(self.archive.source.read(offset, size, name)).cast("B")
            hit = self._packs[row] = (view, name)
        return hit

    # -- objects ----------------------------------------------------------------------------
    def type_of(self, oid: bytes) -> str:
        i = self._ordinal(oid)
        code = int(self.index.types[i]) if self.loose is None else self.loose.type_code(i)
        if code not in TYPE_NAMES:  # (a damaged index: fuzz seed 1024 of family git)
            raise FormatError(f"{GIT_OID}: object {oid.hex()} has type code {code}, no git "
                              "object type", path=self.archive.path)
        return TYPE_NAMES[code]

    def size_of(self, oid: bytes) -> int:
        """The object's size, from its entry header (a delta's from its target-size field)."""
        i = self._ordinal(oid)
        if self.loose is not None:
            return self.loose.size(i)
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
        if self.loose is not None:
            return self.loose.read(i)      # checked against its id there
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

    def objects_of(self, ordinals: np.ndarray) -> pa.Table:
        """``oid``, ``type_name``, ``ordinal`` of these ordinals: the types from the object
        index, or (the Rust tier records none) from each object's own header."""
        index = self.index
        ords = np.asarray(ordinals, dtype=np.int64)
        width = index.oid_len
        raw = np.frombuffer(index.buf, np.uint8, index.count * width, index._oids_at)
        ids = raw.reshape(index.count, width)[ords] if index.count else raw
        if self.loose is None:
            codes = np.asarray(index.types)[ords]
        else:
            codes = np.array([self.loose.type_code(int(i)) for i in ords], dtype=np.uint8)
        if len(codes) and not np.isin(codes, list(TYPE_NAMES)).all():
            raise FormatError(f"{GIT_OID}: an object has no git object type",
                              path=self.archive.path)
        names = pa.array([TYPE_NAMES.get(c, "") for c in range(8)], pa.utf8())
        return pa.table({
            "oid": pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(width), len(ords), [None, pa.py_buffer(ids.tobytes())]),
            "type_name": names.take(pa.array(codes, pa.uint8())),
            "ordinal": pa.array(ords, pa.uint32())})

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
    def _graph_table(self) -> pa.Table:
        """``__gunnar_graph__`` with ``oid``, ``tree``, ``parents``, ``commit_time`` (binary
        ids): the section itself, or the Rust one in that shape."""
        if self.tier is not None:
            return self.tier.graph()
        if not self.archive.has_section(GIT_GRAPH):
            raise FormatError(f"no {GIT_GRAPH} section", path=self.archive.path)
        if self.loose is not None:
            return self.loose.graph()
        t = self.archive.section(GIT_GRAPH)
        assert not isinstance(t, memoryview)
        return t

    @cached_property
    def _graph(self) -> dict[bytes, tuple[bytes, list[bytes], int]]:
        t = self._graph_table
        return {o: (tr, ps, when) for o, tr, ps, when in zip(
            t.column("oid").to_pylist(), t.column("tree").to_pylist(),
            t.column("parents").to_pylist(), t.column("commit_time").to_pylist())}

    @cached_property
    def _blocks(self) -> tuple[list[int], list[int]]:
        """(position, block length) of each graph row: the layout of docs/git-sections.md."""
        t = self._graph_table
        if "position" not in t.column_names or "block" not in t.column_names:
            raise FormatError(f"{GIT_GRAPH}: no position/block columns, but {GIT_OID} has "
                              "positions", path=self.archive.path)
        at, size = _int64s(t.column("position")), _int64s(t.column("block"))
        if len(at) and int((at + size).max()) > self.index.count:
            raise FormatError(f"{GIT_GRAPH}: a commit's block ends past the "
                              f"{self.index.count} objects", path=self.archive.path)
        return at.tolist(), size.tolist()

    @cached_property
    def absent_objects(self) -> int:
        """How many ids the archive's commits and trees name that it does not hold (a partial
        clone's missing blobs, a shallow history's parents); 0 for a complete history. An
        archive written before this was recorded says 0."""
        if not self.archive.has_section(GIT_GRAPH) and self.tier is None:
            return 0
        t = self._graph_table
        value = (t.schema.metadata or {}).get(b"znippy.git.absent_objects", b"0")
        try:
            return int(value)
        except ValueError:
            raise FormatError(f"{GIT_GRAPH}: absent_objects {value!r} is not a number",
                              path=self.archive.path) from None

    @cached_property
    def _bitmaps(self) -> dict[bytes, bytes]:
        if self.loose is not None:
            return self.loose.bitmaps()
        if self.tier is not None:
            return self.tier.bitmaps()
        if not self.archive.has_section(GIT_REACH):
            return {}
        t = self.archive.section(GIT_REACH)
        assert not isinstance(t, memoryview)
        return dict(zip(t.column("oid").to_pylist(), t.column("bitmap").to_pylist()))

    @cached_property
    def _stored_rows(self) -> dict[int, bytes]:
        """graph row → the commit id, of the commits with a stored bitmap."""
        row = self._dag[1]
        return {row[o]: o for o in self._bitmaps if o in row}

    def _commit(self, oid: bytes) -> tuple[bytes, list[bytes], int]:
        hit = self._graph.get(oid)
        if hit is None:
            raise NotFoundError(f"{oid.hex()} is not a commit of the archive",
                                path=self.archive.path)
        return hit

    @cached_property
    def _dag(self) -> tuple[pa.Table, dict[bytes, int], list[tuple[int, ...]], list[int]]:
        """The graph by row: (table, oid → row, each row's parent rows, committer times)."""
        t = self._graph_table
        oids = t.column("oid").combine_chunks()
        row = {o: i for i, o in enumerate(_ids(oids))}
        lists = t.column("parents").combine_chunks()
        hits = [row.get(p, -1) for p in _ids(lists.values)]
        bounds = _int64s(lists.offsets).tolist()
        parents = [tuple(hits[a:b]) for a, b in zip(bounds, bounds[1:])]
        parents = [ps if -1 not in ps else tuple(p for p in ps if p >= 0) for ps in parents]
        return t, row, parents, _int64s(t.column("commit_time")).tolist()

    @cached_property
    def _log_keys(self) -> tuple[list[int], int]:
        """Per row, its committer time as a heap key's high bits (newest smallest), and the
        bit width of a row number: a key is ``time bits | order met | row``, one int."""
        times = self._dag[3]
        bits = max(1, len(times).bit_length())
        top = max(times, default=0) + 1
        return [(top - t) << (2 * bits) for t in times], bits

    def _row(self, oid: bytes) -> int:
        """The graph row of a commit (an error naming it if it is not one)."""
        hit = self._dag[1].get(oid)
        if hit is None:
            self._commit(oid)             # raises, naming it
        return self._dag[1][oid]

    def log_rows(self, oid: bytes) -> list[int]:
        """:meth:`log` as rows of ``__gunnar_graph__``."""
        self._row(oid)
        row, parents = self._dag[1], self._dag[2]
        keys, bits = self._log_keys
        mask = (1 << bits) - 1
        start = row[oid]
        seen = bytearray(len(parents))
        seen[start] = 1
        heap: list[int] = []
        key = keys[start] | start
        count = 1
        out = []
        pop, push, pushpop = heapq.heappop, heapq.heappush, heapq.heappushpop
        while True:
            cur = key & mask
            out.append(cur)
            last = -1
            for p in parents[cur]:
                if not seen[p]:
                    seen[p] = 1
                    if last >= 0:
                        push(heap, last)
                    last = keys[p] | (count << bits) | p
                    count += 1
            if last >= 0:      # push it and pop the least: no heap work when it is the least
                key = pushpop(heap, last)
            elif heap:
                key = pop(heap)
            else:
                return out

    def log(self, oid: bytes) -> list[bytes]:
        """Commits reachable from ``oid`` in ``git log``'s order: newest committer time
        first, ties in the order they were met (git's date-ordered walk)."""
        ids = self._dag[0].column("oid")
        return [ids[i].as_py() for i in self.log_rows(oid)]

    def reachable(self, oid: bytes) -> BitMap:
        """Ordinals of every object ``git rev-list --objects <oid>`` lists (of those the
        archive holds: see :attr:`absent_objects`): a stored bitmap, or the union of the
        nearest bitmapped ancestors' and the walked commits' blocks (version 2) or trees."""
        return BitMap(self.reachable_array(oid))

    def reachable_array(self, oid: bytes) -> np.ndarray:
        """:meth:`reachable` as a sorted ``uint32`` array of ordinals."""
        self._row(oid)
        order = self.index.order
        if order is None:
            ords = np.frombuffer(self._reachable_v1(oid).to_array(), dtype=np.uint32)
            if len(ords) and int(ords[-1]) >= self.index.count:
                raise FormatError(f"{GIT_REACH}: a bitmap names ordinal {int(ords[-1])} "
                                  f"of {self.index.count}", path=self.archive.path)
            return ords
        stored = self._bitmaps
        if oid in stored:
            found = self._bitmap(oid)
        else:
            _t, row, parents, _times = self._dag
            at, size = self._blocks
            by_row = self._stored_rows
            found = BitMap()
            start = row[oid]
            seen = {start}
            todo = [start]
            while todo:
                cur = todo.pop()
                key = by_row.get(cur)
                if key is not None:
                    found |= self._bitmap(key)
                    continue
                found.add_range(at[cur], at[cur] + size[cur])
                for p in parents[cur]:
                    if p not in seen:
                        seen.add(p)
                        todo.append(p)
        positions = np.frombuffer(found.to_array(), dtype=np.uint32)
        if len(positions) and int(positions[-1]) >= len(order):
            raise FormatError(f"{GIT_REACH}: a bitmap names position {int(positions[-1])} "
                              f"of {len(order)}", path=self.archive.path)
        return np.sort(order[positions])

    def _bitmap(self, oid: bytes) -> BitMap:
        try:
            return deserialize(self._bitmaps[oid], path=self.archive.path)
        except MemoryError:  # a damaged size field; the guard lets MemoryError pass
            raise FormatError(f"{GIT_REACH}: the bitmap of {oid.hex()} is damaged",
                              path=self.archive.path) from None

    def _reachable_v1(self, oid: bytes) -> BitMap:
        """Version 1 (bitmaps over ordinals): complete by walking the commits' trees."""
        stored = self._bitmaps
        if oid in stored:
            return self._bitmap(oid)
        result = BitMap()
        walked: list[bytes] = []
        seen = {oid}
        todo = [oid]
        while todo:
            cur = todo.pop()
            if cur in stored:
                result |= self._bitmap(cur)
                continue
            walked.append(cur)
            for p in self._graph[cur][1]:
                if p not in seen and p in self._graph:
                    seen.add(p)
                    todo.append(p)
        # tree_closure asks its mapping for get() alone, which the reader has
        trees = cast(Mapping[bytes, Tree], _TreeReader(self))
        for cur in walked:
            own = self.index.find(cur)
            if own is not None:
                result.add(own)
            tree_closure(result, self._graph[cur][0], trees, self.index.find)
        return result


def _int64s(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer column as ``int64``, read from its buffer (``format.build.numpy_of``)."""
    arr = one_array(col) if isinstance(col, pa.ChunkedArray) else col
    return numpy_of(arr).astype(np.int64)


def _ids(arr: pa.Array) -> list[bytes]:
    """A FixedSizeBinary(20) array without nulls as a list of ids."""
    raw = arr.buffers()[1].to_pybytes()[20 * arr.offset:20 * (arr.offset + len(arr))]
    return [raw[i:i + 20] for i in range(0, len(raw), 20)]


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
    chunk: bytes | memoryview
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
