"""Files in, blobs and rows out: the part every writer shares before its tail.

:class:`Ingest` resolves each entry's group (pkg_type, repo, module), refuses bad or duplicate
paths, cuts files into chunks, sends them through the :class:`Compressor` and writes the
blobs, in input order, from a start offset of an open file.

Chunks (docs/format.md §6): with ``dedup`` (the default), a zip-family file is cut at its
entries (:mod:`~znippy_sql.write.zipcut`), a skip-listed chunk is probed rather than stored raw
unseen, and a chunk whose content has a blob already points at it
(:mod:`~znippy_sql.write.dedup`; seeded with the rows a writer already has: ``existing``).
Without it, every file is cut into ``block_size`` chunks and every chunk gets its own blob.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import partial
from typing import cast

import pyarrow as pa

from ..format import codec
from .. import corelib, modules
from . import zipcut
from .blobs import BlobSink, ChunkTag, GroupRows
from . import early
from .pack import Pack, Packer
from .dedup import DedupIndex
from ..errors import DuplicatePathError, UnreadableSourceError, ZnippyError
from ..format.paths import check_relative_path
from .pipeline import BATCH_BYTES, BATCH_JOBS, DIR_PACK, PACK, BatchResult, Compressor, Job
from ..format.schema import GroupKey, is_reserved
from ..modules.pkgtypes import resolve_pkg_type
from .options import WriteOptions
from .source import Batch, Entry, Walk, data_origin, unreadable_problem


#: the ``seen`` value of a path whose bytes came as ``data=``
IN_MEMORY = "<data>"
#: a zip-family file up to this size is read whole to be cut; a bigger one in pieces
ZIP_READ_WHOLE = 64 << 20
#: where :meth:`Ingest.add` sends a file: a directory pack (a zip-family file, whole), its zip
#: entry spans (deduplicated), a small pack (compressed with its neighbours), or chunks of its
#: own (the one rule: ``native/src/create/route.rs``, said by the walk or asked)
_DIR_PACK, _ZIP_SPANS, _SMALL_PACK, _OWN_CHUNKS = range(4)


class Ingest:
    """``existing``: rows whose blobs lie before ``start`` (an archive's), which new chunks
    may share; or ``index``, a dedup index to use and extend (a store's); ``track_order``:
    keep each row's production place (the store's ordinals)."""

    def __init__(self, fd: int, start: int, options: WriteOptions, *, repo: str = "",
                 pkg_type: int | str | None = 0, existing: Iterable[pa.Table] = (),
                 index: DedupIndex | None = None, track_order: bool = False) -> None:
        self.options = options
        self.default_repo = repo
        self.default_pkg_type = pkg_type
        self.dedup = None
        if options.dedup:
            self.dedup = index if index is not None else DedupIndex()
            if index is None:
                self.dedup.seed(existing, limit=start)
        self.sink = BlobSink(fd, start, dedup=self.dedup, track_order=track_order)
        self.compressor = Compressor(level=options.level, workers=options.workers,
                                     block_size=options.block_size,
                                     known=None if self.dedup is None else self.dedup.known)
        #: path → where it came from, for the duplicate error (see :func:`_origin`): never the
        #: Entry, which would keep every ``data=`` entry's bytes alive to the end (and give
        #: the cyclic GC every Entry to walk again and again)
        self.seen: dict[str, object] = {}
        self._prefixes: dict[str, str] = {}  # one shared string per source directory
        self.files = 0
        self.bytes_in = 0
        self._batch: list[Job] = []
        self._tags: list[ChunkTag] = []
        self._batch_bytes = 0
        self._groups: dict[tuple[str | None, int | str | None], GroupRows] = {}
        #: with "auto": the modules in claiming order (taken once) and the group of each
        #: (repo, claiming module's name)
        self._modules: list[modules.Module] | None = None
        self._claimed: dict[tuple[str, str], GroupRows] = {}
        self.packer = Packer(self.dedup) if options.pack else None
        #: the largest small-pack and directory-pack members (pack.py)
        self._pack_max, self._dir_max = early.member_limits(options)
        #: the routing rule, native (``native/src/create/route.rs``)
        self._rule = early.rule_for(options)

    def read_ahead(self, walk: Walk) -> Walk | None:
        """``walk``, reading ahead (natively) the files :meth:`add` will put in a pack, small
        or directory (None: packing is off)."""
        if self.packer is None:
            return None
        return walk.read_ahead(self._rule)

    # -- grouping -------------------------------------------------------------------------
    def group_key(self, entry: Entry) -> GroupKey:
        """The group ``entry`` would go to (an appender's "unchanged?" check asks)."""
        return self._groups_of(entry.repo, entry.pkg_type, [entry.relative_path])[0].key

    def _groups_of(self, repo: str | None, pkg_type: int | str | None, paths: list[str]
                   ) -> list[GroupRows]:
        """The group of each of ``paths`` given ``repo`` and ``pkg_type`` (None: the
        writer's defaults); with "auto", the modules claim the paths in one call."""
        cached = self._groups.get((repo, pkg_type))
        if cached is not None:
            return [cached] * len(paths)
        wanted = pkg_type if pkg_type is not None else self.default_pkg_type
        if isinstance(wanted, str) and wanted.strip().lower() == "auto":
            if self._modules is None:
                self._modules = modules.all_modules()
            repo_ = repo if repo is not None else self.default_repo
            out = []
            claimed = self._claimed
            for module in modules.claim_all(paths, self._modules):
                name = "" if module is None else module.name
                rows = claimed.get((repo_, name))
                if rows is None:  # "auto" claims per path: the group per module
                    rows = claimed[(repo_, name)] = self._new_group(
                        GroupKey(module.pkg_type if module else 0, repo_, name), module)
                out.append(rows)
            return out
        number = resolve_pkg_type(wanted)
        module = modules.for_pkg_type(number)
        key = GroupKey(number, repo if repo is not None else self.default_repo,
                       module.name if module else "")
        rows = self._groups[(repo, pkg_type)] = self._new_group(key, module)
        return [rows] * len(paths)  # every other choice is per (repo, pkg_type)

    def _new_group(self, key: GroupKey, module: modules.Module | None) -> GroupRows:
        if is_reserved(key.module_name):
            raise ZnippyError(f"module name {key.module_name!r} is reserved")
        return self.sink.group(key, module)

    # -- adding ---------------------------------------------------------------------------
    def add(self, entry: Entry) -> None:
        path = check_relative_path(entry.relative_path)
        file = None if entry.file is None else os.fspath(entry.file)
        ahead = entry.ahead
        self._ingest([path], [file], [entry.data], [entry.known_size], [entry.route],
                     [None if ahead is None else ahead[0]],
                     [None if ahead is None else ahead[1]],
                     self._groups_of(entry.repo, entry.pkg_type, [path]), [entry.origin])

    def add_batch(self, batch: Batch) -> None:
        """:meth:`add` of every file and link of a walk's batch, in one call (issue 33: no
        Python call a file). Only the paths the core did not find plain
        (``batch.unplain``) are checked one by one."""
        rels = batch.rels
        for i in batch.unplain:
            check_relative_path(rels[i])
        base = batch.base
        files = [base + rel if target is None else None
                 for rel, target in zip(rels, batch.targets)]
        targets = batch.targets
        datas: list[bytes | None] = [None] * len(rels)
        if targets.count(None) != len(targets):  # links (posix): their targets' bytes
            datas = [None if target is None else target.encode("utf-8", "surrogateescape")
                     for target in targets]
        self._ingest(rels, files, datas, batch.sizes, batch.routes, batch.datas,
                     batch.digests, self._groups_of(None, None, rels), None)

    def _ingest(self, paths: list[str], files: list[str | None], datas: list[bytes | None],
                sizes: list[int | None], routes: list[int | None],
                aheads: list[bytes | None], digests: list[bytes | None],
                groups: list[GroupRows], origins: list[str] | None) -> None:
        """The files ``paths`` (checked): each with its source ``files`` (or in-memory
        ``datas``), size (None: asked), route (None: asked), bytes and BLAKE3 read ahead
        and group; ``origins``: how errors name each (None: its file, else ``<data>``)."""
        seen, prefixes, packer = self.seen, self._prefixes, self.packer
        for path, file, data, size, route, ahead, digest, rows, i in zip(
                paths, files, datas, sizes, routes, aheads, digests, groups, range(len(paths))):
            first = seen.get(path)
            if first is not None:
                where = origins[i] if origins is not None else \
                    data_origin(path) if file is None else file
                raise DuplicatePathError(
                    f"duplicate relative_path {path!r}: from {_origin(first, path)} and "
                    f"{where}", path=where)
            # what ``seen`` keeps of a source: ``IN_MEMORY``; for a file whose name ends
            # with the archive path (a walked directory: all of them), the part before it,
            # one string shared by every file of that tree (a million full paths would be
            # ~110 MB); else ``(file name,)``
            if file is None:
                seen[path] = IN_MEMORY
            elif file.endswith(path):
                prefix = file[: len(file) - len(path)]
                seen[path] = prefixes.setdefault(prefix, prefix)
            else:
                seen[path] = (file,)
            if packer is not None and (turn := packer.step(path)):
                for pack in packer.turn(turn):
                    self._send_pack(pack)
            if data is not None:
                size = len(data)
            elif size is None:
                size = self._size_of(file, origins[i] if origins is not None else file)
            extra = None
            if rows.has_extra and rows.module is not None:  # a module with columns
                read = partial(_content, ahead if ahead is not None else data, file)
                extra = dict(rows.module.columns(path, read))
            self.files += 1
            self.bytes_in += size
            if route is None:  # not said by a walk (the one rule either way)
                route = corelib.route(self._rule, path, size)
            if route == _DIR_PACK or route == _SMALL_PACK:  # joins its group's open pack
                if ahead is not None:  # read (and hashed) ahead by the walk's reader thread
                    member = ahead
                elif data is not None:
                    member, digest = data, None
                else:
                    member, digest = self._read_now(file, size), None
                assert packer is not None
                serial, closed = packer.join(id(rows), route == _DIR_PACK, member, digest,
                                             self.dedup)
                held = packer.held.get(serial)
                if held is None:
                    held = packer.held[serial] = (rows, [], [])
                held[1].append(path)
                held[2].append(extra)
                if closed:
                    for pack in packer.taken():
                        self._send_pack(pack)
                continue
            self._own_chunks(path, data, file, size, route, rows, extra)

    @staticmethod
    def _size_of(file: str | None, origin: str | None) -> int:
        try:
            return os.stat(file).st_size  # type: ignore[arg-type]
        except OSError as exc:
            raise UnreadableSourceError(unreadable_problem(exc), path=origin) from None

    def _own_chunks(self, path: str, data: bytes | memoryview | None, file: str | None,
                    size: int, route: int, rows: GroupRows,
                    extra: dict[str, object] | None) -> None:
        """A file not packed: its zip entry spans, or chunks of its own."""
        mode = codec.COMPRESS
        if codec.is_skipped(path):
            mode = codec.PROBE if self.options.dedup else codec.RAW
        block = self.options.block_size
        if route == _ZIP_SPANS:
            data, spans = self._zip_spans(data, file, size)
            if spans is not None:
                self._queue_spans(data, file, spans, rows, path, extra)
                return
        if size <= block:
            self._queue(Job(data, file, 0, size, mode), ChunkTag(rows, path, 0, extra))
            return
        for seq, off in enumerate(range(0, size, block)):
            length = min(block, size - off)
            part = data[off : off + length] if data is not None else None
            self._queue(Job(part, file, off, length, mode),
                        ChunkTag(rows, path, seq, extra if seq == 0 else None))

    def _zip_spans(self, data: bytes | memoryview | None, file: str | None, size: int
                   ) -> tuple[bytes | memoryview | None, list[zipcut.Span] | None]:
        """A zip-family file's bytes (read whole when small, else None: read by chunk) and
        its entry-boundary spans (None: cut it like any file)."""
        block = self.options.block_size
        if data is not None:
            view = memoryview(data)
            return view, zipcut.cut(view, block_size=block)
        assert file is not None
        try:
            fd = os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                if size > ZIP_READ_WHOLE:
                    return None, zipcut.cut_file(fd, size, block_size=block)
                whole = _read_exactly(fd, size)
            finally:
                os.close(fd)
        except OSError as exc:
            raise UnreadableSourceError(unreadable_problem(exc), path=file) from None
        view = memoryview(whole)
        return view, zipcut.cut(view, block_size=block)

    def _read_now(self, file: str | None, size: int) -> bytes:
        """A pack member's bytes not read ahead (the pack needs them)."""
        assert file is not None
        try:
            fd = os.open(file, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                return _read_exactly(fd, size)
            finally:
                os.close(fd)
        except OSError as exc:
            raise UnreadableSourceError(unreadable_problem(exc), path=file) from None

    def _send_pack(self, pack: Pack) -> None:
        """A closed pack goes to the codec as one job, after the chunks queued before it."""
        self._flush()
        data = pack.data
        pack.data = b""  # the job holds it until it is compressed
        job = Job(data, None, 0, len(data), DIR_PACK if pack.directory else PACK)
        self._place(self.compressor.submit([job], pack))

    def _queue(self, job: Job, tag: ChunkTag) -> None:
        self._batch.append(job)
        self._tags.append(tag)
        self._batch_bytes += job.length
        if self._batch_bytes >= BATCH_BYTES or len(self._batch) >= BATCH_JOBS:
            self._flush()

    def _queue_spans(self, data: bytes | memoryview | None, file: str | None,
                     spans: list[zipcut.Span], rows: GroupRows, path: str,
                     extra: dict[str, object] | None) -> None:
        """:meth:`_queue` of each of a file's spans (inlined: a jar has hundreds)."""
        batch, tags = self._batch, self._tags
        for seq, (off, n, how) in enumerate(spans):
            batch.append(Job(None if data is None else data[off : off + n], file, off, n, how))
            tags.append(ChunkTag(rows, path, seq, extra if seq == 0 else None))
            self._batch_bytes += n
            if self._batch_bytes >= BATCH_BYTES or len(batch) >= BATCH_JOBS:
                self._flush()
                batch, tags = self._batch, self._tags

    def _flush(self) -> None:
        if self._batch:
            batch, tags = self._batch, self._tags
            self._batch, self._tags, self._batch_bytes = [], [], 0
            self._place(self.compressor.submit(batch, (batch, tags)))

    def _place(self, done: list[tuple[object, BatchResult]]) -> None:
        for tag, result in done:
            if result.error is not None:
                raise UnreadableSourceError(result.error[1], path=result.error[0])
            if isinstance(tag, Pack):
                self.sink.put_pack(tag, result)
            else:
                batch, tags = cast("tuple[list[Job], list[ChunkTag]]", tag)
                self.sink.put_batch(tags, batch, result)

    def finish(self) -> BlobSink:
        try:
            if self.packer is not None:
                for pack in self.packer.drain():
                    self._send_pack(pack)
            self._flush()
            self._place(self.compressor.drain())
        finally:
            self.compressor.close()
        return self.sink

    def abort(self) -> None:
        self.compressor.close()


def _origin(where: object, path: str) -> str:
    """The source ``Ingest.add`` recorded in ``seen`` for ``path``, as the duplicate error names it."""
    if where is IN_MEMORY:
        return data_origin(path)
    if isinstance(where, tuple):
        return str(where[0])
    return f"{where}{path}"


def _read_exactly(fd: int, size: int) -> bytes:
    data = os.pread(fd, size, 0)
    if len(data) != size:
        raise OSError("short read at 0 (file changed while writing?)")
    return data


def _content(data: bytes | None, file: str | None) -> bytes:
    """A file's bytes for its module's columns (a POM's), when the module asks (``read``, a
    ``partial`` of this: no call a file until then): those read ahead or given, else read
    now."""
    if data is not None:
        return data
    assert file is not None  # an entry holds data= or file=
    return _read_file(file)


def _read_file(file: str) -> bytes:
    with open(file, "rb") as fh:
        return fh.read()
