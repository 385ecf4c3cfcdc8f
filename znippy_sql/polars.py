"""Polars over znippy archives: the public face of :mod:`znippy_sql.query.polars`.

``scan(path, section)`` is a lazy scan of one section; ``scan_store`` the same over a live
dynamic store.
"""

from __future__ import annotations

from typing import Any

from .query.polars import read_files, scan


def scan_store(*args: Any, **kwargs: Any) -> Any:
    """A lazy scan of a live dynamic store: see :func:`znippy_sql.store.views.scan_store`."""
    from .store.views import scan_store as impl

    return impl(*args, **kwargs)


__all__ = ["scan", "read_files", "scan_store"]
