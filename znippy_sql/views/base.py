"""What every view shares: :class:`Where` (the predicates a view applies itself),
:class:`View` (one view's definition) and :class:`Request` (what a reader asks of it).

A view is defined once, here or in its capability's package (``git/views.py``,
``provenance/views.py``): a schema for one archive and a function yielding Arrow tables of
that schema for one archive. Projection, group pruning and the :class:`Where` predicates are
applied once, by :func:`znippy_sql.views.batches`, for every engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..format.kernels import call_function, one_array
from ..format.schema import GroupKey
from ..modules.pkgtypes import resolve_pkg_type

try:
    from pyarrow._compute import MatchSubstringOptions, SetLookupOptions
except ImportError:  # pragma: no cover  (a pyarrow that moved its private module)
    from pyarrow.compute import MatchSubstringOptions, SetLookupOptions

Values = tuple[Any, ...]

#: the columns a :class:`Where` field tests, by field
WHERE_COLUMNS = {"repo": "repo", "pkg_type": "pkg_type", "module_name": "module_name",
                 "path_prefix": "relative_path", "path": "relative_path"}
#: the fields that are constant over a data group (they prune whole groups)
GROUP_FIELDS = ("repo", "pkg_type", "module_name")


def _tuple(value: Any) -> Values | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(value)
    return (value,)


@dataclass(frozen=True)
class Where:
    """Simple predicates a view applies itself: equality (one value) or ``IN`` (a tuple) on
    ``repo``, ``pkg_type`` (a number or a module's name), ``module_name``; a path prefix (or
    several: any of them); exact paths (found through the trie first). ``None``: no test.

    The fields are kept as tuples (``pkg_type`` resolved to numbers) so a ``Where`` is
    hashable and picklable.
    """

    repo: Any = None
    pkg_type: Any = None
    module_name: Any = None
    path_prefix: Any = None
    path: Any = None

    def __post_init__(self) -> None:
        for name in WHERE_COLUMNS:
            value = _tuple(getattr(self, name))
            if value is not None:
                for v in value:
                    if name != "pkg_type" and not isinstance(v, str):
                        raise ValueError(f"Where.{name}: {v!r} is not a string")
                if name == "pkg_type":
                    value = tuple(resolve_pkg_type(v) for v in value)
            object.__setattr__(self, name, value)

    def fields(self) -> Iterator[tuple[str, Values]]:
        """(field, values) of every field that is set."""
        for name in WHERE_COLUMNS:
            value = getattr(self, name)
            if value is not None:
                yield name, value

    def columns(self) -> list[str]:
        """The columns the set fields test."""
        return list(dict.fromkeys(WHERE_COLUMNS[n] for n, _ in self.fields()))

    def keeps_group(self, key: GroupKey) -> bool:
        """Whether a data group can hold a matching row (its constant columns decide)."""
        return ((self.repo is None or key.repo in self.repo)
                and (self.pkg_type is None or key.pkg_type in self.pkg_type)
                and (self.module_name is None or key.module_name in self.module_name))

    def mask(self, table: pa.Table) -> np.ndarray | None:
        """The rows of ``table`` that pass every set field (None: all of them)."""
        keep: np.ndarray | None = None
        for name, values in self.fields():
            col = WHERE_COLUMNS[name]
            if col not in table.schema.names:
                continue
            arr = one_array(table.column(col))
            if name == "path_prefix":
                m = np.zeros(len(arr), bool)
                for prefix in values:
                    m |= _bools(call_function("starts_with", [arr],
                                              MatchSubstringOptions(prefix)))
            else:
                m = _isin(arr, values)
            keep = m if keep is None else keep & m
        return keep

    def is_empty(self) -> bool:
        return all(getattr(self, n) is None for n in WHERE_COLUMNS)


def _isin(arr: pa.Array, values: Values) -> np.ndarray:
    typed = pa.array(values, arr.type)
    return _bools(call_function("is_in", [arr], SetLookupOptions(typed)))


def _bools(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=bool) if arr.null_count == 0 \
        else np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True, eq=False)
class Request:
    """What a reader asks of a view for one archive: the columns it needs (None: all), the
    predicates, and the data groups to read (already pruned; None for a view without groups)."""

    columns: tuple[str, ...] | None
    where: Where
    groups: tuple[GroupKey, ...] | None = None

    def wants(self, column: str) -> bool:
        return self.columns is None or column in self.columns


@dataclass(frozen=True)
class View:
    """One view: its name, its schema for an archive, its rows for an archive.

    ``read(archive, request)`` yields ``pa.Table``s (or record batches) whose columns are the
    view's schema, or only ``request.columns`` of it; rows may be filtered by
    ``request.where`` already (the caller filters again: a view need not). A view with
    ``grouped=True`` reads one data group at a time and only ``request.groups``.
    ``sections``: reserved sections that make the view present (any of them); empty: every
    archive has it.
    """

    name: str
    schema: Callable[[Any], pa.Schema]
    read: Callable[[Any, Request], Iterator[pa.Table | pa.RecordBatch]]
    grouped: bool = False
    sections: tuple[str, ...] = ()
    doc: str = ""
    #: computed rather than read (made when an engine plans, e.g. DuckDB's ``register``)
    eager: bool = False
    #: bytes a read costs for one archive, from its manifest alone (for ``plan``)
    cost: Callable[[Any, tuple[GroupKey, ...] | None], int] | None = field(default=None)
