"""Which paths a reading command works on: named members, ``--glob``s and ``--exclude``s,
the way tar users expect them.

- a named ``PATH`` selects that file, or everything under it when it is a directory
  (``lib`` → ``lib/...``); a name that selects nothing is an error before any work;
- ``--glob`` (repeatable): a path matching any of them (``*`` spans ``/``);
- ``--exclude`` (repeatable): a path, or any directory above it, matching one of them is
  left out (``--exclude '*/tests'`` leaves out every ``tests`` tree).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from ..errors import NotFoundError


class PathFilter:
    """Members, globs and excludes; :meth:`keep` says whether a path passes."""

    def __init__(self, *, members: Sequence[str] = (), globs: Sequence[str] = (),
                 excludes: Sequence[str] = ()) -> None:
        self.members = [m.strip("/") for m in members if m.strip("/")]
        self._globs = [re.compile(fnmatch.translate(g)) for g in globs]
        self._excludes = [re.compile(fnmatch.translate(g)) for g in excludes]
        self.used: set[str] = set()  # members that selected something

    def __bool__(self) -> bool:
        return bool(self.members or self._globs or self._excludes)

    def keep(self, path: str) -> bool:
        if self.members:
            hit = next((m for m in self.members if path == m or path.startswith(m + "/")), None)
            if hit is None:
                return False
            self.used.add(hit)
        if self._globs and not any(rx.match(path) for rx in self._globs):
            return False
        if self._excludes:
            parts = path.split("/")
            for i in range(1, len(parts) + 1):
                head = "/".join(parts[:i])
                if any(rx.match(head) for rx in self._excludes):
                    return False
        return True

    def apply(self, paths: Sequence[str], *, archive: str) -> list[str]:
        """The paths that pass; a named member that selected none is a ``NotFoundError``."""
        kept = [p for p in paths if self.keep(p)]
        missing = [m for m in self.members if m not in self.used]
        if missing:
            names = ", ".join(repr(m) for m in missing[:5])
            raise NotFoundError(names + (f" and {len(missing) - 5} more" if len(missing) > 5
                                         else "") + ": Not found in archive", path=archive)
        return kept
