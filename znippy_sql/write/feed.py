"""What every writer does with an entry before its :class:`~znippy_sql.write.ingest.Ingest`.

:class:`Feed` walks a directory source (leaving out the writer's own files), skips unsafe
paths when asked (``skip_unsafe``), skips files and directories it cannot read when asked
(``skip_unreadable``; else the write stops with :class:`UnreadableSourceError`), skips files
an appender finds unchanged, and collects
the POSIX facts of what it passes on (``posix``). The one-shot writer, the appender and the
store share it, so the three treat a source the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from ..errors import UnsafePathError
from ..format.paths import check_relative_path
from .posix import PosixFacts
from .source import Batch, Entry, Walk, can_open

#: the hint every "unsafe path" error of a write carries
SKIP_HINT = "give --skip-unsafe (skip_unsafe=True) to leave such files out"


class Feed:
    """Entries in, :meth:`add`'s ``take`` called for each one to write."""

    def __init__(self, take: Callable[[Entry], None], *, posix: bool = False,
                 links: bool = True,
                 skip_unsafe: bool = False, skip_unreadable: bool = False,
                 exclude: Sequence[str] = (),
                 exclude_prefixes: Sequence[str] = (),
                 unchanged: Callable[[Entry], bool] | None = None,
                 ahead: Callable[[Walk], Walk | None] | None = None,
                 take_batch: Callable[[Batch], None] | None = None) -> None:
        self.take = take
        #: takes a walk's batch whole (``Ingest.add_batch``; None: each entry goes to
        #: ``take``); never used with ``unchanged``
        self.take_batch = take_batch
        #: makes a walk of a directory source read its small files ahead of ``take``
        #: (``Walk.read_ahead``; None: it does not)
        self.ahead = ahead
        self.posix = posix
        #: False: a symbolic link a ``posix`` walk finds is left out (and counted), as the
        #: Rust compress does (``--compat rust-0.10``: its archives have no links)
        self.links = links
        self.skip_unsafe = skip_unsafe
        self.skip_unreadable = skip_unreadable
        self.exclude = list(exclude)
        self.exclude_prefixes = list(exclude_prefixes)
        self.unchanged = unchanged
        self.facts = PosixFacts()
        #: (path as found, why) of each file left out by ``skip_unsafe``
        self.skipped: list[tuple[str, str]] = []
        #: (path as found, why) of each file and directory ``skip_unreadable`` left out
        self.unreadable: list[tuple[str, str]] = []
        self.directories = 0
        #: files an appender found unchanged and did not write again
        self.files_unchanged = 0
        #: what a directory walk left out: symbolic links (no ``posix``), special files
        self.links_left_out = 0
        self.special_left_out: list[str] = []

    def add(self, entry: Entry) -> bool:
        """Pass ``entry`` on (True), or skip it (False: unsafe with ``skip_unsafe``, a file
        that does not open with ``skip_unreadable``, or unchanged)."""
        if self.skip_unreadable and entry.file is not None:
            why = can_open(os.fspath(entry.file))
            if why is not None:
                self.unreadable.append((entry.origin, why))
                return False
        return self._add_many((entry,), None) == 1

    def _add_many(self, entries: Iterable[Entry], after: Callable[[], None] | None) -> int:
        """:meth:`add` of entries a walk found (their files opened already, when they had
        to), in one loop; ``after`` is called after each one passed on. Returns how many
        were."""
        take, unchanged, posix = self.take, self.unchanged, self.posix
        passed = 0
        for entry in entries:
            if entry.link is not None and not self.links:
                self.links_left_out += 1
                continue
            if unchanged is not None and unchanged(entry):
                self.files_unchanged += 1
                self._fact(entry)
                continue
            try:
                take(entry)
            except UnsafePathError as exc:
                if not self.skip_unsafe:
                    raise UnsafePathError(f"{exc.problem} ({SKIP_HINT})",
                                          path=entry.origin) from None
                self.skipped.append((entry.origin, exc.problem))
                continue
            if posix:
                self._fact(entry)
            passed += 1
            if after is not None:
                after()
        return passed

    def _add_batch(self, batch: Batch, after: Callable[[], None] | None) -> None:
        """:meth:`_add_many` of a walk's batch, whole: the paths the core did not find plain
        checked here (unsafe ones skipped or raised as ``take`` would), links left out
        unless kept, the rest to ``take_batch`` in one call."""
        drop: set[int] = set()
        if not self.links:  # (before the path check, as in _add_many)
            drop.update(i for i, target in enumerate(batch.targets) if target is not None)
            self.links_left_out += len(drop)
        for i in batch.unplain:
            if i in drop:
                continue
            try:
                check_relative_path(batch.rels[i])
            except UnsafePathError as exc:
                if not self.skip_unsafe:
                    raise UnsafePathError(f"{exc.problem} ({SKIP_HINT})",
                                          path=batch.origin(i)) from None
                self.skipped.append((batch.origin(i), exc.problem))
                drop.add(i)
        if drop:
            batch = batch.without(drop)
        assert self.take_batch is not None
        self.take_batch(batch)
        if self.posix:
            add = self.facts.add
            for rel, mode, mtime, link in zip(batch.rels, batch.modes, batch.mtimes,
                                              batch.targets):
                if mode is not None:
                    add(rel, mode, mtime, link)
        if after is not None:
            for _ in batch.rels:
                after()

    def _fact(self, entry: Entry) -> None:
        if self.posix and entry.mode is not None:
            self.facts.add(entry.relative_path, entry.mode, entry.mtime_ns, entry.link)

    def walk(self, source: str | os.PathLike[str]) -> Walk:
        return Walk(source, posix=self.posix, exclude=self.exclude,
                    exclude_prefixes=self.exclude_prefixes,
                    skip_unreadable=self.skip_unreadable)

    def add_all(self, source: str | os.PathLike[str] | Iterable[Entry],
                after: Callable[[], None] | None = None) -> None:
        """Every entry of ``source`` (a directory is walked in path order); ``after`` is
        called after each one passed on (a progress hook)."""
        if not isinstance(source, (str, os.PathLike)):
            for entry in source:
                if self.add(entry) and after is not None:
                    after()
            return
        walk = self.walk(source)
        ahead = self.ahead(walk) if self.ahead is not None else None
        try:
            for batch in (walk if ahead is None else ahead).batches():
                if self.take_batch is None or self.unchanged is not None:
                    self._add_many(batch.entries(), after)
                else:
                    self._add_batch(batch, after)
        finally:
            if ahead is not None:
                ahead.close()
        self.links_left_out += walk.links_left_out
        self.special_left_out += walk.special_left_out
        self.unreadable += walk.unreadable
        for rel, mode, mtime in walk.directories:
            try:
                check_relative_path(rel)
            except UnsafePathError as exc:
                if not self.skip_unsafe:
                    raise UnsafePathError(f"{exc.problem} ({SKIP_HINT})",
                                          path=os.path.join(os.fspath(source), rel)) from None
                self.skipped.append((os.path.join(os.fspath(source), rel), exc.problem))
                continue
            self.facts.add(rel, mode, mtime)
            self.directories += 1
