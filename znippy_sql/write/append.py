"""Append / resume: new blobs at ``blob_end`` of a static archive, then the whole tail rewritten.

The old rows come back from the tail itself (each group's sub-index, copied out of the old tail
bytes, so no blob is read); old rows stay first, new rows follow, and :func:`tail.write_tail`
writes the tail a one-shot writer would have written. A path already in the archive is
replaced: its old rows are dropped and their blobs become dead bytes (FORMAT §6).

Crash safety (docs/lifecycle.md) rests on the rollback journal of
:mod:`znippy_sql.format.rollback`, written before the first byte at ``blob_end`` is overwritten
and removed once the new tail is fsynced. One appender at a time: an exclusive ``flock`` on the
archive, refuse-don't-wait.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Unpack

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import (DuplicatePathError, FormatError, PathNotFoundError, RemoteError,
                      SignatureError, ZnippyError)
from ..format.ipc import metadata_text, read_stream
from ..format.rollback import (drop_journal, journal_path, lock, recover_locked, rollback,
                               write_journal)
from ..format.schema import (GIT_GRAPH, GIT_OID, GIT_REACH, LOOKUP, META, RAW_SECTIONS,
                             RESERVED_PKG_TYPE, SIGN_ARCHIVE, SIGN_ARTIFACTS, TRIE, GroupKey)
from ..format.sections import ReservedSection
from ..interop.layouts import FSMETA
from ..interop.meta import as_text, as_typed, is_typed
from ..interop.vsource import VirtualSource
from ..modules.pkgtypes import pkg_type_name
from ..read.reader import open_archive
from ..read.verify import refuse_damaged
from .ingest import Ingest
from .options import INDEX_KEY, PACK_KEY, OptionKwargs, Provenance, WriteOptions, resolve
from .feed import Feed
from .posix import with_rows
from .source import Entry, as_entry
from .unchanged import same_content
from .tail import TailInfo, write_tail
from ..format.lookup import with_inner
from .staging import remove_stale, staging_prefix
from .writer import meta_of, optional_sections
from .compat import check_compat
from .rustappend import (EARLY_KEY, archive_compat, at_home, check_early, follow_given,
                         home_group, live_paths, merged_fsmeta, rust_groups, written_layout)
from .rust10 import RUST10


#: Sections an append cannot carry over: git sections point at lookup rows that move.
_REFUSED = (GIT_OID, GIT_GRAPH, GIT_REACH)
#: Sections an append drops unless a ``signer=`` rebuilds them: they sign the old content.
_STALE = (SIGN_ARTIFACTS, SIGN_ARCHIVE)


@dataclass(frozen=True)
class AppendReport:
    path: str
    files_added: int
    rows_added: int
    #: paths already in the archive, in the same group, written again
    files_replaced: int
    rows_replaced: int
    #: blob bytes of the replaced (and moved) rows, left behind in the blob region
    dead_bytes: int
    #: (offset, length) of each dead byte range, merged where adjacent
    dead_ranges: list[tuple[int, int]]
    old_blob_end: int
    blob_end: int
    blob_bytes_written: int
    archive_bytes: int
    #: a hot journal of an interrupted append was rolled back before this one started
    recovered: bool
    #: reserved sections of the old archive not carried over (stale signatures)
    dropped_sections: list[str] = field(default_factory=list)
    #: paths already in the archive that went to another group (``move=True``)
    files_moved: int = 0
    #: (path, old group, new group) of each move, groups as ``type/repo/module``
    moves: list[tuple[str, str, str]] = field(default_factory=list)
    #: what became of ``__meta__``: "none", "kept" (carried over as it was) or "updated"
    meta: str = "none"
    #: files found unchanged (same size and chunk checksums, same group) and not rewritten
    files_unchanged: int = 0
    #: (path as found, why) of each file ``skip_unsafe`` left out
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: (path as found, why) of each file and directory ``skip_unreadable`` left out
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


# -- the old archive ----------------------------------------------------------------------------
class _Bytes:
    """The old tail held in memory, read like a RangeSource at its archive offsets."""

    def __init__(self, path: str, data: bytes, base: int) -> None:
        self.path = path
        self.buffer = pa.py_buffer(data)
        self.base = base

    def read(self, offset: int, length: int, what: str = "range") -> pa.Buffer:
        start = offset - self.base
        if start < 0 or length < 0 or start + length > self.buffer.size:
            raise FormatError(f"{what}: range [{offset}, {offset + length}) is outside the tail",
                              path=self.path)
        return self.buffer.slice(start, length)


@dataclass
class _Old:
    blob_end: int
    size: int
    tail: bytes
    groups: dict[GroupKey, pa.Table]
    sections: list[ReservedSection]
    stale: list[str]
    metadata: dict[str, str]
    #: the old lookup, read from the tail copy (None: the archive has none, e.g. a Rust one)
    lookup: pa.Table | None = None
    #: the old trie's bytes, copied (None: none)
    trie: bytes | None = None
    #: the archive (named by errors about its old sections)
    path: str | None = None
    #: the compat layout it is in, whether the real Rust tool wrote it, and then the group
    #: new files of no package type join (write/rustappend.py)
    layout: str | None = None
    real: bool = False
    home: GroupKey | None = None
    #: the real tool wrote it before 0.9.15: no __znippy_fsmeta__ (rustappend.check_early);
    #: kept through our appends by EARLY_KEY
    early: bool = False


def _load(path: str, *, signatures: bool = False, typed: bool = False) -> _Old:
    """Everything an append keeps, copied out of the old tail: the archive may then be written.

    ``signatures``: keep the signature sections among the sections (a rewrite that changes no
    path or checksum, as ``compact``, keeps them valid) instead of listing them as stale.
    ``typed``: a ``rust-0.10`` archive's typed meta stays typed (an append in its layout),
    else it is read as this project's text facts."""
    with open_archive(path, verify_checksums=False) as arc:
        blob_end = arc.blob_end
        if arc.tail_offset < blob_end:
            raise FormatError(f"blobs end at {blob_end}, past the tail at {arc.tail_offset}",
                              path=path)
        view = arc.source.read(blob_end, arc.source.size - blob_end, "tail").to_pybytes()
        # a Rust append's sub-indexes read as one group: its blobs are the file's, the tail
        # is made in memory (interop/delta.py); the journal keeps the file's own tail
        regrouped, real_source = False, arc.source
        if isinstance(real_source, VirtualSource) and real_source.why == "appended":
            regrouped, real_source = True, real_source.base
        size = real_source.size
        tail = real_source.read(blob_end, size - blob_end, "tail").to_pybytes() \
            if regrouped else view
        mem = _Bytes(path, view, blob_end)
        groups: dict[GroupKey, pa.Table] = {}
        metadata: dict[str, str] = {}
        for key in arc.groups:
            arc.group_table(key)  # validates the base columns and the row count
            row = arc.manifest_row(key)
            table = read_stream(mem, row.index_offset, row.index_len, f"sub-index {key}")  # type: ignore[arg-type]
            if not metadata and table.schema.metadata:
                metadata = metadata_text(table.schema)
            groups[key] = table.replace_schema_metadata(None)
        refuse_damaged(arc, groups, regrouped=regrouped)
        layout, real = written_layout(arc, metadata)
        sections: list[ReservedSection] = []
        stale: list[str] = []
        lookup: pa.Table | None = None
        trie: bytes | None = None
        for name in arc.sections:
            if name in (LOOKUP, TRIE):  # validated by the reader, then read from the copy
                row = arc.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", name))
                try:
                    if name == LOOKUP:
                        arc.lookup  # noqa: B018
                        lookup = read_stream(mem, row.index_offset, row.index_len, name)  # type: ignore[arg-type]
                    else:
                        arc.trie  # noqa: B018
                        trie = mem.read(row.index_offset, row.index_len).to_pybytes()
                except ZnippyError:
                    pass  # a damaged one is rebuilt by the tail; the unchanged check goes without
                continue
            if name in _REFUSED:
                raise ZnippyError(f"archive holds git section {name}; append would invalidate "
                                  "it (use the git push path)", path=path)
            if name in _STALE and not signatures:
                stale.append(name)
                continue
            row = arc.manifest_row(GroupKey(RESERVED_PKG_TYPE, "", name))
            if name in RAW_SECTIONS:
                sections.append(ReservedSection(name, mem.read(row.index_offset, row.index_len)
                                                .to_pybytes()))
            else:
                table = read_stream(mem, row.index_offset, row.index_len, name)  # type: ignore[arg-type]
                if name == META and is_typed(table.schema) and not (typed and
                                                                    layout == RUST10):
                    table = as_text(table, path)  # the Rust __znippy_meta__, as our facts
                sections.append(ReservedSection(name, table))
    return _Old(blob_end, size, tail, groups, sections, stale, metadata, lookup, trie, path,
                layout, real, home_group(groups) if real else None,
                layout == RUST10 and FSMETA not in arc.sections
                and (real or metadata.get(EARLY_KEY) == "1"))


