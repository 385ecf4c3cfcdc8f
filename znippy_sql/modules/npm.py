"""npm package tarballs: ``{name}-{version}.tgz``, scoped packages under an ``@scope`` directory.

The file name of a scoped package's tarball carries no scope (the registry serves
``@babel/core`` as ``@babel/core/-/core-7.23.0.tgz``), so the scope is taken from the path: an
``@scope`` segment followed by the package's own directory. ``npm pack`` names a scoped tarball
``babel-core-7.23.0.tgz``; from that name alone the scope cannot be told, so it is recorded
unscoped (``babel-core``). The version is SemVer 2.0, found as in the cargo module.

Helm charts are also ``name-semver.tgz``; no helm module ships, so the npm module claims them
under ``--pkg-type auto`` (docs/modules.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from .cargo import split_name_version

#: npm package name (without scope): URL-safe, no leading dot or underscore, at most 214.
NAME = re.compile(r"^[A-Za-z0-9~-][A-Za-z0-9._~-]{0,213}$")
SCOPE = re.compile(r"^@[A-Za-z0-9~-][A-Za-z0-9._~-]*$")


class NpmModule:
    name = "npm"
    #: the only paths it may claim (``modules.claim`` asks no other)
    claim_suffixes = (".tgz",)
    pkg_type = 3
    fields = (
        pa.field("npm_name", pa.utf8()),
        pa.field("npm_version", pa.utf8()),
    )

    def claims(self, relative_path: str) -> bool:
        if not relative_path.endswith(self.claim_suffixes):
            return False  # (what parse_path asks first)
        return parse_path(relative_path) is not None

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]:
        return parse_path(relative_path) or {}

    @property
    def commands(self) -> tuple[Any, ...]:
        """``lookup [@SCOPE/]NAME[@VERSION]`` and ``versions NAME`` (SemVer precedence)."""
        from . import semver
        from .commands import NameVersion

        return NameVersion(self, "npm_name", "npm_version", semver.key, "@").commands()


def parse_path(relative_path: str) -> dict[str, Any] | None:
    *dirs, filename = relative_path.split("/")
    if not filename.endswith(".tgz"):
        return None
    found = split_name_version(filename[: -len(".tgz")], NAME)
    if found is None:
        return None
    name, version = found
    for i, segment in enumerate(dirs[:-1]):
        if SCOPE.match(segment) and dirs[i + 1] == name:
            name = f"{segment}/{name}"
            break
    return {"npm_name": name, "npm_version": version}
