"""Delta chunks of a Rust 0.9.14+ archive (docs/interop.md, "Delta payloads").

``supersede_as_delta`` stores an entry as a delta against another (``UnitPayload::Delta``:
a base path, a delta, the BLAKE3 of the result). The chunk's index row is an ordinary one —
``blob_offset``/``blob_size`` frame the stored delta (an OpenZL frame when ``compressed``, else
the raw delta), ``uncompressed_size`` is the size of the *result* and ``checksum`` its BLAKE3 —
and the reserved section ``__znippy_delta__`` (an Arrow IPC stream of ``relative_path: utf8,
chunk_seq: u32, base_path: utf8``) names each such chunk and its base entry. The delta is
git's delta encoding over the base entry's whole bytes (:func:`apply_delta`); a base may be a
delta itself (the Rust reader follows at most 64 links).

Read here: the archive laid anew (:mod:`.vsource`) with each delta chunk's result in a range
of its own after the real bytes (made when first read, its BLAKE3 always checked) and a tail
whose sub-index rows point there as raw chunks, so every read path reads the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChecksumError, CodecError, FormatError
from ..format import b3 as blake3
from ..format import codec
from ..format.footer import align_up
from ..format.ipc import read_table, stream_bytes
from ..format.schema import LOOKUP, RESERVED_PKG_TYPE, TRIE, GroupKey
from ..format.validate import MAX_CHUNK_BYTES, subindex_schema_problem
from .layouts import DELTA, group_of
from .tail import make_tail
from .vsource import Piece, VirtualSource

#: an open archive (``read.core.ArchiveCore``), not imported: the reader calls into this
#: package, so it cannot be imported back (tests/test_layers.py)
Archive = Any

DELTA_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                          pa.field("chunk_seq", pa.uint32(), nullable=False),
                          pa.field("base_path", pa.utf8(), nullable=False)])
#: links of a delta chain the Rust reader follows (``MAX_RECONSTRUCT_DEPTH``)
MAX_DEPTH = 64


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise FormatError("delta header truncated")
        byte = data[at]
        at += 1
        if shift >= 64:
            raise FormatError("delta size varint overflows 64 bits")
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def apply_delta(base: bytes | memoryview, delta: bytes) -> bytes:
    """git's delta encoding applied to ``base``: the base size and the result size as
    LEB128 varints, then instructions — a byte with the high bit set copies from the base
    (bits 0-3 say which of 4 little-endian offset bytes follow, bits 4-6 which of 3 size
    bytes; size 0 means 0x10000), a byte 1..127 inserts that many literal bytes, 0 is
    invalid. Every range is checked; a bad delta is a :class:`FormatError`."""
    base_size, at = _varint(delta, 0)
    if base_size != len(base):
        raise FormatError(f"delta expects a base of {base_size} bytes, the base has {len(base)}")
    size, at = _varint(delta, at)
    if size > MAX_CHUNK_BYTES:
        raise FormatError(f"delta declares {size} bytes, over the chunk limit")
    out = bytearray()
    n = len(delta)
    while at < n:
        op = delta[at]
        at += 1
        if op & 0x80:
            off = length = 0
            for i in range(4):
                if op & (1 << i):
                    if at >= n:
                        raise FormatError("delta copy offset truncated")
                    off |= delta[at] << (8 * i)
                    at += 1
            for i in range(3):
                if op & (0x10 << i):
                    if at >= n:
                        raise FormatError("delta copy size truncated")
                    length |= delta[at] << (8 * i)
                    at += 1
            length = length or 0x10000
            if off + length > len(base):
                raise FormatError(f"delta copies [{off}, {off + length}) from a base of "
                                  f"{len(base)} bytes")
            out += base[off : off + length]
        elif op:
            if at + op > n:
                raise FormatError(f"delta insert of {op} bytes runs past the stream")
            out += delta[at : at + op]
            at += op
        else:
            raise FormatError("delta contains a 0x00 instruction")
        if len(out) > size:
            raise FormatError(f"delta produced more than the declared {size} bytes")
    if len(out) != size:
        raise FormatError(f"delta produced {len(out)} bytes, declared {size}")
    return bytes(out)


def delta_map(archive: "Archive") -> dict[tuple[str, int], str]:
    """``(relative_path, chunk_seq) → base_path`` of the archive's ``__znippy_delta__``."""
    key = GroupKey(RESERVED_PKG_TYPE, "", DELTA)
    buf = archive.range_bytes(key, DELTA)
    table = read_table(buf, DELTA, archive.path)
    if [(f.name, f.type) for f in table.schema] != [(f.name, f.type) for f in DELTA_SCHEMA]:
        raise FormatError(f"{DELTA} has columns {table.schema.names}, not relative_path, "
                          "chunk_seq, base_path", path=archive.path)
    cols = table.to_pydict()
    return {(p, int(s)): b for p, s, b in zip(cols["relative_path"], cols["chunk_seq"],
                                              cols["base_path"])}