class _Stored:
    """The old archive's files by path, from the copied lookup and trie: what the unchanged
    check of an append compares a new file with. Built on first use."""

    def __init__(self, old: _Old) -> None:
        from ..format.lookup import build_lookup

        lookup = old.lookup if old.lookup is not None else build_lookup(old.groups)
        self.paths = lookup.column("relative_path").combine_chunks()
        self.seqs = lookup.column("chunk_seq").to_numpy()
        self.sizes = lookup.column("uncompressed_size").to_numpy()
        checksums = lookup.column("checksum").combine_chunks()
        self.checksums = checksums.buffers()[1].to_pybytes()[checksums.offset * 32:]
        self._old = old
        self._trie: Any = None
        self._rows: dict[str, int] | None = None
        if old.trie is not None:
            from ..format.trie import TrieMap

            self._trie = TrieMap(old.trie, old.path)
        self._group_of: dict[str, GroupKey] | None = None

    def chunks(self, path: str) -> tuple[list[int], list[bytes]] | None:
        """The stored chunk sizes and checksums of ``path``, or None when it is not stored."""
        try:
            key = path.encode("utf-8")
        except UnicodeEncodeError:
            return None
        if self._trie is not None:
            row = self._trie.get(key)
        else:
            if self._rows is None:
                self._rows = {}
                for i, (p, s) in enumerate(zip(self.paths.to_pylist(), self.seqs.tolist())):
                    if s == 0:
                        self._rows.setdefault(p, i)
            row = self._rows.get(path)
        n = len(self.paths)
        if row is None or not 0 <= row < n or self.paths[row].as_py() != path:
            return None
        end = row + 1
        while end < n and self.paths[end].as_py() == path:
            end += 1
        if self.seqs[row:end].tolist() != list(range(end - row)):
            return None
        sums = [self.checksums[32 * i : 32 * i + 32] for i in range(row, end)]
        return self.sizes[row:end].tolist(), sums

    def group_of(self, path: str) -> GroupKey | None:
        if self._group_of is None:
            self._group_of = {}
            for key, table in self._old.groups.items():
                self._group_of.update(dict.fromkeys(table.column("relative_path").to_pylist(),
                                                    key))
        return self._group_of.get(path)


