"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, cast

from . import _native
from .errors import ZnippyError
from .native import PASS, describe, guard


def version() -> str:
    """The compiled core's version (its crate's)."""
    with guard(ZnippyError, "the native core"):
        return str(_native.version())


# -- create
# The walk of a directory source (listed, lstat-ed; the files the routing rule packs whole
# read and BLAKE3-hashed ahead, on a native thread) and the routing rule itself
# (native/src/create/). ``Walker.next`` waits without the GIL and looks at signals every
# 50 ms, so Ctrl-C stops a create there.

def _native_error(exc: BaseException, what: str, path: str | None) -> BaseException:
    """What :func:`~znippy_sql.native.guard` raises for ``exc`` (a plain ``try``: the per-file
    calls below cost no context manager)."""
    if isinstance(exc, (ZnippyError, *PASS)):
        return exc
    return ZnippyError(f"{what}: {describe(exc)}", path=path)


def router(skip: Iterable[str], zip_family: Iterable[str], *, packing: bool, dedup: bool,
           pack_max: int, dir_max: int) -> Any:
    """The routing rule of a write (``native/src/create/route.rs``): the skip-listed and
    zip-family suffixes, packing and dedup on or off, the largest small-pack and
    directory-pack members."""
    with guard(ZnippyError, "the routing rule"):
        return _native.Router(sorted(skip), sorted(zip_family), packing, dedup, pack_max,
                              dir_max)


def route(rule: Any, path: str, size: int) -> int:
    """Where ``rule`` sends a file: 0 a directory pack, 1 zip-entry spans, 2 a small pack,
    3 chunks of its own."""
    try:
        return int(rule.route(path, size))
    except BaseException as exc:  # a PanicException is a BaseException
        raise _native_error(exc, "the routing rule", path) from None


def walker(root: str, *, posix: bool, skip_unreadable: bool, exclude: Iterable[str],
           prefixes: Iterable[str], rule: Any = None) -> Any:
    """A started walk of ``root`` (``native/src/create/walk.rs``); ``rule``: read ahead the
    files it sends to a small pack. Close it with :func:`walk_close`."""
    with guard(ZnippyError, "the walk", path=root):
        return _native.Walker(os.fsencode(root), posix, skip_unreadable,
                              [os.fsencode(x) for x in exclude],
                              [os.fsencode(x) for x in prefixes], rule)


def walk_next(walk: Any, root: str) -> list[tuple[Any, ...]] | None:
    """The walk's next batch of ``(kind, rel, size, mode, mtime_ns, target, data, digest)``
    (kind 0 file, 1 directory, 2 link, 3 a directory that cannot be listed: ``rel`` its
    path, ``mode`` the errno, ``target`` why); None at the end."""
    try:
        got = walk.next()
    except BaseException as exc:
        raise _native_error(exc, "the walk", root) from None
    return None if got is None else cast("list[tuple[Any, ...]]", got)


def walk_summary(walk: Any, root: str) -> tuple[list[tuple[str, str]], int, list[str]]:
    """``(unreadable [(path, why)], links left out, special files left out)`` of a walk that
    is over."""
    with guard(ZnippyError, "the walk", path=root):
        unreadable, links, special = walk.summary()
        return list(unreadable), int(links), list(special)


def walk_close(walk: Any, root: str) -> None:
    """Stops the walk's thread and waits for it."""
    with guard(ZnippyError, "the walk", path=root):
        walk.close()


def frames(chunks: list[Any], level: int, *, hash_log: int | None = None,
           chain_log: int | None = None, window_log: int | None = None) -> list[bytes | None]:
    """The OpenZL frame of each chunk in ``format/zlframe.py``'s zstd shape
    (``native/src/create/frame.rs``: the same bytes), or None where it would not be smaller;
    compressed without the GIL. ``hash_log``/``chain_log``: a packed blob's tables;
    ``window_log``: a directory pack's long window with long-distance matching."""
    try:
        return cast("list[bytes | None]", _native.frames(chunks, level, hash_log, chain_log,
                                                         window_log))
    except BaseException as exc:
        raise _native_error(exc, "zstd", None) from None
