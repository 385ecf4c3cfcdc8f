"""Which views exist and where each is defined, without importing the definitions.

A view's definition lives in its capability's package; the registry names it as
``"package.module:ATTRIBUTE"`` with the reserved sections that make it present, so asking
which views an archive has (DuckDB's ``register``, ``views.names()``) imports nothing of a
capability the archive does not use (a plain archive loads no git code). Third-party views
announce themselves in the ``znippy_sql.views`` entry-point group (name = the view's name,
value = ``module:ATTRIBUTE`` of a :class:`~znippy_sql.views.base.View`).

Adding a built-in view: write its ``View`` in ``<capability>/views.py``, then add one line
here (docs/design.md, "Adding a view").
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import ZnippyError
from ..format.schema import (GIT_GRAPH, GIT_OID, GIT_REACH, GIT_REFS, GIT_SECRETS, META,
                             SIGN_ARCHIVE, SIGN_ARTIFACTS)
from .base import View

#: name → (where its View is defined, the reserved sections that make it present: any)
BUILTIN: dict[str, tuple[str, tuple[str, ...]]] = {
    "files": ("znippy_sql.views.files:FILES", ()),
    "chunks": ("znippy_sql.views.files:CHUNKS", ()),
    "groups": ("znippy_sql.views.files:GROUPS", ()),
    "manifest": ("znippy_sql.views.tables:MANIFEST", ()),
    "lookup": ("znippy_sql.views.tables:LOOKUP", ()),
    "meta": ("znippy_sql.provenance.views:META_VIEW", (META,)),
    "signatures": ("znippy_sql.provenance.views:SIGNATURES", (SIGN_ARTIFACTS, SIGN_ARCHIVE)),
    "git_objects": ("znippy_sql.git.views:OBJECTS_VIEW", (GIT_OID,)),
    "git_commits": ("znippy_sql.git.views:COMMITS_VIEW", (GIT_GRAPH,)),
    "git_reach": ("znippy_sql.git.views:REACH_VIEW", (GIT_REACH,)),
    "git_refs": ("znippy_sql.git.views:REFS_VIEW", (GIT_REFS,)),
    "git_secrets": ("znippy_sql.git.views:SECRETS_VIEW", (GIT_SECRETS,)),
}
ENTRY_POINT_GROUP = "znippy_sql.views"

_LOADED: dict[str, View] = {}
_EXTRA: dict[str, str] | None = None


def _entry_points() -> dict[str, str]:
    global _EXTRA
    if _EXTRA is None:
        from importlib.metadata import entry_points

        _EXTRA = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)
                  if ep.name not in BUILTIN}
    return _EXTRA


def names() -> list[str]:
    """Every view's name: the built-in ones in their order, then third-party ones by name."""
    return [*BUILTIN, *sorted(_entry_points())]


def register(view: View) -> None:
    """Add (or replace) a view defined at run time."""
    if not isinstance(view, View):
        raise ValueError(f"{view!r} is not a znippy_sql.views.View")
    _LOADED[view.name] = view
    _entry_points()[view.name] = ""


def get(name: str) -> View:
    """The view called ``name`` (its module imported now)."""
    view = _LOADED.get(name)
    if view is not None:
        return view
    where = BUILTIN[name][0] if name in BUILTIN else _entry_points().get(name)
    if not where:
        raise ValueError(f"unknown view {name!r}; one of {', '.join(names())}")
    module, _, attr = where.partition(":")
    try:
        obj: Any = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ZnippyError(f"view {name!r} ({where}) cannot be loaded: {exc}") from None
    if not isinstance(obj, View) or obj.name != name:
        raise ZnippyError(f"view {name!r} ({where}) is not a View named {name!r}")
    _LOADED[name] = obj
    return obj


def sections(name: str) -> tuple[str, ...]:
    """The reserved sections that make view ``name`` present (any; none: always present)."""
    if name in BUILTIN:
        return BUILTIN[name][1]
    return get(name).sections


def present(archive: Any, name: str) -> bool:
    """Whether ``archive`` has view ``name`` (decided from its manifest, nothing imported for
    a built-in view)."""
    needs = sections(name)
    return not needs or any(archive.has_section(s) for s in needs)
