"""An archive's ``__meta__`` rows, checked (FORMAT §4): what ``Archive.meta`` and
:func:`znippy_sql.provenance.meta.read_meta` return. Writing the section is provenance's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import FormatError
from ..format.schema import META
from ..format.validate import meta_problem


def read_meta(archive: Any) -> pa.Table | None:
    """The ``__meta__`` rows of an open archive, or ``None`` when it records no metadata at
    all (no section, or another writer's, which ``info`` reports)."""
    if not archive.understands(META):
        return None
    table = archive.section(META)
    problem = meta_problem(table)
    if problem is not None:
        raise FormatError(f"{META} {problem}".replace(" :", ":"), path=archive.path)
    return table
