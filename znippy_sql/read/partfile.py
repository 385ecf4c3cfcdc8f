"""Files written atomically: a temporary sibling, renamed to its name once complete and checked.

Every file an extract writes is created (``O_EXCL``, never through a symlink) as
``.NAME.znippy-part-PID`` in its destination directory and renamed over ``NAME`` only when all
its bytes are written and checked (with ``--preserve``, its mode and mtime are set before the
rename). A killed extract (SIGKILL, the OOM killer, a CI timeout) therefore never leaves a
truncated file under a final name; it may leave temporaries, which the next extract into the
same directories removes (:func:`remove_leftovers`: those of processes no longer running).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import threading
from collections.abc import Callable, Iterable

from ..format.fsio import pid_alive

SUFFIX = ".znippy-part-"
_LEFTOVER = re.compile(r"^\..*\.znippy-part-(\d+)$", re.S)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
NAME_MAX = 255


def tmp_name(target: str) -> str:
    """The temporary sibling of ``target`` this process writes (a name too long for the file
    system gets a short hashed one, still recognisable)."""
    directory, slash, name = target.rpartition(os.sep)
    suffix = f"{SUFFIX}{os.getpid()}"
    # a character is at most 4 bytes: most names need no encoding to know they fit
    if 4 * len(name) + len(suffix) + 1 > NAME_MAX \
            and len(os.fsencode(name)) + len(suffix) + 1 > NAME_MAX:
        name = hashlib.sha256(os.fsencode(name)).hexdigest()[:32]
    return f"{directory}{slash}.{name}{suffix}"


def create(target: str, made: set[str] | None = None) -> tuple[int, str]:
    """A descriptor of a new temporary file for ``target``, and its name. With ``made``, a
    missing parent directory is made, once per set (every path was checked: no symlink on
    the way). A temporary of this process left by an earlier failure is replaced."""
    tmp = tmp_name(target)
    try:
        return os.open(tmp, _CREATE, 0o644), tmp
    except FileNotFoundError:
        parent = target.rpartition(os.sep)[0]
        if made is None or parent in made:
            raise
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
        return create(target, made)
    except FileExistsError:
        remove(tmp)
        return os.open(tmp, _CREATE, 0o644), tmp


def remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Sink:
    """Where finished files go: ``publish`` renames a complete temporary over its target (after
    ``finish(tmp, archive_path)``, e.g. ``--preserve``'s mode and mtime) and records the path
    as done, from any thread: ``done`` is what is on disk under its final name. With
    ``replace=False`` a target that exists is left alone (``FileExistsError``)."""

    def __init__(self, prefix: str, finish: Callable[[str, str], None] | None = None, *,
                 replace: bool = True) -> None:
        self.prefix = prefix
        self.finish = finish
        self.replace = replace
        self.done: list[str] = []
        self._lock = threading.Lock()

    def publish(self, tmp: str, target: str, path: str) -> None:
        try:
            if self.finish is not None:
                self.finish(tmp, path)
            if self.replace:
                os.replace(tmp, target)
            else:
                place_new(tmp, target)
        except BaseException:
            remove(tmp)
            raise
        with self._lock:
            self.done.append(path)


def place_new(tmp: str, target: str) -> None:
    """Give ``tmp`` the name ``target`` unless that name exists (``FileExistsError``): a hard
    link, atomic (``O_EXCL``-like), then ``tmp`` removed; a file system without hard links
    falls back to a check and a rename."""
    try:
        os.link(tmp, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:  # no hard links here (EPERM, ENOTSUP, ...): as close as a rename gets
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "File exists", target) from None
        os.replace(tmp, target)
        return
    os.unlink(tmp)


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
