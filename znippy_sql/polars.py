"""Polars over znippy archives: the public face of :mod:`znippy_sql.query.polars`.

``scan(path, section)`` is a lazy scan of one section; ``scan_store`` the same over a live
dynamic store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .query.polars import Section, read_files, scan

if TYPE_CHECKING:
    import polars as pl

    from .store.dynamic import Store


def scan_store(store: Store, section: Section = "files") -> pl.LazyFrame:
    """A lazy scan of a live dynamic store: see :func:`znippy_sql.store.views.scan_store`."""
    from .store.views import scan_store as impl

    return impl(store, section)


__all__ = ["scan", "read_files", "scan_store"]
