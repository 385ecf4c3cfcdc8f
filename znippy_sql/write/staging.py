"""Staging siblings: where every writer of a whole archive puts its bytes before the rename.

One name for all of them: ``.<name>.znippy-staging-<pid>-<token>`` beside the output ``name``
(:func:`staging_name`), used by the one-shot writer, ``compact``, the store's seal, ``git
import`` and the git seal, each through :class:`Staging`: the stale siblings are removed
first, the bytes are written under the staging name, :meth:`Staging.commit` renames it onto
the output (and fsyncs the directory), and any exit without a commit removes it. So the
output holds the old or the new complete archive at every instant.

A writer killed before its rename (SIGKILL, power loss) leaves its sibling behind; the next
writer of the same output removes every sibling whose process is gone (:func:`remove_stale`).
A sibling of a live process is another writer at work and is left alone. A directory walk for
a write to ``name`` leaves them all out (:func:`staging_prefix`).
"""

from __future__ import annotations

import os
import re
from types import TracebackType

from ..format.fsio import fsync_dir, pid_alive

_STAGING = re.compile(r"\.(?P<name>.+)\.znippy-staging-(?P<pid>[0-9]+)-[0-9a-f]+\Z")


def staging_prefix(path: str | os.PathLike[str]) -> str:
    """How every staging sibling of the archive ``path`` begins (``<pid>-<token>`` follows)."""
    full = os.path.abspath(path)
    return os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.znippy-staging-")


def staging_name(path: str | os.PathLike[str]) -> str:
    """A new staging sibling's name for ``path``: this process's, and no other's."""
    return f"{staging_prefix(path)}{os.getpid()}-{os.urandom(6).hex()}"


def stale_siblings(path: str | os.PathLike[str]) -> list[str]:
    """Staging siblings of ``path`` left by processes that no longer run."""
    full = os.path.abspath(path)
    folder, base = os.path.dirname(full), os.path.basename(full)
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


def remove_stale(path: str | os.PathLike[str]) -> list[str]:
    """Remove the stale staging siblings of ``path``; the ones removed."""
    gone = []
    for sibling in stale_siblings(path):
        try:
            os.unlink(sibling)
            gone.append(sibling)
        except FileNotFoundError:  # another writer to the same name removed it first
            pass
    return gone


class Staging:
    """A staging sibling of ``path`` for one write (a context manager).

    >>> import tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "a.znippy")
    >>> with Staging(out) as staged:
    ...     with open(staged.name, "wb") as fh:
    ...         _ = fh.write(b"bytes")
    ...     staged.commit(fsync=False)
    >>> with open(out, "rb") as fh:
    ...     fh.read()
    b'bytes'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        #: where the bytes go (created by the writer)
        self.name = staging_name(self.path)
        self.committed = False

    def __enter__(self) -> Staging:
        self.start()
        return self

    def start(self) -> None:
        """Remove what a killed writer of the same output left behind."""
        remove_stale(self.path)

    def commit(self, *, fsync: bool = True) -> None:
        """Rename the staging file onto the output; ``fsync``: then fsync the directory."""
        os.replace(self.name, self.path)
        self.committed = True
        if fsync:
            fsync_dir(self.path)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.discard()

    def discard(self) -> None:
        """Remove the staging file unless it was committed."""
        if not self.committed:
            try:
                os.unlink(self.name)
            except FileNotFoundError:
                pass
