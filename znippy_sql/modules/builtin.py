"""The modules that ship with znippy_sql, registered when the registry first loads."""

from __future__ import annotations

from . import register
from .cargo import CargoModule
from .maven import MavenModule
from .npm import NpmModule
from .pypi import PypiModule

BUILTIN = (MavenModule(), CargoModule(), NpmModule(), PypiModule())

for _module in BUILTIN:
    register(_module)
