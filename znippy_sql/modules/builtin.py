"""The modules that ship with znippy_sql; the registry registers them when it first loads."""

from __future__ import annotations

from .cargo import CargoModule
from .maven import MavenModule
from .npm import NpmModule
from .pypi import PypiModule

#: In pkg_type order, the order ``--pkg-type auto`` asks them in.
BUILTIN = (MavenModule(), CargoModule(), NpmModule(), PypiModule())
