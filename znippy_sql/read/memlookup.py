"""The lookup of an archive that has none: the Rust tool's layout (FORMAT §4, §7).

An archive written by the Rust tool v0.7/v0.8 holds data sub-indexes and a manifest only: no
``__lookup__``, no ``__trie__``. The reader then builds the sorted lookup in memory from the
data sub-indexes (:func:`memory_lookup`: every group's base columns, concatenated, sorted by
``relative_path`` as UTF-8 bytes then ``chunk_seq``; the rows may come in any order and in
any number of record batches), and answers point lookups with :class:`SortedPaths`, a binary
search over the sorted paths that stands where the fst trie would (``get``, ``len``). The same
stands in for the ``__lookup__`` and ``__trie__`` of a later Rust release that this reader does
not understand (:mod:`.foreign`).

Cost: building is one read of every sub-index, one concatenation and one sort of the lookup's
rows (O(n log n), ~100 bytes a row besides the paths), done once, on the first call that needs
the lookup; opening stays a read of the footer and the manifest. A point lookup then costs
log2(files) comparisons of path bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..format.kernels import call_function, numpy_of, one_array, take
from ..format.lookup import build_lookup, with_inner
from ..format.schema import BASE_NAMES, INNER, GroupKey

if TYPE_CHECKING:
    from .columns import Columns


def memory_lookup(keys: Iterable[GroupKey], table: Callable[[GroupKey], pa.Table]) -> pa.Table:
    """The sorted lookup of the groups ``keys``, each read with ``table(key)`` (a checked
    data sub-index), as one contiguous table; with ``inner_offset`` when a group has packed
    blobs (FORMAT §3)."""
    groups = {key: t.select([*BASE_NAMES, *([INNER] if INNER in t.schema.names else [])])
              for key, t in ((key, table(key)) for key in keys)}
    return build_lookup(with_inner(groups)[0])


class SortedPaths:
    """Path → first lookup row, by binary search over a sorted lookup's ``chunk_seq = 0``
    rows: the in-memory stand-in for ``__trie__`` (the same ``get`` and ``len``)."""

    def __init__(self, lookup: pa.Table, cols: "Columns") -> None:
        self._lookup = lookup
        self._offsets = cols.path_offsets
        self._data = cols.path_data
        self._first = cols.first_rows
        self._distinct: int | None = None

    def _key(self, i: int) -> bytes:
        row = int(self._first[i])
        return bytes(self._data[self._offsets[row] : self._offsets[row + 1]])

    def get(self, key: bytes) -> int | None:
        """The first lookup row of ``key``'s file, or None when no file has that path."""
        lo, hi = 0, len(self._first)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self._first) and self._key(lo) == key:
            return int(self._first[lo])
        return None

    def __len__(self) -> int:
        """Distinct paths (a path given twice, which a sound archive never has, counts once)."""
        if self._distinct is None:
            n = len(self._first)
            if n < 2:
                self._distinct = n
            else:
                paths = first_paths_array(self._lookup, self._first)
                same = call_function("equal", [paths.slice(1), paths.slice(0, n - 1)])
                self._distinct = n - int(np.count_nonzero(numpy_of(same)))
        return self._distinct


def first_paths_array(lookup: pa.Table, first_rows: np.ndarray) -> pa.Array:
    """The ``relative_path`` of each ``chunk_seq = 0`` row, as one Arrow array."""
    paths = one_array(lookup.column("relative_path"))
    return paths if len(first_rows) == len(paths) else take(paths, first_rows)
