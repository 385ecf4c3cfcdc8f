"""An archive's ``__meta__`` rows, checked (FORMAT §4): what ``Archive.meta`` and
:func:`znippy_sql.provenance.meta.read_meta` return. Writing the section is provenance's."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import FormatError
from ..format.schema import META
from ..format.validate import meta_problem
from ..interop.meta import as_text, is_typed


def read_meta(archive: Any) -> pa.Table | None:
    """The ``__meta__`` rows of an open archive, or ``None`` when it records no metadata at
    all (no section, or another writer's, which ``info`` reports)."""
    if not archive.understands(META):
        return None
    table = archive.section(META)
    if isinstance(table, pa.Table) and is_typed(table.schema):  # the Rust tool's typed
        table = as_text(table, archive.path)                     # __znippy_meta__ (0.9.13+)
    problem = meta_problem(table)
    if problem is not None:
        raise FormatError(f"{META} {problem}".replace(" :", ":"), path=archive.path)
    return table
