"""The tail cache: the bytes an open fetched, kept on disk per URL and ETag (or version).

A second open of an unchanged archive sends one conditional request (the suffix GET with
``If-None-Match``): ``304 Not Modified``, or a reply with the cached ETag, size and version
(a server that ignores ``If-None-Match`` on a range), and the cached tail is used; any other
answer is the new tail, which replaces the entry. One file per URL under the cache directory
(``$ZNIPPY_SQL_CACHE``, else ``$XDG_CACHE_HOME/znippy-sql/tails``, else
``~/.cache/znippy-sql/tails``), written atomically: a header line of JSON (URL, ETag,
version, size, and the extents held: ``[start, length]`` each, the first one reaching the end
of the object), then the extents' bytes one after another. It holds every index range the
reader kept (the suffix, the rest of the manifest, the lookup with the trie, sub-indexes read),
so a second run asks for none of them again. A damaged entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from typing import Any

from .client import Meta, Tail

#: the largest tail kept (bigger tails are fetched each time)
MAX_ENTRY = 256 << 20


def default_dir() -> str:
    env = os.environ.get("ZNIPPY_SQL_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "znippy-sql", "tails")


class TailCache:
    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.dir = os.fspath(directory) if directory is not None else default_dir()

    def _file(self, url: str) -> str:
        return os.path.join(self.dir, hashlib.sha256(url.encode()).hexdigest() + ".tail")

    def get(self, url: str) -> Tail | None:
        try:
            with open(self._file(url), "rb") as fh:
                head = json.loads(fh.readline())
                data = fh.read()
        except (OSError, ValueError):
            return None
        try:
            size = int(head["size"])
            extents = [(int(a), int(n)) for a, n in head["extents"]]
            if head["url"] != url or not head["etag"] or not extents or \
                    len(data) != sum(n for _, n in extents) or sum(extents[0]) != size:
                return None
            if any(a < 0 or n <= 0 or a + n > size for a, n in extents):
                return None
            parts, at = [], 0
            for a, n in extents:
                parts.append((a, data[at : at + n]))
                at += n
            return Tail(Meta(size, head["etag"], head.get("version")), parts[0][0],
                        parts[0][1], tuple(parts[1:]))
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, url: str, meta: Meta, extents: Sequence[tuple[int, Any]]) -> None:
        """Keep ``extents`` (``(start, buffer)``; the first reaches the end of the object);
        best effort: a full disk is no error."""
        views = [(start, memoryview(buf).cast("B")) for start, buf in extents]
        total = sum(len(v) for _, v in views)
        if not meta.etag or not views or total > MAX_ENTRY or \
                views[0][0] + len(views[0][1]) != meta.size:
            return
        head = json.dumps({"url": url, "etag": meta.etag, "version": meta.version,
                           "size": meta.size,
                           "extents": [[a, len(v)] for a, v in views]}).encode() + b"\n"
        try:
            os.makedirs(self.dir, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tail-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(head)
                    for _, v in views:
                        fh.write(v)
                os.replace(tmp, self._file(url))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass
