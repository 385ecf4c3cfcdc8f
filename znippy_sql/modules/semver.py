"""SemVer 2.0.0 precedence (semver.org §11), the order cargo and npm sort versions in.

``1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-alpha.beta < 1.0.0-beta < 1.0.0-beta.2 < 1.0.0-beta.11
< 1.0.0-rc.1 < 1.0.0``: numbers compare numerically, identifiers with letters in ASCII order, a
numeric identifier sorts before an alphanumeric one, a longer pre-release list after its prefix,
and a release after all its pre-releases. Build metadata (``+...``) has no precedence; the key
keeps it last so that equal versions still sort the same way every time.
"""

from __future__ import annotations

import re
from typing import Any

#: SemVer 2.0.0 (semver.org's own regex).
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


def key(version: str) -> tuple[Any, ...]:
    """A sort key with SemVer precedence; a string that is not SemVer sorts before all."""
    m = SEMVER.match(version)
    if m is None:
        return (0, version)
    major, minor, patch, pre, build = m.groups()
    if pre is None:
        pre_key: tuple[Any, ...] = (1,)
    else:
        pre_key = (0, tuple((0, int(p), "") if p.isdigit() else (1, 0, p)
                            for p in pre.split(".")))
    return (1, int(major), int(minor), int(patch), pre_key, build or "")
