"""Archives in object storage and on HTTP servers, read through byte ranges.

- ``url``: which URLs are remote, the store and key they name, the storage options.
- ``client``: one remote object (``obstore``, or ``fsspec`` for other schemes): checked
  range GETs, errors worded as :class:`~znippy_sql.errors.RemoteError`.
- ``source``: :class:`RemoteSource`, the ``RangeSource`` the reader reads through.
- ``cache``: tails kept on disk per URL and ETag.
- ``upload``: a write to a URL: a local staging file, uploaded on a clean exit.

The request plan and the measured choices are in ``docs/remote.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .url import is_url, local_path

if TYPE_CHECKING:
    from .source import RemoteSource

__all__ = ["configure", "is_url", "local_path", "open_source"]

Cache = bool | str | os.PathLike[str] | None
#: what a process (the CLI) set for every open that names no options of its own
_DEFAULT: dict[str, Any] = {"storage_options": {}, "cache": True}


def configure(*, storage_options: Mapping[str, Any] | None = None,
              cache: Cache = None) -> Callable[[], None]:
    """Defaults for every remote open of this process that gives none (the CLI's
    ``--storage-option`` and ``--no-cache``); returns what puts the previous ones back."""
    before = dict(_DEFAULT)
    if storage_options is not None:
        _DEFAULT["storage_options"] = dict(storage_options)
    if cache is not None:
        _DEFAULT["cache"] = cache
    return lambda: _DEFAULT.update(before)


def open_source(url: str, *, storage_options: Mapping[str, Any] | None = None,
                cache: Cache = None) -> RemoteSource:
    """A :class:`~znippy_sql.remote.source.RemoteSource` for ``url`` after one suffix GET (or
    one conditional GET answered from the tail cache). ``cache``: True for the default
    directory, a directory, False for none, None for what :func:`configure` set."""
    from .cache import TailCache
    from .client import connect
    from .source import TAIL_GUESS, RemoteSource
    from .url import parse

    target = parse(url, storage_options, defaults=_DEFAULT["storage_options"])
    if cache is None:
        cache = _DEFAULT["cache"]
    obj = connect(target)
    store = None if cache is False else TailCache(None if cache is True else cache)
    key = target.url + "|" + str(target.config.get("endpoint", ""))
    cached = store.get(key) if store is not None else None
    tail = obj.tail(TAIL_GUESS, unless=cached.meta if cached is not None else None)
    if tail is None or (cached is not None and tail.meta == cached.meta):
        # 304, or a server that ignores If-None-Match on a range and answers the same
        # ETag, size and version: the cached tail (and the index ranges it holds) is this
        # version's
        assert cached is not None
        tail = cached
    elif store is not None:
        store.put(key, tail.meta, [(tail.start, tail.data)])

    def keep(extents: list[tuple[int, Any]]) -> None:
        if store is not None:
            store.put(key, tail.meta, extents)

    return RemoteSource(obj, tail, on_tail=keep)