def _options(path: str, old: _Old, options: WriteOptions | None,
             given: OptionKwargs) -> WriteOptions:
    """The options of an append: ``options`` as given, else the archive's own (its level,
    block size, packing and index compression, recorded on its sub-indexes), then the
    keywords given; a level or block size other than the archive's is refused."""
    def recorded(key: str, default: int) -> int:
        try:
            return int(old.metadata.get(key, default))
        except ValueError:
            raise FormatError(f"sub-index metadata {key} = {old.metadata[key]!r} is not a "
                              "number", path=path) from None

    own = {"level": recorded("znippy.openzl.level", WriteOptions().level),
           "block_size": recorded("znippy.block_size", WriteOptions().block_size)}
    # an archive written for the Rust readers keeps its layout (write/rustappend.py)
    compat = archive_compat(path, old.layout, given.get("compat") or
                            (options.compat if options is not None else None), real=old.real)
    given = follow_given(compat, dict(given))  # type: ignore[assignment]
    if options is None:
        options = WriteOptions(level=own["level"], block_size=own["block_size"],
                               pack=_follow(old, PACK_KEY, WriteOptions.pack) and not compat,
                               index_compression=_follow(old, INDEX_KEY,
                                                         WriteOptions.index_compression),
                               compat=compat)
    options, _ = resolve(options, what="append_archive", **given)
    if old.groups:
        for name, key in (("level", "znippy.openzl.level"), ("block_size", "znippy.block_size")):
            # an archive that does not record it (the Rust tool's keys) takes any value
            if getattr(options, name) != own[name] and key in old.metadata:
                raise ZnippyError(f"archive was written with {name}={own[name]}; appending "
                                  f"with {name}={getattr(options, name)} would mix two "
                                  "settings", path=path)
    return options


