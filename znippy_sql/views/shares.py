"""What each row of an archive costs: every blob's bytes shared out among the rows that point
at it, so that ``stored_size`` adds up (docs/format.md, "Stored sizes").

A blob is ``(blob_offset, blob_size, compressed)``; a row points at a *slice* of it,
``(inner_offset, uncompressed_size)`` (``inner_offset`` 0 without packed blobs). The rule:

1. A blob's ``blob_size`` bytes are split over its distinct slices in proportion to their
   ``uncompressed_size`` (in equal parts when every slice is empty), by cumulative rounding in
   slice order: with ``B`` the blob's bytes, ``W`` the slices' total weight and ``C_i`` the
   running weight up to slice ``i``, slice ``i`` gets ``B*C_i // W - B*C_(i-1) // W``. The
   parts are whole bytes and sum to ``B`` exactly.
2. A slice several rows point at (a dedup-shared chunk, docs/dedup.md) is charged once, to
   the first of those rows in path order (``relative_path`` as UTF-8 bytes, then
   ``chunk_seq``); the others are charged 0.

So a sum of shares over any set of rows is at most the bytes of the distinct blobs those rows
touch, and over all rows of an archive it is the bytes of its distinct blobs. The rule reads
every data row of the archive (a shared blob may be pointed at from another group); the
result is kept per open archive.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import pyarrow as pa

from ..format import build
from ..format.kernels import SortOptions, call_function, one_array, take
from ..format.schema import INNER, GroupKey

#: the column a group's rows get while their files' sums are taken (a ``.`` keeps it apart
#: from every module column: their names are letters, digits and ``_``: ``format/validate.py``)
SHARE = "znippy.stored_share"
SHARE_FIELD = pa.field(SHARE, pa.uint64(), nullable=False)

_EXACT = 1 << 62  # products below this are exact in uint64 (else Python ints)


def _numpy(col: Any, dtype: Any = np.uint64) -> np.ndarray:
    return np.asarray(build.numpy_of(one_array(col)), dtype=dtype)


def row_shares(table: pa.Table) -> np.ndarray:
    """Each row's share (uint64, in ``table``'s row order) of ``table``: every data row of
    an archive, with at least ``relative_path``, ``chunk_seq``, ``blob_offset``,
    ``blob_size``, ``compressed``, ``uncompressed_size`` and ``inner_offset`` if packed."""
    n = table.num_rows
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    off, size = _numpy(table.column("blob_offset")), _numpy(table.column("blob_size"))
    comp = _numpy(table.column("compressed"), np.uint8)
    usize = _numpy(table.column("uncompressed_size"))
    inner = _numpy(table.column(INNER)) if INNER in table.schema.names \
        else np.zeros(n, dtype=np.uint64)
    order = np.lexsort((usize, inner, comp, size, off))  # by blob, then slice, then row
    so, ss, sc, si, su = off[order], size[order], comp[order], inner[order], usize[order]
    new_blob = np.r_[True, (so[1:] != so[:-1]) | (ss[1:] != ss[:-1]) | (sc[1:] != sc[:-1])]
    new_slice = new_blob | np.r_[True, (si[1:] != si[:-1]) | (su[1:] != su[:-1])]
    starts = np.flatnonzero(new_slice)  # each slice's first row, in sorted positions
    blob_of = np.cumsum(new_blob[starts]) - 1  # slice -> its blob's ordinal
    firsts = np.flatnonzero(new_blob[starts])  # blob ordinal -> its first slice
    weight = su[starts].copy()
    empty = np.add.reduceat(weight.astype(np.float64), firsts) == 0
    weight[empty[blob_of]] = 1
    total_f = np.add.reduceat(weight.astype(np.float64), firsts)
    big = ss[starts]
    if max(float(big.max()), 1.0) * float(total_f.max()) >= _EXACT:  # hostile: Python ints
        weight, big = weight.astype(object), big.astype(object)
    total = np.add.reduceat(weight, firsts)
    running = np.cumsum(weight)
    running = running - (running - weight)[firsts][blob_of]  # C_i, within the slice's blob
    whole = total[blob_of]
    share = big * running // whole - big * (running - weight) // whole
    owners = _owners(table, order, starts, n)
    out[owners] = np.asarray(share, dtype=np.uint64)
    return out


def _owners(table: pa.Table, order: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """The row (``table``'s position) each slice is charged to: the first in path order of
    the rows that point at it."""
    owners = order[starts].copy()
    counts = np.diff(np.append(starts, n))
    if not bool((counts > 1).any()):
        return owners
    slice_of = np.repeat(np.arange(len(starts)), counts)  # sorted position -> its slice
    members = np.flatnonzero(counts[slice_of] > 1)  # rows of slices several rows point at
    rows = order[members]
    slice_no = slice_of[members]
    candidates = pa.table({
        "slice": build.arrow_of(slice_no),
        "path": take(one_array(table.column("relative_path")), build.arrow_of(rows)),
        "seq": build.arrow_of(_numpy(table.column("chunk_seq"))[rows]),
        "row": build.arrow_of(rows)})
    ranked = take(candidates, call_function("sort_indices", [candidates], SortOptions(
        [("slice", "ascending"), ("path", "ascending"), ("seq", "ascending")])))  # utf8: bytes
    slices = _numpy(ranked.column("slice"), np.int64)
    first = np.r_[True, slices[1:] != slices[:-1]]
    owners[slices[first]] = _numpy(ranked.column("row"), np.int64)[first]
    return owners


_COLUMNS = ("relative_path", "chunk_seq", "blob_offset", "blob_size", "compressed",
            "uncompressed_size")

#: each open archive's shares, per data group, and per file (made when first asked for; an
#: archive's bytes do not change while open)
_CACHE: "weakref.WeakKeyDictionary[Any, dict[GroupKey, np.ndarray]]" = \
    weakref.WeakKeyDictionary()
_FILES: "weakref.WeakKeyDictionary[Any, dict[str, int]]" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()  # DuckDB calls file_shares from several threads at once


def group_shares(archive: Any, key: GroupKey) -> np.ndarray:
    """The shares of one data group's rows (in its sub-index's row order), computed over every
    data row of ``archive`` once and kept while it is open."""
    with _LOCK:
        known = _CACHE.get(archive)
        if known is None:
            known = _CACHE[archive] = _archive_shares(archive)
    return known[key]


def file_shares(archive: Any, paths: Any) -> pa.Array:
    """The share of each file of ``paths`` (a utf8 Arrow array): the sum of its rows' shares;
    0 for a path the archive does not hold."""
    by_path = _FILES.get(archive)
    if by_path is None:
        shares = [group_shares(archive, key) for key in archive.groups]
        with _LOCK:
            by_path = _FILES.get(archive)
            if by_path is None:
                by_path = {}
                for key, rows in zip(archive.groups, shares):
                    names = one_array(archive.group_table(key).column("relative_path"))
                    for name, share in zip(names.to_pylist(), rows.tolist()):
                        by_path[name] = by_path.get(name, 0) + share
                _FILES[archive] = by_path
    values = np.fromiter((by_path.get(p, 0) for p in paths.to_pylist()), np.uint64,
                         count=len(paths))
    return build.arrow_of(values)


def _archive_shares(archive: Any) -> dict[GroupKey, np.ndarray]:
    keys = list(archive.groups)
    parts = []
    for key in keys:
        t = archive.group_table(key)
        cols = {c: one_array(t.column(c)) for c in _COLUMNS}
        cols[INNER] = one_array(t.column(INNER)) if INNER in t.schema.names \
            else build.arrow_of(np.zeros(t.num_rows, dtype=np.uint64))
        parts.append(pa.table(cols))
    if not parts:
        return {}
    shares = row_shares(pa.concat_tables(parts))
    cuts = np.cumsum([p.num_rows for p in parts])[:-1]
    return dict(zip(keys, np.split(shares, cuts)))


def with_shares(table: pa.Table, shares: np.ndarray) -> pa.Table:
    """``table`` (a group's sub-index) with its shares as the last column, :data:`SHARE`."""
    return table.append_column(SHARE_FIELD, build.arrow_of(shares))
