"""Python distributions by file name: wheels and sdists, per the PyPA packaging specifications.

- wheel: ``{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`` (binary distribution
  format). Tags are kept as written, compressed tag sets included
  (``manylinux_2_17_x86_64.manylinux2014_x86_64``).
- sdist: ``{name}-{version}.tar.gz`` (source distribution format), plus the legacy ``.zip`` and
  ``.tar.bz2`` archives older releases used. Legacy names keep
  dashes (``python-dateutil-2.8.2.tar.gz``): the version is the first ``-``-separated tail that
  is a valid PEP 440 version.

``pypi_name`` is normalised as the simple repository API says (PEP 503: runs of ``-_.`` become
one ``-``, lower case); ``pypi_version`` is kept as written. Eggs, ``.metadata`` and ``.asc``
sidecars are not claimed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

#: PEP 440 version (the specification's own regex, with the optional leading ``v``).
VERSION = re.compile(
    r"""^v?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*
        (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?
        (?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?
        (?:[-_.]?dev[-_.]?[0-9]*)?
        (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$""",
    re.VERBOSE | re.IGNORECASE,
)
#: A distribution name (core metadata ``Name``).
NAME = re.compile(r"^(?:[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_TAG = re.compile(r"^[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*$")
SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2")


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


class PypiModule:
    name = "pypi"
    #: the only paths it may claim (``modules.claim`` asks no other)
    claim_suffixes = (".whl", *SDIST_SUFFIXES)
    pkg_type = 4
    fields = (
        pa.field("pypi_name", pa.utf8()),
        pa.field("pypi_version", pa.utf8()),
        pa.field("pypi_build_tag", pa.utf8()),
        pa.field("pypi_python_tag", pa.utf8()),
        pa.field("pypi_abi_tag", pa.utf8()),
        pa.field("pypi_platform_tag", pa.utf8()),
        pa.field("pypi_kind", pa.utf8()),
    )
    #: PEP 503 name normalisation (the commands use it: pypi_commands.py)
    normalize = staticmethod(normalize)

    def claims(self, relative_path: str) -> bool:
        if not relative_path.endswith(self.claim_suffixes):
            return False  # (what parse_filename asks first)
        return parse_filename(relative_path.rsplit("/", 1)[-1]) is not None

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]:
        return parse_filename(relative_path.rsplit("/", 1)[-1]) or {}

    @property
    def commands(self) -> tuple[Any, ...]:
        """``lookup NAME[==VERSION]``, ``versions NAME``, ``deps NAME==VERSION``."""
        from .pypi_commands import make_commands

        return make_commands(self)


def parse_filename(filename: str) -> dict[str, Any] | None:
    if filename.endswith(".whl"):
        return parse_wheel(filename)
    return parse_sdist(filename)


def parse_wheel(filename: str) -> dict[str, Any] | None:
    parts = filename[: -len(".whl")].split("-")
    if len(parts) == 6:
        name, version, build, py, abi, plat = parts
        if not build[:1].isdigit() or not re.fullmatch(r"[0-9]+[A-Za-z0-9_.]*", build):
            return None
    elif len(parts) == 5:
        name, version, py, abi, plat = parts
        build = None
    else:
        return None
    if not NAME.match(name) or not VERSION.match(version):
        return None
    if not all(_TAG.match(t) for t in (py, abi, plat)):
        return None
    return {"pypi_name": normalize(name), "pypi_version": version, "pypi_build_tag": build,
            "pypi_python_tag": py, "pypi_abi_tag": abi, "pypi_platform_tag": plat,
            "pypi_kind": "wheel"}


def parse_sdist(filename: str) -> dict[str, Any] | None:
    if not filename.endswith(SDIST_SUFFIXES):
        return None
    suffix = next(s for s in SDIST_SUFFIXES if filename.endswith(s))
    stem = filename[: -len(suffix)]
    start = 0
    while (dash := stem.find("-", start)) != -1:
        name, version = stem[:dash], stem[dash + 1:]
        if NAME.match(name) and version[:1].isdigit() and VERSION.match(version):
            return {"pypi_name": normalize(name), "pypi_version": version,
                    "pypi_build_tag": None, "pypi_python_tag": None, "pypi_abi_tag": None,
                    "pypi_platform_tag": None, "pypi_kind": "sdist"}
        start = dash + 1
    return None
