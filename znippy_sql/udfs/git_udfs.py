"""Python UDFs behind the git macros (queries/git_macros.sql): log order, reachability and
one object's bytes, read through :class:`znippy_sql.git.objects.GitObjects`.

Ids come as git prints them (40 hex digits). An id that is not in the archive gives an empty
list (``git_log``, ``git_reachable``) or NULL fields (``git_cat``); text that is not an id is an error.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from znippy_sql.errors import NotFoundError, ZnippyError
from znippy_sql.git.objects import GitObjects
from znippy_sql.read.reader import Archive
from znippy_sql.udfs.archive_udfs import _plain, archive_at

_LOCK = threading.Lock()
_OBJECTS: "weakref.WeakKeyDictionary[Archive, GitObjects]" = weakref.WeakKeyDictionary()

LOG_ROW = "STRUCT(seq UINTEGER, oid BLOB)"
CAT_ROW = "STRUCT(type VARCHAR, size UBIGINT, content BLOB)"


def _objects(path: str) -> GitObjects:
    archive = archive_at(path)
    with _LOCK:
        hit = _OBJECTS.get(archive)
        if hit is None:
            hit = _OBJECTS[archive] = GitObjects(archive)
        return hit


def _oid(objects: GitObjects, text: str) -> bytes | None:
    if len(text) != 2 * objects.index.oid_len:
        raise ZnippyError(f"{text!r} is not an object id ({2 * objects.index.oid_len} hex "
                          "digits)", path=objects.archive.path)
    try:
        return objects.resolve(text)
    except NotFoundError:
        return None


def _rows(archives: Any, oids: Any) -> list[tuple[GitObjects, bytes | None] | None]:
    out: list[tuple[GitObjects, bytes | None] | None] = []
    for a, o in zip(_plain(archives).to_pylist(), _plain(oids).to_pylist()):
        if a is None or o is None:
            out.append(None)
            continue
        objects = _objects(a)
        out.append((objects, _oid(objects, o)))
    return out


def log_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_log(archive, commit) -> STRUCT(seq, oid)[]`` in ``git log`` order."""
    out: list[list[dict[str, Any]] | None] = []
    for row in _rows(archives, oids):
        if row is None:
            out.append(None)
            continue
        objects, oid = row
        ids = [] if oid is None or objects.type_of(oid) != "commit" else objects.log(oid)
        out.append([{"seq": i, "oid": c} for i, c in enumerate(ids)])
    return pa.array(out, pa.list_(pa.struct([("seq", pa.uint32()), ("oid", pa.binary())])))


def reachable_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_reachable(archive, commit) -> UINTEGER[]``: object ordinals."""
    out: list[list[int] | None] = []
    for row in _rows(archives, oids):
        if row is None:
            out.append(None)
            continue
        objects, oid = row
        if oid is None or objects.type_of(oid) != "commit":
            out.append([])
        else:
            out.append(list(objects.reachable(oid)))
    return pa.array(out, pa.list_(pa.uint32()))


def cat_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_cat(archive, oid) -> STRUCT(type, size, content)`` (NULL fields if
    absent)."""
    out: list[dict[str, Any] | None] = []
    for row in _rows(archives, oids):
        if row is None or row[1] is None:  # a struct of NULLs: DuckDB wants no NULL result
            out.append({"type": None, "size": None, "content": None})
            continue
        kind, content = row[0].read(row[1])
        out.append({"type": kind, "size": len(content), "content": content})
    return pa.array(out, pa.struct([("type", pa.utf8()), ("size", pa.uint64()),
                                    ("content", pa.binary())]))


#: name, function, parameter types, return type, side effects
UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("znippy_git_log", log_udf, ["VARCHAR", "VARCHAR"], f"{LOG_ROW}[]", False),
    ("znippy_git_reachable", reachable_udf, ["VARCHAR", "VARCHAR"], "UINTEGER[]", False),
    ("znippy_git_cat", cat_udf, ["VARCHAR", "VARCHAR"], CAT_ROW, False),
)