def _follow(old: _Old, key: str, default: bool) -> bool:
    """An option the archive records by a key on its sub-indexes: as the archive has it; an
    archive without sub-indexes (empty) has none: the default, as the one-shot write of the
    appended files would."""
    return key in old.metadata if old.groups else default


# -- merging ------------------------------------------------------------------------------------
@dataclass
class Merged:
    groups: dict[GroupKey, pa.Table]
    files_replaced: int
    rows_replaced: int
    dead_ranges: list[tuple[int, int]]
    #: (path, old group, new group) of each path the new rows bring in another group
    moved: list[tuple[str, GroupKey, GroupKey]] = field(default_factory=list)


def group_label(key: GroupKey) -> str:
    """``pypi/pypi-local/pypi``: a group as a user names it (``-`` for an empty part)."""
    return f"{pkg_type_name(key.pkg_type)}/{key.repo or '-'}/{key.module_name or '-'}"


def _unshared(dead: list[tuple[int, int]], live: Iterable[pa.Table]) -> list[tuple[int, int]]:
    """The extents of ``dead`` that no row of ``live`` still points at (shared blobs)."""
    if not dead:
        return dead
    kept = {(o, s) for t in live if t.num_rows
            for o, s in zip(t.column("blob_offset").to_pylist(), t.column("blob_size").to_pylist())}
    return [d for d in dict.fromkeys(dead) if d not in kept]


