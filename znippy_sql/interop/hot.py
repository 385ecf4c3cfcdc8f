"""A Rust hot (unsealed) archive, read as it stands (docs/interop.md, "Hot archives").

``HotArchive`` (``znippy-common`` 0.9.13+, ``hot.rs``) keeps an archive in two files while it
grows: ``<name>`` holds the blobs only (appended in place, no tail, no footer) and each process
that appends writes one journal segment ``<name>.hot.NNNNN`` (five decimal digits, numbered
from 00000): an Arrow IPC stream of the base index columns (``data_subindex_schema``: the
writer's ``znippy_format_version`` metadata), one record batch per append, one row per file
(an appended file is one chunk). A segment torn by a crash is read up to its last whole
message. The rows of all segments in number order, deduplicated by path (the last row of a
path wins, at the place where the path first appeared), are the archive's index; ``seal``
writes them as one data sub-index ``(0, "", "")`` after the blobs, then lookup, trie, manifest
and footer, and removes the segments.

Read here: the blob file's bytes, then a tail made in memory from those rows (:mod:`.tail`),
so every read path reads the hot archive as a sealed one. The file is not changed.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa

from ..errors import FormatError
from ..format.ipc import stream_bytes
from ..format.kernels import take
from ..format.rangeio import RangeSource
from ..format.schema import BASE_NAMES, UNTYPED
from .tail import make_tail
from .vsource import Piece, VirtualSource

JOURNAL_INFIX = ".hot."
_SEGMENT = re.compile(r"\d+\Z")
#: a journal larger than this is not read whole into memory (a hot archive's index rows are
#: ~150 bytes each: 4 GiB is ~28 million appends)
MAX_JOURNAL_BYTES = 4 << 30


def journal_segments(path: str) -> list[str]:
    """The journal segments beside ``path``, in number order (none for a URL)."""
    if "://" in path:
        return []
    folder, name = os.path.split(os.path.abspath(path))
    prefix = name + JOURNAL_INFIX
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    found = []
    for entry in entries:
        tail = entry[len(prefix):] if entry.startswith(prefix) else ""
        if tail and _SEGMENT.match(tail) and tail.isascii():
            found.append((int(tail), os.path.join(folder, entry)))
    return [p for _, p in sorted(found)]


def read_segment(path: str) -> pa.Table | None:
    """A segment's whole record batches (a torn last message is dropped, as the Rust reader
    drops it); None for an empty or unreadable segment."""
    try:
        if os.path.getsize(path) > MAX_JOURNAL_BYTES:
            raise FormatError(f"journal segment is over {MAX_JOURNAL_BYTES} bytes", path=path)
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise FormatError(f"cannot read the journal segment: {exc}", path=path) from None
    if not data:
        return None
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError):
        return None
    batches = []
    while True:
        try:
            batches.append(reader.read_next_batch())
        except StopIteration:
            break
        except (pa.ArrowInvalid, OSError):
            break  # a torn tail
    missing = [n for n in BASE_NAMES if n not in reader.schema.names]
    if missing:
        raise FormatError(f"journal segment lacks the index columns {missing}", path=path)
    return pa.Table.from_batches(batches, schema=reader.schema)


def live_rows(table: pa.Table) -> pa.Table:
    """The last row of each path, at the place where the path first appeared."""
    slot: dict[str, int] = {}
    order: list[int] = []
    for i, path in enumerate(table.column("relative_path").to_pylist()):
        at = slot.get(path)
        if at is None:
            slot[path] = len(order)
            order.append(i)
        else:
            order[at] = i
    if len(order) == table.num_rows:
        return table
    return take(table, pa.array(order, pa.int64()))


def hot_rows(path: str) -> pa.Table | None:
    """The index of the hot archive at ``path`` from its journal segments (None: it has
    none)."""
    segments = journal_segments(path)
    if not segments:
        return None
    tables = [t for t in (read_segment(s) for s in segments) if t is not None]
    if not tables:
        return None
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowInvalid as exc:
        raise FormatError(f"journal segments disagree on their schema: {exc}",
                          path=path) from None
    return live_rows(table).combine_chunks()


def hot_source(src: RangeSource, path: str) -> VirtualSource | None:
    """The hot archive at ``path`` (a file without a footer and with journal segments
    beside it) as a sealed one: its bytes, then a tail of its journal's rows. None when
    there is no journal."""
    if isinstance(src, VirtualSource):
        return None
    rows = hot_rows(path)
    if rows is None:
        return None
    start = src.size
    streams = [(UNTYPED, stream_bytes(rows), rows.num_rows)] if rows.num_rows else []
    tail = make_tail(start, streams)
    pieces = [Piece(0, start, file_offset=0), Piece(start, len(tail), data=pa.py_buffer(tail))]
    if start == 0:
        pieces = pieces[1:]
    return VirtualSource(src, pieces, "hot")
