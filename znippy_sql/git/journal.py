"""The push path's journal: an Arrow IPC stream used as a log of acked pack extents.

Layout of ``<blobs>.journal`` (FORMAT §6)::

    [schema message]            once per file: blob_offset UInt64, blob_size UInt64
    [record batch message] ...  one per acked pack (or tombstone), one row each
                                (no end-of-stream marker: the log is never closed)

A reopen appends and never writes a second schema. A process killed mid-row leaves a torn
final message: :func:`read_journal` keeps every complete message before it. A row whose
``blob_size`` is ``2**64 - 1`` is a *tombstone*: its ``blob_offset`` names a retired pack.
A pack's ordinal is its position among the pack rows (tombstones not counted), so it never
changes once acked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from ..errors import FormatError
from ..format.fsio import write_all

SCHEMA = pa.schema([
    pa.field("blob_offset", pa.uint64(), nullable=False),
    pa.field("blob_size", pa.uint64(), nullable=False),
])
#: ``blob_size`` of a tombstone row: no real extent can be 2^64-1 bytes long.
TOMBSTONE = 2**64 - 1

Extent = tuple[int, int]


def journal_path(blobs: str | os.PathLike[str]) -> str:
    """The journal beside a blob file: ``<blobs>.journal``."""
    return os.fspath(blobs) + ".journal"


def encode_schema() -> bytes:
    """The schema message that opens the journal (written once per file)."""
    return SCHEMA.serialize().to_pybytes()


def encode_row(offset: int, size: int) -> bytes:
    """One batch message: the row ``(offset, size)``."""
    # Arrays from buffers, not from Python lists: pa.array([...]) imports pandas on its first
    # call (~1 s), which a push's first append (often a fresh process's) would pay.
    cols = [pa.Array.from_buffers(pa.uint64(), 1, [None, pa.py_buffer(v.to_bytes(8, "little"))])
            for v in (offset, size)]
    batch = pa.record_batch(cols, schema=SCHEMA)
    return batch.serialize().to_pybytes()


def scan_journal(data: bytes, *, path: str | None = None) -> tuple[list[Extent], int]:
    """``(rows, whole)``: every complete row in log order and the length of the prefix made of
    complete messages. A torn tail (or a torn schema) is not an error; a whole schema that is
    not the journal's schema is a :class:`FormatError`."""
    src = pa.BufferReader(pa.py_buffer(data))
    reader = pa.ipc.MessageReader.open_stream(src)
    rows: list[Extent] = []
    whole = 0
    schema = None
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            break
        except (pa.ArrowException, OSError):
            break  # torn tail: every complete message before it is real
        try:
            if schema is None:
                if message.type != "schema":
                    raise FormatError(f"not a push journal: it opens with a {message.type} "
                                      "message, not a schema", path=path)
                schema = pa.ipc.read_schema(message)
                if not schema.equals(SCHEMA):
                    raise FormatError(f"not a push journal: its schema is {schema}", path=path)
            else:
                batch = pa.ipc.read_record_batch(message, schema)
                if batch.column(0).null_count or batch.column(1).null_count:
                    raise FormatError(f"journal row {len(rows)} has no offset or size (a "
                                      "null): the journal is damaged", path=path)
                rows.extend(zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()))
        except (pa.ArrowException, OSError):
            break
        whole = src.tell()
    return rows, whole


def read_journal(path: str | os.PathLike[str]) -> list[Extent]:
    """Every complete row of the journal at ``path`` (none if there is no file)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return []
    return scan_journal(data, path=path)[0]


@dataclass(frozen=True)
class JournalState:
    """What a journal says: the acked packs in ordinal order and the retired offsets."""

    packs: list[Extent]
    retired: frozenset[int]

    @classmethod
    def of(cls, rows: list[Extent]) -> "JournalState":
        packs = [(o, s) for o, s in rows if s != TOMBSTONE]
        return cls(packs, frozenset(o for o, s in rows if s == TOMBSTONE))

    def live(self) -> list[tuple[int, Extent]]:
        """``(ordinal, extent)`` of every pack not retired."""
        return [(i, e) for i, e in enumerate(self.packs) if e[0] not in self.retired]


def retire_packs(journal: str | os.PathLike[str], offsets: list[int]) -> None:
    """Append one tombstone per pack offset, in one write, fsynced before returning."""
    if not offsets:
        return
    path = os.fspath(journal)
    known = {o for o, s in read_journal(path) if s != TOMBSTONE}
    missing = [o for o in offsets if o not in known]
    if missing:
        raise FormatError(f"no acked pack starts at offset {missing[0]}: nothing to retire",
                          path=path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        write_all(fd, b"".join(encode_row(o, TOMBSTONE) for o in offsets))
        os.fsync(fd)
    finally:
        os.close(fd)
