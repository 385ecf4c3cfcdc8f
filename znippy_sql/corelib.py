"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

from . import _native
from .errors import ZnippyError
from .native import guard


def version() -> str:
    """The compiled core's version (its crate's)."""
    with guard(ZnippyError, "the native core"):
        return str(_native.version())
