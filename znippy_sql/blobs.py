"""Blobs back to back from an offset, and the index rows that point at them, per group."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .modules import Module
from .schema import BASE_FIELDS, PKG_TYPE_FIELD, GroupKey


@dataclass
class GroupRows:
    """Column lists of one group's rows, in production (= canonical) order."""

    key: GroupKey
    module: Module | None
    cols: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [f.name for f in self.schema()]
        self.cols = {n: [] for n in names}

    def schema(self) -> pa.Schema:
        fields = list(BASE_FIELDS)
        if self.module is not None and self.module.fields:
            fields += [PKG_TYPE_FIELD, *self.module.fields]
        return pa.schema(fields)

    def add(self, base: Sequence[Any], extra: dict[str, Any] | None) -> None:
        for f, v in zip(BASE_FIELDS, base):
            self.cols[f.name].append(v)
        if len(self.cols) > len(BASE_FIELDS):
            self.cols["pkg_type"].append(self.key.pkg_type if extra is not None else None)
            for f in self.module.fields:  # type: ignore[union-attr]
                self.cols[f.name].append(None if extra is None else extra.get(f.name))

    def table(self) -> pa.Table:
        return pa.table(self.cols, schema=self.schema())


class BlobSink:
    """Writes blobs at ``cursor`` of an open file descriptor and records their rows."""

    def __init__(self, fd: int, start: int) -> None:
        self.fd = fd
        self.cursor = start
        self.groups: dict[GroupKey, GroupRows] = {}
        self.stored_bytes = 0
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

    def _copy_file(self, path: str, offset: int, length: int) -> None:
        with open(path, "rb") as src:
            done = 0
            while done < length:
                try:
                    n = os.copy_file_range(src.fileno(), self.fd, length - done,
                                           offset + done, self.cursor)
                except OSError:
                    n = 0
                if n <= 0:  # fall back to a plain read (other filesystems, or EOF)
                    data = os.pread(src.fileno(), min(length - done, 1 << 24), offset + done)
                    if not data:
                        raise OSError(f"{path}: file shrank while writing")
                    self._pwrite(data)
                    n = len(data)
                else:
                    self.cursor += n
                done += n

    def put_chunk(
        self,
        rows: GroupRows,
        path: str,
        chunk_seq: int,
        fdata_offset: int,
        length: int,
        digest: bytes,
        frame: bytes | None,
        raw: Callable[[], tuple[str, int] | bytes],
        extra: dict[str, Any] | None,
    ) -> None:
        """Write one chunk's blob (``frame``, else the raw bytes from ``raw()``) and its row."""
        start = self.cursor
        if frame is not None:
            self._pwrite(frame)
            self.compressed_chunks += 1
        else:
            src = raw()
            if isinstance(src, tuple):
                self._copy_file(src[0], src[1], length)
            else:
                self._pwrite(src)
            self.raw_chunks += 1
        size = self.cursor - start
        self.stored_bytes += size
        rows.add((path, chunk_seq, fdata_offset, frame is not None, length, start, size, digest),
                 extra)

    def tables(self) -> dict[GroupKey, pa.Table]:
        return {k: g.table() for k, g in self.groups.items()}
