"""Package-type modules: which files a module claims, the prefixed columns it owns, and the
commands it brings.

The core knows no module by name. It asks this registry for the module of a pkg_type (or,
with ``pkg_type="auto"``, for the first module that claims a path) and lets the module fill
its own columns on ``chunk_seq = 0`` rows. A module may also have ``commands`` (a sequence of
:class:`~znippy_sql.modules.commands.Command`): ``znippy-sql <name> ARCHIVE <command> ...``.
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

    @property
    def fields(self) -> Sequence[pa.Field]:  # read-only: a module's tuple of fields fits
        ...

    def claims(self, relative_path: str) -> bool: ...

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]: ...

    # Optional: ``commands``, a sequence of ``modules.commands.Command`` (checked where used,
    # so a module can import its command code only when a command runs); ``claim_suffixes``,
    # a tuple of path endings outside which ``claims`` is always False, and
    # ``claim_pattern``, a compiled regular expression a path it claims always matches
    # (``search``): :func:`claim_all` asks it only about such paths (no call a file for
    # the rest).


#: Third-party modules announce themselves in this entry-point group (docs/modules.md).
ENTRY_POINT_GROUP = "znippy_sql.modules"

_REGISTRY: dict[str, Module] = {}
_LOADED = False


def register(module: Module) -> None:
    """Add a module (a later one of the same name replaces the earlier).

    Its name must be a plain identifier (never a reserved ``__name__``), its pkg_type in
    1..127, and every column a nullable ``pa.Field`` named ``<name>_...``.
    """
    if not isinstance(module, Module):
        raise ValueError(f"{module!r} is not a package-type module (name, pkg_type, fields, "
                         "claims, columns)")
    name = module.name
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"module name {name!r} must be an identifier not starting with '_'")
    if not isinstance(module.pkg_type, int) or not 1 <= module.pkg_type <= 127:
        raise ValueError(f"module {name!r}: pkg_type {module.pkg_type!r} is not in 1..127")
    for f in module.fields:
        if not isinstance(f, pa.Field) or not f.name.startswith(name + "_"):
            raise ValueError(f"module {name!r}: column {f!r} lacks its prefix {name + '_'!r}")
        if not f.nullable:
            raise ValueError(f"module {name!r}: column {f.name!r} must be nullable")
    _REGISTRY[name] = module


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    from .builtin import BUILTIN

    for module in BUILTIN:
        register(module)
    from importlib.metadata import entry_points

    from ..errors import ZnippyError

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
            register(obj() if isinstance(obj, type) else obj)
        except Exception as exc:
            raise ZnippyError(f"package-type module entry point {ep.name!r} ({ep.value}) "
                              f"cannot be loaded: {exc}") from exc
    _LOADED = True  # only once everything loaded: a broken plugin keeps being reported


def all_modules() -> list[Module]:
    _load()
    return sorted(_REGISTRY.values(), key=lambda m: (m.pkg_type, m.name))


def for_pkg_type(pkg_type: int) -> Module | None:
    """The module that owns ``pkg_type`` (first by name when several do), if any."""
    if not 1 <= pkg_type <= 127:
        return None  # no module may own it (register): the untyped group loads no plugins
    return next((m for m in all_modules() if m.pkg_type == pkg_type), None)


def by_name(name: str) -> Module | None:
    """The registered module called ``name``, if any."""
    _load()
    return _REGISTRY.get(name)


def claim(relative_path: str, among: Sequence[Module] | None = None) -> Module | None:
    """The first module (by pkg_type, then name) that claims ``relative_path``; ``among``:
    :func:`all_modules` as the caller took it once."""
    return claim_all([relative_path], among)[0]


def claim_all(paths: Sequence[str], among: Sequence[Module] | None = None
              ) -> list[Module | None]:
    """:func:`claim` of each of ``paths``, in one call (a writer's batch): each module is
    asked only about the paths no module before it claimed, and, when it declares them, only
    about those ending with one of its ``claim_suffixes`` and matching its
    ``claim_pattern`` (no call a path for the rest)."""
    out: list[Module | None] = [None] * len(paths)
    left: Sequence[int] = range(len(paths))
    for m in all_modules() if among is None else among:
        suffixes = getattr(m, "claim_suffixes", None)
        pattern = getattr(m, "claim_pattern", None)
        search = None if pattern is None else pattern.search
        claims = m.claims
        # one comprehension a module a batch (no call a path but ``claims``)
        taken = [i for i in left if (suffixes is None or paths[i].endswith(suffixes))
                 and (search is None or search(paths[i])) and claims(paths[i])]
        for i in taken:
            out[i] = m
        if taken:
            left = [i for i in left if out[i] is None]
    return out
