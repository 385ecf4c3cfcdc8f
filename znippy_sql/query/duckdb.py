"""DuckDB: an archive as views over its memory-mapped Arrow tables, plus macros and UDFs.

>>> import duckdb, tempfile, os
>>> from znippy_sql import write_archive, Entry
>>> d = tempfile.mkdtemp()
>>> _ = write_archive(os.path.join(d, "demo.znippy"), [Entry("a.txt", data=b"hi")], fsync=False)
>>> con = duckdb.connect()
>>> register(con, os.path.join(d, "demo.znippy"))
'demo'
>>> con.sql("SELECT relative_path, size FROM demo_files").fetchall()
[('a.txt', 2)]

``register`` reads the footer, the manifest and the Arrow stream headers; the rows stay in the
memory map until a query scans them, and the views can be scanned any number of times.
"""

from __future__ import annotations

import glob
import os
import re
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import pyarrow as pa

from .. import views
from ..errors import FormatError, ZnippyError
from ..remote import is_url
from .plan import plan_many, plan_views, union_views

if TYPE_CHECKING:
    import duckdb

#: Every view ``register`` may create, by suffix (``<name>_<suffix>``): the view catalog's
#: (``znippy_sql.views.names()``) and ``_archive`` (the archive's path, for the macros).
VIEW_SUFFIXES = (*views.names(), "_archive")


def sanitize_name(text: str) -> str:
    """A SQL identifier from a file stem: ``my-archive`` → ``my_archive``."""
    name = re.sub(r"\W", "_", text, flags=re.ASCII).strip("_") or "archive"
    return f"_{name}" if name[0].isdigit() else name


def default_name(archive_path: str | os.PathLike[str]) -> str:
    base = os.path.basename(os.fspath(archive_path))
    stem = base.split(".", 1)[0] if not base.startswith(".") else base
    return sanitize_name(stem)


def _run(con: "duckdb.DuckDBPyConnection", sql: str) -> None:
    con.execute(sql).fetchall()


class _State:
    """What this module put into one connection: installed or not, objects per archive."""

    def __init__(self) -> None:
        self.installed = False
        self.capabilities: set[str] = set()
        self.objects: dict[str, list[str]] = {}
        self.functions: dict[str, list[str]] = {}


_STATES: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()


def _state(con: "duckdb.DuckDBPyConnection") -> _State:
    state = _STATES.get(con)
    if state is None:
        state = _STATES[con] = _State()
    return state


#: what a capability adds to a connection: its UDFs (``module:ATTRIBUTE``) and macros
#: (``queries/``), installed by ``register`` for the first archive that has the capability
#: (git sections; a group of the module's pkg_type), so a plain archive imports none of them
CAPABILITIES: dict[str, tuple[str, str]] = {
    "git": ("znippy_sql.udfs.git_udfs:UDFS", "git_macros.sql"),
    "maven": ("znippy_sql.udfs.module_udfs:MAVEN_UDFS", "maven_macros.sql"),
    "pypi": ("znippy_sql.udfs.module_udfs:PYPI_UDFS", "pypi_macros.sql"),
}
_GIT_VIEWS = ("git_objects", "git_commits", "git_reach")


def install(con: "duckdb.DuckDBPyConnection", capabilities: Sequence[str] = ()) -> None:
    """Load the core UDFs (``udfs/archive_udfs.py``) and macros (``queries/macros.sql``)
    into ``con``, and those of ``capabilities`` (names of :data:`CAPABILITIES`; ``register``
    adds the ones its archives have).

    Both are connection-local (Python UDFs, ``TEMP`` macros), like the views ``register``
    makes; installing twice is a no-op.
    """
    from znippy_sql.udfs.archive_udfs import UDFS

    state = _state(con)
    if not state.installed:
        _install(con, UDFS, "macros.sql")
        state.installed = True
    for cap in capabilities:
        if cap in state.capabilities:
            continue
        if cap not in CAPABILITIES:
            raise ValueError(f"unknown capability {cap!r}; one of {', '.join(CAPABILITIES)}")
        import importlib

        where, script = CAPABILITIES[cap]
        module, _, attr = where.partition(":")
        _install(con, getattr(importlib.import_module(module), attr), script)
        state.capabilities.add(cap)


def _install(con: "duckdb.DuckDBPyConnection", udfs: Sequence[Any], script: str) -> None:
    import duckdb

    from .sql import load_sql

    for name, fn, params, returns, side_effects in udfs:
        try:
            con.remove_function(name)
        except duckdb.Error:
            pass
        con.create_function(  # type: ignore[call-overload]  # stubs want an enum for "arrow"
            name, fn, [duckdb.sqltype(p) for p in params], duckdb.sqltype(returns),
            type="arrow", side_effects=side_effects)
    _run(con, ";\n".join(_statements(load_sql(script))))


def capabilities_of(archive: Any) -> list[str]:
    """The capabilities of :data:`CAPABILITIES` an open archive has (from its manifest)."""
    caps = []
    if any(views.present(archive, n) for n in _GIT_VIEWS):
        caps.append("git")
    elif views.present(archive, "git_refs"):
        # the Rust pack tier: git's packs as entries, no object sections, its push log
        # (interop/gitpack.py). Asked only of an archive with a push log: the entries' names
        # are in the lookup, which a registration must not read for every archive (remote
        # ones pay a request for it); a pack tier without one gets the API and CLI, no macros
        from ..interop.gitpack import pack_entries

        if pack_entries(archive.lookup):
            caps.append("git")
    from ..modules.pkgtypes import pkg_type_name  # a module's name is its pkg_type's name

    for pkg_type in sorted({k.pkg_type for k in archive.groups}):
        if pkg_type_name(pkg_type) in CAPABILITIES:
            caps.append(pkg_type_name(pkg_type))
    return caps


