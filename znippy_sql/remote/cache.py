"""The tail cache: the bytes an open fetched, kept on disk per URL and ETag (or version).

A second open of an unchanged archive sends one conditional request (the suffix GET with
``If-None-Match``): ``304 Not Modified`` and the cached tail is used; any other answer is the
new tail, which replaces the entry. One file per URL under the cache directory
(``$ZNIPPY_SQL_CACHE``, else ``$XDG_CACHE_HOME/znippy-sql/tails``, else
``~/.cache/znippy-sql/tails``), written atomically: a header line of JSON (URL, ETag,
version, size, start), then the bytes from ``start`` to the end of the object. A damaged
entry is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
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
            if head["url"] != url or len(data) != head["size"] - head["start"] or not head["etag"]:
                return None
            return Tail(Meta(int(head["size"]), head["etag"], head.get("version")),
                        int(head["start"]), data)
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, url: str, meta: Meta, start: int, data: Any) -> None:
        """Keep ``data`` (bytes ``[start, size)``); best effort: a full disk is no error."""
        if not meta.etag or meta.size - start > MAX_ENTRY:
            return
        head = json.dumps({"url": url, "etag": meta.etag, "version": meta.version,
                           "size": meta.size, "start": start}).encode() + b"\n"
        try:
            os.makedirs(self.dir, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tail-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(head)
                    fh.write(memoryview(data).cast("B"))
                os.replace(tmp, self._file(url))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass
