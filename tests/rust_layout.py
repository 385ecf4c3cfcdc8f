"""An independent writer of the Rust znippy 0.8 archive layouts, for tests only.

Written from the Rust sources (``Ignalina/znippy`` v0.8.0: ``znippy-compress/src/slot_packer.rs``
for the CLI path, ``stream_packer.rs`` for the stream path, ``znippy-common/src/meta_sink.rs``,
``index.rs``, ``codec.rs`` and ``common_config.rs``). It shares no code with znippy_sql: only
pyarrow, openzl and blake3. What it reproduces:

- blobs from offset 0, back to back, in the order the writer thread received them (``seed``
  shuffles that order per pass, as racing worker threads do); every chunk's BLAKE3 is over its
  original bytes; ``compressed`` is true for every chunk whose path is not skip-listed, the
  frame kept whatever its size, an empty chunk included;
- frames as ``CompressCtx`` makes them: no graph selected (``ZL_CCtx_compress`` then takes the
  serial compress selector, which picks zstd; the Python binding needs a graph, and
  ``graphs.Compress`` gives the same bytes), level 19, the format version
  ``ZL_getDefaultEncodingVersion`` returns (24 in OpenZL 0.2.0, the release the Rust 0.8 build's
  ``openzl-sys-rs`` 0.2.0 compiles), OpenZL's default frame checksums;
- the CLI path (``compress_dir``): one group ``(plugin type id, repo, "")`` (the CLI always
  registers the Maven plugin, type 1, so every file carries it), one stream with the big-file
  batch (files over the slice size, and empty files) then the small-file batch; slice size
  200 MiB ÷ workers, workers = ceil(0.9 × cores); rows in write order;
- the stream path (``compress_stream``): 8 MiB rounds, a file of at most 8 MiB whole; groups by
  (pkg_type, repo) in ``BTreeMap`` order, one batch each, rows sorted by (file, chunk);
- the tail (``ArrowIpcSink``): each sub-index stream right after the previous, the first at the
  blob end, the manifest right after the last, then ``ZNPYMIDX`` and the manifest offset as
  u64 LE; every sub-index schema carries ``build_arrow_metadata_for_config``'s keys.
"""

from __future__ import annotations

import math
import os
import random
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import blake3
import openzl.ext as zl
import pyarrow as pa

MAGIC = b"ZNPYMIDX"
SLOT_SIZE = 200 * 1024 * 1024  # slot_packer.rs SLOT_SIZE
STREAM_SLICE = 8 * 1024 * 1024  # stream_packer.rs SLICE_SIZE
LEVEL = 19  # common_config.rs compression_level
FORMAT_VERSION = 24  # ZL_MAX_FORMAT_VERSION (= the default encoding version) of OpenZL 0.2.0
MAVEN = 1  # NativeMavenPlugin::type_id

#: index.rs is_probably_compressed: these suffixes are stored raw (compressed = false)
SKIP = frozenset("""zip gz bz2 xz lz lzma 7z rar cab jar war ear zst sz lz4 tgz txz tbz apk dmg
    deb rpm arrow mpeg mpg jpeg jpg gif bmp png crate znippy zdata parquet webp webm""".split())

