"""DuckDB over znippy archives: the public face of :mod:`znippy_sql.query.duckdb`.

``register(con, path)`` creates an archive's ``<name>_*`` views; ``register_store`` does the same
for a live dynamic store. This module sits above the query layer and the store, so neither has
to import the other's way up.
"""

from __future__ import annotations

from typing import Any

from .query.duckdb import (VIEW_SUFFIXES, connect, default_name, files_arrow, install, register,
                           sanitize_name, unregister)


def register_store(*args: Any, **kwargs: Any) -> Any:
    """Views over a live dynamic store: see :func:`znippy_sql.store.views.register_store`."""
    from .store.views import register_store as impl

    return impl(*args, **kwargs)


__all__ = ["VIEW_SUFFIXES", "register", "unregister", "install", "register_store", "connect",
           "sanitize_name", "default_name", "files_arrow"]
