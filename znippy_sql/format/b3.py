"""BLAKE3 through the ``blake3`` package (Rust): the only module that imports it
(tests/test_native_guard.py), so a panic or a foreign error of the hasher is a
:class:`~znippy_sql.errors.ChecksumError`, never a ``BaseException`` a caller cannot see.

Callers keep their shape: ``from ..format import b3 as blake3`` then
``blake3.blake3(data, max_threads=blake3.blake3.AUTO).digest()``. The hasher is built under
the guard (where the input meets the native code); ``digest`` of a built hasher only reads
its state.
"""

from __future__ import annotations

from typing import Any

import blake3 as _lib

from ..errors import ChecksumError
from ..native import PASS, describe

AUTO = _lib.blake3.AUTO


class _Hasher:
    """``blake3.blake3`` as callers know it: called, it builds a hasher of ``data`` under the
    guard; ``AUTO`` is the library's own."""

    AUTO = AUTO

    def __call__(self, data: Any = b"", *, max_threads: int = 1) -> Any:
        try:
            return _lib.blake3(data, max_threads=max_threads)
        except BaseException as exc:  # a panic is a BaseException
            if isinstance(exc, PASS):
                raise
            raise ChecksumError(f"BLAKE3 failed: {describe(exc)}") from None


blake3 = _Hasher()
