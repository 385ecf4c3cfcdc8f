"""Ray Data over znippy archives (``pip install 'znippy_sql[ray]'``).

>>> import znippy_sql.ray as zray                                       # doctest: +SKIP
>>> ds = zray.read_archives(["a.znippy", "b.znippy"], view="files", content=False)  # doctest: +SKIP

The implementation is :mod:`znippy_sql.engines.ray`; docs/engines.md says what is pushed.
"""

from __future__ import annotations

from .engines.ray import ZnippyDatasource, read_archives

__all__ = ["ZnippyDatasource", "read_archives"]
