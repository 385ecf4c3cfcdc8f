"""Stale staging siblings: what a killed one-shot writer leaves next to its output.

A writer puts its bytes in ``.<name>.znippy-staging-<pid>-<id>`` (``writer.staging_prefix``)
and renames it into place. A writer killed before its rename
(SIGKILL, power loss) leaves one behind; the next write to the same name removes every such
sibling whose process is gone (:func:`remove_stale`). A sibling of a live process is another
writer at work and is left alone.
"""

from __future__ import annotations

import os
import re

from ..format.fsio import pid_alive

_STAGING = re.compile(r"\.(?P<name>.+)\.znippy-staging-(?P<pid>[0-9]+)-[0-9a-f]+\Z")


def stale_siblings(path: str) -> list[str]:
    """Staging siblings of ``path`` left by processes that no longer run."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        found = _STAGING.match(name)
        if found is None or found["name"] != base or pid_alive(int(found["pid"])):
            continue
        out.append(os.path.join(folder, name))
    return sorted(out)


def remove_stale(path: str) -> list[str]:
    """Remove the stale staging siblings of ``path``; the ones removed."""
    gone = []
    for sibling in stale_siblings(path):
        try:
            os.unlink(sibling)
            gone.append(sibling)
        except FileNotFoundError:  # another writer to the same name removed it first
            pass
    return gone
