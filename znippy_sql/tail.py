"""The tail: data sub-indexes, ``__lookup__``, ``__trie__``, reserved sections, manifest, footer.

Every writer (one-shot, append, seal) ends in :func:`write_tail`. Given the same groups (rows in
canonical order), sections and blob end, it writes the same bytes: that is the whole argument
for byte identity between the writers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Union

import ducer
import numpy as np
import pyarrow as pa

from .errors import FormatError
from .footer import align_up, encode_footer
from .ipc import stream_bytes
from .kernels import SortOptions, call_function, one_array, utf8_parts
from .manifest import ManifestRow, encode_manifest
from .schema import (
    ARROW_SECTIONS,
    BASE_NAMES,
    LOOKUP,
    LOOKUP_SCHEMA,
    RAW_SECTIONS,
    RESERVED_PKG_TYPE,
    TRIE,
    GroupKey,
    is_reserved,
    section_rank,
)

Payload = Union[pa.Table, bytes]


@dataclass(frozen=True)
class ReservedSection:
    """A reserved section: ``pa.Table`` → Arrow IPC stream; ``bytes`` → raw bytes."""

    name: str
    payload: Payload


SectionBuilder = Callable[[pa.Table], Iterable[ReservedSection]]


@dataclass(frozen=True)
class TailInfo:
    tail_offset: int
    manifest_offset: int
    file_size: int
    manifest: list[ManifestRow]
    lookup: pa.Table


def build_lookup(groups: Mapping[GroupKey, pa.Table]) -> pa.Table:
    """All data rows, base columns only, sorted by (relative_path bytes, chunk_seq)."""
    parts = [pa.Table.from_arrays([groups[k].column(n) for n in BASE_NAMES], schema=LOOKUP_SCHEMA)
             for k in sorted(groups)]
    if not parts:
        return LOOKUP_SCHEMA.empty_table()
    table = pa.concat_tables(parts).combine_chunks()
    # Arrow orders utf8 by bytes, which is what the fst trie requires.
    order = call_function("sort_indices", [table], SortOptions(
        sort_keys=[("relative_path", "ascending"), ("chunk_seq", "ascending")]))
    return call_function("take", [table, order]).combine_chunks()  # type: ignore[no-any-return]


def build_trie(lookup: pa.Table) -> bytes:
    """fst Map: relative_path → lookup row of its chunk_seq 0. The keys are sliced from the
    lookup's UTF-8 buffer as the builder takes them (no list of a million keys first)."""
    offsets, view = utf8_parts(one_array(lookup.column("relative_path")))
    starts, data = offsets.tolist(), view.tobytes()  # bytes slices: the keys ducer takes
    rows = np.flatnonzero(lookup.column("chunk_seq").to_numpy() == 0).tolist()
    return bytes(ducer.Map.build(":memory:", ((data[starts[r]:starts[r + 1]], r)
                                              for r in rows)))


def check_sections(sections: Sequence[ReservedSection]) -> None:
    """Refuse a section whose name is not reserved (FORMAT §4), is written by the tail itself
    (``__lookup__``, ``__trie__``), or is given twice."""
    seen: set[str] = set()
    for s in sections:
        if not isinstance(s, ReservedSection):
            raise FormatError(f"reserved sections must be ReservedSection objects, not {s!r}")
        if not is_reserved(s.name) or s.name in (LOOKUP, TRIE):
            raise FormatError(f"section name {s.name!r} is not a reserved name this writer takes "
                              "(it must start and end with '__')")
        if s.name in seen:
            raise FormatError(f"section {s.name!r} given twice")
        if not isinstance(s.payload, (pa.Table, bytes, bytearray, memoryview)):
            raise FormatError(f"section {s.name!r}: payload must be a pyarrow Table or bytes")
        if s.name in ARROW_SECTIONS and not isinstance(s.payload, pa.Table):
            raise FormatError(f"section {s.name!r} is an Arrow section: give a pyarrow Table")
        seen.add(s.name)


def write_tail(
    fh: BinaryIO,
    blob_end: int,
    groups: Mapping[GroupKey, pa.Table],
    *,
    sections: Sequence[ReservedSection] = (),
    section_builders: Sequence[SectionBuilder] = (),
    schema_metadata: Mapping[str, str] | None = None,
    fsync: bool = True,
) -> TailInfo:
    """Write the whole tail after ``blob_end`` and cut the file there; fsync unless told not."""
    for key in groups:
        if is_reserved(key.module_name) or key.pkg_type == RESERVED_PKG_TYPE:
            raise FormatError(f"data group {key} uses a reserved name or pkg_type")
    fd = fh.fileno()
    out = _TailOut(fd, blob_end)
    for key in sorted(groups):
        table = groups[key]
        if schema_metadata:
            table = table.replace_schema_metadata(dict(schema_metadata))
        out.put(key, stream_bytes(table), table.num_rows)
    lookup = build_lookup(groups)
    out.put(GroupKey(RESERVED_PKG_TYPE, "", LOOKUP), stream_bytes(lookup), lookup.num_rows)
    out.put(GroupKey(RESERVED_PKG_TYPE, "", TRIE), build_trie(lookup), 0)

    extra = list(sections)
    for builder in section_builders:
        extra.extend(builder(lookup))
    check_sections(extra)
    for s in sorted(extra, key=lambda s: section_rank(s.name)):
        key = GroupKey(RESERVED_PKG_TYPE, "", s.name)
        if isinstance(s.payload, pa.Table):  # a raw section may hold a stream (row_count 0)
            out.put(key, stream_bytes(s.payload),
                    0 if s.name in RAW_SECTIONS else s.payload.num_rows)
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
        while view:
            n = os.pwrite(self.fd, view, self.cursor)
            self.cursor += n
            view = view[n:]

    def pad(self) -> int:
        aligned = align_up(self.cursor)
        if aligned > self.cursor:
            self.write(bytes(aligned - self.cursor))
        return aligned

    def put(self, key: GroupKey, data: bytes, row_count: int) -> None:
        start = self.pad()
        self.write(data)
        self.rows.append(ManifestRow(key, start, len(data), row_count))
