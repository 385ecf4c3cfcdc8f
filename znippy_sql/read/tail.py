"""The tail of an archive: footer → manifest → checked byte ranges → sub-indexes and sections.

Opening reads the footer and the manifest only (:class:`Tail`). Every range comes from the
manifest and is checked against the file before it is sliced out of the map; the first time a
range is read its bytes are checked against the BLAKE3 the manifest records for them
(``verify_sections``; docs/format.md, "Section digests"). The data sub-indexes are decoded
zero-copy and kept; ``__lookup__`` is read (or, in an archive without one, built in memory by
:mod:`.memlookup`) and checked in full by :meth:`Tail.read_lookup`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from ..errors import FormatError, NotFoundError
from ..format import b3 as blake3
from ..format import build
from ..format.footer import FOOTER_LEN, decode_footer
from ..format.ipc import read_table
from ..format.manifest import ManifestRow, decode_manifest
from ..format.rangeio import MappedSource, RangeSource
from ..format.rollback import recover
from ..format.schema import (ARROW_SECTIONS, BASE_FIELDS, LOOKUP, RAW_SECTIONS,
                             RESERVED_PKG_TYPE, TRIE, GroupKey)
from ..format.validate import (lookup_problem, lookup_schema_problem, portable, rows_problem,
                               subindex_schema_problem)
from ..interop import hot_source, rust_rows
from .nofooter import no_footer


def section_digest(buf: pa.Buffer) -> bytes:
    """BLAKE3 of a section's bytes (every core for a big one)."""
    threads = blake3.blake3.AUTO if buf.size > 8 << 20 else 1
    return blake3.blake3(memoryview(buf), max_threads=threads).digest()


def section_key(name: str) -> GroupKey:
    """The manifest key of the reserved section ``name``."""
    return GroupKey(RESERVED_PKG_TYPE, "", name)


class Tail:
    """The manifest of one archive and the checked ranges it points at."""

    def __init__(self, source: RangeSource, path: str, *, verify_sections: bool = True
                 ) -> None:
        self.source = source
        self.path = path
        self.verify_sections = verify_sections
        #: ranges whose BLAKE3 matched the manifest (checked once)
        self.sound: set[GroupKey] = set()
        self.tables: dict[GroupKey, pa.Table] = {}  # the data sub-indexes read so far
        #: facts derived from the tail that modules over it compute once (:mod:`.foreign`)
        self.memo: dict[str, Any] = {}
        # bytes [-16..-8]: magic; [-8..]: manifest offset (u64 LE)
        manifest_offset = None if source.size < FOOTER_LEN else decode_footer(
            source.read(source.size - FOOTER_LEN, FOOTER_LEN, "footer").to_pybytes())
        if manifest_offset is None:  # unsealed, truncated, or not an archive: .nofooter
            hot = hot_source(source, path)  # a Rust hot archive: its journal's rows
            if hot is None:
                raise no_footer(source, path)
            self.source = source = hot
            manifest_offset = hot.manifest_offset
        self.manifest_offset: int = manifest_offset
        self.manifest, self.manifest_rows = decode_manifest(source, manifest_offset,
                                                            adapt=rust_rows)
        self.by_key: dict[GroupKey, ManifestRow] = {r.key: r for r in self.manifest_rows}
        #: where the index tail starts: no blob may run into it
        self.tail_offset: int = min((r.index_offset for r in self.manifest_rows),
                                    default=manifest_offset)

    @property
    def groups(self) -> list[GroupKey]:
        return sorted(r.key for r in self.manifest_rows if r.key.pkg_type != RESERVED_PKG_TYPE)

    @property
    def sections(self) -> list[str]:
        return [r.key.module_name for r in self.manifest_rows
                if r.key.pkg_type == RESERVED_PKG_TYPE]

    def has_section(self, name: str) -> bool:
        return section_key(name) in self.by_key

    def manifest_row(self, key: GroupKey) -> ManifestRow:
        try:
            return self.by_key[key]
        except KeyError:
            raise NotFoundError(f"no sub-index {key}", path=self.path) from None

    def digest_pending(self, key: GroupKey) -> bool:
        """Whether the row ``key`` records a BLAKE3 not checked yet."""
        row = self.by_key.get(key)
        return row is not None and row.blake3 is not None and key not in self.sound

    def range_bytes(self, key: GroupKey, what: str) -> pa.Buffer:
        """The bytes of a manifest row; the first time, checked against the BLAKE3 the
        manifest records for them (unless opened with ``verify_sections=False``)."""
        row = self.manifest_row(key)
        buf = self.source.read(row.index_offset, row.index_len, what)
        if row.blake3 is not None and self.verify_sections and key not in self.sound:
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
        self.sound.add(key)
        return None

    def group_table(self, key: GroupKey) -> pa.Table:
        """One data sub-index, zero-copy from the memory map, checked in full once."""
        table = self.tables.get(key)
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
        self.tables[key] = table
        return table

    def section(self, name: str) -> pa.Table | memoryview:
        """A reserved section: a ``pa.Table`` for Arrow sections, a ``memoryview`` for raw ones."""
        buf = self.range_bytes(section_key(name), name)
        raw = memoryview(buf).cast("B")
        if name in RAW_SECTIONS:
            return raw
        if name not in ARROW_SECTIONS and raw[:4] != b"\xff\xff\xff\xff":
            return raw  # an unknown reserved section that is not an Arrow stream
        return read_table(buf, name, self.path)

    def fetch_paths(self) -> None:
        """A remote source fetches the lookup and the trie together (one request)."""
        if getattr(self.source, "fetches", False):
            rows = [self.by_key[k] for k in map(section_key, (LOOKUP, TRIE)) if k in self.by_key]
            self.source.prefetch([r.index_offset for r in rows], [r.index_len for r in rows],
                                 keep=True)

    def read_lookup(self, *, in_memory: bool) -> pa.Table:
        """``__lookup__``, or (``in_memory``) the same table built from the data sub-indexes;
        checked in full (values, order, each file's chunks) either way."""
        if in_memory:
            from .memlookup import memory_lookup

            table = memory_lookup(self.groups, self.group_table)
        else:
            self.fetch_paths()
            key = section_key(LOOKUP)
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

    def close(self) -> None:
        self.tables.clear()
        self.source.close()


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


def byte_source(path: str, storage_options: Mapping[str, Any] | None,
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
