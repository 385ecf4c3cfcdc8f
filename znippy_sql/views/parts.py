"""Work for a distributed engine (Spark, Daft, Ray): :func:`plan` cuts a view over many
archives into picklable :class:`Part` s, each read anywhere by :func:`read_part`.

Planning reads manifests only (the footer and the manifest of each archive; no sub-index):
the bytes a part costs are the byte lengths of the streams it will read. Archives smaller
than ``target_bytes`` are batched into one part until the part reaches it; a bigger archive
of a grouped view (``files``, ``chunks``, ``groups``) is split by data group, groups taken in
tail order until a part reaches ``target_bytes`` (a group is never split). Groups a
:class:`~.base.Where` rules out are left out of the plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..format.schema import GroupKey
from .base import Where
from .core import archive_name, batches, merge_schemas, open_or_use, project, with_archive
from .core import schema as one_schema
from .registry import get, names, present

#: a part's size when none is asked for: 64 MiB of index streams
TARGET_BYTES = 64 << 20


@dataclass(frozen=True)
class Part:
    """One unit of work: ``items`` are (archive path/URL, the data groups to read: ``None``
    for all / a view without groups), read in that order; ``est_bytes`` is what the plan
    expects it to read. Picklable (plain strings, tuples and ints)."""

    items: tuple[tuple[str, tuple[GroupKey, ...] | None], ...]
    est_bytes: int

    @property
    def archives(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.items)


def plan(archives: Sequence[Any], name: str, where: Where | None = None, *,
         storage_options: Mapping[str, Any] | None = None,
         target_bytes: int = TARGET_BYTES) -> list[Part]:
    """The parts of view ``name`` over ``archives`` (see the module docstring). An archive
    that does not have the view contributes no part."""
    if name not in names():
        raise ValueError(f"unknown view {name!r}; one of {', '.join(names())}")
    if target_bytes <= 0:
        raise ValueError("target_bytes must be positive")
    where = where or Where()
    parts: list[Part] = []
    pending: list[tuple[str, tuple[GroupKey, ...] | None]] = []
    pending_bytes = 0

    def flush() -> None:
        nonlocal pending, pending_bytes
        if pending:
            parts.append(Part(tuple(pending), pending_bytes))
        pending, pending_bytes = [], 0

    for archive in archives:
        label = archive_name(archive)
        arc, owned = open_or_use(archive, storage_options)
        try:
            if not present(arc, name):
                continue
            view = get(name)
            if view.grouped:
                keys = tuple(k for k in arc.groups if where.keeps_group(k))
                if not keys:
                    continue
                sizes = [arc.manifest_row(k).index_len for k in keys]
            else:
                keys, sizes = None, [view.cost(arc, None) if view.cost else 0]
        finally:
            if owned:
                arc.close()
        total = sum(sizes)
        if total < target_bytes or keys is None:
            pending.append((label, keys))
            pending_bytes += total
            if pending_bytes >= target_bytes:
                flush()
            continue
        run: list[GroupKey] = []
        run_bytes = 0
        for key, size in zip(keys, sizes):
            run.append(key)
            run_bytes += size
            if run_bytes >= target_bytes:
                parts.append(Part(((label, tuple(run)),), run_bytes))
                run, run_bytes = [], 0
        if run:
            parts.append(Part(((label, tuple(run)),), run_bytes))
    flush()
    return parts


def read_part(part: Part, name: str, columns: Sequence[str] | None = None,
              where: Where | None = None, *, storage_options: Mapping[str, Any] | None = None,
              schema: pa.Schema | None = None) -> pa.RecordBatchReader:
    """The rows of one part, with the ``archive`` column first (as :func:`batches_many`).

    ``schema``: the schema every part of a plan should have (``views.schema_many`` of the
    plan's archives, projected); by default the union over this part's archives."""
    each = {a: one_schema(a, name, storage_options=storage_options) for a in part.archives}
    out = schema if schema is not None else project(merge_schemas(each, name), columns, name)

    def gen() -> Iterator[pa.RecordBatch]:
        for archive, groups in part.items:
            own = each[archive]
            inner = None if columns is None else [c for c in out.names if c in own.names]
            reader = batches(archive, name, inner, where, storage_options=storage_options,
                             groups=groups)
            yield from with_archive(reader, archive, out)

    return pa.RecordBatchReader.from_batches(out, gen())
