"""Python UDFs behind the git macros (queries/git_macros.sql): log order, reachability and
one object's bytes, read through :class:`znippy_sql.git.objects.GitObjects`.

An object is named as ``git rev-parse`` takes it (:mod:`znippy_sql.git.revparse`): a full id,
an unambiguous abbreviation, a branch or tag name, ``HEAD``, git's suffixes. A name that names
nothing in the archive, an ambiguous abbreviation, and (``git_log``) a name that does not lead
to a commit are errors that say so.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from znippy_sql.git.objects import GitObjects
from znippy_sql.git.revparse import Names
from znippy_sql.read.reader import Archive
from znippy_sql.udfs.archive_udfs import archive_at, plain

_LOCK = threading.Lock()
_OBJECTS: "weakref.WeakKeyDictionary[Archive, GitObjects]" = weakref.WeakKeyDictionary()
_NAMES: "weakref.WeakKeyDictionary[GitObjects, Names]" = weakref.WeakKeyDictionary()

LOG_ROW = ("STRUCT(seq UINTEGER, oid BLOB, parents BLOB[], tree BLOB, generation UINTEGER, "
           "commit_time BIGINT, corrected_date BIGINT)")
REACH_ROW = "STRUCT(oid BLOB, type_name VARCHAR, ordinal UINTEGER)"
CAT_ROW = "STRUCT(type VARCHAR, size UBIGINT, content BLOB)"


def _objects(path: str) -> GitObjects:
    archive = archive_at(path)
    with _LOCK:
        hit = _OBJECTS.get(archive)
        if hit is None:
            hit = _OBJECTS[archive] = GitObjects(archive)
        return hit


def _names(objects: GitObjects) -> Names:
    with _LOCK:
        hit = _NAMES.get(objects)
        if hit is None:
            hit = _NAMES[objects] = Names(objects)
        return hit


def _oid(objects: GitObjects, text: str) -> bytes | None:
    """The id ``text`` names, as git rev-parse resolves it (an error if it names nothing)."""
    return _names(objects).resolve(text)


def _rows(archives: Any, oids: Any) -> list[tuple[GitObjects, bytes | None] | None]:
    out: list[tuple[GitObjects, bytes | None] | None] = []
    for a, o in zip(plain(archives).to_pylist(), plain(oids).to_pylist()):
        if a is None or o is None:
            out.append(None)
            continue
        objects = _objects(a)
        out.append((objects, _oid(objects, o)))
    return out


#: the columns of a commit ``git_log`` lists (``GitObjects._graph_table``, either tier)
LOG_COLUMNS = ("oid", "parents", "tree", "generation", "commit_time", "corrected_date")
LOG_TYPES = (pa.binary(), pa.list_(pa.binary()), pa.binary(), pa.uint32(), pa.int64(),
             pa.int64())


def log_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_log(archive, commit) -> STRUCT(seq, oid, parents, tree, generation,
    commit_time, corrected_date)[]`` in ``git log`` order; built as Arrow arrays (the
    graph's rows taken), not a Python object per commit."""
    sizes: list[int] = []
    parts: list[pa.Table] = []
    nulls: list[bool] = []
    for row in _rows(archives, oids):
        rows = np.zeros(0, dtype=np.int64)
        if row is not None and row[1] is not None:
            objects = row[0]
            rows = _names(objects).log_rows_of(row[1])
            graph = objects._graph_table.select(list(LOG_COLUMNS))
            parts.append(graph.cast(pa.schema(list(zip(LOG_COLUMNS, LOG_TYPES))))
                         .take(pa.array(rows)))
        nulls.append(row is None)
        sizes.append(len(rows))
    seq = np.concatenate([np.arange(n, dtype=np.uint32) for n in sizes] or
                         [np.zeros(0, dtype=np.uint32)])
    empty = [pa.array([], t) for t in LOG_TYPES]
    columns = [pa.concat_arrays([c for t in parts for c in t.column(name).chunks]
                                or [empty[i]]) for i, name in enumerate(LOG_COLUMNS)]
    values = pa.StructArray.from_arrays(
        [pa.array(seq), *columns],
        fields=[pa.field("seq", pa.uint32()),
                *(pa.field(n, t) for n, t in zip(LOG_COLUMNS, LOG_TYPES))])
    return pa.ListArray.from_arrays(_offsets(sizes), values, mask=pa.array(nulls, pa.bool_()))


def reachable_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_reachable(archive, commit) -> STRUCT(oid, type_name, ordinal)[]``: the
    objects in ordinal order (:meth:`GitObjects.objects_of`: either tier)."""
    parts: list[pa.Table] = []
    sizes: list[int] = []
    nulls: list[bool] = []
    for row in _rows(archives, oids):
        got = np.zeros(0, dtype=np.uint32)
        if row is not None and row[1] is not None:
            got = _names(row[0]).reachable_array_of(row[1]).astype(np.uint32)
            parts.append(row[0].objects_of(got))
        nulls.append(row is None)
        sizes.append(len(got))
    fields = [pa.field("oid", pa.binary()), pa.field("type_name", pa.utf8()),
              pa.field("ordinal", pa.uint32())]
    table = pa.concat_tables(parts).cast(pa.schema(fields)) if parts else \
        pa.schema(fields).empty_table()
    rows = pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in fields],
                                      fields=fields)
    return pa.ListArray.from_arrays(_offsets(sizes), rows, mask=pa.array(nulls, pa.bool_()))


def _offsets(sizes: list[int]) -> pa.Array:
    out = np.zeros(len(sizes) + 1, dtype=np.int32)
    np.cumsum(sizes, out=out[1:])
    return pa.array(out)


def shallow_udf(archives: Any) -> pa.Array:
    """``znippy_git_shallow(archive) -> BLOB[]``: the shallow boundary's commits (git shows
    them without parents)."""
    return pa.array([None if a is None else sorted(_names(_objects(a)).refs.shallow)
                     for a in plain(archives).to_pylist()], pa.list_(pa.binary()))


def cat_udf(archives: Any, oids: Any) -> pa.Array:
    """``znippy_git_cat(archive, name) -> STRUCT(type, size, content)``."""
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
    ("znippy_git_reachable", reachable_udf, ["VARCHAR", "VARCHAR"], f"{REACH_ROW}[]", False),
    ("znippy_git_cat", cat_udf, ["VARCHAR", "VARCHAR"], CAT_ROW, False),
    ("znippy_git_shallow", shallow_udf, ["VARCHAR"], "BLOB[]", False),
)
