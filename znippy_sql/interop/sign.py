"""The Rust tool's signature digests (``znippy-common`` 0.9.13+ ``sign.rs``, feature ``sign``).

The sections have this project's shapes — ``__znippy_sign_artifacts__`` is an Arrow IPC stream
of ``(relative_path: utf8, cms: binary)``, ``__znippy_sign_archive__`` one detached CMS
``SignedData`` (DER) whose ``messageDigest`` is SHA-256 of the 32-byte digest, with no
``eContent`` — and are read as ``__sign_artifacts__`` and ``__sign_archive__``
(:mod:`.layouts`). What differs is what is signed:

* a file's digest: BLAKE3 over ``b"znippy.artifact.v1\\0"``, the path's byte length (u64 LE),
  the path, the chunk count (u64 LE), then each chunk's ``chunk_seq`` (u32 LE) and checksum in
  ``chunk_seq`` order;
* the archive root: BLAKE3 over ``b"znippy.archive.v1\\0"``, the footer kind (one byte, 1: the
  multi-index footer), the file count (u64 LE), then per file in path byte order the path's
  byte length (u64 LE), the path and its digest.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from ..format import b3 as blake3
from .layouts import SIGN_ARCHIVE, SIGN_ARTIFACTS

#: an open archive (``read.core.ArchiveCore``), not imported: the reader calls into this
#: package, so it cannot be imported back (tests/test_layers.py)
Archive = Any

ARTIFACT_TAG = b"znippy.artifact.v1\0"
ARCHIVE_TAG = b"znippy.archive.v1\0"
MULTI_FOOTER = 1
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


def rust_signed(archive: "Archive") -> bool:
    """The archive's signature sections are spelt the Rust way (its digests are these)."""
    names = set(archive.manifest.column("module_name").to_pylist())
    return SIGN_ARTIFACTS in names or SIGN_ARCHIVE in names


def file_digests(lookup: pa.Table) -> tuple[list[str], list[bytes]]:
    """Each file's Rust digest from a sorted lookup: paths in lookup (= byte) order."""
    paths: list[str] = []
    digests: list[bytes] = []
    cols = lookup.select(["relative_path", "chunk_seq", "checksum"]).to_pydict()
    run: list[tuple[int, bytes]] = []

    def close(path: str) -> None:
        data = path.encode("utf-8")
        h = blake3.blake3(ARTIFACT_TAG)
        h.update(_U64.pack(len(data)))
        h.update(data)
        h.update(_U64.pack(len(run)))
        for seq, checksum in sorted(run):
            h.update(_U32.pack(seq))
            h.update(checksum)
        paths.append(path)
        digests.append(h.digest())

    prev: str | None = None
    for path, seq, checksum in zip(cols["relative_path"], cols["chunk_seq"], cols["checksum"]):
        if prev is not None and path != prev:
            close(prev)
            run = []
        run.append((seq, checksum))
        prev = path
    if prev is not None:
        close(prev)
    return paths, digests


def archive_root(paths: list[str], digests: list[bytes]) -> bytes:
    """The Rust archive root over ``paths`` and their digests."""
    h = blake3.blake3(ARCHIVE_TAG)
    h.update(bytes([MULTI_FOOTER]))
    h.update(_U64.pack(len(paths)))
    for path, digest in sorted(zip((p.encode("utf-8") for p in paths), digests)):
        h.update(_U64.pack(len(path)))
        h.update(path)
        h.update(digest)
    return h.digest()