def merge_rows(old: dict[GroupKey, pa.Table], new: dict[GroupKey, pa.Table], *,
               where: str = "") -> Merged:
    """Old rows minus every path the new rows bring, then the new rows, group by group.

    Also used by the store's seal path: any table that replaces by path the same way.
    """
    new_paths = pa.concat_arrays([t.column("relative_path").combine_chunks() for t in new.values()]
                                 ) if new else pa.array([], pa.utf8())
    new_paths = pc.unique(new_paths)
    out: dict[GroupKey, pa.Table] = {}
    dead: list[tuple[int, int]] = []
    was_in: dict[str, GroupKey] = {}  # replaced path → its old group
    rows_replaced = 0
    for key, table in old.items():
        mask = pc.is_in(table.column("relative_path"), value_set=new_paths)
        hits = pc.sum(mask).as_py() or 0
        if hits:
            gone = table.filter(mask)
            rows_replaced += gone.num_rows
            was_in.update(dict.fromkeys(gone.column("relative_path").to_pylist(), key))
            dead.extend(zip(gone.column("blob_offset").to_pylist(),
                            gone.column("blob_size").to_pylist()))
            table = table.filter(pc.invert(mask))
        if table.num_rows:
            out[key] = table
    moved: list[tuple[str, GroupKey, GroupKey]] = []
    for key, table in new.items():
        if was_in:
            for path in pc.unique(table.column("relative_path")).to_pylist():
                before = was_in.get(path)
                if before is not None and before != key:
                    moved.append((path, before, key))
        if key in out:
            if not out[key].schema.equals(table.schema):
                raise ZnippyError(f"group {tuple(key)} has columns {out[key].schema.names} in the "
                                  f"archive but {table.schema.names} now (module changed?)",
                                  path=where or None)
            out[key] = pa.concat_tables([out[key], table])
        else:
            out[key] = table
    moved.sort(key=lambda m: m[0].encode("utf-8"))
    return Merged({k: t.combine_chunks() for k, t in out.items()}, len(was_in) - len(moved),
                  rows_replaced, _merge_ranges(_unshared(dead, out.values())), moved)


def _merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for off, size in sorted(r for r in ranges if r[1]):
        if merged and merged[-1][0] + merged[-1][1] == off:
            merged[-1] = (merged[-1][0], merged[-1][1] + size)
        else:
            merged.append((off, size))
    return merged


