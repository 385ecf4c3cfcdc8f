"""A scan of one view over many archives, cut into parts, read anywhere, content on demand.

:class:`Scan` is what every adapter holds: picklable (strings, tuples, a
:class:`~znippy_sql.views.Where`, the storage options), so a worker process or a remote
executor rebuilds nothing from local state. Planning reads manifests only
(:func:`znippy_sql.views.plan`); a part's rows come from :func:`znippy_sql.views.read_part`;
the ``content`` column (the files' bytes) is added after the ``where`` has thinned the rows,
read with ``Archive.read_many`` from an archive kept open per worker process
(:mod:`znippy_sql.views.opened`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .. import views
from ..format import build
from ..views import Part, Where
from ..views.opened import opened

CONTENT = pa.field("content", pa.large_binary(), nullable=True)
ARCHIVE = "archive"
#: a part's size: index bytes per read task (many small archives share one task)
TARGET_BYTES = 16 << 20
#: a plan with fewer parts than this is cut finer (down to one data group a part), so a
#: small fleet still gives every worker something to read
MIN_PARTS = 8


@dataclass(frozen=True)
class Scan:
    """View ``view`` of ``archives`` (already expanded: paths or URLs), rows ``where`` keeps,
    with the ``content`` column when ``content`` is true (``files`` only)."""

    archives: tuple[str, ...]
    view: str = "files"
    where: Where = field(default_factory=Where)
    storage_options: Mapping[str, Any] | None = None
    content: bool = False
    target_bytes: int = TARGET_BYTES
    min_parts: int = MIN_PARTS

    def __post_init__(self) -> None:
        if self.view not in views.names():
            raise ValueError(f"unknown view {self.view!r}; one of {', '.join(views.names())}")
        if self.content and self.view != "files":
            raise ValueError(f"content is read for the files view, not {self.view!r}")
        opts = dict(self.storage_options) if self.storage_options else None
        object.__setattr__(self, "storage_options", opts)
        object.__setattr__(self, "archives", tuple(self.archives))

    def schema(self) -> pa.Schema:
        """``archive`` first, then the union of the archives' columns (+ ``content``)."""
        out = views.schema_many(list(self.archives), self.view,
                                storage_options=self.storage_options)
        return out.append(CONTENT) if self.content else out

    def plan(self, where: Where | None = None) -> list[Part]:
        """The parts (manifests only): archives and groups ``where`` (and the scan's own)
        rule out are not in it; fewer than ``min_parts`` are cut finer."""
        from .predicates import merge

        # one pass over the manifests: a part per group (or per archive of a view without
        # groups), then packed up to the target here
        units = views.plan(list(self.archives), self.view, merge(self.where, where),
                           storage_options=self.storage_options, target_bytes=1)
        total = sum(u.est_bytes for u in units)
        parts = pack(units, self.target_bytes)
        if len(parts) < self.min_parts:
            finer = pack(units, max(1, min(self.target_bytes, total // self.min_parts)))
            parts = finer if len(finer) > len(parts) else parts
        return parts

    def read(self, part: Part, schema: pa.Schema, columns: Sequence[str] | None = None,
             where: Where | None = None) -> Iterator[pa.RecordBatch]:
        """The rows of ``part`` as batches of ``schema`` projected to ``columns`` (all by
        default), ``content`` filled when asked."""
        from .predicates import merge

        names = list(columns) if columns is not None else schema.names
        want_content = self.content and CONTENT.name in names
        base = [n for n in names if n != CONTENT.name]
        need = list(dict.fromkeys(base + ([ARCHIVE, "relative_path"] if want_content else [])))
        inner = pa.schema([schema.field(n) for n in need])
        reader = views.read_part(part, self.view, need, merge(self.where, where),
                                 storage_options=self.storage_options, schema=inner)
        out = pa.schema([schema.field(n) for n in names])
        for batch in reader:
            if not batch.num_rows:
                continue
            if not want_content:  # a select keeps the length, with no column too
                yield batch.select(names)
                continue
            cols = {n: batch.column(n) for n in need}
            cols[CONTENT.name] = contents(cols[ARCHIVE].to_pylist(),
                                          cols["relative_path"].to_pylist(),
                                          self.storage_options)
            yield pa.RecordBatch.from_arrays([cols[n] for n in names], schema=out)


def pack(units: Sequence[Part], target: int) -> list[Part]:
    """Consecutive units joined into parts of about ``target`` bytes: the groups of one
    archive become one item, a group is never split."""
    out: list[Part] = []
    items: list[tuple[str, Any]] = []
    size = 0
    for unit in units:
        for archive, groups in unit.items:
            if items and items[-1][0] == archive and items[-1][1] is not None \
                    and groups is not None:
                items[-1] = (archive, (*items[-1][1], *groups))
            else:
                items.append((archive, groups))
        size += unit.est_bytes
        if size >= target:
            out.append(Part(tuple(items), size))
            items, size = [], 0
    if items:
        out.append(Part(tuple(items), size))
    return out


# -- content ----------------------------------------------------------------------------------

def read_files(uri: str, paths: Sequence[str],
               storage_options: Mapping[str, Any] | None = None) -> dict[str, bytes]:
    """path → bytes of ``paths`` of one archive (``Archive.read_many``: blob order, worker
    threads, coalesced ranged GETs remotely)."""
    arc = opened(uri, storage_options)
    wanted = list(dict.fromkeys(paths))
    if hasattr(arc, "read_many"):
        return dict(arc.read_many(wanted))
    return {p: arc.read(p) for p in wanted}  # before the house branch's read_many


def contents(archives: Sequence[str | None], paths: Sequence[str | None],
             storage_options: Mapping[str, Any] | None = None) -> pa.Array:
    """The bytes of each (archive, path) pair, in the pairs' order (NULL for a NULL pair);
    each archive's files are read together."""
    by_archive: dict[str, list[str]] = {}
    for a, p in zip(archives, paths):
        if a is not None and p is not None:
            by_archive.setdefault(a, []).append(p)
    got = {a: read_files(a, ps, storage_options) for a, ps in by_archive.items()}
    return build.binary([None if a is None or p is None else got[a][p]
                         for a, p in zip(archives, paths)], large=True)
