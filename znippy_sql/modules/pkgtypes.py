"""pkg_type numbers and names: FORMAT §3's built-in ones (``format.schema.PKG_TYPES``), then
the module registry's (a module's name is its pkg_type's name), loaded only when a name or a
number is not a built-in one (a plain archive loads no module)."""

from __future__ import annotations

from ..errors import OptionError
from ..format.schema import PKG_TYPE_NAMES, PKG_TYPES
from . import all_modules, by_name, for_pkg_type


def resolve_pkg_type(value: int | str | None) -> int:
    """A pkg_type given as a number or a name (``'maven'``) → its number; anything else is
    an :class:`~znippy_sql.errors.OptionError` (a ``ValueError`` too)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise OptionError(f"pkg_type must be a number or a name, not {value!r}")
    if isinstance(value, int):
        if not -128 <= value <= 127 or value < 0:
            raise OptionError(f"pkg_type {value} is not in 0..127")
        return value
    text = str(value).strip().lower()
    if text.lstrip("-").isdigit():
        return resolve_pkg_type(int(text))
    if text in PKG_TYPES:
        return PKG_TYPES[text]
    module = by_name(text)
    if module is not None:
        return module.pkg_type
    known = {*PKG_TYPES, *(m.name for m in all_modules())}
    raise OptionError(f"unknown pkg_type {value!r}; known: {', '.join(sorted(known))}")


def pkg_type_name(value: int) -> str:
    """The name of a pkg_type: FORMAT §3's, else its module's (the registry), else the
    number."""
    name = PKG_TYPE_NAMES.get(value)
    if name is not None:
        return name
    module = for_pkg_type(value)  # None outside 1..127: no module may own it
    return module.name if module is not None else str(value)