# -- the appender -------------------------------------------------------------------------------
class Appender:
    """Append entry by entry; the tail is rewritten on a clean ``with`` exit, else rolled back.

    Use :func:`open_for_append`. Holds the archive's append lock from enter to exit.
    """

    def __init__(self, path: str | os.PathLike[str], *, options: WriteOptions | None = None,
                 provenance: Provenance | None = None, repo: str = "",
                 pkg_type: int | str = 0, drop_signatures: bool = False, move: bool = False,
                 **kwargs: Unpack[OptionKwargs]) -> None:
        self.path = os.fspath(path)
        # checked now (an unknown keyword or a bad value before any work); the archive's own
        # options are the base once it is read (``__enter__``)
        self.options, self.provenance = resolve(options, provenance, what="append_archive",
                                                **kwargs)
        self._given_options, self._given = options, kwargs
        self._repo, self._pkg_type = repo, pkg_type
        self._drop_signatures, self._move = drop_signatures, move
        self._feed: Feed | None = None
        self._stored: _Stored | None = None
        self._kept: set[str] = set()  # paths found unchanged
        self.report: AppendReport | None = None
        self.tail: TailInfo | None = None
        self._fh: BinaryIO | None = None
        self._ingest: Ingest | None = None
        self._old: _Old | None = None
        self._recovered = False
        self._started = 0.0

    def __enter__(self) -> "Appender":
        self._started = time.perf_counter()
        try:
            self._fh = open(self.path, "r+b")
        except FileNotFoundError:
            raise PathNotFoundError("archive not found", path=self.path) from None
        except OSError as exc:
            raise ZnippyError(f"cannot open for append: {exc.strerror or exc}",
                              path=self.path) from None
        journal = False
        try:
            lock(self._fh.fileno(), self.path)
            self._recovered = recover_locked(self.path, self._fh.fileno())
            remove_stale(self.path)  # what a killed compact or seal of this name left
            old = self._old = _load(self.path, typed=True)
            if old.stale and self.provenance.signer is None and not self._drop_signatures:
                raise SignatureError(
                    f"archive is signed ({', '.join(old.stale)}); appending would leave its "
                    "signatures over content it no longer has: re-sign (--sign-key and "
                    "--sign-cert, signer=) or drop them (--drop-signatures, "
                    "drop_signatures=True)", path=self.path)
            options = self.options = _options(self.path, old, self._given_options, self._given)
            journal = True  # from here a journal of ours may exist; the archive is untouched
            write_journal(self.path, self._fh.fileno(), old.size, old.blob_end, old.tail)
            self._ingest = Ingest(self._fh.fileno(), old.blob_end, options, repo=self._repo,
                                  pkg_type=self._pkg_type, existing=old.groups.values())
            self._feed = Feed(self._ingest.add, posix=options.posix,
                              skip_unsafe=options.skip_unsafe,
                              skip_unreadable=options.skip_unreadable,
                              exclude=[self.path, journal_path(self.path)],
                              exclude_prefixes=[staging_prefix(self.path)],
                              unchanged=self._unchanged if old.groups else None)
        except BaseException:
            if journal and os.path.exists(journal_path(self.path)):
                os.unlink(journal_path(self.path))  # nothing was written to the archive yet
            self._fh.close()
            raise
        return self

    def _unchanged(self, entry: Entry) -> bool:
        """Stored already in the same group, same size and chunk checksums (and not the
        second entry of one path in this batch: the duplicate check must see it)."""
        assert self._old is not None and self._ingest is not None
        if self._stored is None:
            self._stored = _Stored(self._old)
        path = entry.relative_path
        self._check_twice(path)
        found = self._stored.chunks(path)
        if found is None or path in self._ingest.seen:
            return False
        key = at_home(self._ingest.group_key(entry), self._old.home)  # write/rustappend.py
        if key != self._stored.group_of(path):
            return False
        if not same_content(entry, found[0], found[1], block_size=self.options.block_size):
            return False
        self._kept.add(path)
        return True

    def _check_twice(self, path: str) -> None:
        if path in self._kept:
            raise DuplicatePathError(f"duplicate relative_path {path!r} in this append",
                                     path=self.path)

    def add(self, entry: Entry | str, data: bytes | None = None, *,
            file: str | os.PathLike[str] | None = None, repo: str | None = None,
            pkg_type: int | str | None = None) -> None:
        """Add one file: an :class:`Entry`, or a path with ``data=`` or ``file=``."""
        if self._feed is None:
            raise RuntimeError("Appender.add outside its 'with' block")
        self._feed.add(as_entry(entry, data, file=file, repo=repo, pkg_type=pkg_type))

    def add_all(self, source: str | os.PathLike[str] | Iterable[Entry]) -> None:
        """Add every entry of ``source`` (a directory is walked in path order, the archive
        itself and its journal left out)."""
        if self._feed is None:
            raise RuntimeError("Appender.add_all outside its 'with' block")
        self._feed.add_all(source)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._fh is not None and self._ingest is not None and self._old is not None
        old, fd = self._old, self._fh.fileno()
        try:
            if exc_type is not None:
                self._ingest.abort()
                rollback(fd, self.path, old.size, old.blob_end, old.tail)
                return
            self._commit(old)
        except BaseException:
            if os.path.exists(journal_path(self.path)):
                rollback(fd, self.path, old.size, old.blob_end, old.tail)
            raise
        finally:
            self._ingest = None  # its rows and path set are the tail's now: not kept with us
            self._fh.close()  # releases the lock

    def _commit(self, old: _Old) -> None:
        assert self._ingest is not None and self._fh is not None
        sink = self._ingest.finish()
        new = {k: t for k, t in sink.tables().items() if t.num_rows}
        compat = self.options.compat
        check_compat(compat, meta=self.provenance.meta, signer=self.provenance.signer)
        if old.early:
            check_early(self.path, self.provenance.meta, self.provenance.signer,
                        signed=bool(old.stale),
                        has_meta=any(s.name == META for s in old.sections))
        if compat is not None:  # as the archive's compat mode writes them (rustappend.py)
            old.groups, new = rust_groups(old.groups, new, compat, old.home)
        sections, builders, meta_state = self._sections(old, new)
        if not new and not self.provenance and _same_sections(old.sections, sections):
            drop_journal(self.path)  # nothing written at blob_end: the old tail stands
            self._report(old, sink.cursor, old.size, Merged(old.groups, 0, 0, []), 0, [],
                         "kept" if any(s.name == META for s in old.sections) else "none")
            return
        old_groups, new = with_inner(old.groups, new)
        merged = merge_rows(old_groups, new, where=self.path)
        if merged.moved and not self._move:
            first = ", ".join(f"{p!r} from {group_label(a)} to {group_label(b)}"
                              for p, a, b in merged.moved[:3])
            raise ZnippyError(
                f"{len(merged.moved)} file(s) already in the archive would move to another "
                f"group ({first}{', ...' if len(merged.moved) > 3 else ''}); append replaces "
                "a file in its own group: give --move (move=True) to move them",
                path=self.path)
        dropped = old.stale if self.provenance.signer is None else []
        self.tail = write_tail(self._fh, sink.cursor, merged.groups, sections=sections,
                               section_builders=builders,
                               schema_metadata={**self.options.schema_metadata(),
                                                **({EARLY_KEY: "1"} if old.early else {})},
                               fsync=self.options.fsync, compat=compat,
                               index_compression=self.options.index_compression)
        drop_journal(self.path)
        rows = sum(t.num_rows for t in new.values())
        self._report(old, sink.cursor, self.tail.file_size, merged, rows, dropped, meta_state)

    def _sections(self, old: _Old, new: dict[GroupKey, pa.Table]
                  ) -> tuple[list[ReservedSection], list[Any], str]:
        """The old sections carried over, ``__meta__`` merged with the new facts
        (:func:`~znippy_sql.provenance.meta.merge_meta`), the signature builder if any."""
        rust10 = self.options.compat == RUST10
        extra_sections, builders = optional_sections(self.provenance.meta,
                                                     self.provenance.signer, self.options.compat)
        old_meta, new_meta = meta_of(old.sections), meta_of(extra_sections)
        typed = old_meta if old_meta is not None and is_typed(old_meta.schema) else None
        if typed is not None:  # rust-0.10: kept typed, merged as text (write/rustappend.py)
            old_meta = as_text(typed, self.path)
        facts = self._feed.facts if self._feed is not None else None
        if facts and not rust10:
            new_meta = with_rows(new_meta, facts.rows())
        sections = [s for s in old.sections
                    if s.name != META and not (rust10 and s.name == FSMETA)]
        if rust10 and not old.early:  # modes and directories as __znippy_fsmeta__
            fsmeta = merged_fsmeta(next((s.payload for s in old.sections if s.name == FSMETA
                                         and isinstance(s.payload, pa.Table)), None),
                                   _live_after(old.groups, new), facts)
            if fsmeta is not None:
                sections.append(ReservedSection(FSMETA, fsmeta))
        sections += [s for s in extra_sections if s.name != META]
        state = "none" if old_meta is None else "kept"
        if new_meta is not None:
            from ..provenance.meta import merge_meta

            rewritten = pc.unique(pa.chunked_array(
                [t.column("relative_path") for t in new.values()], pa.utf8())).to_pylist() \
                if new else []
            merged = merge_meta(old_meta, new_meta, rewritten=rewritten)
            if rust10 and merged is not None:
                merged = as_typed(merged, typed)
            state = "updated"
        else:
            merged = typed if typed is not None else old_meta
        if merged is not None:
            sections.append(ReservedSection(META, merged))
        return sections, builders, state

    def _report(self, old: _Old, blob_end: int, size: int, merged: Merged, rows: int,
                dropped: Sequence[str], meta: str) -> None:
        assert self._ingest is not None
        self.report = AppendReport(
            path=self.path, files_added=self._ingest.files, rows_added=rows,
            files_replaced=merged.files_replaced, rows_replaced=merged.rows_replaced,
            dead_bytes=sum(n for _, n in merged.dead_ranges), dead_ranges=merged.dead_ranges,
            old_blob_end=old.blob_end, blob_end=blob_end,
            blob_bytes_written=blob_end - old.blob_end, archive_bytes=size,
            recovered=self._recovered, dropped_sections=list(dropped),
            files_moved=len(merged.moved),
            moves=[(p, group_label(a), group_label(b)) for p, a, b in merged.moved],
            meta=meta, files_unchanged=self._feed.files_unchanged if self._feed else 0,
            skipped=list(self._feed.skipped) if self._feed else [],
            unreadable=list(self._feed.unreadable) if self._feed else [],
            seconds=time.perf_counter() - self._started,
        )


