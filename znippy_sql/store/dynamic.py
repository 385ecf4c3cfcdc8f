"""The dynamic store: blobs in a sidecar file, index rows in Iceberg tables (one per group).

``Store.add`` writes the new blobs at the sidecar's committed end with the same
:class:`~znippy_sql.write.ingest.Ingest` every writer uses, fsyncs the sidecar, and only then commits
the rows: one Iceberg transaction per touched table (create + first rows, or delete of replaced
paths + new rows). Bytes first, then the reference: a crash in between leaves orphan bytes past
the committed end, which the next ``add`` truncates and the seal never copies.

One writer per sidecar (an exclusive ``flock``, refuse-don't-wait); readers (``files()``, the
seal, DuckDB/Polars views) read the committed snapshots and need no lock.

Replacement: a path added again replaces its older rows, in whatever table they were. Tables
holding new rows commit before tables that only lose rows, so a crash between two table
commits can leave a path twice but never lose it; the copy with the highest ordinal wins in
every read, and the next ``add`` deletes the stale copy.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LockError, StoreError
from ..write.dedup import DedupIndex
from ..write.ingest import Ingest, WriteOptions
from ..write.options import resolve
from ..format.schema import INNER, GroupKey
from ..modules.pkgtypes import resolve_pkg_type
from ..write.feed import Feed
from ..write.source import Entry
from ..write.unchanged import same_content
from .convert import ORDINAL, from_iceberg, in_order, to_iceberg
from .iceberg import (NS_BLOCK, NS_INDEX, NS_LEVEL, NS_PACK, GroupTable, create_transaction, group_tables,
                      open_catalog, read_rows, table_name)

#: the options a store fixes when it is created (an add with other values is refused)
STORE_FIXED = ("level", "block_size", "pack", "index_compression")
_STATE_COLUMNS = ("relative_path", "blob_offset", "blob_size", ORDINAL)
_CHUNK_SCHEMA = pa.schema([pa.field("relative_path", pa.utf8(), nullable=False),
                           pa.field("chunk_seq", pa.uint32(), nullable=False),
                           pa.field("uncompressed_size", pa.uint64(), nullable=False),
                           pa.field("checksum", pa.binary(32), nullable=False)])
_DEDUP_COLUMNS = ("checksum", "uncompressed_size", "blob_offset", "blob_size", "compressed")


@dataclass(frozen=True)
class AddReport:
    files_added: int
    rows_added: int
    files_replaced: int
    rows_replaced: int
    #: blob bytes of replaced rows, now dead in the sidecar (a blob that a live row still
    #: shares is counted too: an upper bound)
    dead_bytes: int
    #: bytes of an earlier crashed add, cut off the sidecar before this one wrote
    orphan_bytes_truncated: int
    sidecar_start: int
    sidecar_end: int
    blob_bytes_written: int
    #: the Iceberg tables committed, in commit order
    tables: list[str]
    seconds: float
    #: files found stored already, unchanged (same group, size and chunk checksums): skipped
    files_unchanged: int = 0
    #: new rows that point at a blob already in the sidecar or written earlier in this add,
    #: and the blob bytes they did not write
    shared_chunks: int = 0
    bytes_saved: int = 0


@dataclass
class _Live:
    """What the store knows about one live path: its table, rows and blob bytes."""

    key: GroupKey
    ordinal: int
    rows: int
    stored: int


class Store:
    """A dynamic store. Use :func:`open_store`; ``writable=False`` for readers (no lock)."""

    def __init__(self, sidecar: str | os.PathLike[str], warehouse: str | os.PathLike[str],
                 namespace: str, catalog: Mapping[str, Any] | None = None, *,
                 options: WriteOptions | None = None, level: int | None = None,
                 block_size: int | None = None, writable: bool = True,
                 pack: bool | None = None, index_compression: bool | None = None) -> None:
        self.sidecar = os.fspath(sidecar)
        self.warehouse = os.fspath(warehouse)
        self.namespace = namespace
        self.writable = writable
        if not writable and not os.path.exists(self.sidecar):
            raise StoreError("no sidecar file", path=self.sidecar)
        self.catalog = open_catalog(warehouse, catalog, create=writable)
        self._fd: int | None = None
        #: the dedup index of the committed rows (built at the first add; None: rebuild)
        self._index: DedupIndex | None = None
        if options is not None:  # its fixed settings are the store's (fixed at creation)
            given, _ = resolve(options, what="open_store", level=level, block_size=block_size,
                               pack=pack, index_compression=index_compression)
            level, block_size = given.level, given.block_size
            pack, index_compression = given.pack, given.index_compression
        self.options = self._options(level, block_size, pack, index_compression)
        if writable:
            fd = os.open(self.sidecar, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LockError("another process is writing to this store",
                                path=self.sidecar) from None
            self._fd = fd
        self._groups: dict[GroupKey, GroupTable] = group_tables(self.catalog, namespace)
        self._load_state()

    # -- options and state ------------------------------------------------------------------
    def _options(self, level: int | None, block_size: int | None, pack: bool | None = None,
                 index_compression: bool | None = None) -> WriteOptions:
        """The store's codec level, block size, packing and index compression, recorded once
        in the namespace. A namespace with a level but no packing recorded was created before
        packing existed: its store neither packs nor compresses its index (so its later adds
        keep its tables' schema and its seal the layout it always had)."""
        ns = self.namespace
        if "." in ns and type(self.catalog).__name__ == "SqlCatalog":
            raise StoreError(f"namespace {ns!r}: the SQL catalog takes one-level namespaces "
                             "(no '.')", path=self.warehouse)
        if not self.catalog.namespace_exists(ns):
            if not self.writable:
                raise StoreError(f"no namespace {ns!r} in the catalog", path=self.warehouse)
            self.catalog.create_namespace(ns)
        props = self.catalog.load_namespace_properties(ns)
        recorded = {NS_LEVEL: props.get(NS_LEVEL), NS_BLOCK: props.get(NS_BLOCK)}
        given: dict[str, Any] = {NS_LEVEL: level, NS_BLOCK: block_size}  # None: not given
        defaults = {NS_LEVEL: WriteOptions().level, NS_BLOCK: WriteOptions().block_size}
        values: dict[str, int] = {}
        for name in (NS_LEVEL, NS_BLOCK):
            if recorded[name] is not None:
                values[name] = int(recorded[name])
                if given[name] is not None and given[name] != values[name]:
                    raise StoreError(f"store was created with {name}={values[name]}, "
                                     f"not {given[name]}", path=self.warehouse)
            else:
                values[name] = given[name] if given[name] is not None else defaults[name]
        older = recorded[NS_LEVEL] is not None
        flags: dict[str, bool] = {}
        for name, want, default in ((NS_PACK, pack, WriteOptions.pack),
                                    (NS_INDEX, index_compression, WriteOptions.index_compression)):
            have = props.get(name)
            if have is not None or older:
                flags[name] = have == "1"
                if want is not None and want != flags[name]:
                    raise StoreError(f"store was created with {name}={int(flags[name])}, "
                                     f"not {int(want)}", path=self.warehouse)
            else:
                flags[name] = default if want is None else want
        missing = {k: str(v) for k, v in values.items() if recorded[k] is None}
        missing.update({k: str(int(v)) for k, v in flags.items() if props.get(k) is None})
        if missing and self.writable:
            self.catalog.update_namespace_properties(ns, updates=missing)
        return WriteOptions(level=values[NS_LEVEL], block_size=values[NS_BLOCK],
                            pack=flags[NS_PACK], index_compression=flags[NS_INDEX])

    def _add_options(self, options: WriteOptions | None, **given: Any) -> WriteOptions:
        """The options of one add: the store's, or ``options`` if its fixed settings are the
        store's, with ``given`` (``workers``, ``dedup``) applied."""
        if options is not None:
            for f in STORE_FIXED:
                mine, theirs = getattr(self.options, f), getattr(options, f)
                if mine != theirs:
                    raise StoreError(f"store was created with {f}={mine!r}, not {theirs!r}",
                                     path=self.warehouse)
        out, _ = resolve(options if options is not None else self.options, what="Store.add",
                         **given)
        return out

    def _load_state(self) -> None:
        """Live paths (highest ordinal wins), stale copies, next ordinal, committed end."""
        self._live: dict[str, _Live] = {}
        self._stale: dict[GroupKey, set[str]] = {}
        self._next_ordinal = 0
        self._end = 0
        parts = []
        for key, group in self._groups.items():
            t = read_rows(group, _STATE_COLUMNS)
            if t.num_rows:
                parts.append((key, t))
        if not parts:
            return
        keys = [k for k, _ in parts]
        table = pa.concat_tables([t.select(list(_STATE_COLUMNS)).cast(pa.schema([
            ("relative_path", pa.utf8()), ("blob_offset", pa.int64()), ("blob_size", pa.int64()),
            (ORDINAL, pa.int64())])) for _, t in parts])
        which = np.repeat(np.arange(len(parts)), [t.num_rows for _, t in parts])
        offsets = table.column("blob_offset").to_numpy().view(np.uint64)
        sizes = table.column("blob_size").to_numpy().view(np.uint64)
        ordinals = table.column(ORDINAL).to_numpy()
        self._end = int((offsets + sizes).max())
        self._next_ordinal = int(ordinals.max()) + 1
        seen: dict[tuple[str, int], list[int]] = {}  # (path, table) → [max ordinal, rows, bytes]
        for path, w, o, s in zip(table.column("relative_path").to_pylist(), which.tolist(),
                                 ordinals.tolist(), sizes.tolist()):
            entry = seen.get((path, w))
            if entry is None:
                seen[(path, w)] = [o, 1, s]
            else:
                entry[0] = max(entry[0], o)
                entry[1] += 1
                entry[2] += s
        for (path, w), (o, rows, stored) in seen.items():
            live = self._live.get(path)
            if live is None or o > live.ordinal:
                if live is not None:
                    self._stale.setdefault(live.key, set()).add(path)
                self._live[path] = _Live(keys[w], o, rows, stored)
            else:
                self._stale.setdefault(keys[w], set()).add(path)

    # -- reading ----------------------------------------------------------------------------
    @property
    def groups(self) -> list[GroupKey]:
        return sorted(self._groups)

    @property
    def committed_end(self) -> int:
        """End of the last committed blob in the sidecar (where the next add writes)."""
        return self._end

    def refresh(self) -> None:
        """Re-read the catalog (another process may have committed since this one opened)."""
        self._groups = group_tables(self.catalog, self.namespace)
        self._load_state()
        self._index = None

    def _dedup_index(self) -> DedupIndex:
        """The blobs of the rows in the tables now, by content (what a one-shot writer of
        the same files would know at this point)."""
        if self._index is None:
            index = DedupIndex()
            index.seed([read_rows(g, (*_DEDUP_COLUMNS, *(
                            (INNER,) if INNER in g.schema.names else ())))
                        for g in self._groups.values()], limit=self._end)
            self._index = index
        return self._index

    def group_rows(self) -> dict[GroupKey, pa.Table]:
        """Every group's live rows in canonical order, in the exact sub-index schema.

        Exactly what a one-shot writer hands the tail for the same files.
        """
        out: dict[GroupKey, pa.Table] = {}
        for key, group in sorted(self._groups.items()):
            rows, ordinals = from_iceberg(read_rows(group), group.schema)
            stale = self._stale.get(key)
            if stale:
                keep = pc.invert(pc.is_in(rows.column("relative_path"),
                                          value_set=pa.array(sorted(stale), pa.utf8())))
                rows, ordinals = rows.filter(keep), ordinals.filter(keep)
            if rows.num_rows:
                out[key] = in_order(rows, ordinals)[0]
        return out

    def files(self) -> pa.Table:
        """The live index: every chunk row with ``repo``, ``pkg_type``, ``module_name``.

        The same columns as :meth:`Archive.index` of the sealed archive, in canonical order.
        """
        from ..read.reader import label_groups

        return label_groups(self.group_rows().items())

    def snapshot(self) -> Any:
        """The committed state as a read-only :class:`~znippy_sql.read.reader.Archive` (``read``,
        ``open``, ``extract``, ``verify`` ...), its blobs read from the sidecar; ``close()`` it."""
        from .views import snapshot

        return snapshot(self)

    def iceberg_table(self, key: GroupKey) -> Any:
        """The pyiceberg table of one group (for ``pl.scan_iceberg`` and friends)."""
        try:
            return self._groups[key].table
        except KeyError:
            raise StoreError(f"no table for group {tuple(key)}", path=self.warehouse) from None

    # -- writing ----------------------------------------------------------------------------
    def add(self, source: str | os.PathLike[str] | Iterable[Entry], *,
            options: WriteOptions | None = None, repo: str = "", pkg_type: int | str = 0,
            workers: int | None = None, dedup: bool | None = None) -> AddReport:
        """Add ``source`` (a directory or :class:`Entry` objects): blobs, fsync, commits.

        A file stored already in the same group with the same chunk sizes and checksums is
        skipped (``files_unchanged``); a directory source never yields the sidecar or the
        warehouse. With ``dedup`` a chunk identical to one in the store's rows (or earlier in
        this add) points at its blob, as a one-shot writer's would. ``options`` (a
        :class:`~znippy_sql.WriteOptions`): its ``workers`` and ``dedup`` apply (``workers=``,
        ``dedup=`` override them); the settings the store fixed at creation (level, block
        size) must be the store's."""
        if self._fd is None:
            raise StoreError("store is closed or read-only", path=self.sidecar)
        if not (isinstance(pkg_type, str) and pkg_type.strip().lower() == "auto"):
            resolve_pkg_type(pkg_type)  # fail before any byte is written
        started = time.perf_counter()
        fd, start = self._fd, self._end
        size = os.fstat(fd).st_size
        if size < start:
            raise StoreError(f"sidecar is {size} bytes but committed rows reach {start}",
                             path=self.sidecar)
        if size > start:
            os.ftruncate(fd, start)  # orphans of a crashed add: never referenced
        options = self._add_options(options, workers=workers, dedup=dedup)
        dedup = options.dedup
        index = self._dedup_index() if dedup else None
        hits, saved = (index.hits, index.saved) if index is not None else (0, 0)
        self._index = None  # until this add commits, its entries may point past the end
        ingest = Ingest(fd, start, options, repo=repo, pkg_type=pkg_type, index=index,
                        track_order=True)
        stored: dict[GroupKey, dict[str, tuple[list[int], list[bytes]]]] = {}

        def unchanged(entry: Entry) -> bool:
            live = self._live.get(entry.relative_path)
            if live is None or entry.relative_path in ingest.seen:
                return False
            key = ingest.group_key(entry)
            if key != live.key:
                return False
            if key not in stored:
                stored[key] = self._chunks_of(key)
            found = stored[key].get(entry.relative_path)
            return found is not None and same_content(entry, *found,
                                                      block_size=options.block_size)

        feed = Feed(ingest.add, exclude=[self.sidecar, self.warehouse],
                    unchanged=unchanged if self._live else None)
        try:
            feed.add_all(source)
            sink = ingest.finish()
            # a packing store's tables always have ``inner_offset`` (one schema for every add;
            # the seal drops it where FORMAT §3 wants none, as a one-shot writer does)
            new = {k: t for k, t in sink.tables(inner=options.pack or None).items()
                   if t.num_rows}
            orders = sink.orders()
            for key, t in new.items():
                if key in self._groups and not self._groups[key].schema.equals(t.schema):
                    raise StoreError(f"group {tuple(key)} has columns {self._groups[key].schema.names}"
                                     f" in the store but {t.schema.names} now",
                                     path=self.warehouse)
            os.fsync(fd)  # the bytes are durable before any row references them
        except BaseException:
            ingest.abort()
            os.ftruncate(fd, start)
            raise
        report = self._commit(new, orders, start, sink.cursor, size - start)
        deleted = report.pop("deleted")
        if index is not None and not deleted:
            self._index = index  # exactly the rows in the tables now
        return AddReport(**{**report, "files_added": ingest.files,
                            "files_unchanged": feed.files_unchanged,
                            "seconds": time.perf_counter() - started,
                            "shared_chunks": 0 if index is None else index.hits - hits,
                            "bytes_saved": 0 if index is None else index.saved - saved})

    def _chunks_of(self, key: GroupKey) -> dict[str, tuple[list[int], list[bytes]]]:
        """Each live path of one group → its chunk sizes and checksums, in chunk order."""
        group = self._groups[key]
        rows, ordinals = from_iceberg(read_rows(group, ("relative_path", "chunk_seq",
                                                        "uncompressed_size", "checksum",
                                                        ORDINAL)), _CHUNK_SCHEMA)
        stale = self._stale.get(key, set())
        found: dict[str, list[tuple[int, int, bytes]]] = {}
        for path, seq, size, digest in zip(rows.column("relative_path").to_pylist(),
                                           rows.column("chunk_seq").to_pylist(),
                                           rows.column("uncompressed_size").to_pylist(),
                                           rows.column("checksum").to_pylist()):
            if path not in stale:
                found.setdefault(path, []).append((seq, size, digest))
        out: dict[str, tuple[list[int], list[bytes]]] = {}
        for path, chunks in found.items():
            chunks.sort()
            if [c[0] for c in chunks] == list(range(len(chunks))):
                out[path] = ([c[1] for c in chunks], [c[2] for c in chunks])
        return out

    def compact(self) -> Any:
        """Rewrite each group's table as one data file, expire the older snapshots and remove
        the data files no snapshot refers to (:mod:`znippy_sql.store.compact`)."""
        from .compact import compact_tables

        if self._fd is None:
            raise StoreError("store is closed or read-only", path=self.sidecar)
        return compact_tables(self.namespace, self._groups, self._stale)

    def _ordinals(self, orders: dict[GroupKey, np.ndarray]) -> dict[GroupKey, pa.Array]:
        """Each new row's place in production order over all new rows (recorded by the
        sink: a row that shares an older blob has no blob offset of its own to go by)."""
        return {k: pa.array(o + self._next_ordinal, pa.int64()) for k, o in orders.items()}

    def _commit(self, new: dict[GroupKey, pa.Table], orders: dict[GroupKey, np.ndarray],
                start: int, end: int, orphans: int) -> dict[str, Any]:
        from pyiceberg.expressions import In

        ordinals = self._ordinals({k: orders[k] for k in new}) if new else {}
        new_live: dict[str, _Live] = {}
        for key, t in new.items():
            paths = t.column("relative_path").to_pylist()
            sizes = t.column("blob_size").to_pylist()
            ords = ordinals[key].to_pylist()
            for p, s, o in zip(paths, sizes, ords):
                live = new_live.get(p)
                if live is None:
                    new_live[p] = _Live(key, o, 1, s)
                else:
                    live.rows += 1
                    live.stored += s
                    live.ordinal = max(live.ordinal, o)
        deletes: dict[GroupKey, set[str]] = {k: set(v) for k, v in self._stale.items()}
        replaced = [p for p in new_live if p in self._live]
        for p in replaced:
            deletes.setdefault(self._live[p].key, set()).add(p)
        dead = self._dead_bytes(replaced, deletes, new)
        order = sorted(new) + sorted(k for k in deletes if k not in new and deletes[k])
        props = {"znippy.sidecar_end": str(end), "znippy.add_rows": str(sum(
            t.num_rows for t in new.values()))}
        committed = []
        for key in order:
            fresh = key not in self._groups
            if fresh:
                tx = create_transaction(self.catalog, self.namespace, key, new[key].schema)
            else:
                tx = self._groups[key].table.transaction()
            gone = deletes.get(key)
            if gone:
                # pyiceberg's expressions take (term, values) positionally at run time; their
                # pydantic-generated signature names them as keywords only
                tx.delete(In("relative_path", sorted(gone)))  # type: ignore[call-arg, arg-type]
            if key in new:
                tx.append(to_iceberg(new[key], ordinals[key]), snapshot_properties=props)
            tx.commit_transaction()
            ident = f"{self.namespace}.{table_name(key)}"
            if fresh:
                self._groups[key] = GroupTable(key, self.catalog.load_table(ident),
                                               new[key].schema)
            self._stale.pop(key, None)
            committed.append(ident)
        rows_replaced = sum(self._live[p].rows for p in replaced)
        self._live.update(new_live)
        if new:
            self._next_ordinal = max(o.ordinal for o in new_live.values()) + 1
            self._end = max(self._end, end)
        return dict(rows_added=sum(t.num_rows for t in new.values()),
                    files_replaced=len(replaced), rows_replaced=rows_replaced, dead_bytes=dead,
                    orphan_bytes_truncated=orphans, sidecar_start=start, sidecar_end=end,
                    blob_bytes_written=end - start, tables=committed,
                    deleted=any(deletes.values()))

    def _dead_bytes(self, replaced: list[str], deletes: dict[GroupKey, set[str]],
                    new: dict[GroupKey, pa.Table]) -> int:
        """Bytes of the replaced rows' blobs that no remaining or new row shares."""
        if not replaced:
            return 0
        gone: set[tuple[int, int]] = set()
        kept: set[tuple[int, int]] = set()
        for key, group in self._groups.items():
            t = read_rows(group, ("relative_path", "blob_offset", "blob_size"))
            drop = deletes.get(key, set())
            for path, off, size in zip(t.column("relative_path").to_pylist(),
                                       t.column("blob_offset").to_pylist(),
                                       t.column("blob_size").to_pylist()):
                if path not in drop:
                    kept.add((off, size))
                elif self._live.get(path) is not None and self._live[path].key == key:
                    gone.add((off, size))
        for t in new.values():
            kept.update(zip(t.column("blob_offset").to_pylist(),
                            t.column("blob_size").to_pylist()))
        return sum(size for off, size in gone - kept)

    # -- lifetime ---------------------------------------------------------------------------
    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the writer lock
            self._fd = None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<Store {self.sidecar!r} + {self.warehouse!r}/{self.namespace}: "
                f"{len(self._groups)} tables, {len(self._live)} files>")


def open_store(sidecar: str | os.PathLike[str], warehouse: str | os.PathLike[str],
               namespace: str, catalog: Mapping[str, Any] | None = None, *,
               options: WriteOptions | None = None, level: int | None = None,
               block_size: int | None = None, writable: bool = True,
               pack: bool | None = None, index_compression: bool | None = None) -> Store:
    """Open (creating what is missing) the store of ``sidecar`` + ``warehouse``/``namespace``.

    ``catalog``: pyiceberg catalog properties (``{"type": "rest", "uri": ...}``); default: an
    SQLite ``SqlCatalog`` at ``<warehouse>/catalog.db``. ``level``/``block_size``, ``pack``
    and ``index_compression`` (default: on, as for ``write_archive``), or those of
    ``options`` (a :class:`~znippy_sql.WriteOptions`), are fixed when the store is created; a
    later open with other values is refused. A store created before packing existed neither
    packs nor compresses its index.
    """
    return Store(sidecar, warehouse, namespace, catalog, options=options, level=level,
                 block_size=block_size, writable=writable, pack=pack,
                 index_compression=index_compression)
