"""The tail: data sub-indexes, ``__lookup__``, ``__trie__``, reserved sections, manifest, footer.

Every Python writer (one-shot, append, the store's seal) ends in :func:`write_tail`. Given the
same groups (rows in canonical order), sections and blob end, it writes the same bytes: that is
the whole argument for byte identity between those writers. The git import and push seal end
in the core's tail instead (``native/src/git/seal.rs``, git/seal.py), which writes the same
tables in its own IPC bytes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from ..format import b3 as blake3
import pyarrow as pa

from ..errors import FormatError
from ..format.files import file_starts
from ..format.fsio import write_all
from ..format.footer import align_up, encode_footer
from ..format.ipc import LOOKUP_BATCH_ROWS, stream_bytes
from ..format.kernels import one_array, utf8_parts
from ..format.lookup import build_lookup, has_packs, unify_inner
from ..format.manifest import ManifestRow, encode_manifest
from ..format.schema import (LOOKUP, META, RAW_SECTIONS, RESERVED_PKG_TYPE, TRIE, GroupKey,
                             is_reserved, section_rank)
from ..format import trie
from ..format.sections import ReservedSection, SectionBuilder, check_sections
from .compat import COMPAT_KEY, Compat, one_schema
from .rust10 import (FORMAT_METADATA, RUST_INDEXED, rust_fsmeta_section, rust_index_sections,
                     rust_meta_section, rust_plugin_groups)
from ..interop.layouts import FSMETA, RUST_RESERVED_PKG_TYPE, SIGN_ARCHIVE, SIGN_ARTIFACTS
from ..format.schema import SIGN_ARCHIVE as OUR_SIGN_ARCHIVE
from ..format.schema import SIGN_ARTIFACTS as OUR_SIGN_ARTIFACTS

#: the sections a rust-0.9 or rust-0.10 archive spells the Rust way (write/rust10.py)
RUST_NAMES = {OUR_SIGN_ARTIFACTS: SIGN_ARTIFACTS, OUR_SIGN_ARCHIVE: SIGN_ARCHIVE}



@dataclass(frozen=True)
class TailInfo:
    tail_offset: int
    manifest_offset: int
    file_size: int
    manifest: list[ManifestRow]
    lookup: pa.Table


def build_trie(lookup: pa.Table) -> bytes:
    """fst Map: relative_path → lookup row of its chunk_seq 0, built by the core from the
    lookup's UTF-8 buffer and offsets (no Python object per key)."""
    offsets, view = utf8_parts(one_array(lookup.column("relative_path")))
    rows = file_starts(lookup.column("chunk_seq")).astype("<u8")
    return trie.build(view.tobytes(), offsets.astype("<i4").tobytes(), rows.tobytes())


