"""Path → a file's rows: the trie (or its in-memory stand-in) and a lookup read in batches.

A point read asks the trie for the file's first lookup row (``__trie__``, a
:class:`~znippy_sql.format.trie.TrieMap`; in an archive without one, :class:`~.memlookup.
SortedPaths`), then takes its rows from the lookup's :class:`~.columns.Columns`. A lookup
written in several record batches (a compressed one, docs/format.md §2) is not decoded whole
for that: :class:`Batches` decodes the batch holding the file's rows (and its neighbours) and
keeps the last few. The very first read of an archive whose sections carry digests goes
through :mod:`.firstfind` (the digests computed beside the search).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import batch_index, read_batch
from ..format.schema import LOOKUP, TRIE
from ..format.trie import TrieMap
from ..format.validate import lookup_schema_problem, rows_problem
from .columns import Columns, FileInfo
from .tail import Tail, section_key

if TYPE_CHECKING:
    from .memlookup import SortedPaths


class Batches:
    """A lookup in record batches, decoded a few at a time for point reads: a file is read
    from the batch holding its first row, with the batch before when it starts a batch (its
    neighbour) and the ones after while its rows run on (at most ``SPAN`` batches; a longer
    run is left to the whole lookup). The last ``KEEP`` decoded batches are kept (``kept``)."""

    KEEP = 4
    SPAN = 4
    #: after this many batch decodes the whole lookup is read and serves the point reads
    PROMOTE = 16

    def __init__(self, schema: pa.Schema, batches: list[tuple[int, int, Any]]) -> None:
        self.schema = schema
        self.batches = batches
        self.starts = [start for start, _, _ in batches]
        self.kept: dict[int, pa.Table] = {}
        self.decoded = 0

    def file_at(self, tail: Tail, path: str, key: bytes, row: int) -> FileInfo | None:
        b = bisect.bisect_right(self.starts, row) - 1
        if b < 0 or row >= self.starts[b] + self.batches[b][1]:
            return None
        lo = b - 1 if row == self.starts[b] and b > 0 else b
        hi = b
        while True:
            c = Columns(pa.concat_tables([self.table(tail, i) for i in range(lo, hi + 1)])
                        .combine_chunks() if hi > lo else self.table(tail, lo))
            if c.run_end(row - self.starts[lo]) < c.n or hi + 1 == len(self.batches):
                return c.file_at(path, key, row, base=self.starts[lo], archive=tail.path)
            if hi - lo + 1 >= self.SPAN:
                return None
            hi += 1

    def table(self, tail: Tail, b: int) -> pa.Table:
        """Batch ``b``, decoded and checked (kept among the last ``KEEP``)."""
        table = self.kept.get(b)
        if table is None:
            table = read_batch(self.schema, self.batches[b][2], LOOKUP, tail.path)
            self.decoded += 1
            problem = rows_problem(table, tail.tail_offset)
            if problem is not None:
                raise FormatError(f"{LOOKUP} {problem}", path=tail.path)
            if len(self.kept) >= self.KEEP:
                self.kept.pop(next(iter(self.kept)))
            self.kept[b] = table
        return table


def batches_of(tail: Tail, buf: pa.Buffer) -> Batches | None:
    """The lookup's bytes ``buf`` as :class:`Batches`; None when it is one batch (their
    digest is the caller's)."""
    schema, batches = batch_index(buf, LOOKUP, tail.path, check_schema=lookup_schema_problem)
    if len(batches) <= 1:
        return None
    if sum(n for _, n, _ in batches) != tail.manifest_row(section_key(LOOKUP)).row_count:
        raise FormatError(f"{LOOKUP}'s batches do not hold the rows the manifest says",
                          path=tail.path)
    return Batches(schema, batches)


def lookup_batches(tail: Tail) -> Batches | None:
    """``__lookup__`` as :class:`Batches` (each decoded only when a point read needs it);
    None for a lookup of one batch."""
    tail.fetch_paths()
    return batches_of(tail, tail.range_bytes(section_key(LOOKUP), LOOKUP))


def trie_of(tail: Tail, *, in_memory: bool, lookup: Callable[[], pa.Table],
            columns: Callable[[], Columns]) -> "TrieMap | SortedPaths":
    """``__trie__`` as a :class:`~..format.trie.TrieMap`, or (``in_memory``) a
    :class:`~.memlookup.SortedPaths` over the lookup (the same ``get``/``len``)."""
    if in_memory:
        from .memlookup import SortedPaths

        return SortedPaths(lookup(), columns())
    tail.fetch_paths()
    return TrieMap(tail.range_bytes(section_key(TRIE), TRIE), tail.path)
