"""Blobs back to back from an offset, and the index rows that point at them, per group."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa

from .modules import Module
from .pipeline import BatchResult, Job
from .schema import BASE_FIELDS, PKG_TYPE_FIELD, GroupKey


@dataclass
class GroupRows:
    """One group's rows, in production (= canonical) order: base tuples, module extras."""

    key: GroupKey
    module: Module | None
    base: list[tuple[Any, ...]] = field(default_factory=list)
    extra: list[dict[str, Any] | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        #: whether rows carry module columns (asked once per row: computed once)
        self.has_extra = self.module is not None and bool(self.module.fields)

    def schema(self) -> pa.Schema:
        fields = list(BASE_FIELDS)
        if self.has_extra:
            fields += [PKG_TYPE_FIELD, *self.module.fields]  # type: ignore[union-attr]
        return pa.schema(fields)

    def table(self) -> pa.Table:
        cols: dict[str, list[Any]] = {f.name: [] for f in BASE_FIELDS}
        if self.base:
            for f, values in zip(BASE_FIELDS, zip(*self.base)):
                cols[f.name] = list(values)
        if self.has_extra:
            cols["pkg_type"] = [None if e is None else self.key.pkg_type for e in self.extra]
            for f in self.module.fields:  # type: ignore[union-attr]
                cols[f.name] = [None if e is None else e.get(f.name) for e in self.extra]
        return pa.table(cols, schema=self.schema())


class ChunkTag(NamedTuple):
    """Where a chunk's row goes: its group, path, chunk number and module columns."""

    rows: GroupRows
    path: str
    chunk_seq: int
    extra: dict[str, Any] | None


class BlobSink:
    """Writes blobs at ``cursor`` of an open file descriptor and records their rows."""

    def __init__(self, fd: int, start: int) -> None:
        self.fd = fd
        self.cursor = start
        self.groups: dict[GroupKey, GroupRows] = {}
        self.compressed_chunks = 0
        self.raw_chunks = 0

    def group(self, key: GroupKey, module: Module | None) -> GroupRows:
        rows = self.groups.get(key)
        if rows is None:
            rows = self.groups[key] = GroupRows(key, module)
        return rows

    def _pwrite(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.cursor)
            self.cursor += n
            view = view[n:]

    def put_batch(self, tags: Sequence[ChunkTag], jobs: Sequence[Job],
                  result: BatchResult) -> None:
        """Write a batch's blobs in order (one ``pwrite``, ``result.buffer`` holds them back
        to back) and record their rows."""
        digests = result.digests
        start = self.cursor
        for i, (tag, job, size, compressed) in enumerate(zip(tags, jobs, result.stored,
                                                             result.compressed)):
            rows = tag.rows
            rows.base.append((tag.path, tag.chunk_seq, job.offset, compressed, job.length,
                              start, size, digests[32 * i : 32 * i + 32]))
            if rows.has_extra:
                rows.extra.append(tag.extra)
            start += size
        packed = sum(result.compressed)
        self.compressed_chunks += packed
        self.raw_chunks += len(result.stored) - packed
        self._pwrite(result.buffer)

    def tables(self) -> dict[GroupKey, pa.Table]:
        return {k: g.table() for k, g in self.groups.items()}
