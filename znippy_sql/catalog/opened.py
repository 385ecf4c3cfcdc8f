"""What a catalog's query, extract and verify steps ask of an open catalog
(:class:`~znippy_sql.catalog.fleet.Catalog` is one), so they need not import it back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import pyarrow as pa


class OpenCatalog(Protocol):
    warehouse: str
    #: whether the catalog has its path index (``catalog/index.py``)
    has_index: bool

    def table(self, name: str) -> Any:
        """The pyiceberg table ``name``, loaded now."""
        ...

    def table_for_read(self, name: str) -> Any:
        """As :meth:`table`, reusing a table loaded before (the query path)."""
        ...

    def archives(self, columns: Iterable[str] | None = None) -> pa.Table: ...