def _stored_rows(archive: "Archive", key: GroupKey) -> pa.Table:
    """A data sub-index as stored: a raw delta chunk's ``blob_size`` is its delta's, not its
    result's, so the row checks run on the rows laid anew (when the reader reads them)."""
    what = f"sub-index {key.pkg_type}/{key.repo!r}/{key.module_name!r}"
    table = read_table(archive.range_bytes(key, what), what, archive.path,
                       check_schema=subindex_schema_problem)
    if table.num_rows != archive.manifest_row(key).row_count:
        raise FormatError(f"{what} has {table.num_rows} rows, the manifest says "
                          f"{archive.manifest_row(key).row_count}", path=archive.path)
    return table


class _Maker:
    """Makes one delta chunk's result: the stored delta decoded, applied to the base
    entry's bytes read through the archive itself, checked against the chunk's BLAKE3."""

    depth = 0  # links being resolved now, over every maker of the process (a chain)

    def __init__(self, archive: "Archive", path: str, base: str, row: dict[str, Any]
                 ) -> None:
        self.archive, self.path, self.base, self.row = archive, path, base, row

    def __call__(self) -> bytes:
        row, path = self.row, self.archive.path
        where = f"{self.path!r} chunk {row['chunk_seq']} (a delta against {self.base!r})"
        if _Maker.depth >= MAX_DEPTH:
            raise FormatError(f"{where}: a delta chain deeper than {MAX_DEPTH} links (a cycle?)",
                              path=path)
        stored = self.archive.source.read(int(row["blob_offset"]), int(row["blob_size"]),
                                          "blob")
        delta: bytes = stored.to_pybytes()
        if row["compressed"]:
            try:
                n = codec.content_size(delta, where=where + ": ")
                if n > MAX_CHUNK_BYTES:
                    raise FormatError(f"{where}: the delta frame declares {n} bytes", path=path)
                delta = bytes(codec.decoder().decode_view(delta, n))
            except CodecError as exc:
                raise CodecError(exc.problem, path=path) from None
        _Maker.depth += 1
        try:
            base = self.archive.read(self.base, verify=True)
        finally:
            _Maker.depth -= 1
        try:
            out = apply_delta(base, delta)
        except FormatError as exc:
            raise FormatError(f"{where}: {exc.problem}", path=path) from None
        if len(out) != row["uncompressed_size"] or blake3.blake3(out).digest() != row["checksum"]:
            raise ChecksumError(f"{where}: the result does not match its BLAKE3", path=path)
        return out


def _first_wins(tables: list[pa.Table]) -> list[pa.Table]:
    """A group's sub-indexes with each path's rows from the first that holds it: ``znippy
    append`` writes the appended rows first, and before 0.9.13 (``znippy-cli`` 0.9.6) it
    carries the replaced file's old rows too, so a path is in two of them (docs/interop.md,
    "Layouts"); the appended rows win, as the real ``decompress`` leaves the files."""
    out: list[pa.Table] = []
    seen: pa.Array = pa.array([], pa.utf8())
    for table in tables:
        paths = table.column("relative_path")
        if len(seen):
            table = table.filter(pc.invert(pc.is_in(paths, value_set=seen)))
        out.append(table)
        seen = pa.concat_arrays([seen, paths.unique().cast(pa.utf8())])
    return out


