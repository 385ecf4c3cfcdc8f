"""Polars over znippy archives: the public face of :mod:`znippy_sql.query.polars`.

``scan(path, section)`` is a lazy scan of one section; ``scan_store`` the same over a live
dynamic store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .query.polars import read_files, scan

if TYPE_CHECKING:  # (through the wrapper: tests/test_native_guard.py)
    from .query.polars import pl
    from .store.dynamic import Store


def scan_store(store: "Store", section: str = "files") -> "pl.LazyFrame":
    """A lazy scan of a live dynamic store's ``files`` (or ``chunks``, ``lookup``, ...): see
    :func:`znippy_sql.store.views.scan_store`."""
    from .store.views import scan_store as impl

    return impl(store, section)


__all__ = ["scan", "read_files", "scan_store"]
