"""An independent writer of the Rust znippy 0.9.18 / 0.10.6 layouts, for tests only.

Written from the published sources (``znippy-common`` 0.10.6: ``index.rs``, ``meta_sink.rs``,
``meta_index.rs``, ``fsmeta.rs``, ``sign.rs``, ``archive.rs``, ``meta_sink_append.rs``,
``hot.rs``; docs/interop.md), sharing no code with znippy_sql: pyarrow, openzl, blake3, ducer
(the fst) and cryptography only. It writes what the real tool writes where the real binaries
could not be made to (a multi-chunk file needs over 100 MiB through ``znippy compress`` on two
cores; delta payloads and hot archives have no CLI command):

- blobs from offset 0, each chunk its own blob: an OpenZL frame (format version 25, the
  given level) when it is smaller than the chunk, else the raw bytes;
- one data sub-index ``(pkg_type, "", "")`` with the base columns (then ``pkg_type`` and
  plugin columns, a ``List<Utf8>`` among them, when given), schema metadata
  ``znippy_format_version = 3`` and the config keys;
- ``__znippy_lookup__`` (base columns by path bytes then ``chunk_seq``, no metadata) and
  ``__znippy_trie__`` (fst map path → first lookup row), then ``__znippy_fsmeta__``,
  ``__znippy_delta__``, the typed ``__znippy_meta__``, ``__znippy_sign_artifacts__`` and
  ``__znippy_sign_archive__``: every reserved row with ``pkg_type = -128``; streams back to
  back, the manifest, ``ZNPYMIDX`` and its offset;
- a hot archive: the blobs alone, and ``<name>.hot.00000`` holding one record batch per
  append.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import pyarrow as pa

import rust_layout as rl

RESERVED = -128
FORMAT = 25
CONFIG = {"znippy_format_version": "3", "compression_level": "19", "max_chunks": "100",
          "file_split_block_size": "10485760", "max_core_in_flight": "2",
          "max_core_in_compress": "2", "max_mem_allowed": "1073741824",
          "min_free_memory_ratio": "0.1", "zstd_output_buffer_size": "1048576"}
DATA_SCHEMA = pa.schema(rl.BASE, metadata=CONFIG)
LOOKUP_SCHEMA = pa.schema(rl.BASE)
META_SCHEMA = pa.schema([
    pa.field("relative_path", pa.utf8()), pa.field("key", pa.utf8(), nullable=False),
    pa.field("value_type", pa.int8(), nullable=False), pa.field("v_str", pa.utf8()),
    pa.field("v_i64", pa.int64()), pa.field("v_f64", pa.float64()),
    pa.field("v_bool", pa.bool_()), pa.field("v_bytes", pa.binary())],
    metadata={"znippy_format_version": "3"})
FSMETA_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                           pa.field("kind", pa.uint8(), nullable=False),
                           pa.field("mode", pa.uint32(), nullable=False)],
                          metadata={"znippy_format_version": "3"})
DELTA_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                          pa.field("chunk_seq", pa.uint32(), nullable=False),
                          pa.field("base_path", pa.utf8(), nullable=False)])
SIGN_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                         pa.field("cms", pa.binary(), nullable=False)])


def stream(schema: pa.Schema, rows: Mapping[str, Sequence[Any]] | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as w:
        if rows is not None:
            w.write_table(pa.table({f.name: pa.array(rows[f.name], f.type) for f in schema},
                                   schema=schema))
    return sink.getvalue().to_pybytes()


def git_delta(base: bytes, target: bytes) -> bytes:
    """``encode_delta_against``'s format: sizes, then a copy of the longest common prefix
    and inserts of the rest (a valid, simple encoding)."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b = n & 0x7F
            n >>= 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)
    out = bytearray(varint(len(base)) + varint(len(target)))
    common = 0
    while common < min(len(base), len(target)) and base[common] == target[common]:
        common += 1
    if common >= 16:
        op, tail = 0x80, b""
        for i in range(3):
            byte = (common >> (8 * i)) & 0xFF
            if byte:
                op |= 0x10 << i
                tail += bytes([byte])
        out += bytes([op]) + tail  # offset 0: no offset bytes
    else:
        common = 0
    rest = target[common:]
    for i in range(0, len(rest), 0x7F):
        piece = rest[i : i + 0x7F]
        out += bytes([len(piece)]) + piece
    return bytes(out)


def artifact_digest(path: str, checksums: Sequence[bytes]) -> bytes:
    data = path.encode()
    h = blake3.blake3(b"znippy.artifact.v1\0")
    h.update(struct.pack("<Q", len(data)) + data + struct.pack("<Q", len(checksums)))
    for seq, ck in enumerate(checksums):
        h.update(struct.pack("<I", seq) + ck)
    return h.digest()


def archive_root(digests: Mapping[str, bytes]) -> bytes:
    h = blake3.blake3(b"znippy.archive.v1\0" + bytes([1]) + struct.pack("<Q", len(digests)))
    for path in sorted(digests, key=str.encode):
        data = path.encode()
        h.update(struct.pack("<Q", len(data)) + data + digests[path])
    return h.digest()