def _statements(script: str) -> list[str]:
    lines = [ln for ln in script.splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


ArchivesLike = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


def expand_archives(archives: ArchivesLike) -> tuple[list[str], bool]:
    """The archive paths a ``register``/``scan`` argument names, and whether it names them as
    a set (a glob or a list: views with an ``archive`` column) rather than one file. A glob
    (``*``, ``?``, ``[``) matches in sorted order; one that matches nothing is an error."""
    items = [archives] if isinstance(archives, (str, os.PathLike)) else list(archives)
    paths: list[str] = []
    many = not isinstance(archives, (str, os.PathLike))
    for item in items:
        text = os.fspath(item)
        if _GLOB.search(text) and not is_url(text) and not os.path.exists(text):
            found = sorted(glob.glob(text))
            if not found:
                raise ZnippyError("no archive matches this pattern", path=text)
            paths.extend(found)
            many = True
        else:
            paths.append(text)
    if not paths:
        raise ValueError("no archive given")
    return list(dict.fromkeys(paths)), many


_GLOB = re.compile(r"[*?\[]")


def set_name(archives: ArchivesLike, paths: Sequence[str]) -> str:
    """The default name of several archives: their stems' name when they share one (``rel.v1``,
    ``rel.v2`` → ``rel``), else the name of a glob's directory (``dumps/*.znippy`` → ``dumps``)."""
    names = {default_name(p) for p in paths}
    if len(names) == 1:
        return names.pop()
    if isinstance(archives, (str, os.PathLike)):
        folder = os.path.basename(os.path.dirname(os.path.abspath(os.fspath(archives))))
        if folder:
            return sanitize_name(folder)
    raise ValueError(f"archives {sorted(names)} have different names: give name=")


def register(con: "duckdb.DuckDBPyConnection", archives: ArchivesLike,
             name: str | None = None) -> str:
    """Create the ``<name>_*`` views of an archive (a path), or of several (a glob or a list
    of paths and globs: the same views over all of them, with an ``archive`` column); returns
    ``name``.

    Raises a :class:`ZnippyError` (and leaves ``con`` as it was) for a missing archive or one
    whose structure is bad; the rows of each table are checked in full when a query first scans
    them, and a query on an archive that changed since (an in-place append) fails with
    "archive changed since it was registered; register it again". Registering the same name
    again replaces every view of the earlier registration.
    """
    import duckdb

    paths, many = expand_archives(archives)
    if name is not None:
        name = sanitize_name(name)
    elif many:
        name = set_name(archives, paths)
    else:
        name = default_name(paths[0])
    # every check happens here, before con changes
    plans = plan_many(paths, name) if many else [plan_views(paths[0], name)]
    views = union_views(plans) if many else plans[0].views
    install(con, list(dict.fromkeys(c for p in plans for c in capabilities_of(p.archive))))
    if name in _state(con).objects:  # replacing: drop views the new archive may not have
        unregister(con, name)
    objects = {k: v for plan in plans for k, v in plan.objects.items()}
    for obj_name, table in objects.items():
        con.register(obj_name, table)
    _state(con).objects[name] = list(objects)
    functions = {k: v for plan in plans for k, v in plan.functions.items()}
    for fn_name, (fn, params, returns) in functions.items():
        con.create_function(  # type: ignore[call-overload]  # stubs want an enum for "arrow"
            fn_name, fn, [duckdb.sqltype(p) for p in params], duckdb.sqltype(returns),
            type="arrow", side_effects=False)
    _state(con).functions[name] = list(functions)
    try:
        _run(con, ";\n".join(f'CREATE OR REPLACE TEMP VIEW "{name}_{suffix}" AS {sql}'
                             for suffix, sql in views.items()))
    except duckdb.Error as exc:  # checked archives should never get here: say which it was
        unregister(con, name)
        raise FormatError(f"DuckDB refused the views of this archive: {exc}",
                          path=", ".join(paths)) from None
    return name


def unregister(con: "duckdb.DuckDBPyConnection", name: str) -> None:
    """Drop every view and Arrow object ``register`` made for ``name``."""
    _run(con, ";\n".join(f'DROP VIEW IF EXISTS "{name}_{suffix}"' for suffix in VIEW_SUFFIXES))
    for obj in _state(con).objects.pop(name, []):
        con.unregister(obj)
    for fn in _state(con).functions.pop(name, []):
        con.remove_function(fn)


def connect(*archives: str | os.PathLike[str], database: str = ":memory:"
            ) -> "duckdb.DuckDBPyConnection":
    """A new connection with ``archives`` registered under their stems' names (a glob
    under its default name, as :func:`register`)."""
    import duckdb

    con = duckdb.connect(database)
    try:
        for archive in archives:
            register(con, archive)
    except ZnippyError:
        con.close()
        raise
    return con


def files_arrow(con: "duckdb.DuckDBPyConnection", name: str) -> pa.Table:
    """``<name>_files`` as an Arrow table."""
    return con.sql(f'SELECT * FROM "{name}_files"').to_arrow_table()


__all__ = ["register", "unregister", "install", "connect", "sanitize_name",
           "default_name", "files_arrow", "expand_archives"]
