"""Daft over znippy archives and the fleet catalog (``pip install 'znippy_sql[daft]'``).

>>> import znippy_sql.daft as zdaft                                    # doctest: +SKIP
>>> df = zdaft.read_archives("dumps/*.znippy")                         # doctest: +SKIP
>>> df.where(daft.col("repo") == "central").with_column(               # doctest: +SKIP
...     "content", zdaft.read_bytes(daft.col("archive"), daft.col("relative_path")))

The implementation is :mod:`znippy_sql.engines.daft`; docs/engines.md says what is pushed.
"""

from __future__ import annotations

from .engines.daft import ZnippySource, read_archives, read_bytes, read_catalog

__all__ = ["ZnippySource", "read_archives", "read_bytes", "read_catalog"]
