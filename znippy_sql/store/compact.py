"""Store compaction: each group's Iceberg table rewritten as one data file.

Every ``add`` commits one Parquet file per touched table (and a delete of the replaced paths),
so a store that took many adds reads many small files. ``compact_tables`` rewrites each table
that has more than one data file (or stale rows, see :mod:`.dynamic`) with its live rows in one
``overwrite`` commit: the same rows, types and ordinals, so every view, and a seal, give the
same result as before. Then the snapshots before that commit are expired and, for a local
warehouse, the data files no remaining snapshot refers to are deleted. Run it with no reader
scanning (the writer lock is held; readers take none): a reader in the middle of a scan of an
expired snapshot would lose its files. The sidecar is not touched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc

from ..format.schema import GroupKey
from .iceberg import GroupTable, read_rows, table_name



@dataclass(frozen=True)
class StoreCompactReport:
    #: the tables rewritten
    tables: list[str]
    data_files_before: int
    data_files_after: int
    snapshots_expired: int
    #: data files deleted from a local warehouse
    files_removed: int
    seconds: float
    untouched: list[str] = field(default_factory=list)


def _data_files(table: Any) -> set[str]:
    return {task.file.file_path for task in table.scan().plan_files()}


def compact_tables(namespace: str, groups: Mapping[GroupKey, GroupTable],
                   stale_paths: dict[GroupKey, set[str]]) -> StoreCompactReport:
    """Compact a store's ``groups`` (its namespace's tables); a group's ``stale_paths`` are
    left out of its rewrite and dropped from the dict."""
    started = time.perf_counter()
    rewritten: list[str] = []
    untouched: list[str] = []
    before = after = expired = removed = 0
    for key, group in sorted(groups.items()):
        table = group.table
        ident = f"{namespace}.{table_name(key)}"
        files = _data_files(table)
        before += len(files)
        stale = stale_paths.get(key)
        if len(files) <= 1 and not stale and len(table.snapshots()) <= 1:
            untouched.append(ident)
            after += len(files)
            continue
        rows = read_rows(group)
        if stale:
            keep = pc.invert(pc.is_in(rows.column("relative_path"),
                                      value_set=pa.array(sorted(stale), pa.utf8())))
            rows = rows.filter(keep)
        with table.transaction() as tx:
            tx.overwrite(rows, snapshot_properties={"znippy.compacted": "1"})
        table.refresh()
        current = table.current_snapshot()
        old = [s.snapshot_id for s in table.snapshots()
               if current is None or s.snapshot_id != current.snapshot_id]
        if old:
            table.maintenance.expire_snapshots().by_ids(old).commit()
            table.refresh()
            expired += len(old)
        kept = _data_files(table)
        after += len(kept)
        removed += _remove_unreferenced(table, kept)
        stale_paths.pop(key, None)
        rewritten.append(ident)
    return StoreCompactReport(rewritten, before, after, expired, removed,
                              time.perf_counter() - started, untouched)


def _remove_unreferenced(table: Any, kept: set[str]) -> int:
    """Delete the Parquet data files of a local table that ``kept`` does not name."""
    location = urlparse(table.location())
    if location.scheme not in ("", "file"):
        return 0  # a shared object store: other engines' time travel is theirs to expire
    data_dir = os.path.join(unquote(location.path), "data")
    keep = {unquote(urlparse(p).path) if "://" in p else p for p in kept}
    removed = 0
    for root, _dirs, names in os.walk(data_dir):
        for name in names:
            full = os.path.join(root, name)
            if name.endswith(".parquet") and full not in keep:
                os.unlink(full)
                removed += 1
    return removed
