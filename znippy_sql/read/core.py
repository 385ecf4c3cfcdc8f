"""``ArchiveCore``: one archive file read through its parts, each in a module of its own.

Opening reads the footer and the manifest only (:mod:`.tail`); the lookup's columns are made
once (:mod:`.columns`); a point read goes path → trie → lookup rows (:mod:`.search`, the very
first one through :mod:`.firstfind`) → that file's chunks, decoded and checked
(:mod:`.stream`, many at once by :mod:`.bulk`; packed blobs: :mod:`.packs`,
:mod:`.blobcache`). It costs microseconds and touches only the file's own bytes.

:class:`~.reader.Archive` adds the work done over whole archives (extract, verify, many files
at once, file objects, ``__meta__``); the modules doing that work take an ``ArchiveCore``, so
they need nothing of the facade that calls them.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Self, cast

import numpy as np
import pyarrow as pa

from ..errors import FormatError, NotFoundError
from ..format.build import numpy_of
from ..format.kernels import filter_by, one_array, take
from ..format.manifest import ManifestRow
from ..format.rangeio import RangeSource
from ..format.schema import INNER, LOOKUP, TRIE, GroupKey
from ..modules.pkgtypes import resolve_pkg_type
from . import bulk, stream
from .blobcache import BlobCache
from .columns import Chunk, Columns, FileInfo
from .firstfind import NOT_HANDLED, first_find
from .foreign import (lookup_usable, not_understood, rust_writer, section_status,
                      with_writer)
from .search import Batches, lookup_batches, trie_of
from ..interop import delta_source
from .tail import Tail, byte_source, label_groups

if TYPE_CHECKING:
    from ..format.trie import TrieMap
    from .memlookup import SortedPaths


class ArchiveCore:
    """A read-only view of one archive file: its structure and its files' checked bytes."""

    def __init__(self, path: str | os.PathLike[str], *, verify_checksums: bool = True,
                 storage_options: Mapping[str, Any] | None = None,
                 cache: bool | str | os.PathLike[str] | None = None,
                 verify_sections: bool = True,
                 warehouse: str | os.PathLike[str] | None = None,
                 namespace: str | None = None) -> None:
        self.path = os.fspath(path)
        self.verify_checksums = verify_checksums
        self.verify_sections = verify_sections
        #: the last decoded compressed blob of a packed archive (:mod:`.blobcache`)
        self.blob_cache = BlobCache(self.path)
        source = byte_source(self.path, storage_options, cache)
        try:
            if warehouse is not None:  # a Rust Iceberg-backed archive's blob sidecar
                from ..interop.icebergrs import rust_iceberg_source

                source = rust_iceberg_source(source, self.path, warehouse, namespace)
            self.tail = Tail(source, self.path, verify_sections=verify_sections)
            self._open()
            relaid = delta_source(self)  # Rust delta chunks, or append's repeated groups
            if relaid is not None:
                self.tail = Tail(relaid, self.path, verify_sections=verify_sections)
                self._open()
        except BaseException:
            source.close()
            raise

    def _open(self) -> None:
        tail = self.tail
        self.manifest_offset = tail.manifest_offset
        self.manifest = tail.manifest
        self.manifest_rows: list[ManifestRow] = tail.manifest_rows
        self.tail_offset = tail.tail_offset
        present = [self.has_section(name) for name in (LOOKUP, TRIE)]
        if not any(present):  # the Rust tool's v0.7/v0.8 layout
            self.__dict__["lookup_in_memory"] = True
        elif not rust_writer(self):  # this project's, or an anonymous writer's: strict
            self.__dict__["lookup_in_memory"] = False
            for name, there in zip((LOOKUP, TRIE), present):
                if not there:
                    raise FormatError(f"manifest has no {name} section", path=self.path)

    @property
    def source(self) -> RangeSource:
        """Where the bytes come from (a memory map, or a remote object's ranges)."""
        return self.tail.source

    @source.setter
    def source(self, value: RangeSource) -> None:
        self.tail.source = value

    @property
    def memo(self) -> dict[str, Any]:
        """Facts about the archive computed once by the modules that need them."""
        return self.tail.memo

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

    # -- structure (:mod:`.tail`) -----------------------------------------------------------
    @property
    def groups(self) -> list[GroupKey]:
        return self.tail.groups

    @property
    def sections(self) -> list[str]:
        return self.tail.sections

    def manifest_row(self, key: GroupKey) -> ManifestRow:
        return self.tail.manifest_row(key)

    def range_bytes(self, key: GroupKey, what: str) -> pa.Buffer:
        """The bytes of a manifest row; the first time, checked against the BLAKE3 the
        manifest records for them (unless opened with ``verify_sections=False``)."""
        return self.tail.range_bytes(key, what)

    def digest_problem(self, key: GroupKey, what: str, buf: pa.Buffer | None = None
                       ) -> str | None:
        """What is wrong with a row's bytes against its recorded BLAKE3 (None: they match,
        or none is recorded)."""
        return self.tail.digest_problem(key, what, buf)

    def fetch_paths(self) -> None:
        """A remote source fetches the lookup and the trie together (one request)."""
        self.tail.fetch_paths()

    @with_writer
    def group_table(self, key: GroupKey) -> pa.Table:
        """One data sub-index, zero-copy from the memory map, checked in full once."""
        return self.tail.group_table(key)

    def index(self, pkg_type: int | str | None = None, repo: str | None = None) -> pa.Table:
        """Data rows of the matching groups with ``repo``, ``pkg_type`` and ``module_name``."""
        want = None if pkg_type is None else resolve_pkg_type(pkg_type)
        keys = [k for k in self.groups
                if (want is None or k.pkg_type == want) and (repo is None or k.repo == repo)]
        return label_groups(((k, self.group_table(k)) for k in keys), path=self.path)

    def has_section(self, name: str) -> bool:
        return self.tail.has_section(name)

    @with_writer
    def section(self, name: str) -> pa.Table | memoryview:
        """A reserved section: a ``pa.Table`` for Arrow sections, a ``memoryview`` for raw ones."""
        return self.tail.section(name)

    # -- the lookup and the paths (:mod:`.columns`, :mod:`.search`) --------------------------
    @cached_property
    @with_writer
    def lookup(self) -> pa.Table:
        """``__lookup__``, or, in an archive without one, the same table built in memory;
        checked in full (values, order, each file's chunks) either way."""
        return self.tail.read_lookup(in_memory=self.lookup_in_memory)

    @cached_property
    def lookup_columns(self) -> Columns:
        """The lookup's columns as numpy arrays, made once."""
        return Columns(self.lookup)

    def first_paths(self) -> list[str]:
        """The path of each lookup row with ``chunk_seq = 0``, in lookup order (made anew
        each call: a million paths are ~70 MB of ``str`` an open archive should not keep)."""
        paths = self.lookup.column("relative_path")
        first = self.lookup_columns.first_rows
        return (paths if len(first) == len(paths) else take(paths, first)).to_pylist()

    @cached_property
    @with_writer
    def trie(self) -> "TrieMap | SortedPaths":
        """``__trie__`` as a :class:`~..format.trie.TrieMap`, or, in an archive without one, a
        :class:`~.memlookup.SortedPaths` over the in-memory lookup (the same ``get``/``len``)."""
        return trie_of(self.tail, in_memory=self.lookup_in_memory,
                       lookup=lambda: self.lookup, columns=lambda: self.lookup_columns)

    @cached_property
    def lookup_batches(self) -> Batches | None:
        """``__lookup__`` written in several record batches (a compressed one, docs/format.md
        §2): its batches, each decoded only when a point read needs it; None for one batch."""
        return lookup_batches(self.tail)

    @cached_property
    def blob_end(self) -> int:
        c = self.lookup_columns
        if c.n == 0:
            return 0
        ends = c.blob_offset + c.blob_size
        if bool(np.any(ends < c.blob_offset)):
            raise FormatError(f"{LOOKUP}: a blob range overflows 64 bits", path=self.path)
        return int(ends.max())

    @cached_property
    def packed(self) -> bool:
        """Whether the archive has packed blobs (the ``inner_offset`` column, FORMAT §3)."""
        if "lookup" not in self.__dict__ and not self.lookup_in_memory:
            lazy = self.lookup_batches
            if lazy is not None:
                return INNER in lazy.schema.names
        return self.lookup_columns.packed

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
            first = first_find(self.tail, path, key)
            if first is not None:  # the trie and the batches it read are checked: kept
                self.__dict__.setdefault("trie", first.trie)
                self.__dict__.setdefault("lookup_batches", first.batches)
                if first.found is not NOT_HANDLED:
                    return cast("FileInfo | None", first.found)
        row = self.trie.get(key)
        if row is None:
            return None
        if "lookup" not in self.__dict__ and not self.lookup_in_memory:
            lazy = self.lookup_batches
            # a lookup in batches: decode the one holding the file; once many were decoded
            # (random reads all over it), the whole lookup serves every read after
            if lazy is not None and lazy.decoded < lazy.PROMOTE:
                found = lazy.file_at(self.tail, path, key, int(row))
                if found is not None:
                    return found
        return self.lookup_columns.file_at(path, key, int(row), archive=self.path)

    def file_at(self, path: str, row: int) -> FileInfo:
        """The chunks of ``path`` whose first lookup row is ``row``, checked as :meth:`find`
        checks what the trie gives it (for callers that already hold the rows)."""
        return self.lookup_columns.file_at(path, path.encode("utf-8"), row, archive=self.path)

    def must_find(self, path: str) -> FileInfo:
        """:meth:`find`, a :class:`~znippy_sql.errors.NotFoundError` when it is not there."""
        info = self.find(path)
        if info is None:
            raise NotFoundError(f"no file {path!r} in the archive", path=self.path)
        return info

    @cached_property
    def mapped(self) -> memoryview | None:
        """The whole file as unsigned bytes (slices are bounded by the checked rows), or
        None for a source that fetches its ranges (they come through ``source.view``)."""
        buffer = getattr(self.source, "buffer", None)
        return None if buffer is None else memoryview(buffer).cast("B")

    # -- checked bytes (:mod:`.stream`, :mod:`.bulk`, :mod:`.blobcache`) ---------------------
    def one_chunk_views(self, items: Sequence[tuple[str, int]], *,
                        verify: bool | None = None) -> list[memoryview | None]:
        """The checked bytes of many small files at once (:func:`.bulk.one_chunk_views`):
        for each ``(path, first lookup row)``, the file's bytes when it is exactly that one
        row and every check of :meth:`file_at` and :meth:`chunk_view` holds; None where the
        caller must ask those."""
        return bulk.one_chunk_views(self, items, verify=verify)

    def decoded_blob(self, offset: int, size: int, where: str = "",
                     upto: int | None = None) -> memoryview:
        """The decoded bytes of a compressed blob, the last one kept
        (:meth:`.blobcache.BlobCache.decoded`; ``upto``: only that many bytes needed)."""
        return self.blob_cache.decoded(self.source, offset, size, where, upto)

    def read_chunk(self, path: str, chunk: Chunk, *, verify: bool | None = None) -> bytes:
        """The original bytes of one chunk, checked against its BLAKE3 unless told not."""
        data = self.chunk_view(path, chunk, verify=verify)
        return data if isinstance(data, bytes) else data.tobytes()

    @with_writer
    def chunk_view(self, path: str, chunk: Chunk, *, verify: bool | None = None
                   ) -> bytes | memoryview:
        """Like :meth:`read_chunk`, but a raw chunk comes as a view of the map (no copy)."""
        return stream.chunk_view(self, path, chunk, verify=verify)

    @with_writer
    def chunk_pieces(self, path: str, chunk: Chunk, *, verify: bool | None = None
                     ) -> Iterator[bytes | memoryview]:
        """One chunk's bytes in order, a big compressed one in pieces (bounded memory; its
        BLAKE3 checked after the last piece: :func:`.stream.chunk_pieces`)."""
        return stream.chunk_pieces(self, path, chunk, verify=verify)

    def checked_pieces(self, path: str, chunk: Chunk, *, verify: bool | None = None
                       ) -> Iterator[bytes | memoryview]:
        """:meth:`chunk_pieces` whose every piece is checked before it comes (a streamed
        chunk is decoded twice), for output that cannot be taken back (stdout, a reader)."""
        return stream.checked_pieces(self, path, chunk, verify=verify)

    def chunk_views(self, path: str, chunks: Sequence[Chunk], *, verify: bool | None = None
                    ) -> list[bytes | memoryview]:
        """:meth:`chunk_view` of many chunks of one file at once, the compressed frames
        decoded in one call without the GIL (:func:`.bulk.chunk_views`)."""
        return bulk.chunk_views(self, path, chunks, verify=verify)

    def iter_chunks(self, path: str, *, verify: bool | None = None) -> Iterator[bytes]:
        info = self.must_find(path)
        for chunk in info.chunks:
            yield self.read_chunk(path, chunk, verify=verify)

    def read(self, path: str, *, verify: bool | None = None) -> bytes:
        """The whole file; only its own blobs are touched."""
        return b"".join(self.iter_chunks(path, verify=verify))

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

    def close(self) -> None:
        for name in ("lookup", "trie", "lookup_columns", "mapped", "lookup_batches", "packed"):
            self.__dict__.pop(name, None)
        self.blob_cache.clear()
        self.tail.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Archive {self.path!r}: {len(self.groups)} groups, sections {self.sections}>"