def cms_sign(digest: bytes, key_der: bytes, cert_der: bytes) -> bytes:
    """A detached CMS SignedData over the 32-byte digest (messageDigest = SHA-256 of it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.serialization import pkcs7

    key = serialization.load_der_private_key(key_der, None)
    cert = x509.load_der_x509_certificate(cert_der)
    return (pkcs7.PKCS7SignatureBuilder().set_data(digest)
            .add_signer(cert, key, hashes.SHA256())  # type: ignore[arg-type]
            .sign(serialization.Encoding.DER, [pkcs7.PKCS7Options.DetachedSignature,
                   pkcs7.PKCS7Options.Binary]))


@dataclass
class Spec:
    """What to write: files (in write order), chunking, and the optional sections."""

    files: Mapping[str, bytes]
    chunk: int = 1 << 30
    level: int = 3
    pkg_type: int = 0
    columns: Mapping[str, tuple[pa.DataType, Mapping[str, Any]]] = field(default_factory=dict)
    meta: Sequence[tuple[str | None, str, Any]] = ()
    fsmeta: Sequence[tuple[str, int, int]] = ()
    deltas: Mapping[str, str] = field(default_factory=dict)  # path → base path
    signer: tuple[bytes, bytes] | None = None  # key DER, cert DER


def _rows(spec: Spec, out: bytearray) -> dict[str, list[Any]]:
    frames = rl.Frames(level=spec.level, format_version=FORMAT)
    cols: dict[str, list[Any]] = {f.name: [] for f in rl.BASE}
    for path, data in spec.files.items():
        pieces = [data[i : i + spec.chunk] for i in range(0, len(data), spec.chunk)] or [b""]
        if path in spec.deltas:
            pieces = [git_delta(spec.files[spec.deltas[path]], data)]
        fdata = 0
        for seq, piece in enumerate(pieces):
            frame = frames.frame(piece)
            stored, compressed = (frame, True) if len(frame) < len(piece) else (piece, False)
            result = data if path in spec.deltas else piece
            for name, value in (("relative_path", path), ("chunk_seq", seq),
                                ("fdata_offset", fdata), ("compressed", compressed),
                                ("uncompressed_size", len(result)),
                                ("blob_offset", len(out)), ("blob_size", len(stored)),
                                ("checksum", blake3.blake3(result).digest())):
                cols[name].append(value)
            out += stored
            fdata += len(result)
    return cols


def write(path: str | Path, spec: Spec) -> Path:
    """A sealed archive of ``spec`` at ``path``."""
    out = bytearray()
    cols = _rows(spec, out)
    schema = DATA_SCHEMA
    data_cols = dict(cols)
    if spec.columns:
        fields = [pa.field("pkg_type", pa.int8()),
                  *(pa.field(n, t) for n, (t, _) in spec.columns.items())]
        schema = pa.schema([*rl.BASE, *fields], metadata=CONFIG)
        data_cols["pkg_type"] = [spec.pkg_type] * len(cols["relative_path"])
        for name, (_, values) in spec.columns.items():
            data_cols[name] = [values.get(p) for p in cols["relative_path"]]
    sections: list[tuple[int, str, bytes, int]] = [
        (spec.pkg_type, "", stream(schema, data_cols), len(cols["relative_path"]))]
    order = sorted(range(len(cols["relative_path"])),
                   key=lambda i: (cols["relative_path"][i].encode(), cols["chunk_seq"][i]))
    lookup = {k: [v[i] for i in order] for k, v in cols.items()}
    sections.append((RESERVED, "__znippy_lookup__", stream(LOOKUP_SCHEMA, lookup), len(order)))
    sections.append((RESERVED, "__znippy_trie__", rl.fst_trie(pa.table(lookup)), 0))
    if spec.fsmeta:
        rows = sorted(spec.fsmeta)
        sections.append((RESERVED, "__znippy_fsmeta__", stream(FSMETA_SCHEMA, {
            "relative_path": [r[0] for r in rows], "kind": [r[1] for r in rows],
            "mode": [r[2] for r in rows]}), len(rows)))
    if spec.deltas:
        sections.append((RESERVED, "__znippy_delta__", stream(DELTA_SCHEMA, {
            "relative_path": list(spec.deltas), "chunk_seq": [0] * len(spec.deltas),
            "base_path": list(spec.deltas.values())}), len(spec.deltas)))
    if spec.meta:
        sections.append((RESERVED, "__znippy_meta__", _meta(spec.meta), len(spec.meta)))
    if spec.signer is not None:
        key, cert = spec.signer
        digests = {p: artifact_digest(p, [lookup["checksum"][i] for i in range(len(order))
                                          if lookup["relative_path"][i] == p])
                   for p in dict.fromkeys(lookup["relative_path"])}
        paths = sorted(digests, key=str.encode)
        sections.append((RESERVED, "__znippy_sign_artifacts__", stream(SIGN_SCHEMA, {
            "relative_path": paths,
            "cms": [cms_sign(digests[p], key, cert) for p in paths]}), 0))
        sections.append((RESERVED, "__znippy_sign_archive__",
                         cms_sign(archive_root(digests), key, cert), 0))
    manifest: dict[str, list[Any]] = {f.name: [] for f in rl.MANIFEST}
    for pkg_type, name, data, count in sections:
        for k, v in (("pkg_type", pkg_type), ("repo", ""), ("module_name", name),
                     ("index_offset", len(out)), ("index_len", len(data)),
                     ("row_count", count)):
            manifest[k].append(v)
        out += data
    at = len(out)
    out += stream(rl.MANIFEST, manifest) + rl.MAGIC + struct.pack("<Q", at)
    Path(path).write_bytes(out)
    return Path(path)


def _meta(rows: Sequence[tuple[str | None, str, Any]]) -> bytes:
    kinds = {str: 0, int: 1, float: 2, bool: 3, bytes: 4}
    names = ("v_str", "v_i64", "v_f64", "v_bool", "v_bytes")
    rows = sorted(rows, key=lambda r: (r[1], r[0] or ""))
    cols: dict[str, list[Any]] = {f.name: [] for f in META_SCHEMA}
    for path, key, value in rows:
        kind = kinds[type(value)]
        cols["relative_path"].append(path)
        cols["key"].append(key)
        cols["value_type"].append(kind)
        for i, name in enumerate(names):
            cols[name].append(value if i == kind else None)
    return stream(META_SCHEMA, cols)


def write_hot(path: str | Path, appends: Sequence[Mapping[str, bytes]], level: int = 3) -> Path:
    """A hot archive: the blobs of every append, and one journal segment with one record
    batch per append (a path appended again is a later row)."""
    out = bytearray()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, DATA_SCHEMA) as w:
        for files in appends:
            cols = _rows(Spec(files=files, level=level), out)
            w.write_table(pa.table({f.name: pa.array(cols[f.name], f.type) for f in rl.BASE},
                                   schema=DATA_SCHEMA))
    Path(path).write_bytes(out)
    Path(str(path) + ".hot.00000").write_bytes(sink.getvalue().to_pybytes())
    return Path(path)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def generated(root: Path) -> list[dict[str, Any]]:
    """The generated goldens under ``root``, as ``goldens.json`` entries (kinds of
    ``interop_corpus.expected``)."""
    import interop_corpus as corpus

    root.mkdir(parents=True, exist_ok=True)
    files = corpus.files()
    files_big = {**files, "big/multi.bin": corpus.text(3 * 65536 + 5, "multi")}
    key, cert = corpus.signer(root)
    deps = {"crates/serde-1.0.200.crate": ["serde_derive", "itoa"], "crates/tiny-0.1.0.crate": []}
    out = []
    write(root / "gen-all.znippy", Spec(
        files=files, pkg_type=1, chunk=8192,
        columns={"crate_name": (pa.utf8(), {"crates/serde-1.0.200.crate": "serde",
                                            "crates/tiny-0.1.0.crate": "tiny"}),
                 "deps": (pa.list_(pa.utf8()), deps)},
        meta=[("hello.txt", "owner", "team-a"), ("hello.txt", "build", 42),
              ("random.bin", "entropy", 7.5), ("random.bin", "signed", True),
              ("bin/run.sh", "digest", b"\xde\xad\xbe\xef"), (None, "release", "2026.12")],
        fsmeta=[("", 2, 0o644), ("bin/run.sh", 1, 0o755), ("bin", 0, 0o755),
                ("empty-dir", 0, 0o750)],
        signer=(key.read_bytes(), cert.read_bytes())))
    out.append({"file": "gen-all.znippy", "kind": "corpus", "signed": str(root / "ca.cert.der"),
                "dirs": ["empty-dir"], "modes": {"bin/run.sh": "755", "hello.txt": "644"},
                "meta": [["hello.txt", "owner", "team-a"], ["hello.txt", "build", "42"],
                         ["random.bin", "entropy", "7.5"], ["random.bin", "signed", "true"],
                         ["bin/run.sh", "digest", "deadbeef"], ["", "release", "2026.12"]]})
    write(root / "gen-big.znippy", Spec(files=files_big, chunk=65536))
    out.append({"file": "gen-big.znippy", "kind": "big"})
    want = corpus.expected("delta")
    write(root / "gen-delta.znippy", Spec(files=want, deltas={"docs/readme-v1.md":
                                                                "docs/readme.md"}))
    out.append({"file": "gen-delta.znippy", "kind": "delta"})
    half = list(files)[: len(files) // 2]
    write_hot(root / "gen-hot.znippy", [{p: files[p] for p in half},
                                        {p: files[p] for p in files if p not in half},
                                        dict(corpus.CHANGED)])
    out.append({"file": "gen-hot.znippy", "kind": "hot"})
    return out
