"""The one guard at every call into a native library (docs/design.md, "Native boundaries").

A Rust extension that panics raises ``pyo3_runtime.PanicException``, which derives from
``BaseException``: ``except Exception`` never sees it, and a user would get a Rust backtrace.
:func:`guard` turns a panic, or any other error the native call raises that is not ours, into
the :class:`~znippy_sql.errors.ZnippyError` subclass the caller names, worded with what was
being done and where (the archive or URL, the operation, the section or option):

    with guard(FormatError, "__trie__ cannot be searched", path=archive.path):
        row = trie.get(key)

Interrupts (Ctrl-C, ``SystemExit``, ``GeneratorExit``) and ``MemoryError`` pass through;
``ZnippyError`` passes through unchanged. Each native library is imported by one wrapper
module only (``tests/test_native_guard.py`` keeps it so), and that module guards its calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from .errors import ZnippyError

_T = TypeVar("_T")
#: what is never turned into an error of ours
PASS = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)
_SPACES = re.compile(r"\s+")


def is_panic(exc: BaseException) -> bool:
    """True for a Rust panic surfacing through pyo3 (``pyo3_runtime.PanicException``)."""
    return any(t.__name__ == "PanicException" and t.__module__ == "pyo3_runtime"
               for t in type(exc).__mro__)


#: the native libraries this package calls (their own exception types count as native)
LIBRARIES = ("obstore", "ducer", "openzl", "zstandard", "blake3", "pyroaring", "pyiceberg",
             "pyarrow", "duckdb", "polars", "fsspec", "google_crc32c")


def is_native(exc: BaseException) -> bool:
    """A panic, or an error raised by one of :data:`LIBRARIES` (not an interrupt)."""
    if isinstance(exc, PASS):
        return False
    return is_panic(exc) or any(t.__module__.split(".")[0].lstrip("_") in LIBRARIES
                                for t in type(exc).__mro__)


def describe(exc: BaseException, *, scrub: Callable[[str], str] | None = None) -> str:
    """One line about ``exc``: its first line of text (at most 200 characters), said to be a
    panic when it is one. ``scrub`` removes what must not be shown (secrets) first."""
    text = str(exc)
    if scrub is not None:
        text = scrub(text)
    first = _SPACES.sub(" ", text.strip().split("\n", 1)[0])[:200] or type(exc).__name__
    if is_panic(exc):
        return f"the native library panicked ({first})"
    return first


@contextmanager
def guard(kind: type[ZnippyError], what: str, *, path: str | None = None,
          scrub: Callable[[str], str] | None = None) -> Iterator[None]:
    """Run the block; a panic or a foreign error in it becomes ``kind(f"{what}: ...")``."""
    try:
        yield
    except ZnippyError:
        raise
    except PASS:
        raise
    except BaseException as exc:  # a PanicException is a BaseException
        raise kind(f"{what}: {describe(exc, scrub=scrub)}", path=path) from None


def call(fn: Callable[[], _T], kind: type[ZnippyError], what: str, *,
         path: str | None = None) -> _T:
    """``fn()`` under :func:`guard`."""
    with guard(kind, what, path=path):
        return fn()
