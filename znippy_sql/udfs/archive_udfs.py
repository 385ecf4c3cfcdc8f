"""Python UDFs behind the SQL macros: file digests, reading and extracting files, glob, pkg_type.

All are Arrow UDFs (a whole batch per call). ``znippy_extract_paths`` has side effects: it is
called once per query with the full, sorted list of paths (an aggregate), writes each file
through ``Archive.extract`` (same path rules, checksums and bytes as ``znippy-sql extract``) and
remembers what it wrote in the current transaction, so a re-invocation writes nothing twice.
"""

from __future__ import annotations

import fnmatch
import os
import re
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import pyarrow as pa

from znippy_sql.format import build
from znippy_sql.format.files import file_digest
from znippy_sql.read.reader import Archive
from znippy_sql.views.opened import bind, opened
from znippy_sql.format.schema import resolve_pkg_type

_LOCK = threading.Lock()
#: (transaction id, archive, dest) → {relative_path: (bytes_written, checksum_ok)}
_DONE: dict[tuple[int, str, str], dict[str, tuple[int, bool]]] = {}

EXTRACT_ROW = "STRUCT(relative_path VARCHAR, bytes_written UBIGINT, checksum_ok BOOLEAN)"


def archive_at(path: str) -> Archive:
    """The open :class:`Archive` of ``path`` (:func:`znippy_sql.views.opened.opened`)."""
    return opened(path)


def bind_archive(path: str, archive: Archive) -> None:
    """Serve ``path`` from ``archive`` (e.g. a store snapshot whose blobs live elsewhere)
    until the file at ``path`` changes."""
    bind(path, archive)


def _plain(arr: Any) -> pa.Array:
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def digest_udf(paths: Any, checksums: Any) -> pa.Array:
    """``znippy_file_digest(relative_path, checksums BLOB[]) -> BLOB`` (FORMAT §4)."""
    out = [
        None if p is None or c is None else file_digest(p, c)
        for p, c in zip(_plain(paths).to_pylist(), _plain(checksums).to_pylist())
    ]
    return build.binary(out)  # (pa.array would import pandas: format/build.py)


def read_udf(archives: Any, paths: Any) -> pa.Array:
    """``znippy_read(archive_path, relative_path) -> BLOB``: the file's bytes, verified."""
    out = []
    for a, p in zip(_plain(archives).to_pylist(), _plain(paths).to_pylist()):
        out.append(None if a is None or p is None else archive_at(a).read(p))
    return pa.array(out, pa.binary())


def has_udf(archives: Any, paths: Any) -> pa.Array:
    """``znippy_has(archive_path, relative_path) -> BOOLEAN``: a trie lookup, no scan."""
    out = [None if a is None or p is None else archive_at(a).find(p) is not None
           for a, p in zip(_plain(archives).to_pylist(), _plain(paths).to_pylist())]
    return pa.array(out, pa.bool_())


def extract_udf(archives: Any, dests: Any, path_lists: Any, txids: Any) -> pa.Array:
    """``znippy_extract_paths(archive, dest, paths[], txid) -> STRUCT(...)[]``."""
    out: list[list[dict[str, Any]] | None] = []
    rows = zip(*(_plain(x).to_pylist() for x in (archives, dests, path_lists, txids)))
    for archive_path, dest, paths, txid in rows:
        if archive_path is None or dest is None or paths is None:
            out.append(None)
            continue
        out.append(_extract_once(archive_path, dest, paths, int(txid or 0)))
    return pa.array(out, pa.list_(pa.struct([("relative_path", pa.utf8()),
                                              ("bytes_written", pa.uint64()),
                                              ("checksum_ok", pa.bool_())])))


def _extract_once(archive_path: str, dest: str, paths: list[str], txid: int
                  ) -> list[dict[str, Any]]:
    key = (txid, os.path.realpath(archive_path), os.path.realpath(dest))
    with _LOCK:
        done = _DONE.setdefault(key, {})
        if len(_DONE) > 64:  # old transactions: keep the memo small
            for old in list(_DONE)[:-64]:
                del _DONE[old]
    todo = [p for p in paths if p not in done or not os.path.exists(os.path.join(dest, p))]
    if todo:
        archive = archive_at(archive_path)
        report = archive.extract(dest, paths=todo)
        for path in report.written:  # written whole: its size is the archive's
            info = archive.find(path)
            done[path] = (info.size if info is not None else 0, True)
        for path in report.failed:
            done[path] = (0, False)
    return [{"relative_path": p, "bytes_written": done[p][0], "checksum_ok": done[p][1]}
            for p in paths]


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def glob_udf(paths: Any, patterns: Any) -> pa.Array:
    """``znippy_glob(path, pattern) -> BOOLEAN``: the same matching as ``Archive.select``."""
    out = [
        None if p is None or g is None else bool(_glob(g).match(p))
        for p, g in zip(_plain(paths).to_pylist(), _plain(patterns).to_pylist())
    ]
    return pa.array(out, pa.bool_())


def pkg_type_udf(values: Any) -> pa.Array:
    """``znippy_pkg_type(value VARCHAR) -> TINYINT``: a number or a name (``'maven'``)."""
    return pa.array([None if v is None else resolve_pkg_type(v)
                     for v in _plain(values).to_pylist()], pa.int8())


#: name, function, parameter types, return type, side effects
UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("znippy_file_digest", digest_udf, ["VARCHAR", "BLOB[]"], "BLOB", False),
    ("znippy_read", read_udf, ["VARCHAR", "VARCHAR"], "BLOB", False),
    ("znippy_has", has_udf, ["VARCHAR", "VARCHAR"], "BOOLEAN", False),
    ("znippy_extract_paths", extract_udf, ["VARCHAR", "VARCHAR", "VARCHAR[]", "UBIGINT"],
     f"{EXTRACT_ROW}[]", True),
    ("znippy_glob", glob_udf, ["VARCHAR", "VARCHAR"], "BOOLEAN", False),
    ("znippy_pkg_type", pkg_type_udf, ["VARCHAR"], "TINYINT", False),
)
