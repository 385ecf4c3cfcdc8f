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

import os
import re
import weakref
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import ZnippyError
from .plan import plan_views

if TYPE_CHECKING:
    import duckdb

#: Every view ``register`` may create, by suffix (``<name>_<suffix>``).
VIEW_SUFFIXES = ("files", "chunks", "manifest", "groups", "lookup", "meta", "signatures",
                 "git_objects", "git_commits", "git_reach", "_archive")


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
        self.objects: dict[str, list[str]] = {}


_STATES: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()


def _state(con: "duckdb.DuckDBPyConnection") -> _State:
    state = _STATES.get(con)
    if state is None:
        state = _STATES[con] = _State()
    return state


def install(con: "duckdb.DuckDBPyConnection") -> None:
    """Load the UDFs (``udfs/``) and the macros (``queries/macros.sql``) into ``con``.

    Both are connection-local (Python UDFs, ``TEMP`` macros), like the views ``register``
    makes; installing twice is a no-op.
    """
    state = _state(con)
    if state.installed:
        return
    import duckdb

    from znippy_sql.udfs.archive_udfs import UDFS
    from znippy_sql.udfs.git_udfs import UDFS as GIT_UDFS

    from .sql import load_sql

    for name, fn, params, returns, side_effects in UDFS + GIT_UDFS:
        try:
            con.remove_function(name)
        except duckdb.Error:
            pass
        con.create_function(name, fn, [duckdb.sqltype(p) for p in params],
                            duckdb.sqltype(returns), type="arrow", side_effects=side_effects)
    for script in ("macros.sql", "git_macros.sql"):
        _run(con, ";\n".join(_statements(load_sql(script))))
    state.installed = True


def _statements(script: str) -> list[str]:
    lines = [ln for ln in script.splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def register(con: "duckdb.DuckDBPyConnection", archive_path: str | os.PathLike[str],
             name: str | None = None, *, trust: Any = None) -> str:
    """Create the ``<name>_*`` views of one archive in ``con``; returns ``name``.

    Raises a :class:`ZnippyError` (and leaves ``con`` as it was) for a missing or bad archive.
    Registering the same name again replaces every view of the earlier archive.
    """
    path = os.fspath(archive_path)
    name = sanitize_name(name) if name is not None else default_name(path)
    plan = plan_views(path, name, trust=trust)  # every check happens here, before con changes
    install(con)
    if name in _state(con).objects:  # replacing: drop views the new archive may not have
        unregister(con, name)
    for obj_name, table in plan.objects.items():
        con.register(obj_name, table)
    _state(con).objects[name] = list(plan.objects)
    _run(con, ";\n".join(f'CREATE OR REPLACE TEMP VIEW "{view}" AS {sql}'
                         for view, sql in plan.views.items()))
    return name


def unregister(con: "duckdb.DuckDBPyConnection", name: str) -> None:
    """Drop every view and Arrow object ``register`` made for ``name``."""
    _run(con, ";\n".join(f'DROP VIEW IF EXISTS "{name}_{suffix}"' for suffix in VIEW_SUFFIXES))
    for obj in _state(con).objects.pop(name, []):
        con.unregister(obj)


def connect(*archives: str | os.PathLike[str], database: str = ":memory:"
            ) -> "duckdb.DuckDBPyConnection":
    """A new connection with ``archives`` registered under their stems' names."""
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
           "default_name", "files_arrow"]