def _live_after(old: dict[GroupKey, pa.Table], new: dict[GroupKey, pa.Table]) -> list[str]:
    """The files of the archive once ``new`` replaced its paths in ``old``."""
    fresh = live_paths(new)
    replaced = set(fresh)
    return [p for p in live_paths(old) if p not in replaced] + fresh


def _same_sections(old: Sequence[ReservedSection], new: Sequence[ReservedSection]) -> bool:
    """The same sections with equal payloads (an append that changes nothing at all)."""
    def key(sections: Sequence[ReservedSection]) -> dict[str, Any]:
        return {s.name: s.payload for s in sections}

    a, b = key(old), key(new)
    if a.keys() != b.keys():
        return False
    for name, payload in a.items():
        other = b[name]
        if isinstance(payload, pa.Table) and isinstance(other, pa.Table):
            if not payload.equals(other):
                return False
        elif payload != other:
            return False
    return True


def open_for_append(path: str | os.PathLike[str], *, options: WriteOptions | None = None,
                    provenance: Provenance | None = None, repo: str = "",
                    pkg_type: int | str = 0, drop_signatures: bool = False, move: bool = False,
                    **kwargs: Unpack[OptionKwargs]) -> Appender:
    """An :class:`Appender` for ``path``, to use as a context manager."""
    from ..remote import is_url, local_path

    if is_url(path):  # appending rewrites the tail in place: a local file only
        local = local_path(os.fspath(path))
        if local is None:
            raise RemoteError("append works on local archives only (it rewrites the tail in "
                              "place): download the archive, append, upload it", path=path)
        path = local
    return Appender(path, options=options, provenance=provenance, repo=repo, pkg_type=pkg_type,
                    drop_signatures=drop_signatures, move=move, **kwargs)


