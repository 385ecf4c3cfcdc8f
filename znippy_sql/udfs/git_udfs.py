"""Python UDFs behind the git macros (queries/git_macros.sql): log order, reachability and
one object's bytes, read through :class:`znippy_sql.git.objects.GitObjects`.

An object is named as ``git rev-parse`` takes it (:mod:`znippy_sql.git.revparse`): a full id,
an unambiguous abbreviation, a branch or tag name, ``HEAD``. A name that names nothing in the
archive, an ambiguous abbreviation, and (for ``git_log``) a name that does not lead to a
commit are errors that say so.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from znippy_sql.git.objects import GitObjects
from znippy_sql.git.revparse import Names
from znippy_sql.read.reader import Archive
from znippy_sql.udfs.archive_udfs import _plain, archive_at

_LOCK = threading.Lock()
_NAMES: "weakref.WeakKeyDictionary[Archive, Names]" = weakref.WeakKeyDictionary()

LOG_ROW = "STRUCT(seq UINTEGER, oid BLOB, shallow BOOLEAN)"
CAT_ROW = "STRUCT(type VARCHAR, size UBIGINT, content BLOB)"


def _names(path: str) -> Names:
    archive = archive_at(path)
    with _LOCK:
        hit = _NAMES.get(archive)
        if hit is None:
            hit = _NAMES[archive] = Names(GitObjects(archive))
        return hit


def _rows(archives: Any, names: Any) -> list[tuple[Names, str] | None]:
    return [None if a is None or n is None else (_names(a), n)
            for a, n in zip(_plain(archives).to_pylist(), _plain(names).to_pylist())]


def log_udf(archives: Any, names: Any) -> pa.Array:
    """``znippy_git_log(archive, name) -> STRUCT(seq, oid, shallow)[]`` in ``git log`` order;
    ``shallow``: a boundary commit of a shallow history (git shows it without parents)."""
    out: list[list[dict[str, Any]] | None] = []
    for row in _rows(archives, names):
        if row is None:
            out.append(None)
            continue
        resolver, name = row
        ids = resolver.log(name)
        shallow = resolver.refs.shallow
        out.append([{"seq": i, "oid": c, "shallow": c in shallow} for i, c in enumerate(ids)])
    return pa.array(out, pa.list_(pa.struct([("seq", pa.uint32()), ("oid", pa.binary()),
                                             ("shallow", pa.bool_())])))


def reachable_udf(archives: Any, names: Any) -> pa.Array:
    """``znippy_git_reachable(archive, name) -> UINTEGER[]``: object ordinals."""
    out: list[list[int] | None] = []
    for row in _rows(archives, names):
        out.append(None if row is None else list(row[0].reachable(row[1])))
    return pa.array(out, pa.list_(pa.uint32()))


def cat_udf(archives: Any, names: Any) -> pa.Array:
    """``znippy_git_cat(archive, name) -> STRUCT(type, size, content)``."""
    out: list[dict[str, Any] | None] = []
    for row in _rows(archives, names):
        if row is None:  # a struct of NULLs: DuckDB wants no NULL result
            out.append({"type": None, "size": None, "content": None})
            continue
        resolver, name = row
        kind, content = resolver.objects.read(resolver.resolve(name))
        out.append({"type": kind, "size": len(content), "content": content})
    return pa.array(out, pa.struct([("type", pa.utf8()), ("size", pa.uint64()),
                                    ("content", pa.binary())]))


#: name, function, parameter types, return type, side effects
UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("znippy_git_log", log_udf, ["VARCHAR", "VARCHAR"], f"{LOG_ROW}[]", False),
    ("znippy_git_reachable", reachable_udf, ["VARCHAR", "VARCHAR"], "UINTEGER[]", False),
    ("znippy_git_cat", cat_udf, ["VARCHAR", "VARCHAR"], CAT_ROW, False),
)
