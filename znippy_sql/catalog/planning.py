"""Scan planning of the catalog's tables with manifest entries kept in memory.

pyiceberg's ``plan_files`` decodes every manifest's Avro entries on every scan; for the
``files`` table of a fleet (one data file per archive) that decoding is most of a query's
planning time. A manifest file is immutable (a new commit writes new manifests), so its decoded
entries are kept here, keyed by its path, in a bounded LRU shared by the process. Evaluation
(partition values, column bounds, residuals, delete files) is pyiceberg's own
``ManifestGroupPlanner``; only where the entries come from differs. Where that planner is not
available (an older pyiceberg), or the table's catalog plans on its server, the table's own
``scan().plan_files()`` is used.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

#: decoded entries kept, summed over manifests (a data file's entry took ~6.5 KB of memory
#: in the benchmark's catalog: at most ~130 MB; one entry per archive in ``files``)
MAX_ENTRIES = 20_000

_LOCK = threading.Lock()


class _Lru:
    """Decoded manifest data by path, least recently used first out once ``weight`` summed
    over the kept values passes ``limit`` (a value heavier than ``limit`` is not kept)."""

    def __init__(self, limit: int, weight: Callable[[Any], int]) -> None:
        self.limit, self.weight, self.size = limit, weight, 0
        self.kept: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str, load: Callable[[], Any]) -> Any:
        with _LOCK:
            hit = self.kept.get(key)
            if hit is not None:
                self.kept.move_to_end(key)
                return hit
        got = load()
        w = self.weight(got)
        with _LOCK:
            if key not in self.kept and w <= self.limit:
                self.kept[key] = got
                self.size += w
                while self.size > self.limit:
                    _old, gone = self.kept.popitem(last=False)
                    self.size -= self.weight(gone)
        return got

    def clear(self) -> None:
        with _LOCK:
            self.kept.clear()
            self.size = 0


_ENTRIES = _Lru(MAX_ENTRIES, len)


def _entries(manifest: Any, io: Any) -> list[Any]:
    """The live entries of ``manifest`` (decoded once per process while they fit)."""
    return _ENTRIES.get(manifest.manifest_path, lambda: list(
        manifest.fetch_manifest_entry(io, discard_deleted=True)))


#: manifest lists decoded, by path (immutable too; one per snapshot, a few entries each)
MAX_LISTS = 64
_LISTS = _Lru(MAX_LISTS, lambda _value: 1)


def manifests(snapshot: Any, io: Any) -> tuple[Any, ...]:
    """``snapshot.manifests(io)``, the snapshot's manifest list decoded once per process."""
    got: tuple[Any, ...] = _LISTS.get(snapshot.manifest_list,
                                      lambda: tuple(snapshot.manifests(io)))
    return got


def clear() -> None:
    """Forget every cached manifest and manifest list (tests; memory)."""
    for lru in (_ENTRIES, _LISTS):
        lru.clear()


def _planner_class() -> Any:
    """pyiceberg's ManifestGroupPlanner with cached entries, or None when absent."""
    try:
        from pyiceberg.table import ManifestGroupPlanner, _min_sequence_number
    except ImportError:
        return None
    if not hasattr(ManifestGroupPlanner, "_check_sequence_number"):
        return None

    class CachedPlanner(ManifestGroupPlanner):
        def plan_manifest_entries(self, manifests: Any) -> Any:
            # as ManifestGroupPlanner.plan_manifest_entries, serially, entries from the cache
            by_spec: dict[int, Any] = {}
            kept = []
            for m in manifests:
                spec = m.partition_spec_id
                if spec not in by_spec:
                    by_spec[spec] = (self._build_manifest_evaluator(spec),
                                     self._build_partition_evaluator(spec))
                if by_spec[spec][0](m):
                    kept.append(m)
            metrics = self._build_metrics_evaluator()
            low = _min_sequence_number(kept)
            out = []
            for m in kept:
                if not self._check_sequence_number(low, m):
                    continue
                part = by_spec[m.partition_spec_id][1]
                out.append([e for e in _entries(m, self.io)
                            if part(e.data_file) and metrics(e.data_file)])
            return iter(out)

        def plan_files(self, manifests: Any, manifest_entry_filter: Any = None) -> Any:
            # as ManifestGroupPlanner.plan_files, with the whole row filter as each task's
            # residual (a valid, conservative one: ArrowScan filters rows by the scan's filter
            # anyway); pyiceberg's exact residual costs ~3 ms of binding per data file
            from pyiceberg.manifest import DataFileContent
            from pyiceberg.table import FileScanTask
            from pyiceberg.table.delete_file_index import DeleteFileIndex
            from pyiceberg.table.metadata import INITIAL_SEQUENCE_NUMBER

            data = []
            deletes = DeleteFileIndex()
            for entries in self.plan_manifest_entries(manifests):
                for entry in entries:
                    if manifest_entry_filter is not None and not manifest_entry_filter(entry):
                        continue
                    f = entry.data_file
                    if f.content == DataFileContent.DATA:
                        data.append(entry)
                    elif f.content == DataFileContent.POSITION_DELETES:
                        deletes.add_delete_file(entry, partition_key=f.partition)
                    else:  # equality deletes: pyiceberg's own planner says what it says
                        return super().plan_files(manifests)
            return [FileScanTask(e.data_file, delete_files=deletes.for_data_file(
                e.sequence_number or INITIAL_SEQUENCE_NUMBER, e.data_file,
                partition_key=e.data_file.partition), residual=self.row_filter) for e in data]

    return CachedPlanner


_PLANNER: list[Any] = []


def plan_files(table: Any, row_filter: Any, snapshot: Any = None) -> list[Any]:
    """The ``FileScanTask`` list of a scan of ``table`` (its current snapshot, or
    ``snapshot``) with ``row_filter``, as ``table.scan(row_filter=...).plan_files()``."""
    if not _PLANNER:
        _PLANNER.append(_planner_class())
    planner = _PLANNER[0]
    snap = snapshot if snapshot is not None else table.current_snapshot()
    scan = table.scan(row_filter=row_filter)
    server = getattr(scan, "_should_use_server_side_planning", None)
    if planner is None or (server is not None and server()):
        return list(scan.plan_files())
    if snap is None:
        return []
    return list(planner(table_metadata=table.metadata, io=table.io, row_filter=row_filter,
                        case_sensitive=True).plan_files(manifests(snap, table.io)))