def append_archive(
    path: str | os.PathLike[str],
    source: str | os.PathLike[str] | Iterable[Entry],
    *,
    options: WriteOptions | None = None,
    provenance: Provenance | None = None,
    repo: str = "",
    pkg_type: int | str = 0,
    drop_signatures: bool = False,
    move: bool = False,
    **kwargs: Unpack[OptionKwargs],
) -> AppendReport:
    """Append ``source`` (a directory or :class:`Entry` objects) to the archive at ``path``.

    ``options`` (a :class:`~znippy_sql.WriteOptions`) is used as given; without it the
    archive's own level, block size, packing and index compression are kept, and the keyword
    arguments (``level=``, ``pack=``, ..., as for ``write_archive``) change what they name. A
    level or block size other than the archive's is refused. ``provenance`` (or ``meta=``,
    ``signer=``): ``__meta__`` is kept; ``meta`` facts are merged into it (a key given again
    replaces its old facts). A signed archive is refused unless a signer re-signs the new
    content or ``drop_signatures=True`` drops the old signatures (named in the report). A path
    already in the archive is replaced in its group; one that would go to another group is
    refused unless ``move=True``. With ``dedup`` (the default) a new chunk identical to one
    already in the archive points at its blob.
    """
    appender = open_for_append(path, options=options, provenance=provenance, repo=repo,
                               pkg_type=pkg_type, drop_signatures=drop_signatures, move=move,
                               **kwargs)
    with appender:
        appender.add_all(source)
    assert appender.report is not None
    return appender.report
