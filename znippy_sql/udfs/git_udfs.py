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

import numpy as np
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


def _lists(parts: list[pa.Array | None], value_type: pa.DataType) -> pa.Array:
    """One list per row (``None`` → NULL), built from Arrow arrays without Python rows."""
    offsets = [0]
    end = 0
    for part in parts:
        if part is not None:
            end += len(part)
        offsets.append(end)
    values = [p for p in parts if p is not None and len(p)]
    flat = pa.concat_arrays(values) if values else pa.array([], value_type)
    offs = pa.array(offsets, pa.int32())
    mask = (pa.array([p is None for p in parts]) if any(p is None for p in parts)
            else None)
    return pa.ListArray.from_arrays(offs, flat, mask=mask)


def log_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_log(archive, commit) -> STRUCT(seq, oid)[]`` in ``git log`` order."""
    kind = pa.struct([("seq", pa.uint32()), ("oid", pa.binary())])
    parts: list[pa.Array | None] = []
    for row in _rows(archives, oids):
        if row is None:
            parts.append(None)
            continue
        objects, oid = row
        rows = [] if oid is None or objects.type_of(oid) != "commit" else objects.log_rows(oid)
        ids = objects._dag[0].column("oid").take(pa.array(rows, pa.int64())).cast(pa.binary())
        parts.append(pa.StructArray.from_arrays(
            [pa.array(np.arange(len(rows), dtype=np.uint32)), ids.combine_chunks()
             if isinstance(ids, pa.ChunkedArray) else ids], fields=list(kind)))
    return _lists(parts, kind)


def reachable_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_reachable(archive, commit) -> UINTEGER[]``: object ordinals."""
    parts: list[pa.Array | None] = []
    for row in _rows(archives, oids):
        if row is None:
            parts.append(None)
            continue
        objects, oid = row
        if oid is None or objects.type_of(oid) != "commit":
            parts.append(pa.array([], pa.uint32()))
        else:
            parts.append(pa.array(objects.reachable_array(oid)))
    return _lists(parts, pa.uint32())


REACH_ROW = "STRUCT(oid BLOB, type_name VARCHAR, ordinal UINTEGER)"
_TYPE_NAMES = pa.array(["", "commit", "tree", "blob", "tag"])


def reachable_objects_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_reachable_objects(archive, commit) -> STRUCT(oid, type_name, ordinal)[]``
    in ordinal order: the rows ``git_reachable`` returns, built from the object index
    without a join."""
    kind = pa.struct([("oid", pa.binary()), ("type_name", pa.utf8()),
                      ("ordinal", pa.uint32())])
    parts: list[pa.Array | None] = []
    for row in _rows(archives, oids):
        if row is None:
            parts.append(None)
            continue
        objects, oid = row
        found = (np.zeros(0, dtype=np.uint32) if oid is None
                 or objects.type_of(oid) != "commit" else objects.reachable_array(oid))
        index = objects.index
        width = index.oid_len
        ids = np.frombuffer(index.buf, dtype=np.uint8, count=index.count * width,
                            offset=index._oids_at).reshape(index.count, width)[found]
        oid_col = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), len(found), [None, pa.py_buffer(ids.tobytes())]).cast(pa.binary())
        names = _TYPE_NAMES.take(pa.array(index.types[found].astype(np.int32)))
        parts.append(pa.StructArray.from_arrays([oid_col, names, pa.array(found)],
                                                fields=list(kind)))
    return _lists(parts, kind)


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
    ("znippy_git_reachable_objects", reachable_objects_udf, ["VARCHAR", "VARCHAR"],
     f"{REACH_ROW}[]", False),
    ("znippy_git_cat", cat_udf, ["VARCHAR", "VARCHAR"], CAT_ROW, False),
)
