"""Roaring bitmaps (``pyroaring``, C): the only module that imports it
(tests/test_native_guard.py). ``BitMap`` is pyroaring's own; reading one from an archive's
bytes goes through :func:`deserialize`, where damaged bytes (pyroaring raises ``ValueError``
or ``IndexError`` on them) become a :class:`~znippy_sql.errors.FormatError` naming the
section and the archive.
"""

from __future__ import annotations

from typing import Any

from pyroaring import BitMap

from ..errors import FormatError
from ..format.schema import GIT_REACH
from ..native import guard

__all__ = ["BitMap", "deserialize"]


def deserialize(data: Any, *, path: str | None = None) -> BitMap:
    """A bitmap stored in ``__gunnar_reach__``."""
    with guard(FormatError, f"{GIT_REACH}: a stored bitmap cannot be read", path=path):
        return BitMap.deserialize(data)
