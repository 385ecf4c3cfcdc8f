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

from .errors import ZnippyError

# Imported by the CLI's fast path (cli/fast.py), whose start-up time is a target (issue 33):
# ``typing``, ``re`` and ``contextlib`` are not imported on the way to a successful call.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    _T = TypeVar("_T")
#: what is never turned into an error of ours
PASS = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)


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
    import re

    first = re.sub(r"\s+", " ", text.strip().split("\n", 1)[0])[:200] or type(exc).__name__
    if is_panic(exc):
        return f"the native library panicked ({first})"
    return first


class guard:  # noqa: N801  (used as a function: ``with guard(...)``)
    """Run the block; a panic or a foreign error in it becomes ``kind(f"{what}: ...")``."""

    def __init__(self, kind: type[ZnippyError], what: str, *, path: str | None = None,
                 scrub: Callable[[str], str] | None = None) -> None:
        self.kind, self.what, self.path, self.scrub = kind, what, path, scrub

    def __enter__(self) -> None:
        return None

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        if exc is None or isinstance(exc, (ZnippyError, *PASS)):
            return  # nothing, or ours: it goes on as it is
        # a PanicException is a BaseException
        raise self.kind(f"{self.what}: {describe(exc, scrub=self.scrub)}",
                        path=self.path) from None


def call(fn: Callable[[], _T], kind: type[ZnippyError], what: str, *,
         path: str | None = None) -> _T:
    """``fn()`` under :func:`guard`."""
    with guard(kind, what, path=path):
        return fn()