BASE = [
    pa.field("relative_path", pa.utf8(), nullable=False),
    pa.field("chunk_seq", pa.uint32(), nullable=False),
    pa.field("fdata_offset", pa.uint64(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("uncompressed_size", pa.uint64(), nullable=False),
    pa.field("blob_offset", pa.uint64(), nullable=False),
    pa.field("blob_size", pa.uint64(), nullable=False),
    pa.field("checksum", pa.binary(32), nullable=False),
]
MANIFEST = pa.schema([
    pa.field("pkg_type", pa.int8(), nullable=False),
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("module_name", pa.utf8(), nullable=False),
    pa.field("index_offset", pa.uint64(), nullable=False),
    pa.field("index_len", pa.uint64(), nullable=False),
    pa.field("row_count", pa.uint64(), nullable=False),
])


def workers_for(cores: int) -> int:
    """strategic_config: max_core_in_flight = ceil(physical cores × 0.90)."""
    return max(1, math.ceil(cores * 0.90))


def cli_slice_size(cores: int) -> int:
    """slot_packer: slice_size = SLOT_SIZE / num_workers."""
    return SLOT_SIZE // workers_for(cores)


def rust_metadata(cores: int, memory: int = 8 << 30) -> dict[str, str]:
    """build_arrow_metadata_for_config(&CONFIG) for a machine of ``cores`` and ``memory``."""
    workers = workers_for(cores)
    return {
        "znippy_format_version": "3",
        "max_core_in_flight": str(workers),
        "max_core_in_compress": str(cores - workers),
        "max_mem_allowed": str(memory),
        "min_free_memory_ratio": "0",
        "file_split_block_size": str(10 * 1024 * 1024),
        "max_chunks": str(min(memory // (10 * 1024 * 1024), 128)),
        "compression_level": str(LEVEL),
        "zstd_output_buffer_size": str(1024 * 1024),
    }


def skipped(path: str) -> bool:
    """Path::extension (after the last dot of the file name, not a leading one) in SKIP."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    return dot > 0 and name[dot + 1 :].lower() in SKIP


class Frames:
    """CompressCtx::new(19) + compress_into, through the Python binding."""

    def __init__(self, level: int = LEVEL, format_version: int = FORMAT_VERSION) -> None:
        compressor = zl.Compressor()
        compressor.select_starting_graph(zl.graphs.Compress()(compressor))
        self.cctx = zl.CCtx()
        self.cctx.ref_compressor(compressor)
        self.cctx.set_parameter(zl.CParam.StickyParameters, 1)
        self.cctx.set_parameter(zl.CParam.FormatVersion, format_version)
        self.cctx.set_parameter(zl.CParam.CompressionLevel, level)

    def frame(self, data: bytes) -> bytes:
        return self.cctx.compress([zl.Input(zl.Type.Serial, data)])  # type: ignore[no-any-return]


@dataclass
class Round:
    """One chunk on its way to the writer thread (a slot_packer/stream_packer round)."""

    file_index: int
    chunk_seq: int
    fdata_offset: int
    data: bytes
    skip: bool


@dataclass
class Blob:
    round: Round
    compressed: bool
    blob_offset: int
    blob_size: int
    checksum: bytes


@dataclass
class Written:
    """What a Rust writer wrote, for the tests' own checks."""

    path: Path
    blob_end: int
    sub_indexes: list[tuple[tuple[int, str, str], int, int, int]] = field(default_factory=list)
    manifest_offset: int = 0


class _Out:
    def __init__(self, path: Path) -> None:
        self.fh = open(path, "wb")
        self.cursor = 0

    def write(self, data: bytes) -> int:
        at = self.cursor
        self.fh.write(data)
        self.cursor += len(data)
        return at


def _fire(out: _Out, rounds: list[Round], frames: Frames, seed: int | None) -> list[Blob]:
    """Workers compress (or skip), the writer appends in arrival order: ``seed`` shuffles it."""
    order = list(rounds)
    if seed is not None:
        random.Random(seed).shuffle(order)
    blobs = []
    for r in order:
        checksum = blake3.blake3(r.data).digest()
        payload = r.data if r.skip else frames.frame(r.data)
        offset = out.write(payload)
        blobs.append(Blob(r, not r.skip, offset, len(payload), checksum))
    return blobs


def _batch(blobs: Sequence[Blob], paths: Sequence[str], schema: pa.Schema,
           ext: Mapping[int, dict[str, str]] | None = None, ext_type: int = MAVEN
           ) -> pa.RecordBatch:
    """build_metadata_batch: one row per blob, in the order given; module columns (when the
    schema has them) on every row of a file the plugin recognised, null elsewhere."""
    cols: list[pa.Array] = [
        pa.array([paths[b.round.file_index] for b in blobs], pa.utf8()),
        pa.array([b.round.chunk_seq for b in blobs], pa.uint32()),
        pa.array([b.round.fdata_offset for b in blobs], pa.uint64()),
        pa.array([b.compressed for b in blobs], pa.bool_()),
        pa.array([len(b.round.data) for b in blobs], pa.uint64()),
        pa.array([b.blob_offset for b in blobs], pa.uint64()),
        pa.array([b.blob_size for b in blobs], pa.uint64()),
        pa.array([b.checksum for b in blobs], pa.binary(32)),
    ]
    if len(schema) > len(BASE):
        ext = ext or {}
        cols.append(pa.array([ext_type if b.round.file_index in ext else None for b in blobs],
                             pa.int8()))
        for f in list(schema)[len(BASE) + 1 :]:
            cols.append(pa.array([ext.get(b.round.file_index, {}).get(f.name) for b in blobs],
                                 pa.utf8()))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _stream(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _finish(out: _Out, written: Written, subs: list[tuple[tuple[int, str, str], bytes, int]]
            ) -> Written:
    """ArrowIpcSink: sub-indexes back to back from the blob end, manifest, magic, offset."""
    rows = []
    for key, data, count in subs:
        at = out.write(data)
        rows.append((key, at, len(data), count))
    manifest = pa.table({
        "pkg_type": pa.array([k[0] for k, *_ in rows], pa.int8()),
        "repo": pa.array([k[1] for k, *_ in rows], pa.utf8()),
        "module_name": pa.array([k[2] for k, *_ in rows], pa.utf8()),
        "index_offset": pa.array([r[1] for r in rows], pa.uint64()),
        "index_len": pa.array([r[2] for r in rows], pa.uint64()),
        "row_count": pa.array([r[3] for r in rows], pa.uint64()),
    }, schema=MANIFEST)
    written.manifest_offset = out.write(_stream(MANIFEST, manifest.to_batches()))
    out.write(MAGIC + struct.pack("<Q", written.manifest_offset))
    out.fh.close()
    written.sub_indexes = rows
    return written


def write_cli(out_path: str | os.PathLike[str], files: Mapping[str, bytes], *, cores: int = 2,
              plugin_type_id: int = MAVEN, repo: str = "", seed: int | None = None,
              no_skip: bool = False, ext_fields: Sequence[str] = (),
              ext: Mapping[str, dict[str, str]] | None = None,
              memory: int = 8 << 30, format_version: int = FORMAT_VERSION) -> Written:
    """``znippy compress -i DIR -o OUT``: ``files`` in walk order (path → bytes).
    ``ext_fields``/``ext``: a WASM plugin's columns and the rows it extracted (by path)."""
    out_path = Path(out_path)
    out = _Out(out_path)
    frames = Frames(format_version=format_version)
    paths = list(files)
    slice_size = cli_slice_size(cores)
    big = [i for i, p in enumerate(paths) if len(files[p]) > slice_size or not files[p]]
    small = [i for i, p in enumerate(paths) if 0 < len(files[p]) <= slice_size]
    fields = list(BASE)
    if ext_fields:
        fields += [pa.field("pkg_type", pa.int8()), *(pa.field(n, pa.utf8()) for n in ext_fields)]
    schema = pa.schema(fields, metadata=rust_metadata(cores, memory))
    ext_rows = {paths.index(p): row for p, row in (ext or {}).items()}
    batches = []
    for n, indices in enumerate((big, small)):
        rounds = []
        for i in indices:
            data, skip = files[paths[i]], not no_skip and skipped(paths[i])
            step = slice_size if len(data) > slice_size else max(len(data), 1)
            for seq, start in enumerate(range(0, max(len(data), 1), step)):
                rounds.append(Round(i, seq, start, data[start : start + step], skip))
        if rounds:
            blobs = _fire(out, rounds, frames, None if seed is None else seed + n)
            batches.append(_batch(blobs, paths, schema, ext_rows, plugin_type_id))
    written = Written(out_path, out.cursor)
    rows = sum(b.num_rows for b in batches)
    return _finish(out, written, [((plugin_type_id, repo, ""), _stream(schema, batches), rows)])


@dataclass
class StreamEntry:
    """stream_packer::ArchiveEntry."""

    relative_path: str
    data: bytes
    pkg_type: int | None = None
    repo: str | None = None


def write_stream(out_path: str | os.PathLike[str], entries: Sequence[StreamEntry], *,
                 cores: int = 2, seed: int | None = None, no_skip: bool = False,
                 memory: int = 8 << 30, format_version: int = FORMAT_VERSION) -> Written:
    """``compress_stream``: entries sent in this order, then ``finish()``."""
    out_path = Path(out_path)
    out = _Out(out_path)
    frames = Frames(format_version=format_version)
    paths = [e.relative_path for e in entries]
    rounds = []
    for i, e in enumerate(entries):
        skip = not no_skip and skipped(e.relative_path)
        step = len(e.data) if len(e.data) <= STREAM_SLICE else STREAM_SLICE
        for seq, start in enumerate(range(0, max(len(e.data), 1), max(step, 1))):
            rounds.append(Round(i, seq, start, e.data[start : start + max(step, 1)], skip))
    blobs = _fire(out, rounds, frames, seed)
    blobs.sort(key=lambda b: (b.round.file_index, b.round.chunk_seq))
    schema = pa.schema(BASE, metadata=rust_metadata(cores, memory))
    groups: dict[tuple[int, bytes], list[Blob]] = {}
    for b in blobs:
        e = entries[b.round.file_index]
        key = (e.pkg_type or 0, (e.repo or "").encode())  # BTreeMap<(i8, String)> order
        groups.setdefault(key, []).append(b)
    subs = []
    for (pkg_type, repo), group in sorted(groups.items()):
        batch = _batch(group, paths, schema)
        subs.append(((pkg_type, repo.decode(), ""), _stream(schema, [batch]), batch.num_rows))
    return _finish(out, Written(out_path, out.cursor), subs)


def walk_order(root: str | os.PathLike[str]) -> dict[str, bytes]:
    """WalkDir order (directory order, not sorted): relative path → bytes of every file."""
    root = Path(root)
    files: dict[str, bytes] = {}
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False):
                    files[Path(e.path).relative_to(root).as_posix()] = Path(e.path).read_bytes()
    return files


def read_multi_index(path: str | os.PathLike[str]) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """index.rs read_znippy_index → read_multi_index with pyarrow alone: the manifest between
    its offset and the magic, every manifest row read as a stream, the first stream's schema,
    all batches concatenated column by column (arrow-select ``concat_batches``)."""
    data = Path(path).read_bytes()
    if len(data) < 16 or data[-16:-8] != MAGIC:
        raise ValueError("not a v0.7 multi-index archive")
    (manifest_offset,) = struct.unpack("<Q", data[-8:])
    if manifest_offset > len(data) - 16:
        raise ValueError("corrupt v0.7 manifest_offset")
    manifest = pa.ipc.open_stream(pa.py_buffer(data[manifest_offset : len(data) - 16])).read_all()
    schema: pa.Schema | None = None
    batches: list[pa.RecordBatch] = []
    for row in manifest.to_pylist():
        sub = data[row["index_offset"] : row["index_offset"] + row["index_len"]]
        if len(sub) != row["index_len"]:
            raise ValueError("read_exact: unexpected end of file")
        reader = pa.ipc.open_stream(pa.py_buffer(sub))
        if schema is None:
            schema = reader.schema
        batches.extend(reader)
    schema = schema if schema is not None else pa.schema(BASE)
    if len(batches) <= 1:
        return schema, batches
    columns = []
    for i, f in enumerate(schema):
        parts = [b.column(i) for b in batches]
        if any(p.type != f.type for p in parts):
            raise ValueError(f"concat sub-indexes: column {f.name} types differ")
        columns.append(pa.concat_arrays(parts))
    merged = pa.RecordBatch.from_arrays(columns, schema=schema)
    for f, col in zip(schema, merged.columns):  # RecordBatch::try_new checks nullability
        if not f.nullable and col.null_count:
            raise ValueError(f"concat sub-indexes: non-nullable {f.name} holds nulls")
    return schema, [merged]


def decompress_archive(path: str | os.PathLike[str],
                       decode: Callable[[bytes], bytes] | None = None) -> dict[str, bytes]:
    """decompress.rs decompress_archive: every row's blob read, decoded when ``compressed``,
    checked against its BLAKE3 and written at its ``fdata_offset`` of its path; ``decode``
    turns a frame into bytes (default: the installed openzl)."""
    dctx = zl.DCtx()
    if decode is None:
        def decode(frame: bytes) -> bytes:
            return dctx.decompress(frame)[0].content.as_bytes()  # type: ignore[no-any-return]
    data = Path(path).read_bytes()
    _, batches = read_multi_index(path)
    out: dict[str, bytearray] = {}
    for batch in batches:
        for row in batch.to_pylist():
            blob = data[row["blob_offset"] : row["blob_offset"] + row["blob_size"]]
            chunk = decode(blob) if row["compressed"] else blob
            if blake3.blake3(chunk).digest() != row["checksum"]:
                raise ValueError(f"[verify] MISMATCH {row['relative_path']} {row['chunk_seq']}")
            buf = out.setdefault(row["relative_path"], bytearray())
            end = row["fdata_offset"] + len(chunk)
            if len(buf) < end:
                buf.extend(bytes(end - len(buf)))
            buf[row["fdata_offset"] : end] = chunk
    return {k: bytes(v) for k, v in out.items()}


# -- releases after 0.8 -----------------------------------------------------------------------
# What is public about them (docs.rs pages of znippy-common 0.9.1 .. 0.14.0, znippy-iceberg and
# znippy-plugin-git; the GitHub repository stops at v0.8.0) is described in docs/format.md
# §10, "Archives from releases after 0.8". Where those pages name a thing but not its bytes
# (the columns of their __lookup__ and __meta__, the name and layout of a hot archive's
# journal, the list-typed columns, delta rows), the shapes below are stand-ins of that kind,
# made up here and labelled so: they test that the reader degrades clearly, not that it
# reads those releases.

#: the version key of ``build_arrow_metadata_for_config`` (0.8 writes 3); a later release may
#: write a larger one
NEWER_FORMAT_VERSION = "5"


def foreign_lookup(rows: pa.Table) -> tuple[bytes, int]:
    """A ``__lookup__`` of another shape (stand-in: the 0.9.1 ``lookup_schema``'s columns are
    not public): the path, the chunk number and a struct of the chunk's location, sorted by
    (path bytes, chunk)."""
    order = sorted(range(rows.num_rows), key=lambda i: (
        rows.column("relative_path")[i].as_py().encode(), rows.column("chunk_seq")[i].as_py()))
    t = rows.take(pa.array(order, pa.int64()))
    loc = pa.StructArray.from_arrays(
        [t.column("blob_offset").combine_chunks(), t.column("blob_size").combine_chunks(),
         t.column("compressed").combine_chunks()], names=["offset", "size", "compressed"])
    table = pa.table({"relative_path": t.column("relative_path"),
                      "chunk_seq": t.column("chunk_seq"), "loc": loc})
    return _stream(table.schema, table.to_batches()), table.num_rows


def base_lookup(rows: pa.Table) -> tuple[bytes, int]:
    """A ``__lookup__`` with exactly the base columns, sorted (path bytes, chunk)."""
    order = sorted(range(rows.num_rows), key=lambda i: (
        rows.column("relative_path")[i].as_py().encode(), rows.column("chunk_seq")[i].as_py()))
    t = rows.select([f.name for f in BASE]).take(pa.array(order, pa.int64()))
    t = pa.Table.from_arrays(t.columns, schema=pa.schema(BASE))
    return _stream(t.schema, t.to_batches()), t.num_rows


def fst_trie(rows: pa.Table) -> bytes:
    """An fst Map (ducer, the Rust ``fst`` crate's format): path → first row of the lookup
    ``base_lookup`` makes."""
    import ducer

    paths = sorted({p.encode() for p in rows.column("relative_path").to_pylist()})
    firsts, row = {}, 0
    counts: dict[bytes, int] = {}
    for p in rows.column("relative_path").to_pylist():
        counts[p.encode()] = counts.get(p.encode(), 0) + 1
    for p in paths:
        firsts[p] = row
        row += counts[p]
    return bytes(ducer.Map.build(":memory:", ((p, firsts[p]) for p in paths)))


def foreign_trie() -> bytes:
    """Bytes where a trie is expected that are not an fst of a version the ``fst`` crate
    0.4 reads (its header's first u64 is the fst version, 1..3)."""
    return struct.pack("<QQ", 9, 0) + b"not an fst of a known version" + bytes(7)


def typed_meta(files: Sequence[str], version: str = "0.10.8") -> tuple[bytes, int]:
    """A ``__meta__`` of the 0.9.13+ kind: one nullable column per ``MetaValue`` variant (Str,
    I64, F64, Bool, Bytes) plus a discriminant. The variants are public, the column names
    and the discriminant's type are not: these are stand-ins."""
    rows = [(None, "created_by", 0, f"znippy {version}", None, None, None, None)]
    rows += [(p, "size_class", 1, None, i, None, None, None) for i, p in enumerate(files)]
    rows += [(None, "ratio", 2, None, None, 0.5, None, None),
             (None, "sealed", 3, None, None, None, True, None),
             (None, "digest", 4, None, None, None, None, b"\x01\x02")]
    cols = list(zip(*rows))
    table = pa.table({
        "relative_path": pa.array(cols[0], pa.utf8()), "key": pa.array(cols[1], pa.utf8()),
        "kind": pa.array(cols[2], pa.int8()), "str": pa.array(cols[3], pa.utf8()),
        "i64": pa.array(cols[4], pa.int64()), "f64": pa.array(cols[5], pa.float64()),
        "bool": pa.array(cols[6], pa.bool_()), "bytes": pa.array(cols[7], pa.binary())})
    return _stream(table.schema, table.to_batches()), table.num_rows


def unknown_arrow_section() -> tuple[bytes, int]:
    """A reserved section this reader has never heard of, an Arrow stream."""
    table = pa.table({"generation": pa.array([1, 2], pa.uint32()),
                      "parents": pa.array([[], [1]], pa.list_(pa.uint32()))})
    return _stream(table.schema, table.to_batches()), table.num_rows


#: extra columns after the base ones (stand-ins for the list-typed columns of 0.10+ and the
#: like): name → (type, value of a row from (path, chunk_seq, blob_offset, blob_size))
EXTRA_COLUMNS: dict[str, tuple[pa.DataType, Callable[[str, int, int, int], object]]] = {
    "units": (pa.list_(pa.uint64()), lambda p, s, o, n: [o, n]),
    "origin": (pa.struct([("generation", pa.uint32()), ("tool", pa.utf8())]),
               lambda p, s, o, n: {"generation": s, "tool": "znippy"}),
    "kind": (pa.dictionary(pa.int8(), pa.utf8()),
             lambda p, s, o, n: p.rsplit(".", 1)[-1] if "." in p else "none"),
    "labels": (pa.map_(pa.utf8(), pa.utf8()), lambda p, s, o, n: [("path", p)]),
}


def write_newer(out_path: str | os.PathLike[str], entries: Sequence[StreamEntry], *,
                format_version: str = NEWER_FORMAT_VERSION, extra: Sequence[str] = (),
                sections: Mapping[str, Callable[[pa.Table], tuple[bytes, int]]] | None = None,
                cores: int = 2, seed: int | None = None) -> Written:
    """A stream-path archive as a release after 0.8 might lay it out: the 0.8 tail, with
    ``znippy_format_version`` = ``format_version``, the ``extra`` columns of
    ``EXTRA_COLUMNS`` after the base ones (and ``pkg_type``), and after the data sub-indexes
    the reserved ``sections`` (name → builder from all data rows: (bytes, row_count); a
    raw section's row_count is 0)."""
    out_path = Path(out_path)
    out = _Out(out_path)
    frames = Frames()
    paths = [e.relative_path for e in entries]
    rounds = []
    for i, e in enumerate(entries):
        step = max(len(e.data) if len(e.data) <= STREAM_SLICE else STREAM_SLICE, 1)
        for seq, start in enumerate(range(0, max(len(e.data), 1), step)):
            rounds.append(Round(i, seq, start, e.data[start : start + step], skipped(paths[i])))
    blobs = _fire(out, rounds, frames, seed)
    blobs.sort(key=lambda b: (b.round.file_index, b.round.chunk_seq))
    meta = {**rust_metadata(cores), "znippy_format_version": format_version}
    fields = list(BASE)
    if extra:
        fields.append(pa.field("pkg_type", pa.int8()))
        fields += [pa.field(n, EXTRA_COLUMNS[n][0]) for n in extra]
    schema = pa.schema(fields, metadata=meta)
    groups: dict[tuple[int, bytes], list[Blob]] = {}
    for b in blobs:
        e = entries[b.round.file_index]
        groups.setdefault((e.pkg_type or 0, (e.repo or "").encode()), []).append(b)
    subs: list[tuple[tuple[int, str, str], bytes, int]] = []
    tables = []
    for (pkg_type, repo), group in sorted(groups.items()):
        base = _batch(group, paths, pa.schema(BASE))
        cols = list(base.columns)
        if extra:
            cols.append(pa.array([pkg_type] * len(group), pa.int8()))
            for n in extra:
                typ, value = EXTRA_COLUMNS[n]
                vals = [value(paths[b.round.file_index], b.round.chunk_seq, b.blob_offset,
                              b.blob_size) for b in group]
                if pa.types.is_dictionary(typ):
                    cols.append(pa.array(vals, pa.utf8()).dictionary_encode().cast(typ))
                else:
                    cols.append(pa.array(vals, typ))
        batch = pa.RecordBatch.from_arrays(cols, schema=schema)
        tables.append(pa.Table.from_batches([base]))
        subs.append(((pkg_type, repo.decode(), ""), _stream(schema, [batch]), batch.num_rows))
    rows = pa.concat_tables(tables) if tables else pa.schema(BASE).empty_table()
    for name, build in (sections or {}).items():
        data, count = build(rows)
        subs.append(((-1, "", name), data, count))
    return _finish(out, Written(out_path, out.cursor), subs)


#: where the hot fixture keeps its journal (a stand-in: the public pages say "index rows in a
#: journal beside it" and "journal segments", not the name)
JOURNAL_SUFFIX = ".journal"


def write_hot(out_path: str | os.PathLike[str], entries: Sequence[StreamEntry]) -> Path:
    """An archive in its hot phase (``HotArchive``, 0.9.14+): blobs appended in place from
    offset 0 and no tail, no footer; the index rows in a journal beside it, an Arrow IPC
    stream whose schema message opens the segment (``encode_journal_schema``) and whose
    batches follow, without an end-of-stream marker while the archive is hot. Returns the
    journal's path."""
    out_path = Path(out_path)
    out = _Out(out_path)
    paths = [e.relative_path for e in entries]
    rounds = [Round(i, 0, 0, e.data, skipped(e.relative_path)) for i, e in enumerate(entries)]
    blobs = _fire(out, rounds, Frames(), None)
    out.fh.close()
    batch = _batch(blobs, paths, pa.schema(BASE))
    data = _stream(batch.schema, [batch])[: -8]  # the segment is open: no end-of-stream yet
    journal = out_path.with_name(out_path.name + JOURNAL_SUFFIX)
    journal.write_bytes(data)
    return journal