def write_tail(
    fh: BinaryIO,
    blob_end: int,
    groups: Mapping[GroupKey, pa.Table],
    *,
    sections: Sequence[ReservedSection] = (),
    section_builders: Sequence[SectionBuilder] = (),
    schema_metadata: Mapping[str, str] | None = None,
    fsync: bool = True,
    compat: Compat | None = None,
    index_compression: bool = False,
) -> TailInfo:
    """Write the whole tail after ``blob_end`` and cut the file there; fsync unless told not.
    ``compat="rust-0.8"``: data sub-indexes of one schema and the manifest only
    (:mod:`.compat`). The manifest records the BLAKE3 of every sub-index and section it
    lists (``manifest.SECTION_BLAKE3``). ``index_compression``: the Arrow streams but the
    manifest (and raw sections) ZSTD-compressed where it pays, the lookup in batches of
    ``LOOKUP_BATCH_ROWS`` (docs/format.md, "Compressed index streams")."""
    for key in groups:
        if is_reserved(key.module_name) or key.pkg_type == RESERVED_PKG_TYPE:
            raise FormatError(f"data group {key} uses a reserved name or pkg_type")
    groups = unify_inner(groups)
    if compat is not None and any(has_packs(t) for t in groups.values()):
        raise FormatError(f"compat {compat!r}: the Rust 0.8 reader cannot read packed blobs")
    if compat in RUST_INDEXED:  # module groups as the Rust plugins write them (write/rust10.py)
        groups = rust_plugin_groups(groups, compat)
    if compat is not None:  # its sections were refused by the writer (``check_compat``)
        groups = one_schema(groups)
        schema_metadata = {**(schema_metadata or {}), COMPAT_KEY: compat,
                           **(FORMAT_METADATA if compat in RUST_INDEXED else {})}
    fd = fh.fileno()
    out = _TailOut(fd, blob_end)
    for key in sorted(groups):
        table = groups[key]
        if schema_metadata:
            table = table.replace_schema_metadata(dict(schema_metadata))
        out.put(key, stream_bytes(table, compress=index_compression), table.num_rows)
    lookup = build_lookup(groups)
    if compat is None:
        out.put(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP),
                stream_bytes(lookup, compress=index_compression,
                             batch_rows=LOOKUP_BATCH_ROWS if index_compression else None),
                lookup.num_rows)
        out.put(GroupKey(RESERVED_PKG_TYPE, "", TRIE), build_trie(lookup), 0)
    elif compat in RUST_INDEXED:  # fsmeta, the Rust lookup, trie, meta (write/rust10.py;
        # rust-0.9: no fsmeta or meta, refused by ``check_compat`` and ``WriteOptions``)
        for s in sections:  # the Rust compress pushes it right after the data sub-index
            if s.name == FSMETA and isinstance(s.payload, pa.Table):
                out.put(*rust_fsmeta_section(s.payload))
        for key, data, count in rust_index_sections(lookup, build_trie(lookup)):
            out.put(key, data, count)
        for s in sections:
            if s.name == META and isinstance(s.payload, pa.Table):
                out.put(*rust_meta_section(s.payload))
        sections = [s for s in sections if s.name not in (META, FSMETA)]

    extra = list(sections)
    for builder in section_builders:
        extra.extend(builder(lookup))
    check_sections(extra)
    for s in sorted(extra, key=lambda s: section_rank(s.name)):
        key = GroupKey(RESERVED_PKG_TYPE, "", s.name)
        if compat in RUST_INDEXED:  # the signatures under the Rust names (made over its digests)
            key = GroupKey(RUST_RESERVED_PKG_TYPE, "", RUST_NAMES.get(s.name, s.name))
        if isinstance(s.payload, pa.Table):  # a raw section may hold a stream (row_count 0)
            raw = s.name in RAW_SECTIONS
            out.put(key, stream_bytes(s.payload, compress=index_compression and not raw),
                    0 if raw else s.payload.num_rows)
        else:
            out.put(key, bytes(s.payload), 0)

    manifest_offset = out.pad()
    out.write(encode_manifest(out.rows))
    out.write(encode_footer(manifest_offset))
    os.ftruncate(fd, out.cursor)
    if fsync:
        os.fsync(fd)
    return TailInfo(align_up(blob_end), manifest_offset, out.cursor, out.rows, lookup)


class _TailOut:
    """Positioned writes from the blob end on, with zero padding to 64-byte boundaries."""

    def __init__(self, fd: int, start: int) -> None:
        self.fd = fd
        self.cursor = start
        self.rows: list[ManifestRow] = []

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        write_all(self.fd, view, self.cursor)
        self.cursor += view.nbytes

    def pad(self) -> int:
        aligned = align_up(self.cursor)
        if aligned > self.cursor:
            self.write(bytes(aligned - self.cursor))
        return aligned

    def put(self, key: GroupKey, data: bytes, row_count: int) -> None:
        start = self.pad()
        self.write(data)
        digest = blake3.blake3(data, max_threads=blake3.blake3.AUTO if len(data) > _MT else 1)
        self.rows.append(ManifestRow(key, start, len(data), row_count, digest.digest()))


#: sections larger than this are hashed with every core (the manifest records their BLAKE3)
_MT = 8 << 20
