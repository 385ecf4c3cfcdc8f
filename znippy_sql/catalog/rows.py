"""One archive's tail → its ``archives`` row and its ``files`` rows, as Arrow.

Only the tail is read: the manifest, each data sub-index and ``__meta__`` (blobs never). The
``files`` rows are the ``files`` view of each group (``views/files.py``) plus each file's
chunks as a list, sorted by path; the root digest is FORMAT §4's over the same file digests.
"""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import CatalogError
from ..views.files import files_of_group, module_fields
from ..format import build
from ..modules.pkgtypes import pkg_type_name
from ..format.files import file_starts
from ..format.kernels import call_function, one_array
from ..provenance.sign import archive_root
from ..read.reader import Archive, open_archive
from ..remote.url import is_url
from .schema import module_field

CHUNK_TYPE = pa.struct([
    pa.field("blob_offset", pa.int64(), nullable=False),
    pa.field("blob_size", pa.int64(), nullable=False),
    pa.field("compressed", pa.bool_(), nullable=False),
    pa.field("uncompressed_size", pa.int64(), nullable=False),
    pa.field("checksum", pa.binary(32), nullable=False),
])
FILES_FIELDS = (
    pa.field("archive_uri", pa.utf8(), nullable=False),
    pa.field("relative_path", pa.utf8(), nullable=False),
    pa.field("repo", pa.utf8(), nullable=False),
    pa.field("pkg_type", pa.int32(), nullable=False),
    pa.field("pkg_type_name", pa.utf8(), nullable=False),
    pa.field("module_name", pa.utf8(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("digest", pa.binary(32), nullable=False),
    pa.field("chunks", pa.list_(pa.field("element", CHUNK_TYPE, nullable=False)),
             nullable=False),
)
ARCHIVES_ARROW = pa.schema([
    pa.field("archive_uri", pa.utf8(), nullable=False),
    pa.field("size", pa.int64(), nullable=False),
    pa.field("etag_or_mtime", pa.utf8(), nullable=False),
    pa.field("root_digest", pa.binary(32), nullable=False),
    pa.field("files", pa.int64(), nullable=False),
    pa.field("groups", pa.int32(), nullable=False),
    pa.field("chunk_rows", pa.int64(), nullable=False),
    pa.field("added_at", pa.timestamp("us", tz="UTC"), nullable=False),
    pa.field("meta", pa.map_(pa.utf8(), pa.field("value", pa.utf8(), nullable=False)),
             nullable=True),
])
_FILE_COLUMNS = ("relative_path", "size", "digest")


def archive_uri(path: str | os.PathLike[str]) -> str:
    """The catalog's name of an archive: the URL as given, or the absolute local path."""
    text = os.fspath(path)
    return text if is_url(text) else os.path.abspath(text)


def local_identity(uri: str) -> tuple[int, str] | None:
    """(size, ``mtime:<ns>``) of a local archive without opening it; None for a URL."""
    if is_url(uri):
        return None
    try:
        st = os.stat(uri)
    except OSError as exc:
        raise CatalogError(f"cannot read archive: {exc.strerror or exc}", path=uri) from None
    return st.st_size, f"mtime:{st.st_mtime_ns}"


def remote_identity(archive: Archive) -> tuple[int, str]:
    """(size, ``etag:<ETag>``) of an archive opened from a URL (its source's response)."""
    source = archive.source
    etag = getattr(getattr(source, "meta", None), "etag", None)
    return int(source.size), f"etag:{etag}" if etag else f"size:{source.size}"


@dataclass
class ArchiveRows:
    """What the catalog records of one archive."""

    uri: str
    size: int
    etag_or_mtime: str
    root_digest: bytes
    groups: int
    chunk_rows: int
    meta: list[tuple[str, str]] | None
    files: pa.Table  # FILES_FIELDS + module columns, sorted by relative_path
    #: bytes the reader handed out, and where the archive's tail starts (blobs end before)
    bytes_read: int = 0
    tail_offset: int = 0

    def record(self, added_at: _dt.datetime) -> dict[str, Any]:
        return {"archive_uri": self.uri, "size": self.size, "etag_or_mtime": self.etag_or_mtime,
                "root_digest": self.root_digest, "files": self.files.num_rows,
                "groups": self.groups, "chunk_rows": self.chunk_rows, "added_at": added_at,
                "meta": self.meta}


def read_rows(uri: str, *, identity: tuple[int, str] | None = None,
              open_options: dict[str, Any] | None = None) -> ArchiveRows:
    """Open ``uri`` and read its tail. ``identity`` is the (size, etag_or_mtime) taken
    *before* opening (a local file changed in between is then re-read by the next add)."""
    try:
        archive = open_archive(uri, **(open_options or {}))
    except OSError as exc:
        raise CatalogError(f"cannot open archive: {exc}", path=uri) from None
    with archive:
        if identity is None:
            identity = remote_identity(archive)
        size, etag = identity
        parts = []
        chunk_rows = 0
        for key in archive.groups:
            table = archive.group_table(key)
            chunk_rows += table.num_rows
            parts.append(_group_files(table, key, uri))
        meta = _meta(archive)
        groups = len(archive.groups)
        bytes_read, tail_offset = archive.source.bytes_read, archive.tail_offset
    files = _concat(parts)
    paths = one_array(files.column("relative_path"))
    n = len(paths)
    if n > 1 and call_function("any", [call_function(
            "equal", [paths.slice(1), paths.slice(0, n - 1)])]).as_py():  # sorted: neighbours
        raise CatalogError("a relative_path is in two groups of the archive", path=uri)
    return ArchiveRows(uri=uri, size=size, etag_or_mtime=etag,
                       root_digest=archive_root(paths, files.column("digest")), groups=groups,
                       chunk_rows=chunk_rows, meta=meta, files=files, bytes_read=bytes_read,
                       tail_offset=tail_offset)


def _group_files(table: pa.Table, key: Any, uri: str) -> pa.Table:
    """One group's files rows (unsorted) with their chunk lists."""
    seq = one_array(table.column("chunk_seq")).to_numpy(zero_copy_only=False)
    if not bool(np.all(seq == 0)):  # several chunks to a file: each file's chunks in order
        table = table.sort_by([("relative_path", "ascending"), ("chunk_seq", "ascending")])
        seq = one_array(table.column("chunk_seq")).to_numpy(zero_copy_only=False)
    extra = [f.name for f in module_fields(table.schema)]
    files = files_of_group(table, key, columns=[*_FILE_COLUMNS, *extra])
    starts = file_starts(seq)
    if len(starts) != files.num_rows:
        raise CatalogError(f"group {tuple(key)}: chunks are not in chunk_seq order", path=uri)
    n = files.num_rows
    structs = pa.StructArray.from_arrays(
        [_int64(table, "blob_offset", uri), _int64(table, "blob_size", uri),
         one_array(table.column("compressed")), _int64(table, "uncompressed_size", uri),
         one_array(table.column("checksum"))], fields=list(CHUNK_TYPE))
    offsets = pa.array(np.append(starts, len(seq)).astype(np.int32), pa.int32())
    chunks = pa.ListArray.from_arrays(offsets, structs, type=FILES_FIELDS[-1].type)
    cols: dict[str, Any] = {
        "archive_uri": build.repeat(uri, pa.utf8(), n),
        "relative_path": files.column("relative_path"),
        "repo": build.repeat(key.repo, pa.utf8(), n),
        "pkg_type": build.repeat(key.pkg_type, pa.int32(), n),
        "pkg_type_name": build.repeat(pkg_type_name(key.pkg_type), pa.utf8(), n),
        "module_name": build.repeat(key.module_name, pa.utf8(), n),
        "size": files.column("size").cast(pa.int64()),
        "digest": files.column("digest"),
        "chunks": chunks,
    }
    fields = list(FILES_FIELDS)
    for name in extra:
        field = module_field(files.schema.field(name))
        cols[name] = files.column(name).cast(field.type)
        fields.append(field)
    return pa.table(cols, schema=pa.schema(fields))


def _int64(table: pa.Table, name: str, uri: str) -> pa.Array:
    arr = one_array(table.column(name))
    try:
        return arr.cast(pa.int64())
    except pa.ArrowInvalid:
        raise CatalogError(f"{name} does not fit a signed 64-bit integer", path=uri) from None


def _concat(parts: list[pa.Table]) -> pa.Table:
    if not parts:
        return pa.schema(list(FILES_FIELDS)).empty_table()
    try:
        table = pa.concat_tables(parts, promote_options="default")
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise CatalogError(f"groups have conflicting module columns: {exc}") from None
    return table.sort_by("relative_path")  # UTF-8 byte order, as FORMAT §4's root wants


def _meta(archive: Archive) -> list[tuple[str, str]] | None:
    """Archive-level ``__meta__`` facts as map entries; several values of a key joined by
    a newline; None when the archive has no ``__meta__``."""
    table = archive.meta
    if table is None:
        return None
    facts: dict[str, list[str]] = {}
    for row in table.to_pylist():
        if row["relative_path"] is None:
            facts.setdefault(row["key"], []).append(row["value"])
    return [(k, "\n".join(v)) for k, v in facts.items()]


__all__ = ["ARCHIVES_ARROW", "ArchiveRows", "FILES_FIELDS", "archive_uri", "local_identity",
           "read_rows"]
