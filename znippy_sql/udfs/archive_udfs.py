"""Python UDFs behind the SQL macros: file digests, reading and extracting files, glob, pkg_type.

All are Arrow UDFs (a whole batch per call). ``znippy_extract_files`` has side effects: it is
called once per query with the selection and the options (one row), runs
:func:`znippy_sql.read.extract.extract` (the implementation ``znippy-sql extract`` runs: same
selection, path rules, links, checksums and bytes) and returns its
:func:`~znippy_sql.read.extract.outcomes`; it remembers them in the current transaction, so a
re-invocation writes nothing twice (a file that has gone since is written again).
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
from znippy_sql.read.extract import outcomes
from znippy_sql.read.reader import Archive
from znippy_sql.views.opened import bind, opened
from znippy_sql.modules.pkgtypes import resolve_pkg_type

_LOCK = threading.Lock()
#: (transaction id, archive, dest, options) → the outcome rows of that extract
_DONE: dict[tuple[Any, ...], list[dict[str, Any]]] = {}

EXTRACT_ROW = ("STRUCT(relative_path VARCHAR, bytes_written UBIGINT, checksum_ok BOOLEAN, "
               "status VARCHAR, problem VARCHAR)")
#: the options of ``znippy_extract`` (macros.sql), as ``Archive.extract`` takes them
EXTRACT_OPTIONS = ("STRUCT(repo VARCHAR, pkg_type VARCHAR, \"glob\" VARCHAR, symlinks BOOLEAN, "
                   "preserve BOOLEAN, strip_components INTEGER, existing VARCHAR)")


def archive_at(path: str) -> Archive:
    """The open :class:`Archive` of ``path`` (:func:`znippy_sql.views.opened.opened`)."""
    return opened(path)


def bind_archive(path: str, archive: Archive) -> None:
    """Serve ``path`` from ``archive`` (e.g. a store snapshot whose blobs live elsewhere)
    until the file at ``path`` changes."""
    bind(path, archive)


def plain(arr: Any) -> pa.Array:
    """A UDF argument as one Arrow array (DuckDB may hand a chunked one)."""
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def digest_udf(paths: Any, checksums: Any) -> pa.Array:
    """``znippy_file_digest(relative_path, checksums BLOB[]) -> BLOB`` (FORMAT §4)."""
    out = [
        None if p is None or c is None else file_digest(p, c)
        for p, c in zip(plain(paths).to_pylist(), plain(checksums).to_pylist())
    ]
    return build.binary(out)  # (pa.array would import pandas: format/build.py)


def read_udf(archives: Any, paths: Any) -> pa.Array:
    """``znippy_read(archive_path, relative_path) -> BLOB``: the file's bytes, verified."""
    out = []
    for a, p in zip(plain(archives).to_pylist(), plain(paths).to_pylist()):
        out.append(None if a is None or p is None else archive_at(a).read(p))
    return pa.array(out, pa.binary())


def has_udf(archives: Any, paths: Any) -> pa.Array:
    """``znippy_has(archive_path, relative_path) -> BOOLEAN``: a trie lookup, no scan."""
    out = [None if a is None or p is None else archive_at(a).find(p) is not None
           for a, p in zip(plain(archives).to_pylist(), plain(paths).to_pylist())]
    return pa.array(out, pa.bool_())


def extract_udf(archives: Any, dests: Any, options: Any, txids: Any) -> pa.Array:
    """``znippy_extract_files(archive, dest, options, txid) -> STRUCT(...)[]``: one row per
    path extracted, made (a link), skipped or failed (:func:`.extract.outcomes`)."""
    out: list[list[dict[str, Any]] | None] = []
    rows = zip(*(plain(x).to_pylist() for x in (archives, dests, options, txids)))
    for archive_path, dest, opts, txid in rows:
        if archive_path is None or dest is None:
            out.append(None)
            continue
        out.append(_extract_once(archive_path, dest, opts or {}, int(txid or 0)))
    return pa.array(out, pa.list_(pa.struct([("relative_path", pa.utf8()),
                                              ("bytes_written", pa.uint64()),
                                              ("checksum_ok", pa.bool_()),
                                              ("status", pa.utf8()),
                                              ("problem", pa.utf8())])))


def _extract_once(archive_path: str, dest: str, opts: dict[str, Any], txid: int
                  ) -> list[dict[str, Any]]:
    pkg_type = opts.get("pkg_type")
    kwargs: dict[str, Any] = {
        "repo": opts.get("repo"), "glob": opts.get("glob"),
        "pkg_type": None if pkg_type is None else resolve_pkg_type(pkg_type),
        "symlinks": bool(opts.get("symlinks")), "preserve": bool(opts.get("preserve")),
        "strip_components": int(opts.get("strip_components") or 0),
        "existing": opts.get("existing") or "replace"}
    key = (txid, os.path.realpath(archive_path), os.path.realpath(dest),
           tuple(sorted(kwargs.items())))
    with _LOCK:
        done = _DONE.get(key)
    archive = archive_at(archive_path)
    if done is None:
        done = outcomes(archive, archive.extract(dest, **kwargs))
    else:  # a re-invocation: only what has gone since is written again
        strip = kwargs["strip_components"]
        gone = [r["relative_path"] for r in done if r["status"] == "extracted" and not
                os.path.lexists(os.path.join(dest, *r["relative_path"].split("/")[strip:]))]
        if gone:
            kwargs.update(repo=None, pkg_type=None, glob=None, existing="replace")
            again = {r["relative_path"]: r
                     for r in outcomes(archive, archive.extract(dest, paths=gone, **kwargs))}
            done = [again.get(r["relative_path"], r) for r in done]
    with _LOCK:
        _DONE[key] = done
        if len(_DONE) > 64:  # old transactions: keep the memo small
            for old in list(_DONE)[:-64]:
                del _DONE[old]
    return done


@lru_cache(maxsize=256)
def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(pattern))


def glob_udf(paths: Any, patterns: Any) -> pa.Array:
    """``znippy_glob(path, pattern) -> BOOLEAN``: the same matching as ``Archive.select``."""
    out = [
        None if p is None or g is None else bool(_glob(g).match(p))
        for p, g in zip(plain(paths).to_pylist(), plain(patterns).to_pylist())
    ]
    return pa.array(out, pa.bool_())


def pkg_type_udf(values: Any) -> pa.Array:
    """``znippy_pkg_type(value VARCHAR) -> TINYINT``: a number or a name (``'maven'``)."""
    return pa.array([None if v is None else resolve_pkg_type(v)
                     for v in plain(values).to_pylist()], pa.int8())


#: name, function, parameter types, return type, side effects
UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("znippy_file_digest", digest_udf, ["VARCHAR", "BLOB[]"], "BLOB", False),
    ("znippy_read", read_udf, ["VARCHAR", "VARCHAR"], "BLOB", False),
    ("znippy_has", has_udf, ["VARCHAR", "VARCHAR"], "BOOLEAN", False),
    ("znippy_extract_files", extract_udf, ["VARCHAR", "VARCHAR", EXTRACT_OPTIONS, "UBIGINT"],
     f"{EXTRACT_ROW}[]", True),
    ("znippy_glob", glob_udf, ["VARCHAR", "VARCHAR"], "BOOLEAN", False),
    ("znippy_pkg_type", pkg_type_udf, ["VARCHAR"], "TINYINT", False),
)
