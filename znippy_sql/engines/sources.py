"""Which archives an engine reads: local paths, globs, lists, and URLs (with globs).

A local glob matches in sorted order (as ``znippy_sql.duckdb.register``); a URL glob
(``s3://bucket/dumps/*.znippy``) lists the objects under the pattern's fixed prefix with the
same store and ``storage_options`` as the reads, and keeps the keys the pattern matches
(``*`` and ``?`` do not cross ``/``). A pattern matching nothing is a :class:`ZnippyError`.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import RemoteError, ZnippyError
from ..remote.url import is_url, local_path, parse, shown

_GLOB = re.compile(r"[*?\[]")
ArchivesArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def expand(archives: ArchivesArg, storage_options: Mapping[str, Any] | None = None
           ) -> list[str]:
    """The archives ``archives`` names, each once, in the order given (a glob's matches
    sorted)."""
    items = [archives] if isinstance(archives, (str, os.PathLike)) else list(archives)
    out: list[str] = []
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(f"an archive is a path or a URL, not {item!r}")
        text = os.fspath(item)
        if is_url(text) and local_path(text) is None:
            out.extend(_remote_glob(text, storage_options) if _GLOB.search(text) else [text])
        elif _GLOB.search(text) and not os.path.exists(local_path(text) or text):
            found = sorted(glob.glob(local_path(text) or text))
            if not found:
                raise ZnippyError("no archive matches this pattern", path=text)
            out.extend(found)
        else:
            out.append(text)
    if not out:
        raise ValueError("no archive given")
    return list(dict.fromkeys(out))


def _remote_glob(url: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    """The objects a URL pattern matches, listed from the store."""
    from ..remote.client import list_keys

    target = parse(url, storage_options)
    if target.backend != "obstore" or target.scheme in ("http", "https"):
        raise RemoteError("a pattern needs a store that lists objects (s3, gs, az)",
                          path=shown(url))
    cut = _GLOB.search(target.key)
    prefix = target.key[: cut.start()] if cut else target.key
    regex = re.compile(fnmatch.translate(target.key).replace(".*", "[^/]*"))
    keys = list_keys(target, prefix)
    root = target.root.rstrip("/")
    found = sorted(f"{root}/{k}" for k in keys if regex.fullmatch(k))
    if not found:
        raise ZnippyError("no archive matches this pattern", path=shown(url))
    return found
