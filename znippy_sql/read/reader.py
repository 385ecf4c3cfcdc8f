"""``open_archive``: footer → manifest → checked byte ranges → zero-copy Arrow tables.

Nothing is read until asked for: opening reads the footer and the manifest only. Every range
comes from the manifest and is checked against the file before it is sliced out of the map.
A point read goes trie → lookup row → that file's blobs, through numpy views of the lookup
columns made once, so it costs microseconds and touches only the file's own bytes.
"""

from __future__ import annotations

import bisect
import fnmatch
import os
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..format import b3 as blake3
import numpy as np
import pyarrow as pa

from ..format import build, codec
from ..errors import (ChecksumError, CodecError, FormatError, NotFoundError,
                      UnsealedArchiveError)
from ..format.footer import FOOTER_LEN, decode_footer
from ..format.ipc import batch_index, read_batch, read_table
from ..format.build import numpy_of
from ..format.kernels import filter_by, one_array, take, utf8_parts
from ..format.manifest import ManifestRow, decode_manifest
from ..format.rangeio import MappedSource, RangeSource
from ..format.rollback import recover
from ..format.trie import TrieMap
from ..format.schema import (
    ARROW_SECTIONS,
    BASE_FIELDS,
    LOOKUP,
    RAW_SECTIONS,
    RESERVED_PKG_TYPE,
    TRIE,
    INNER,
    GroupKey,
    resolve_pkg_type,
)
from ..format.validate import (MAX_CHUNK_BYTES, lookup_problem, lookup_schema_problem,
                               portable, rows_problem, subindex_schema_problem)
from .firstfind import NOT_HANDLED, first_find, section_digest
from ..interop import delta_source, hot_source, rust_rows
from .foreign import (lookup_usable, not_understood, rust_writer, section_status,
                      unsealed_problem, with_writer)

if TYPE_CHECKING:
    from .extract import ExtractReport
    from .fileobj import ArchiveFile
    from .verify import VerifyReport
    from .memlookup import SortedPaths

_T = TypeVar("_T")
#: a point read of a pack member decodes at least this much of the pack (the files next to it
#: are often read next, and zstd decodes in blocks of 128 KiB anyway)
PREFIX_MIN = 256 << 10


@dataclass(frozen=True)
class Chunk:
    chunk_seq: int
    fdata_offset: int
    compressed: bool
    uncompressed_size: int
    blob_offset: int
    blob_size: int
    checksum: bytes
    #: where the chunk starts in its decoded blob (FORMAT §3, packed blobs; 0 otherwise)
    inner_offset: int = 0


@dataclass(frozen=True)
class FileInfo:
    relative_path: str
    lookup_row: int
    chunks: tuple[Chunk, ...]

    @property
    def size(self) -> int:
        return sum(c.uncompressed_size for c in self.chunks)

    @property
    def stored_size(self) -> int:
        """Stored bytes of the file's blobs; a packed blob shared with other files counts
        whole (docs/format.md, "Packed blobs")."""
        return sum(c.blob_size for c in self.chunks)


class _Columns:
    """The lookup's columns as numpy arrays (zero-copy where Arrow allows), made once."""

    def __init__(self, lookup: pa.Table) -> None:
        n = self.n = lookup.num_rows
        cols = {name: one_array(lookup.column(name)) for name in lookup.column_names}
        self.path_offsets, self.path_data = utf8_parts(cols["relative_path"])
        self.chunk_seq = numpy_of(cols["chunk_seq"])  # never to_numpy: it imports pandas
        self.fdata_offset = numpy_of(cols["fdata_offset"])
        self.compressed = numpy_of(cols["compressed"])
        self.uncompressed_size = numpy_of(cols["uncompressed_size"])
        self.blob_offset = numpy_of(cols["blob_offset"])
        self.blob_size = numpy_of(cols["blob_size"])
        #: FORMAT §3: an archive with packed blobs has the column; others read zeros
        self.packed = INNER in cols
        self.inner_offset = (numpy_of(cols[INNER]) if self.packed
                             else np.zeros(n, dtype=np.uint64))
        sums = cols["checksum"]
        start = sums.offset * 32
        self.checksum = (memoryview(sums.buffers()[1]).cast("B")[start : start + n * 32]
                         if n else memoryview(b""))
        self.first_rows = np.flatnonzero(self.chunk_seq == 0)

    def run_end(self, row: int) -> int:
        """End of the run of rows starting at ``row`` (the next chunk_seq 0 row, or the end)."""
        i = int(np.searchsorted(self.first_rows, row, side="right"))
        return int(self.first_rows[i]) if i < len(self.first_rows) else self.n

    def path_bytes(self, row: int) -> bytes:
        return bytes(self.path_data[self.path_offsets[row] : self.path_offsets[row + 1]])

    def all_named(self, start: int, end: int, key: bytes) -> bool:
        """Rows ``[start, end)`` all have ``relative_path == key``."""
        if end - start == 1:
            return self.path_bytes(start) == key
        offs = self.path_offsets[start : end + 1]
        if not bool(np.all(np.diff(offs) == len(key))):
            return False
        return bytes(self.path_data[offs[0] : offs[-1]]) == key * (end - start)

    def chunk(self, row: int) -> Chunk:
        return Chunk(int(self.chunk_seq[row]), int(self.fdata_offset[row]),
                     bool(self.compressed[row]), int(self.uncompressed_size[row]),
                     int(self.blob_offset[row]), int(self.blob_size[row]),
                     bytes(self.checksum[row * 32 : row * 32 + 32]),
                     int(self.inner_offset[row]))


class Archive:
    """A read-only view of one archive file. Use :func:`open_archive`."""

    def __init__(self, path: str | os.PathLike[str], *, verify_checksums: bool = True,
                 storage_options: Mapping[str, Any] | None = None,
                 cache: bool | str | os.PathLike[str] | None = None,
                 verify_sections: bool = True) -> None:
        self.path = os.fspath(path)
        self.verify_checksums = verify_checksums
        self.verify_sections = verify_sections
        self._sound: set[GroupKey] = set()  # ranges whose BLAKE3 matched the manifest
        self._groups: dict[GroupKey, pa.Table] = {}
        #: the last decoded compressed blob of a packed archive: (offset, size, bytes, whole:
        #: all its bytes, or only a prefix, see :meth:`decoded_blob`; its frame)
        self._last_blob: tuple[int, int, memoryview, bool, memoryview] | None = None
        self.source: RangeSource = _source(self.path, storage_options, cache)
        try:
            self._open_tail()
        except BaseException:
            self.source.close()
            raise

    def _open_tail(self) -> None:
        src = self.source
        # bytes [-16..-8]: magic; [-8..]: manifest offset (u64 LE)
        manifest_offset = None if src.size < FOOTER_LEN else decode_footer(
            src.read(src.size - FOOTER_LEN, FOOTER_LEN, "footer").to_pybytes())
        if manifest_offset is None:
            hot = hot_source(src, self.path)  # a Rust hot archive: its journal's rows
            if hot is not None:
                self.source = hot
                return self._open_tail()
            unsealed = unsealed_problem(src, self.path)  # a Rust hot archive, its journal
            if unsealed is not None:
                raise UnsealedArchiveError(unsealed, path=self.path)
            if src.size < FOOTER_LEN:
                raise FormatError(f"file is {src.size} bytes, too short for a footer",
                                  path=self.path)
            raise FormatError("no ZNPYMIDX footer: not a znippy archive (v0.7+)", path=self.path)
        self.manifest_offset = manifest_offset
        self.manifest, self.manifest_rows = decode_manifest(src, manifest_offset, adapt=rust_rows)
        self._by_key = {r.key: r for r in self.manifest_rows}
        self.tail_offset = min((r.index_offset for r in self.manifest_rows),
                               default=manifest_offset)
        present = [self.has_section(name) for name in (LOOKUP, TRIE)]
        if not any(present):  # the Rust tool's v0.7/v0.8 layout
            self.__dict__["lookup_in_memory"] = True
        elif not rust_writer(self):  # this project's, or an anonymous writer's: strict
            self.__dict__["lookup_in_memory"] = False
            for name, there in zip((LOOKUP, TRIE), present):
                if not there:
                    raise FormatError(f"manifest has no {name} section", path=self.path)
        relaid = delta_source(self)  # a Rust archive's delta chunks, laid out anew
        if relaid is not None:
            self.source = relaid
            self._open_tail()

    @cached_property
    def lookup_in_memory(self) -> bool:
        """No usable ``__lookup__`` and ``__trie__``: both are built in memory from the data
        sub-indexes when first needed (:mod:`.memlookup`). True for the Rust tool's v0.7/v0.8
        layout (neither section) and for another writer's archive whose sections this reader
        does not understand (:mod:`.foreign`); decided without I/O for every other archive."""
        return not lookup_usable(self)

    def not_understood(self) -> dict[str, str]:
        """Reserved sections of another writer's archive this reader does not understand
        (name → ``"not understood (schema …)"``): skipped for reading files."""
        return not_understood(self)

    def understands(self, name: str) -> bool:
        """Whether the reserved section ``name`` is read (present and understood)."""
        return self.has_section(name) and (not rust_writer(self)
                                           or section_status(self, name) is None)

    # -- structure --------------------------------------------------------------------------
    @property
    def groups(self) -> list[GroupKey]:
        return sorted(r.key for r in self.manifest_rows if r.key.pkg_type != RESERVED_PKG_TYPE)

    @property
    def sections(self) -> list[str]:
        return [r.key.module_name for r in self.manifest_rows if r.key.pkg_type == RESERVED_PKG_TYPE]

    def manifest_row(self, key: GroupKey) -> ManifestRow:
        try:
            return self._by_key[key]
        except KeyError:
            raise NotFoundError(f"no sub-index {key}", path=self.path) from None

    def range_bytes(self, key: GroupKey, what: str) -> pa.Buffer:
        """The bytes of a manifest row; the first time, checked against the BLAKE3 the
        manifest records for them (unless opened with ``verify_sections=False``)."""
        row = self.manifest_row(key)
        buf = self.source.read(row.index_offset, row.index_len, what)
        if row.blake3 is not None and self.verify_sections and key not in self._sound:
            problem = self.digest_problem(key, what, buf)
            if problem is not None:
                raise FormatError(problem, path=self.path)
        return buf

    def digest_problem(self, key: GroupKey, what: str, buf: pa.Buffer | None = None
                       ) -> str | None:
        """What is wrong with a row's bytes against its recorded BLAKE3 (None: they match,
        or none is recorded)."""
        row = self.manifest_row(key)
        if row.blake3 is None:
            return None
        if buf is None:
            buf = self.source.read(row.index_offset, row.index_len, what)
        if section_digest(buf) != row.blake3:
            return f"{what}: its bytes do not match the BLAKE3 the manifest records (damaged)"
        self._sound.add(key)
        return None

    @with_writer
    def group_table(self, key: GroupKey) -> pa.Table:
        """One data sub-index, zero-copy from the memory map, checked in full once."""
        table = self._groups.get(key)
        if table is not None:
            return table
        row = self.manifest_row(key)
        what = group_what(key)
        table = read_table(self.range_bytes(key, what), what, self.path,
                           check_schema=subindex_schema_problem)
        if table.num_rows != row.row_count:
            raise FormatError(f"{what} has {table.num_rows} rows, manifest says {row.row_count}",
                              path=self.path)
        problem = rows_problem(table, self.tail_offset)
        if problem is not None:
            raise FormatError(f"{what} {problem}", path=self.path)
        table = portable(table)
        self._groups[key] = table
        return table

    def index(self, pkg_type: int | str | None = None, repo: str | None = None) -> pa.Table:
        """Data rows of the matching groups with ``repo``, ``pkg_type`` and ``module_name``."""
        want = None if pkg_type is None else resolve_pkg_type(pkg_type)
        keys = [k for k in self.groups
                if (want is None or k.pkg_type == want) and (repo is None or k.repo == repo)]
        return label_groups(((k, self.group_table(k)) for k in keys), path=self.path)

    def has_section(self, name: str) -> bool:
        return GroupKey(RESERVED_PKG_TYPE, "", name) in self._by_key

    @with_writer
    def section(self, name: str) -> pa.Table | memoryview:
        """A reserved section: a ``pa.Table`` for Arrow sections, a ``memoryview`` for raw ones."""
        buf = self.range_bytes(GroupKey(RESERVED_PKG_TYPE, "", name), name)
        raw = memoryview(buf).cast("B")
        if name in RAW_SECTIONS:
            return raw
        if name not in ARROW_SECTIONS and raw[:4] != b"\xff\xff\xff\xff":
            return raw  # an unknown reserved section that is not an Arrow stream
        return read_table(buf, name, self.path)

    def _fetch_paths(self) -> None:
        """A remote source fetches the lookup and the trie together (one request)."""
        if getattr(self.source, "fetches", False):
            keys = [GroupKey(RESERVED_PKG_TYPE, "", n) for n in (LOOKUP, TRIE)]
            rows = [self._by_key[k] for k in keys if k in self._by_key]
            self.source.prefetch([r.index_offset for r in rows], [r.index_len for r in rows],
                                 keep=True)

    @cached_property
    @with_writer
    def lookup(self) -> pa.Table:
        """``__lookup__``, or, in an archive without one, the same table built in memory;
        checked in full (values, order, each file's chunks) either way."""
        if self.lookup_in_memory:
            from .memlookup import memory_lookup

            table = memory_lookup(self.groups, self.group_table)
        else:
            self._fetch_paths()
            key = GroupKey(RESERVED_PKG_TYPE, "", LOOKUP)
            row = self.manifest_row(key)
            table = read_table(self.range_bytes(key, LOOKUP), LOOKUP, self.path,
                               check_schema=lookup_schema_problem)
            if table.num_rows != row.row_count:
                raise FormatError(f"{LOOKUP} has {table.num_rows} rows, manifest says "
                                  f"{row.row_count}", path=self.path)
        if table.column(0).num_chunks > 1:
            table = table.combine_chunks()
        problem = rows_problem(table, self.tail_offset) or lookup_problem(table)
        if problem is not None:
            raise FormatError(f"{LOOKUP} {problem}", path=self.path)
        return table

    @cached_property
    def _cols(self) -> _Columns:
        return _Columns(self.lookup)

    def first_paths(self) -> list[str]:
        """The path of each lookup row with ``chunk_seq = 0``, in lookup order (made anew
        each call: a million paths are ~70 MB of ``str`` an open archive should not keep)."""
        paths = self.lookup.column("relative_path")
        first = self._cols.first_rows
        return (paths if len(first) == len(paths) else take(paths, first)).to_pylist()

    @cached_property
    @with_writer
    def trie(self) -> "TrieMap | SortedPaths":
        """``__trie__`` as a :class:`~..format.trie.TrieMap`, or, in an archive without one, a
        :class:`~.memlookup.SortedPaths` over the in-memory lookup (the same ``get``/``len``)."""
        if self.lookup_in_memory:
            from .memlookup import SortedPaths

            return SortedPaths(self.lookup, self._cols)
        self._fetch_paths()
        buf = self.range_bytes(GroupKey(RESERVED_PKG_TYPE, "", TRIE), TRIE)
        return TrieMap(buf, self.path)

    @cached_property
    def blob_end(self) -> int:
        c = self._cols
        if c.n == 0:
            return 0
        ends = c.blob_offset + c.blob_size
        if bool(np.any(ends < c.blob_offset)):
            raise FormatError(f"{LOOKUP}: a blob range overflows 64 bits", path=self.path)
        return int(ends.max())

    # -- files ------------------------------------------------------------------------------
    @with_writer
    def find(self, path: str) -> FileInfo | None:
        """The file's chunks, found through the fst trie (or the in-memory binary search of an
        archive without one; no scan either way)."""
        try:
            key = path.encode("utf-8")
        except UnicodeEncodeError:
            return None
        if "trie" not in self.__dict__ and "lookup" not in self.__dict__ \
                and not self.lookup_in_memory:
            found = first_find(self, path, key)
            if found is not NOT_HANDLED:
                return cast("FileInfo | None", found)
        row = self.trie.get(key)
        if row is None:
            return None
        if "lookup" not in self.__dict__ and not self.lookup_in_memory:
            lazy = self._lazy_lookup
            # a lookup in batches: decode the one holding the file; once many were decoded
            # (random reads all over it), the whole lookup serves every read after
            if lazy is not None and lazy.decoded < lazy.PROMOTE:
                found = lazy.file_at(self, path, key, int(row))
                if found is not None:
                    return found
        return self._file_at(path, key, int(row))

    @cached_property
    def _lazy_lookup(self) -> "_Batches | None":
        """``__lookup__`` written in several record batches (a compressed one, docs/format.md
        §2): its batches, each decoded only when a point read needs it; None for one batch."""
        self._fetch_paths()
        return self._batches_of(self.range_bytes(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP),
                                                 LOOKUP))

    def _batches_of(self, buf: pa.Buffer) -> "_Batches | None":
        """:attr:`_lazy_lookup` of the lookup's bytes ``buf`` (their digest is the caller's)."""
        key = GroupKey(RESERVED_PKG_TYPE, "", LOOKUP)
        schema, batches = batch_index(buf, LOOKUP, self.path, check_schema=lookup_schema_problem)
        if len(batches) <= 1:
            return None
        if sum(n for _, n, _ in batches) != self.manifest_row(key).row_count:
            raise FormatError(f"{LOOKUP}'s batches do not hold the rows the manifest says",
                              path=self.path)
        return _Batches(schema, batches)

    @cached_property
    def packed(self) -> bool:
        """Whether the archive has packed blobs (the ``inner_offset`` column, FORMAT §3)."""
        if "lookup" not in self.__dict__ and not self.lookup_in_memory:
            lazy = self._lazy_lookup
            if lazy is not None:
                return INNER in lazy.schema.names
        return self._cols.packed

    def _file_at(self, path: str, key: bytes, row: int, c: "_Columns | None" = None,
                 base: int = 0) -> FileInfo:
        """The chunks of ``path`` from lookup row ``row`` on, each checked against the last
        (``c``: the columns of lookup rows ``base`` on; the whole lookup by default)."""
        if c is None:
            c = self._cols
        first = row
        row -= base
        if not 0 <= row < c.n:
            raise FormatError(f"{TRIE} points {path!r} at row {row}, past the lookup",
                              path=self.path)
        if c.chunk_seq[row] != 0:
            raise FormatError(f"{TRIE} points {path!r} at row {row}, not a first chunk",
                              path=self.path)
        if row > 0 and c.path_bytes(row - 1) == key:
            raise FormatError(f"{path!r}: lookup row {row - 1} before its first chunk belongs "
                              "to it too (chunks out of order)", path=self.path)
        nxt = row + 1
        if (c.fdata_offset[row] == 0 and c.path_bytes(row) == key
                and (nxt == c.n or (c.chunk_seq[nxt] == 0 and c.path_bytes(nxt) != key))):
            return FileInfo(path, first, (c.chunk(row),))  # one chunk: what the loop finds
        end = c.run_end(row)
        while end < c.n and c.path_bytes(end) == key:  # a chunk_seq wrongly 0: caught below
            end = c.run_end(end)
        if not c.all_named(row, end, key):
            raise FormatError(f"{TRIE} points {path!r} at rows of another file", path=self.path)
        chunks = []
        offset = 0
        for r in range(row, end):
            chunk = c.chunk(r)
            if chunk.chunk_seq != r - row or chunk.fdata_offset != offset:
                raise FormatError(f"{path!r}: chunk {chunk.chunk_seq} at {chunk.fdata_offset}, "
                                  f"expected chunk {r - row} at {offset}", path=self.path)
            if chunk.uncompressed_size == 0 and end - row > 1:
                raise FormatError(f"{path!r}: chunk {chunk.chunk_seq} of {end - row} is empty",
                                  path=self.path)
            offset += chunk.uncompressed_size
            chunks.append(chunk)
        return FileInfo(path, first, tuple(chunks))

    def file_at(self, path: str, row: int) -> FileInfo:
        """The chunks of ``path`` whose first lookup row is ``row``, checked as :meth:`find`
        checks what the trie gives it (for callers that already hold the rows)."""
        return self._file_at(path, path.encode("utf-8"), row)

    def one_chunk_views(self, items: Sequence[tuple[str, int]], *,
                        verify: bool | None = None) -> list[memoryview | None]:
        """The checked bytes of many small files at once: for each ``(path, first lookup
        row)``, the file's bytes when it is exactly that one row and every check of
        :meth:`file_at` and :meth:`chunk_view` holds; None where the caller must ask those
        (another layout, or something wrong: they say what). The row checks are vectorised
        and the compressed chunks decoded in one call without the GIL, so a small file costs
        one hash and a few slices of Python."""
        c = self._cols
        out: list[memoryview | None] = [None] * len(items)
        rows = np.fromiter((r for _, r in items), dtype=np.int64, count=len(items))
        ok = (rows >= 0) & (rows < c.n)
        if not bool(ok.any()):
            return out
        picks = np.flatnonzero(ok)
        rows = rows[picks]
        nxt = np.minimum(rows + 1, c.n - 1)
        tail = self.tail_offset
        size, blob, stored = c.uncompressed_size[rows], c.blob_offset[rows], c.blob_size[rows]
        packed = c.compressed[rows]
        good = ((c.chunk_seq[rows] == 0) & (c.fdata_offset[rows] == 0)
                & ((rows + 1 == c.n) | (c.chunk_seq[nxt] == 0))
                & (stored <= tail) & (blob <= tail - np.minimum(stored, tail))
                & np.where(packed, size <= codec.STREAM_BYTES, stored == size))
        offs, names, sums = c.path_offsets, c.path_data, c.checksum
        starts, ends = offs[rows].tolist(), offs[rows + 1].tolist()
        nexts = offs[np.minimum(rows + 2, c.n)].tolist()
        prevs = offs[np.maximum(rows - 1, 0)].tolist()
        whole = self._bytes
        frames: list[tuple[bytes | memoryview, int]] = []
        at: list[int] = []  # item of each frame
        n = c.n
        fetched = 0  # bytes of the blobs viewed (packed ones counted once, below)
        inner = c.inner_offset[rows].tolist() if c.packed else None
        blobs: dict[int, list[tuple[int, int, int]]] = {}  # packed: blob → (item, inner, size)
        blob_views: dict[int, memoryview] = {}
        for k, (i, row, g, p, b, s, u) in enumerate(zip(
                picks.tolist(), rows.tolist(), good.tolist(), packed.tolist(), blob.tolist(),
                stored.tolist(), size.tolist())):
            if not g:
                continue
            key = items[i][0].encode("utf-8")
            if names[starts[k]:ends[k]] != key or (row + 1 < n and names[ends[k]:nexts[k]] == key) \
                    or (row > 0 and names[prevs[k]:starts[k]] == key):
                continue  # another layout, or chunks out of order: file_at says which
            if p and inner is not None:  # each packed blob fetched and decoded once
                if b not in blob_views:
                    blob_views[b] = whole[b : b + s] if whole is not None \
                        else self.source.view(b, s)
                blobs.setdefault(b, []).append((i, inner[k], u))
                continue
            view = whole[b : b + s] if whole is not None else self.source.view(b, s)
            fetched += s
            if p:
                frames.append((view, u))
                at.append(i)
            else:
                out[i] = view
        self.source.bytes_read += fetched + sum(v.nbytes for v in blob_views.values())
        for i, decoded in zip(at, codec.decoder().decode_views(frames)):
            out[i] = decoded
        if blobs:
            self._slice_packs(blob_views, blobs, out)
        if self.verify_checksums if verify is None else verify:
            for i, got in enumerate(out):
                if got is not None:
                    row = items[i][1] * 32
                    if blake3.blake3(got).digest() != sums[row : row + 32]:
                        out[i] = None  # chunk_view says what is wrong
        return out

    def _slice_packs(self, views: dict[int, memoryview],
                     members: dict[int, list[tuple[int, int, int]]],
                     out: list[memoryview | None]) -> None:
        """Decode each packed blob once (one GIL-free call for all) and give each member its
        slice; a member whose slice does not fit is left to :meth:`chunk_view` (it says so)."""
        keys: list[int] = []
        frames: list[tuple[bytes | memoryview, int]] = []
        for b, view in views.items():
            try:
                size = codec.content_size(view)
            except CodecError:
                continue
            if size <= MAX_CHUNK_BYTES:
                keys.append(b)
                frames.append((view, size))
        for b, decoded in zip(keys, codec.decoder().decode_views(frames)):
            if decoded is None:
                continue
            for i, inner, u in members[b]:
                if inner + u <= decoded.nbytes:
                    out[i] = decoded[inner : inner + u]

    def decoded_blob(self, offset: int, size: int, where: str = "",
                     upto: int | None = None) -> memoryview:
        """The decoded bytes of a compressed blob whatever its size (a packed blob holds
        several chunks), its declared length bounded first; the last one is kept, so the
        files of one pack read one after the other decode it once. ``upto``: only the first
        ``upto`` bytes are needed (a point read of a pack member): a frame of our zstd shape
        is decoded that far and no further (``codec.Decoder.decode_prefix``; a cold read of
        a file early in a 4 MiB pack decodes a fraction of it)."""
        cached = self._last_blob
        again = cached is not None and cached[0] == offset and cached[1] == size
        if cached is not None and again:
            if cached[3] or (upto is not None and upto <= cached[2].nbytes):
                return cached[2]
            frame = cached[4]  # a prefix of it was decoded: now the whole, from those bytes
        else:
            frame = memoryview(self.source.read(offset, size, "blob")).cast("B")
        try:
            n = codec.content_size(frame, where=where)
        except CodecError as exc:
            raise CodecError(exc.problem, path=self.path) from None
        if n > MAX_CHUNK_BYTES:
            raise FormatError(f"{where}blob declares {n} bytes, more than the "
                              f"{MAX_CHUNK_BYTES}-byte limit", path=self.path)
        want = None if upto is None or again else max(upto, PREFIX_MIN)
        try:
            if want is not None and want < n:
                prefix = codec.decoder().decode_prefix(frame, n, want)
                if prefix is not None:
                    self._last_blob = (offset, size, prefix, False, frame)
                    return prefix
            data = codec.decoder().decode_view(frame, n)
        except CodecError as exc:
            raise CodecError(where + exc.problem, path=self.path) from None
        self._last_blob = (offset, size, data, True, frame)
        return data

    @cached_property
    def _bytes(self) -> memoryview | None:
        """The whole file as unsigned bytes (slices are bounded by the checked rows), or
        None for a source that fetches its ranges (they come through ``source.view``)."""
        buffer = getattr(self.source, "buffer", None)
        return None if buffer is None else memoryview(buffer).cast("B")

    def _need(self, path: str) -> FileInfo:
        info = self.find(path)
        if info is None:
            raise NotFoundError(f"no file {path!r} in the archive", path=self.path)
        return info

    def read_chunk(self, path: str, chunk: Chunk, *, verify: bool | None = None) -> bytes:
        """The original bytes of one chunk, checked against its BLAKE3 unless told not."""
        data = self.chunk_view(path, chunk, verify=verify)
        return data if isinstance(data, bytes) else data.tobytes()

    @with_writer
    def chunk_view(self, path: str, chunk: Chunk, *, verify: bool | None = None
                   ) -> bytes | memoryview:
        """Like :meth:`read_chunk`, but a raw chunk comes as a view of the map (no copy)."""
        # error texts are built only when something is wrong: this runs once per chunk
        def where() -> str:
            return f"{path!r} chunk {chunk.chunk_seq}: "

        if chunk.blob_offset + chunk.blob_size > self.tail_offset:
            raise FormatError(f"{where()}blob [{chunk.blob_offset}, "
                              f"{chunk.blob_offset + chunk.blob_size}) runs into the index tail "
                              f"at {self.tail_offset}", path=self.path)
        data: bytes | memoryview
        if chunk.compressed and self.packed:
            end = chunk.inner_offset + chunk.uncompressed_size
            decoded = self.decoded_blob(chunk.blob_offset, chunk.blob_size, where(), upto=end)
            if end > decoded.nbytes:
                raise FormatError(f"{where()}slice [{chunk.inner_offset}, {end}) lies outside "
                                  f"its decoded blob of {decoded.nbytes} bytes", path=self.path)
            data = decoded[chunk.inner_offset : end]
        elif chunk.compressed:
            if chunk.uncompressed_size > MAX_CHUNK_BYTES:
                raise FormatError(f"{where()}size {chunk.uncompressed_size} exceeds the "
                                  f"{MAX_CHUNK_BYTES}-byte chunk limit", path=self.path)
            blob = self.source.read(chunk.blob_offset, chunk.blob_size, "blob")
            try:
                data = codec.decoder().decode_view(memoryview(blob), chunk.uncompressed_size)
            except CodecError as exc:
                raise CodecError(where() + exc.problem, path=self.path) from None
        else:
            blob = self.source.read(chunk.blob_offset, chunk.blob_size, "blob")
            if chunk.blob_size != chunk.uncompressed_size:
                raise FormatError(f"{where()}raw blob is {chunk.blob_size} bytes, index says "
                                  f"{chunk.uncompressed_size}", path=self.path)
            data = memoryview(blob).cast("B")
        if (self.verify_checksums if verify is None else verify):
            if blake3.blake3(data).digest() != chunk.checksum:
                raise ChecksumError(f"{where()}BLAKE3 mismatch", path=self.path)
        return data

    @with_writer
    def chunk_pieces(self, path: str, chunk: Chunk, *, verify: bool | None = None
                     ) -> Iterator[bytes | memoryview]:
        """One chunk's bytes in order, for writing them out: a compressed chunk above
        ``codec.STREAM_BYTES`` is decoded in pieces of ``codec.PIECE_BYTES`` (bounded memory);
        any other comes whole from :meth:`chunk_view`. A streamed chunk's BLAKE3 is checked
        after its last piece (ChecksumError then): write it where it is not final yet (a
        temporary file), or check it with a first pass."""
        if not chunk.compressed or chunk.uncompressed_size <= codec.STREAM_BYTES \
                or chunk.uncompressed_size > MAX_CHUNK_BYTES \
                or chunk.blob_offset + chunk.blob_size > self.tail_offset:
            yield self.chunk_view(path, chunk, verify=verify)  # (it words any problem)
            return
        where = f"{path!r} chunk {chunk.chunk_seq}: "
        blob = self.source.read(chunk.blob_offset, chunk.blob_size, "blob")
        check = self.verify_checksums if verify is None else verify
        hasher = blake3.blake3() if check else None
        try:
            for piece in codec.decoder().decode_pieces(memoryview(blob), chunk.uncompressed_size,
                                                       where=where):
                if hasher is not None:
                    hasher.update(piece)
                yield piece
        except CodecError as exc:
            raise CodecError(exc.problem, path=self.path) from None
        if hasher is not None and hasher.digest() != chunk.checksum:
            raise ChecksumError(f"{where}BLAKE3 mismatch", path=self.path)

    def checked_pieces(self, path: str, chunk: Chunk, *, verify: bool | None = None
                       ) -> Iterator[bytes | memoryview]:
        """:meth:`chunk_pieces` whose every piece is checked before it comes: a streamed
        chunk is decoded twice (a first pass checks its BLAKE3), for output that cannot be
        taken back (stdout, a reader)."""
        streamed = chunk.compressed and codec.STREAM_BYTES < chunk.uncompressed_size \
            <= MAX_CHUNK_BYTES
        if streamed and (self.verify_checksums if verify is None else verify):
            for _ in self.chunk_pieces(path, chunk, verify=True):
                pass
            verify = False
        return self.chunk_pieces(path, chunk, verify=verify)

    def chunk_views(self, path: str, chunks: Sequence[Chunk], *, verify: bool | None = None
                    ) -> list[bytes | memoryview]:
        """:meth:`chunk_view` of many chunks of one file at once: the same checks, the
        compressed frames decoded in one call without the GIL (a cut jar is many small
        chunks). Anything a check refuses, or a frame the batch cannot decode, goes through
        :meth:`chunk_view`, which raises or words the error."""
        if self.packed:  # a packed blob is decoded once (kept by decoded_blob)
            return [self.chunk_view(path, ch, verify=verify) for ch in chunks]
        tail = self.tail_offset
        whole = self._bytes
        out: list[bytes | memoryview | None] = [None] * len(chunks)
        frames: list[tuple[bytes | memoryview, int]] = []
        at: list[int] = []
        slow: list[int] = []
        fetched = 0
        for i, ch in enumerate(chunks):
            b, s, u = ch.blob_offset, ch.blob_size, ch.uncompressed_size
            if b + s > tail or (u > codec.STREAM_BYTES if ch.compressed else s != u):
                slow.append(i)
                continue
            fetched += s
            view = whole[b : b + s] if whole is not None else self.source.view(b, s)
            if ch.compressed:
                frames.append((view, u))
                at.append(i)
            else:
                out[i] = view
        self.source.bytes_read += fetched
        for i, decoded in zip(at, codec.decoder().decode_views(frames)):
            if decoded is None:
                slow.append(i)
            else:
                out[i] = decoded
        if self.verify_checksums if verify is None else verify:
            for i, got in enumerate(out):
                if got is not None and blake3.blake3(got).digest() != chunks[i].checksum:
                    slow.append(i)
        for i in slow:  # raises for a bad chunk; decodes one the batch could not
            out[i] = self.chunk_view(path, chunks[i], verify=verify)
        return cast("list[bytes | memoryview]", out)  # every slot filled above

    def iter_chunks(self, path: str, *, verify: bool | None = None) -> Iterator[bytes]:
        info = self._need(path)
        for chunk in info.chunks:
            yield self.read_chunk(path, chunk, verify=verify)

    def read(self, path: str, *, verify: bool | None = None) -> bytes:
        """The whole file; only its own blobs are touched."""
        return b"".join(self.iter_chunks(path, verify=verify))

    def read_many(self, paths: Iterable[str], *, verify: bool | None = None,
                  workers: int | None = None, ordered: bool = False
                  ) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of many files: found first, read in blob order (``ordered=True``:
        the given order), decoded in worker threads, remote ranges coalesced, memory bounded
        (:mod:`.many`)."""
        from .many import read_many

        return read_many(self, paths, verify=verify, workers=workers, ordered=ordered)

    def iter_files(self, rows: Any, *, verify: bool | None = None, workers: int | None = None,
                   ordered: bool = False) -> Iterator[tuple[str, bytes]]:
        """:meth:`read_many` of the ``relative_path`` of ``rows`` (an Arrow table, batch or
        reader: the rows of the ``files`` view; or mappings)."""
        from .many import read_many, rows_paths

        return read_many(self, rows_paths(rows), verify=verify, workers=workers,
                         ordered=ordered)

    def open(self, path: str) -> "ArchiveFile":
        """A streaming, seekable binary file object over one file."""
        from .fileobj import ArchiveFile

        return ArchiveFile(self, self._need(path))

    def select(self, *, repo: str | None = None, pkg_type: int | str | None = None,
               glob: str | None = None) -> list[str]:
        """Paths of the files that match every given filter, in path order (UTF-8 byte order,
        which is code point order). Without ``repo``/``pkg_type`` they come from the lookup
        (the union of every group's rows), otherwise from the matching data sub-indexes."""
        if repo is None and pkg_type is None:
            paths = sorted(self.first_paths())  # in order already unless the lookup is damaged
        else:
            idx = self.index(pkg_type=pkg_type, repo=repo)
            seq = numpy_of(one_array(idx.column("chunk_seq")))
            first = filter_by(one_array(idx.column("relative_path")), seq == 0)
            paths = sorted(first.to_pylist())
        if glob is not None:
            rx = re.compile(fnmatch.translate(glob))
            paths = [p for p in paths if rx.match(p)]
        return paths

    def extract(self, dest: str | os.PathLike[str], *, repo: str | None = None,
                pkg_type: int | str | None = None, glob: str | None = None,
                paths: list[str] | None = None, workers: int | None = None,
                progress: Any = None, strip_components: int = 0, preserve: bool = False,
                symlinks: bool = False) -> "ExtractReport":
        """Extract the matching files under ``dest`` (see :mod:`znippy_sql.read.extract`)."""
        from .extract import extract

        return extract(self, os.fspath(dest), repo=repo, pkg_type=pkg_type, glob=glob,
                       paths=paths, workers=workers, progress=progress,
                       strip_components=strip_components, preserve=preserve, symlinks=symlinks)

    def verify(self, *, progress: Any = None, content: bool = True) -> "VerifyReport":
        """Structure and (unless ``content=False``) every blob's content: all findings."""
        from .verify import verify

        return verify(self, progress=progress, content=content)

    @property
    def meta(self) -> pa.Table | None:
        """``__meta__`` facts, or ``None`` when the archive records no metadata at all."""
        from ..provenance.meta import read_meta

        return read_meta(self)

    def close(self) -> None:
        for name in ("lookup", "trie", "_cols", "_bytes", "_lazy_lookup", "packed"):
            self.__dict__.pop(name, None)
        self._last_blob = None
        self._groups.clear()
        self.source.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Archive {self.path!r}: {len(self.groups)} groups, sections {self.sections}>"


class _Batches:
    """A lookup in record batches, decoded a few at a time for point reads: a file is read
    from the batch holding its first row, with the batch before when it starts a batch (its
    neighbour) and the ones after while its rows run on (at most ``SPAN`` batches; a longer
    run is left to the whole lookup). The last ``KEEP`` decoded batches are kept."""

    KEEP = 4
    SPAN = 4
    #: after this many batch decodes the whole lookup is read and serves the point reads
    PROMOTE = 16

    def __init__(self, schema: pa.Schema, batches: list[tuple[int, int, Any]]) -> None:
        self.schema = schema
        self.batches = batches
        self.starts = [start for start, _, _ in batches]
        self._done: dict[int, pa.Table] = {}
        self.decoded = 0

    def file_at(self, archive: "Archive", path: str, key: bytes, row: int) -> FileInfo | None:
        b = bisect.bisect_right(self.starts, row) - 1
        if b < 0 or row >= self.starts[b] + self.batches[b][1]:
            return None
        lo = b - 1 if row == self.starts[b] and b > 0 else b
        hi = b
        while True:
            c = _Columns(pa.concat_tables([self._table(archive, i) for i in range(lo, hi + 1)])
                         .combine_chunks() if hi > lo else self._table(archive, lo))
            if c.run_end(row - self.starts[lo]) < c.n or hi + 1 == len(self.batches):
                return archive._file_at(path, key, row, c, self.starts[lo])
            if hi - lo + 1 >= self.SPAN:
                return None
            hi += 1

    def _table(self, archive: "Archive", b: int) -> pa.Table:
        table = self._done.get(b)
        if table is None:
            table = read_batch(self.schema, self.batches[b][2], LOOKUP, archive.path)
            self.decoded += 1
            problem = rows_problem(table, archive.tail_offset)
            if problem is not None:
                raise FormatError(f"{LOOKUP} {problem}", path=archive.path)
            if len(self._done) >= self.KEEP:
                self._done.pop(next(iter(self._done)))
            self._done[b] = table
        return table


def group_what(key: GroupKey) -> str:
    """How errors name a data sub-index."""
    return f"sub-index {key.pkg_type}/{key.repo!r}/{key.module_name!r}"


def label_groups(items: Iterable[tuple[GroupKey, pa.Table]], *,
                 path: str | None = None) -> pa.Table:
    """Data rows of several groups in one table, each labelled ``repo``, ``pkg_type``,
    ``module_name``; module columns are unioned by name (nulls elsewhere)."""
    parts = []
    for key, t in items:
        n = t.num_rows
        if "pkg_type" in t.schema.names:
            t = t.drop_columns(["pkg_type"])
        t = t.append_column("repo", build.repeat(key.repo, pa.utf8(), n))
        t = t.append_column("pkg_type", build.repeat(key.pkg_type, pa.int8(), n))
        t = t.append_column("module_name", build.repeat(key.module_name, pa.utf8(), n))
        parts.append(t)
    if not parts:
        extra = [pa.field("repo", pa.utf8()), pa.field("pkg_type", pa.int8()),
                 pa.field("module_name", pa.utf8())]
        return pa.schema([*BASE_FIELDS, *extra]).empty_table()
    try:
        return pa.concat_tables(parts, promote_options="default")
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise FormatError(f"sub-indexes have conflicting module columns: {exc}",
                          path=path) from None


def _source(path: str, storage_options: Mapping[str, Any] | None,
            cache: bool | str | os.PathLike[str] | None) -> RangeSource:
    """A memory map for a local path or ``file://`` URL, a remote source for other URLs."""
    if "://" in path:  # a plain path needs none of the URL code (3-4 ms of imports)
        from ..remote import is_url, local_path, open_source

        if is_url(path):
            local = local_path(path)
            if local is None:
                return open_source(path, storage_options=storage_options, cache=cache)
            path = local
    recover(path)  # an interrupted append is rolled back first (one stat when none)
    return MappedSource(path)


def open_archive(path: str | os.PathLike[str], *, verify_checksums: bool = True,
                 storage_options: Mapping[str, Any] | None = None,
                 cache: bool | str | os.PathLike[str] | None = None,
                 verify_sections: bool = True) -> Archive:
    """Open an archive: reads the footer and the manifest, nothing else.

    ``path``: a local path, or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``,
    ``file://``; see ``docs/remote.md``). ``storage_options``: endpoint, region, credentials,
    retries, timeouts of a remote store. ``cache``: where remote tails are kept (True: the
    user cache directory; a directory; False: not at all; None: the process default).
    ``verify_checksums=False`` skips the BLAKE3 of each chunk read; ``verify_sections=False``
    skips the BLAKE3 of each sub-index and section the manifest records (checked the first
    time one is read), for callers that verified the archive already."""
    return Archive(path, verify_checksums=verify_checksums, storage_options=storage_options,
                   cache=cache, verify_sections=verify_sections)
