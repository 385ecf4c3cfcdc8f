"""``open_archive``: footer → manifest → checked byte ranges → zero-copy Arrow tables.

Nothing is read until asked for: opening reads the footer and the manifest only. Every range
comes from the manifest and is checked against the file before it is sliced out of the map.
"""

from __future__ import annotations

import fnmatch
import re
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import blake3
import ducer
import pyarrow as pa
import pyarrow.compute as pc

from . import codec
from .errors import ChecksumError, FormatError, NotFoundError
from .footer import FOOTER_LEN, decode_footer
from .ipc import read_stream
from .manifest import ManifestRow, decode_manifest
from .rangeio import RangeSource
from .schema import (
    BASE_FIELDS,
    LOOKUP,
    LOOKUP_SCHEMA,
    RAW_SECTIONS,
    RESERVED_PKG_TYPE,
    TRIE,
    GroupKey,
    resolve_pkg_type,
)


@dataclass(frozen=True)
class Chunk:
    chunk_seq: int
    fdata_offset: int
    compressed: bool
    uncompressed_size: int
    blob_offset: int
    blob_size: int
    checksum: bytes


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
        return sum(c.blob_size for c in self.chunks)


class Archive:
    """A read-only view of one archive file. Use :func:`open_archive`."""

    def __init__(self, path: str | os.PathLike[str], *, verify_checksums: bool = True) -> None:
        self.path = os.fspath(path)
        self.verify_checksums = verify_checksums
        self.source = RangeSource(self.path)
        src = self.source
        if src.size < FOOTER_LEN:
            raise FormatError(f"file is {src.size} bytes, too short for a footer", path=self.path)
        manifest_offset = decode_footer(src.read(src.size - FOOTER_LEN, FOOTER_LEN, "footer")
                                        .to_pybytes())
        if manifest_offset is None:
            raise FormatError("no ZNPYMIDX footer: not a znippy archive (v0.7+)", path=self.path)
        self.manifest_offset = manifest_offset
        self.manifest, self.manifest_rows = decode_manifest(src, manifest_offset)
        self._by_key = {r.key: r for r in self.manifest_rows}
        self.tail_offset = min((r.index_offset for r in self.manifest_rows),
                               default=manifest_offset)
        for name in (LOOKUP, TRIE):
            if GroupKey(RESERVED_PKG_TYPE, "", name) not in self._by_key:
                raise FormatError(f"manifest has no {name} section", path=self.path)

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

    def group_table(self, key: GroupKey) -> pa.Table:
        """One data sub-index, zero-copy from the memory map."""
        row = self.manifest_row(key)
        what = f"sub-index {key.pkg_type}/{key.repo!r}/{key.module_name!r}"
        table = read_stream(self.source, row.index_offset, row.index_len, what)
        fields = list(table.schema)
        head = pa.schema(fields[: len(BASE_FIELDS)]) if len(fields) >= len(BASE_FIELDS) else None
        if head is None or not head.equals(LOOKUP_SCHEMA):
            raise FormatError(f"{what} does not start with the base columns", path=self.path)
        if table.num_rows != row.row_count:
            raise FormatError(f"{what} has {table.num_rows} rows, manifest says {row.row_count}",
                              path=self.path)
        return table

    def index(self, pkg_type: int | str | None = None, repo: str | None = None) -> pa.Table:
        """Data rows of the matching groups with ``repo``, ``pkg_type`` and ``module_name``."""
        want = None if pkg_type is None else resolve_pkg_type(pkg_type)
        parts = []
        for key in self.groups:
            if (want is not None and key.pkg_type != want) or (repo is not None and key.repo != repo):
                continue
            t = self.group_table(key)
            n = t.num_rows
            if "pkg_type" in t.schema.names:
                t = t.drop_columns(["pkg_type"])
            t = t.append_column("repo", pa.repeat(key.repo, n).cast(pa.utf8()))
            t = t.append_column("pkg_type", pa.repeat(pa.scalar(key.pkg_type, pa.int8()), n))
            t = t.append_column("module_name", pa.repeat(key.module_name, n).cast(pa.utf8()))
            parts.append(t)
        if not parts:
            extra = [pa.field("repo", pa.utf8()), pa.field("pkg_type", pa.int8()),
                     pa.field("module_name", pa.utf8())]
            return pa.schema([*BASE_FIELDS, *extra]).empty_table()
        return pa.concat_tables(parts, promote_options="default")

    def has_section(self, name: str) -> bool:
        return GroupKey(RESERVED_PKG_TYPE, "", name) in self._by_key

    def section(self, name: str) -> pa.Table | memoryview:
        """A reserved section: a ``pa.Table`` for Arrow sections, a ``memoryview`` for raw ones."""
        row = self.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", name))
        if name in RAW_SECTIONS:
            return memoryview(self.source.read(row.index_offset, row.index_len, name)).cast("B")
        return read_stream(self.source, row.index_offset, row.index_len, name)

    @cached_property
    def lookup(self) -> pa.Table:
        row = self.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP))
        return read_stream(self.source, row.index_offset, row.index_len, LOOKUP, LOOKUP_SCHEMA)

    @cached_property
    def trie(self) -> ducer.Map:
        buf = self.section(TRIE)
        try:
            return ducer.Map(buf)
        except Exception as exc:
            raise FormatError(f"{TRIE} is not a valid fst map: {exc}", path=self.path) from None

    @cached_property
    def blob_end(self) -> int:
        lk = self.lookup
        if lk.num_rows == 0:
            return 0
        ends = pc.add(lk.column("blob_offset"), lk.column("blob_size"))
        return int(pc.max(ends).as_py())

    # -- files ------------------------------------------------------------------------------
    def find(self, path: str) -> FileInfo | None:
        """The file's chunks, found through the fst trie (no scan)."""
        trie = self.trie
        try:
            row = trie.get(path.encode("utf-8"))
        except Exception as exc:
            raise FormatError(f"{TRIE} cannot be searched: {exc}", path=self.path) from None
        if row is None:
            return None
        return self._file_at(path, int(row))

    def _file_at(self, path: str, row: int) -> FileInfo:
        lk = self.lookup
        if not 0 <= row < lk.num_rows:
            raise FormatError(f"{TRIE} points {path!r} at row {row}, past the lookup",
                              path=self.path)
        cols = [lk.column(i) for i in range(8)]
        chunks = []
        r = row
        while r < lk.num_rows and cols[0][r].as_py() == path:
            vals = [c[r].as_py() for c in cols[1:]]
            if vals[0] != len(chunks):
                raise FormatError(f"{path!r}: chunk_seq {vals[0]} out of order", path=self.path)
            chunks.append(Chunk(*vals))
            r += 1
        if not chunks:
            raise FormatError(f"{TRIE} points {path!r} at a row of another file", path=self.path)
        return FileInfo(path, row, tuple(chunks))

    def _need(self, path: str) -> FileInfo:
        info = self.find(path)
        if info is None:
            raise NotFoundError(f"no file {path!r} in the archive", path=self.path)
        return info

    def read_chunk(self, path: str, chunk: Chunk, *, verify: bool | None = None) -> bytes:
        """The original bytes of one chunk, checked against its BLAKE3 unless told not."""
        if chunk.blob_offset + chunk.blob_size > self.tail_offset:
            raise FormatError(f"{path!r} chunk {chunk.chunk_seq}: blob runs into the index tail",
                              path=self.path)
        blob = self.source.read(chunk.blob_offset, chunk.blob_size, f"blob of {path!r}")
        where = f"{path!r} chunk {chunk.chunk_seq}: "
        if chunk.compressed:
            data = codec.decoder().decode(memoryview(blob), chunk.uncompressed_size, where=where)
        else:
            if chunk.blob_size != chunk.uncompressed_size:
                raise FormatError(f"{where}raw blob size differs from its size", path=self.path)
            data = blob.to_pybytes()
        if (self.verify_checksums if verify is None else verify):
            if blake3.blake3(data).digest() != chunk.checksum:
                raise ChecksumError(f"{where}BLAKE3 mismatch", path=self.path)
        return data

    def iter_chunks(self, path: str, *, verify: bool | None = None) -> Iterator[bytes]:
        info = self._need(path)
        for chunk in info.chunks:
            yield self.read_chunk(path, chunk, verify=verify)

    def read(self, path: str, *, verify: bool | None = None) -> bytes:
        """The whole file; only its own blobs are touched."""
        return b"".join(self.iter_chunks(path, verify=verify))

    def open(self, path: str) -> Any:
        """A streaming, seekable binary file object over one file."""
        from .fileobj import ArchiveFile

        return ArchiveFile(self, self._need(path))

    def select(self, *, repo: str | None = None, pkg_type: int | str | None = None,
               glob: str | None = None) -> list[str]:
        """Paths of the files that match every given filter, in path order."""
        idx = self.index(pkg_type=pkg_type, repo=repo)
        first = idx.filter(pc.equal(idx.column("chunk_seq"), 0)).column("relative_path")
        paths = sorted(first.to_pylist(), key=lambda p: p.encode("utf-8"))
        if glob is not None:
            rx = re.compile(fnmatch.translate(glob))
            paths = [p for p in paths if rx.match(p)]
        return paths

    def extract(self, dest: str | os.PathLike[str], *, repo: str | None = None,
                pkg_type: int | str | None = None, glob: str | None = None,
                paths: list[str] | None = None, progress: Any = None) -> Any:
        from .extract import extract

        return extract(self, os.fspath(dest), repo=repo, pkg_type=pkg_type, glob=glob,
                       paths=paths, progress=progress)

    def verify(self, *, progress: Any = None) -> Any:
        from .verify import verify

        return verify(self, progress=progress)

    def close(self) -> None:
        self.__dict__.pop("lookup", None)
        self.__dict__.pop("trie", None)
        self.source.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Archive {self.path!r}: {len(self.groups)} groups, sections {self.sections}>"


def open_archive(path: str | os.PathLike[str], *, verify_checksums: bool = True) -> Archive:
    """Open an archive: reads the footer and the manifest, nothing else."""
    return Archive(path, verify_checksums=verify_checksums)
