"""Files in, blobs and rows out: the part every writer shares before its tail.

:class:`Ingest` resolves each entry's group (pkg_type, repo, module), refuses bad or duplicate
paths, cuts files into ``block_size`` chunks, sends them through the :class:`Compressor` and
writes the blobs, in input order, from a start offset of an open file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from . import codec, modules
from .blobs import BlobSink, GroupRows
from .errors import DuplicatePathError, ZnippyError
from .paths import check_relative_path
from .pipeline import BATCH_BYTES, BATCH_JOBS, Compressor, Job
from .schema import GroupKey, is_reserved, resolve_pkg_type
from .source import Entry

DEFAULT_BLOCK_SIZE = 10 * 1024 * 1024


@dataclass(frozen=True)
class WriteOptions:
    level: int = codec.DEFAULT_LEVEL
    block_size: int = DEFAULT_BLOCK_SIZE
    workers: int | None = None

    def schema_metadata(self) -> dict[str, str]:
        """Recorded on every data sub-index schema (docs/format.md)."""
        return {
            "znippy.codec": "openzl",
            "znippy.openzl.graph": codec.GRAPH,
            "znippy.openzl.level": str(self.level),
            "znippy.openzl.format_version": str(codec.FORMAT_VERSION),
            "znippy.block_size": str(self.block_size),
        }


@dataclass
class _Pending:
    rows: GroupRows
    entry: Entry
    path: str
    chunk_seq: int
    extra: dict[str, Any] | None


class Ingest:
    def __init__(self, fd: int, start: int, options: WriteOptions, *, repo: str = "",
                 pkg_type: int | str | None = 0, known_paths: dict[str, str] | None = None) -> None:
        if options.block_size <= 0:
            raise ValueError("block_size must be positive")
        self.options = options
        self.default_repo = repo
        self.default_pkg_type = pkg_type
        self.sink = BlobSink(fd, start)
        self.compressor = Compressor(level=options.level, workers=options.workers)
        self.seen: dict[str, str] = known_paths if known_paths is not None else {}
        self.files = 0
        self.bytes_in = 0
        self._batch: list[Job] = []
        self._tags: list[_Pending] = []
        self._batch_bytes = 0

    # -- grouping -------------------------------------------------------------------------
    def _group(self, entry: Entry) -> GroupRows:
        repo = entry.repo if entry.repo is not None else self.default_repo
        wanted = entry.pkg_type if entry.pkg_type is not None else self.default_pkg_type
        if isinstance(wanted, str) and wanted.strip().lower() == "auto":
            module = modules.claim(entry.relative_path)
            pkg_type = module.pkg_type if module else 0
        else:
            pkg_type = resolve_pkg_type(wanted)
            module = modules.for_pkg_type(pkg_type)
        key = GroupKey(pkg_type, repo, module.name if module else "")
        if is_reserved(key.module_name):
            raise ZnippyError(f"module name {key.module_name!r} is reserved")
        return self.sink.group(key, module)

    # -- adding ---------------------------------------------------------------------------
    def add(self, entry: Entry) -> None:
        path = check_relative_path(entry.relative_path)
        if path in self.seen:
            raise DuplicatePathError(
                f"duplicate relative_path {path!r}: from {self.seen[path]} and {entry.origin}",
                path=entry.origin,
            )
        self.seen[path] = entry.origin
        rows = self._group(entry)
        size = entry.size()
        extra = None
        if rows.module is not None and rows.module.fields:
            extra = dict(rows.module.columns(path, lambda: _read_all(entry)))
        skip = codec.is_skipped(path)
        block = self.options.block_size
        offsets = range(0, size, block) if size else [0]
        self.files += 1
        self.bytes_in += size
        for seq, off in enumerate(offsets):
            length = min(block, size - off)
            data = entry.data[off : off + length] if entry.data is not None else None
            file = None if entry.file is None else os.fspath(entry.file)
            job = Job(data, file, off, length, skip)
            self._queue(job, _Pending(rows, entry, path, seq, extra if seq == 0 else None))

    def _queue(self, job: Job, tag: _Pending) -> None:
        self._batch.append(job)
        self._tags.append(tag)
        self._batch_bytes += job.length
        if self._batch_bytes >= BATCH_BYTES or len(self._batch) >= BATCH_JOBS:
            self._flush()

    def _flush(self) -> None:
        if self._batch:
            batch, tags = self._batch, self._tags
            self._batch, self._tags, self._batch_bytes = [], [], 0
            self._place(self.compressor.submit(batch, (batch, tags)))

    def _place(self, done: list[tuple[object, list]]) -> None:
        for (batch, tags), results in done:  # type: ignore[misc]
            for job, tag, (digest, frame) in zip(batch, tags, results):
                self.sink.put_chunk(
                    tag.rows, tag.path, tag.chunk_seq, job.offset, job.length, digest, frame,
                    lambda job=job: job.data if job.data is not None else (job.file, job.offset),
                    tag.extra,
                )

    def finish(self) -> BlobSink:
        try:
            self._flush()
            self._place(self.compressor.drain())
        finally:
            self.compressor.close()
        return self.sink

    def abort(self) -> None:
        self.compressor.close()


def _read_all(entry: Entry) -> bytes:
    if entry.data is not None:
        return entry.data
    with open(entry.file, "rb") as fh:  # type: ignore[arg-type]
        return fh.read()