def delta_source(archive: "Archive") -> VirtualSource | None:
    """The archive laid anew with its delta chunks' results and each group's repeated
    sub-indexes (``znippy append``'s) as one (None: it has neither, or was laid anew
    already)."""
    repeated = any(group_of(k) != k for k in archive.groups)
    if isinstance(archive.source, VirtualSource) or not (archive.has_section(DELTA)
                                                         or repeated):
        return None
    deltas = delta_map(archive) if archive.has_section(DELTA) else {}
    start = align_up(archive.tail_offset)
    pieces = [Piece(0, archive.tail_offset, file_offset=0)]
    if start > archive.tail_offset:
        pieces.append(Piece(archive.tail_offset, start - archive.tail_offset,
                            data=pa.py_buffer(b"\0" * (start - archive.tail_offset))))
    at = start
    streams: list[tuple[GroupKey, bytes, int]] = []
    found = set()
    merged: dict[GroupKey, list[pa.Table]] = {}
    for key in archive.groups:
        table = _stored_rows(archive, key)
        paths = table.column("relative_path").to_pylist()
        seqs = table.column("chunk_seq").to_pylist()
        hits = [i for i, (p, s) in enumerate(zip(paths, seqs)) if (p, s) in deltas]
        if hits:
            compressed = np.array(table.column("compressed").to_pylist(), dtype=bool)
            offsets = table.column("blob_offset").to_numpy().copy()
            sizes = table.column("blob_size").to_numpy().copy()
            usizes = table.column("uncompressed_size").to_numpy()
            for i in hits:
                row = {name: table.column(name)[i].as_py() for name in
                       ("chunk_seq", "blob_offset", "blob_size", "compressed",
                        "uncompressed_size", "checksum")}
                found.add((paths[i], seqs[i]))
                size = int(usizes[i])
                pieces.append(Piece(at, size, make=_Maker(archive, paths[i],
                                                          deltas[(paths[i], seqs[i])], row)))
                compressed[i], offsets[i], sizes[i] = False, at, size
                at += size
            for name, values in (("compressed", pa.array(compressed)),
                                 ("blob_offset", pa.array(offsets, pa.uint64())),
                                 ("blob_size", pa.array(sizes, pa.uint64()))):
                col = table.schema.get_field_index(name)
                table = table.set_column(col, table.schema.field(col), values)
        merged.setdefault(group_of(key), []).append(table)
    for key, tables in merged.items():  # a group's repeated sub-indexes as one
        try:
            table = pa.concat_tables(_first_wins(tables), promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise FormatError(f"the sub-indexes of group {key} disagree: {exc}",
                              path=archive.path) from None
        streams.append((key, stream_bytes(table), table.num_rows))
    missing = sorted(set(deltas) - found)
    if missing:
        raise FormatError(f"{DELTA} names chunk {missing[0][1]} of {missing[0][0]!r}, which "
                          "the index has not", path=archive.path)
    written = dict(zip((r.key for r in archive.manifest_rows),  # the names as written
                       zip(archive.manifest.column("pkg_type").to_pylist(),
                           archive.manifest.column("module_name").to_pylist())))
    for name in archive.sections:
        if name in (LOOKUP, TRIE):
            continue  # they point at the stored deltas: the lookup is built anew
        key = GroupKey(RESERVED_PKG_TYPE, "", name)
        count = archive.manifest_row(key).row_count
        pkg_type, as_written = written[key]
        streams.append((GroupKey(pkg_type, "", as_written),
                        archive.range_bytes(key, name).to_pybytes(), count))
    tail_start = align_up(at)
    if tail_start > at:
        pieces.append(Piece(at, tail_start - at, data=pa.py_buffer(b"\0" * (tail_start - at))))
    tail = make_tail(tail_start, streams)
    pieces.append(Piece(tail_start, len(tail), data=pa.py_buffer(tail)))
    return VirtualSource(archive.source, [p for p in pieces if p.length],
                         "delta" if deltas else "appended")
