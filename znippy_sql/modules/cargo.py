"""Rust crates by file name: ``{name}-{version}.crate`` (the crates.io download format).

A crate name is ASCII letters, digits, ``-`` and ``_``, starting with a letter (at most 64
characters); the version is SemVer 2.0. Names may hold dashes and digits
(``tokio-util-0.7.10.crate``, ``base64-0.21.5.crate``): the version is the first ``-``-separated
tail that is a full SemVer version (pre-release and build metadata included).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from .semver import SEMVER

NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def split_name_version(stem: str, name: re.Pattern[str]) -> tuple[str, str] | None:
    """``name-version`` split at the first dash whose tail is a SemVer version."""
    start = 0
    while (dash := stem.find("-", start)) != -1:
        if name.match(stem[:dash]) and SEMVER.match(stem[dash + 1:]):
            return stem[:dash], stem[dash + 1:]
        start = dash + 1
    return None


class CargoModule:
    name = "cargo"
    #: the only paths it may claim (``modules.claim`` asks no other)
    claim_suffixes = (".crate",)
    pkg_type = 2
    fields = (
        pa.field("cargo_name", pa.utf8()),
        pa.field("cargo_version", pa.utf8()),
    )

    def claims(self, relative_path: str) -> bool:
        if not relative_path.endswith(self.claim_suffixes):
            return False  # (what parse_filename asks first)
        return parse_filename(relative_path.rsplit("/", 1)[-1]) is not None

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]:
        return parse_filename(relative_path.rsplit("/", 1)[-1]) or {}

    @property
    def commands(self) -> tuple[Any, ...]:
        """``lookup NAME[@VERSION]`` and ``versions NAME`` (SemVer precedence)."""
        from . import semver
        from .commands import NameVersion

        return NameVersion(self, "cargo_name", "cargo_version", semver.key, "@").commands()


def parse_filename(filename: str) -> dict[str, Any] | None:
    if not filename.endswith(".crate"):
        return None
    found = split_name_version(filename[: -len(".crate")], NAME)
    if found is None:
        return None
    return {"cargo_name": found[0], "cargo_version": found[1]}
