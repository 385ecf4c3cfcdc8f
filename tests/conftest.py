"""Shared test helpers: deterministic corpora and an independent archive builder.

The builder (:class:`RawArchive`) writes an archive with pyarrow, ducer and blake3 only, no
znippy_sql code, so tests can hand the reader archives no znippy writer would produce:
attacker-chosen paths, overlapping extents, lying row counts.
"""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
import ducer
import pyarrow as pa
import pytest

WORDS = ("alpha beta gamma delta import class def return self value index chunk archive "
         "manifest footer offset length public static void main string int float list "
         "dict for while if else try except raise yield lambda").split()


def text_bytes(n: int, seed: int = 0) -> bytes:
    """``n`` bytes of compressible, source-like text (deterministic per seed)."""
    rng = random.Random(seed)
    out = bytearray()
    while len(out) < min(n, 1 << 16):
        out += (" ".join(rng.choice(WORDS) for _ in range(12)) + "\n").encode()
    if len(out) < n:  # large inputs: 64 KiB of text, repeated with a per-block marker
        base, out = bytes(out), bytearray()
        while len(out) < n:
            out += b"%d\n" % len(out) + base
    return bytes(out[:n])


def random_bytes(n: int, seed: int = 0) -> bytes:
    """``n`` incompressible bytes (deterministic per seed)."""
    return random.Random(seed).randbytes(n)


# -- independent builder -------------------------------------------------------------------
BASE = pa.schema([
    pa.field("relative_path", pa.utf8(), nullable=False),
    pa.field("chunk_seq", pa.uint32(), nullable=False),
    pa.field("fdata_offset", pa.uint64(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("uncompressed_size", pa.uint64(), nullable=False),
    pa.field("blob_offset", pa.uint64(), nullable=False),
    pa.field("blob_size", pa.uint64(), nullable=False),
    pa.field("checksum", pa.binary(32), nullable=False),
])
MANIFEST = pa.schema([
    pa.field("pkg_type", pa.int8(), nullable=False),
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("module_name", pa.utf8(), nullable=False),
    pa.field("index_offset", pa.uint64(), nullable=False),
    pa.field("index_len", pa.uint64(), nullable=False),
    pa.field("row_count", pa.uint64(), nullable=False),
])


def ipc_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        for batch in table.to_batches():
            w.write_batch(batch)
    return sink.getvalue().to_pybytes()


@dataclass
class RawArchive:
    """Files stored raw, one untyped group; every part can be tampered with before ``write``."""

    files: list[tuple[str, bytes]]
    rows: list[dict[str, Any]] = field(default_factory=list)
    blobs: bytes = b""

    def __post_init__(self) -> None:
        out = bytearray()
        for path, data in self.files:
            self.rows.append(dict(relative_path=path, chunk_seq=0, fdata_offset=0,
                                  compressed=False, uncompressed_size=len(data),
                                  blob_offset=len(out), blob_size=len(data),
                                  checksum=blake3.blake3(data).digest()))
            out += data
        self.blobs = bytes(out)

    def write(self, path: Path, *, lookup_rows: list[dict[str, Any]] | None = None,
              trie: list[tuple[bytes, int]] | None = None,
              manifest_edit: Callable[[list[dict[str, Any]]], None] | None = None,
              table_edit: Callable[[str, pa.Table], pa.Table] | None = None,
              trie_bytes: bytes | None = None) -> Path:
        """``table_edit(name, table)`` may replace the sub-index (``"sub"``), ``"__lookup__"``
        or ``"manifest"`` table before it is streamed; ``trie_bytes`` replaces the trie."""
        edit = table_edit if table_edit is not None else (lambda _name, t: t)
        rows = self.rows
        lk_rows = lookup_rows if lookup_rows is not None else sorted(
            rows, key=lambda r: (r["relative_path"].encode("utf-8", "surrogatepass"),
                                 r["chunk_seq"]))
        sub = edit("sub", pa.Table.from_pylist(rows, schema=BASE))
        lookup = edit("__lookup__", pa.Table.from_pylist(lk_rows, schema=BASE))
        if trie is None:
            trie = [(r["relative_path"].encode("utf-8", "surrogatepass"), i)
                    for i, r in enumerate(lk_rows) if r["chunk_seq"] == 0]
        out = bytearray(self.blobs)
        manifest: list[dict[str, Any]] = []

        def put(key: tuple[int, str, str], data: bytes, count: int) -> None:
            out.extend(bytes(-len(out) % 64))
            manifest.append(dict(pkg_type=key[0], repo=key[1], module_name=key[2],
                                 index_offset=len(out), index_len=len(data), row_count=count))
            out.extend(data)

        put((0, "", ""), ipc_stream(sub), sub.num_rows)
        put((-1, "", "__lookup__"), ipc_stream(lookup), lookup.num_rows)
        put((-1, "", "__trie__"), trie_bytes if trie_bytes is not None
            else bytes(ducer.Map.build(":memory:", trie)), 0)
        if manifest_edit is not None:
            manifest_edit(manifest)
        out.extend(bytes(-len(out) % 64))
        manifest_offset = len(out)
        out += ipc_stream(edit("manifest", pa.Table.from_pylist(manifest, schema=MANIFEST)))
        out += b"ZNPYMIDX" + struct.pack("<Q", manifest_offset)
        path.write_bytes(bytes(out))
        return path


@pytest.fixture
def raw_archive() -> type[RawArchive]:
    return RawArchive


@pytest.fixture
def make_text() -> Callable[[int, int], bytes]:
    return text_bytes


def listing(root: Path) -> list[str]:
    """Every path under ``root`` (files, dirs, links), relative, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


@pytest.fixture
def tree_listing() -> Callable[[Path], list[str]]:
    return listing


def self_signed_signer(common_name: str = "znippy test") -> Any:
    """A `znippy_sql.provenance.sign.Signer` with a fresh EC P-256 key and a self-signed certificate."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from znippy_sql.provenance.sign import Signer

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return Signer(key, cert)
