"""Package-type modules: which files a module claims, the prefixed columns it owns.

The core knows no module by name. It asks this registry for the module of a pkg_type (or,
with ``pkg_type="auto"``, for the first module that claims a path) and lets the module fill
its own columns on ``chunk_seq = 0`` rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa


@runtime_checkable
class Module(Protocol):
    #: short name: the group's ``module_name`` and the prefix of every column it owns
    name: str
    pkg_type: int
    fields: Sequence[pa.Field]

    def claims(self, relative_path: str) -> bool: ...

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]: ...


_REGISTRY: dict[str, Module] = {}
_LOADED = False


def register(module: Module) -> None:
    """Add a module; its columns must all start with ``<name>_``."""
    for f in module.fields:
        if not f.name.startswith(module.name + "_"):
            raise ValueError(f"module {module.name!r}: column {f.name!r} lacks its prefix")
    _REGISTRY[module.name] = module


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    try:
        from . import builtin  # noqa: F401  (registers the shipped modules)
    except ImportError:
        pass
    from importlib.metadata import entry_points

    for ep in entry_points(group="znippy_sql.modules"):
        obj = ep.load()
        register(obj() if isinstance(obj, type) else obj)


def all_modules() -> list[Module]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda m: (m.pkg_type, m.name))


def for_pkg_type(pkg_type: int) -> Module | None:
    """The module that owns ``pkg_type`` (first by name when several do), if any."""
    return next((m for m in all_modules() if m.pkg_type == pkg_type), None)


def claim(relative_path: str) -> Module | None:
    """The first module (by pkg_type, then name) that claims ``relative_path``."""
    return next((m for m in all_modules() if m.claims(relative_path)), None)
