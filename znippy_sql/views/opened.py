"""Archives kept open in this process: the one cache of every reader that is handed archives
by name, again and again (the engines' workers, the SQL UDFs, Polars' ``read_files``).

One entry per path or URL and storage options. A local file is opened again when it changed
(inode, size, mtime); a remote object is opened once, its reads pinned to the version first
seen (a changed object fails them clearly: docs/remote.md). The last :data:`KEEP` entries are
kept; an older one is dropped, not closed (a reader on another thread may still hold it; its
memory map goes with the last reference). :func:`bind` serves a path from a given archive
(a store snapshot whose blobs live elsewhere) until the file changes; such an entry is kept.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..read.reader import Archive, open_archive
from ..remote.url import is_url, local_path

#: archives kept open (bound ones are not counted)
KEEP = 32

Key = tuple[str, tuple[tuple[str, str], ...]]
Stamp = tuple[int, int, int]


@dataclass(frozen=True)
class _Entry:
    archive: Archive
    stamp: Stamp | None  # None: a remote object (never reopened)
    bound: bool = False


_LOCK = threading.Lock()
_OPEN: "OrderedDict[Key, _Entry]" = OrderedDict()


def _key(uri: str, storage_options: Mapping[str, Any] | None) -> Key:
    return uri, tuple(sorted((str(k), str(v)) for k, v in (storage_options or {}).items()))


def _stamp(uri: str) -> Stamp | None:
    """The local file's identity (OSError if it cannot be read); None for a remote object."""
    path = local_path(uri) if is_url(uri) else uri
    if path is None:
        return None
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def opened(uri: str, storage_options: Mapping[str, Any] | None = None) -> Archive:
    """The open archive ``uri`` of this process (opened now if it is not, or if its file
    changed)."""
    key = _key(uri, storage_options)
    try:
        stamp = _stamp(uri)
    except OSError:  # let the open say what is wrong with the path
        return open_archive(uri, storage_options=storage_options)
    with _LOCK:
        hit = _OPEN.get(key)
        if hit is not None and hit.stamp == stamp:
            _OPEN.move_to_end(key)
            return hit.archive
    archive = open_archive(uri, storage_options=storage_options)
    with _LOCK:
        hit = _OPEN.get(key)
        if hit is not None and hit.stamp == stamp:  # another thread opened it meanwhile
            archive.close()
            return hit.archive
        _OPEN[key] = _Entry(archive, stamp)
        unbound = [k for k, e in _OPEN.items() if not e.bound]
        for old in unbound[: max(len(unbound) - KEEP, 0)]:
            del _OPEN[old]
    return archive


def bind(path: str, archive: Archive) -> None:
    """Serve the local ``path`` from ``archive`` until the file at ``path`` changes."""
    stamp = _stamp(path)
    with _LOCK:
        _OPEN[_key(path, None)] = _Entry(archive, stamp, bound=True)


def forget() -> None:
    """Drop every entry (the next :func:`opened` opens again)."""
    with _LOCK:
        _OPEN.clear()
