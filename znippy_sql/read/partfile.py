"""Files written atomically: a temporary sibling, renamed to its name once complete and checked.

Every file an extract writes is created by the core (``native/src/extract.rs``: ``O_EXCL``,
never through a symlink) as ``.NAME.znippy-part-PID`` in its destination directory (a name too
long for the file system: the first 32 hex digits of its BLAKE3 for NAME) and renamed over
``NAME`` only when all its bytes are written and checked (with ``--preserve``, its mode and
mtime are set before the rename; with ``--keep-old-files``/``--skip-old-files`` it is hard
linked, so a name that appeared meanwhile is never replaced). A killed extract (SIGKILL, the
OOM killer, a CI timeout) therefore never leaves a truncated file under a final name; it may
leave temporaries, which the next extract into the same directories removes
(:func:`remove_leftovers`: those of processes no longer running).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from ..format.fsio import pid_alive

_LEFTOVER = re.compile(r"^\..*\.znippy-part-(\d+)$", re.S)


def remove_leftovers(directories: Iterable[str]) -> int:
    """Remove the temporaries of extracts no longer running from these (checked, existing)
    directories; how many."""
    n = 0
    for directory in directories:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            m = _LEFTOVER.match(entry.name)
            if m is None or pid_alive(int(m.group(1))):
                continue
            try:
                if entry.is_symlink() or entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
                    n += 1
            except OSError:
                pass
    return n
