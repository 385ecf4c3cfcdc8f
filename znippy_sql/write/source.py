"""What the writer takes: :class:`Entry` objects, or a directory walked in path order.

A :class:`Walk` of a directory yields its regular files; with ``posix=True`` it also yields
each symbolic link (as an entry whose bytes are the link's target, as git stores one) and
keeps every directory's mode and mtime (``Walk.directories``), and every entry carries its
mode and mtime: the facts the writer records as ``posix.*`` rows of ``__meta__``
(docs/posix.md). ``exclude``/``exclude_prefixes`` name absolute paths the
walk never takes (a writer's own output and staging file, when they lie inside the source).
A directory the walk cannot list raises :class:`UnreadableSourceError` naming it, as a file
the writer cannot read does; with ``skip_unreadable=True`` the walk leaves out (and lists in
``Walk.unreadable``) every directory it cannot list and every file it cannot open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import corelib
from ..errors import UnreadableSourceError, ZnippyError, missing_or

#: the hint every "cannot read" error of a write for want of permission carries
UNREADABLE_HINT = "give --skip-unreadable (skip_unreadable=True) to leave such paths out"


@dataclass(frozen=True, init=False)
class Entry:
    """One file to write: its archive path and either its bytes (``data``) or a ``file`` path.

    ``repo`` and ``pkg_type`` choose the group; ``None`` takes the writer's defaults.
    """

    relative_path: str
    data: bytes | None
    file: str | os.PathLike[str] | None
    repo: str | None
    pkg_type: int | str | None
    #: the size the directory walk already read (``lstat``); ``size()`` asks the file otherwise
    known_size: int | None = field(repr=False, compare=False)
    #: ``st_mode`` and ``st_mtime_ns`` (a ``posix=True`` walk), recorded as ``posix.*`` facts
    mode: int | None = field(repr=False, compare=False)
    mtime_ns: int | None = field(repr=False, compare=False)
    #: the target of a symbolic link (its bytes are ``data``)
    link: str | None = field(repr=False, compare=False)
    #: where the routing rule sends the file (``corelib.route``), when the walk said so
    route: int | None = field(repr=False, compare=False)
    #: the file's bytes and BLAKE3, when the walk read them ahead (a pack member's)
    ahead: tuple[bytes, bytes] | None = field(repr=False, compare=False)

    def __init__(self, relative_path: str, data: bytes | None = None,
                 file: str | os.PathLike[str] | None = None, repo: str | None = None,
                 pkg_type: int | str | None = None, known_size: int | None = None,
                 mode: int | None = None, mtime_ns: int | None = None, link: str | None = None,
                 route: int | None = None, ahead: tuple[bytes, bytes] | None = None) -> None:
        # written out rather than generated: one Python call an entry, not two (__init__
        # and __post_init__), for the walk's 10,000s (issue 33)
        if (data is None) == (file is None):
            raise ValueError(f"Entry {relative_path!r}: give exactly one of data= or file=")
        put = object.__setattr__  # (frozen)
        put(self, "relative_path", relative_path)
        put(self, "data", data)
        put(self, "file", file)
        put(self, "repo", repo)
        put(self, "pkg_type", pkg_type)
        put(self, "known_size", known_size)
        put(self, "mode", mode)
        put(self, "mtime_ns", mtime_ns)
        put(self, "link", link)
        put(self, "route", route)
        put(self, "ahead", ahead)

    @property
    def origin(self) -> str:
        return os.fspath(self.file) if self.file is not None else data_origin(self.relative_path)

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        if self.known_size is not None:
            return self.known_size
        try:
            return os.stat(self.file).st_size  # type: ignore[arg-type]
        except OSError as exc:
            raise UnreadableSourceError(unreadable_problem(exc), path=self.origin) from None


def data_origin(path: str) -> str:
    """How errors name an entry whose bytes came as ``data=``."""
    return f"<data {path}>"


def unreadable_problem(exc: OSError, what: str = "file") -> str:
    """What an :class:`UnreadableSourceError` says of a source ``what`` that ``exc`` stopped
    (with the hint to skip such paths when it was for want of permission)."""
    hint = f" ({UNREADABLE_HINT})" if exc.errno in (errno.EACCES, errno.EPERM) else ""
    return f"cannot read source {what}: {exc.strerror or exc}{hint}"


def can_open(path: str, dir_fd: int | None = None) -> str | None:
    """None when the file ``path`` opens for reading, else why not (``skip_unreadable``)."""
    try:
        os.close(os.open(path, _READ_FLAGS, dir_fd=dir_fd))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def walk_directory(root: str | os.PathLike[str]) -> Iterator[Entry]:
    """Regular files under ``root`` in sorted relative-path order (UTF-8 bytes); symlinks are
    not followed. The same as iterating a :class:`Walk` with its defaults."""
    return iter(Walk(root))


class Walk:
    """The files under ``root`` in sorted relative-path order (UTF-8 bytes); symlinks are not
    followed.

    Walked by a native thread ahead of the caller (``native/src/create/walk.rs``), depth
    first: each directory's entries are sorted by name bytes with ``/`` appended to the names
    of subdirectories, so the order is exactly the byte order of the whole relative paths
    (``a.txt`` comes before ``a/b`` because ``.`` < ``/``). ``d_type`` answers
    is_dir/is_file, and the size comes from an ``lstat`` relative to the directory,
    carried in the :class:`Entry`. With :meth:`read_ahead` a second thread reads and hashes
    the files the writer packs whole (:meth:`take`).

    A directory that cannot be listed raises :class:`UnreadableSourceError`; with
    ``skip_unreadable`` it is left out, and so is every file that cannot be opened (each
    one opened and closed as it is listed), both named in :attr:`unreadable`.
    """

    def __init__(self, root: str | os.PathLike[str], *, posix: bool = False,
                 exclude: Sequence[str | os.PathLike[str]] = (),
                 exclude_prefixes: Sequence[str | os.PathLike[str]] = (),
                 skip_unreadable: bool = False) -> None:
        self.root = os.fspath(root)
        self.posix = posix
        self.skip_unreadable = skip_unreadable
        #: (path as found, why) of each directory and file ``skip_unreadable`` left out
        self.unreadable: list[tuple[str, str]] = []
        #: ``(relative path, st_mode, st_mtime_ns)`` of every directory walked (``posix``)
        self.directories: list[tuple[str, int, int]] = []
        #: what the walk left out: symbolic links (without ``posix``), and special files
        #: (FIFOs, sockets, devices), which an archive cannot hold
        self.links_left_out = 0
        self.special_left_out: list[str] = []
        self._rule: Any = None  # read ahead what it sends to a small pack (read_ahead)
        real = os.path.realpath(self.root)
        self._exclude = frozenset(r for r in (_inside(real, x) for x in exclude) if r)
        self._prefixes = tuple(r for r in (_inside(real, x) for x in exclude_prefixes) if r)

    def __iter__(self) -> Iterator[Entry]:
        for batch in self.batches():
            yield from batch.entries()

    def read_ahead(self, rule: Any) -> "Walk":
        """This walk, reading ahead (and hashing) the files ``rule`` sends to a pack, small or
        directory (``corelib.router``): each file's :class:`Entry` holds its ``route`` and,
        read ahead, its bytes and digest (``ahead``)."""
        self._rule = rule
        return self

    def close(self) -> None:
        """(Nothing to do: the walk's thread ends with its iteration.)"""

    def batches(self) -> Iterator[Batch]:
        """The files and links, from the native walk (``native/src/create/walk.rs``), a
        :class:`Batch` of columns for each of its batches (no Python call a file)."""
        root = self.root
        if not os.path.isdir(root):
            raise missing_or(root, "source is not a directory", "source")
        base = root if root.endswith("/") else root + "/"
        self.directories = []
        self.links_left_out = 0
        self.special_left_out = []
        self.unreadable = []
        walker = _STARTED.pop(self._key(), None) or self._walker()
        try:
            while (got := corelib.walk_next(walker, root)) is not None:
                *columns, directories, fail = got
                self.directories += directories
                yield Batch(base, *columns)
                if fail is not None:  # a directory that cannot be listed (after the rest)
                    rel, errno_, why = fail
                    raise UnreadableSourceError(
                        unreadable_problem(OSError(errno_, why), "directory"), path=rel)
            unreadable, self.links_left_out, special = corelib.walk_summary(walker, root)
            self.unreadable += unreadable
            self.special_left_out += special
        finally:
            corelib.walk_close(walker, root)

    def _key(self) -> tuple[object, ...]:
        return (self.root, self.posix, self.skip_unreadable, self._exclude, self._prefixes,
                self._rule)

    def _walker(self) -> Any:
        return corelib.walker(self.root, posix=self.posix,
                              skip_unreadable=self.skip_unreadable, exclude=self._exclude,
                              prefixes=self._prefixes, rule=self._rule)

    def start(self) -> None:
        """Start the native walk now (``write/early.py``): the next :meth:`batches` of an
        equal walk (same root, options, exclusions and rule object) in this process takes it
        instead of starting its own. One started walk at a time."""
        discard_started()
        if os.path.isdir(self.root):
            _STARTED[self._key()] = self._walker()

    def count(self) -> tuple[int, int]:
        """``(files, bytes)`` the walk would yield, from a listing alone (a progress bar's
        total; with ``skip_unreadable`` each file is opened and closed)."""
        files = nbytes = 0
        for batch in Walk(self.root, skip_unreadable=self.skip_unreadable,
                          posix=self.posix).batches():
            files += len(batch.rels)
            nbytes += sum([len(target.encode("utf-8", "surrogateescape")) if size is None
                           and target is not None else size or 0
                           for size, target in zip(batch.sizes, batch.targets)])
        return files, nbytes


class Batch:
    """Files and links of a walk in columns, in walk order (``Walker.next``,
    ``native/src/create/mod.rs`` ``as_columns``): ``rels`` relative paths; ``sizes``
    (``lstat``; None when it failed); ``modes``, ``mtimes`` (``posix``); ``targets`` (a
    link's target, None for a file); ``datas`` and ``digests`` (bytes and BLAKE3 read
    ahead); ``routes`` (``corelib.route``'s answer, said by the walk); ``unplain``: the
    indexes of the paths the core found not plain (``walk::plain``, the fast path of
    ``check_relative_path``), which only those need checking one by one. :class:`Entry`
    objects are made only when asked (:meth:`entries`)."""

    __slots__ = ("base", "rels", "sizes", "modes", "mtimes", "targets", "datas", "digests",
                 "routes", "unplain")

    def __init__(self, base: str, rels: list[str], sizes: list[int | None],
                 modes: list[int | None], mtimes: list[int | None],
                 targets: list[str | None], datas: list[bytes | None],
                 digests: list[bytes | None], routes: list[int | None],
                 unplain: list[int]) -> None:
        self.base = base  # the root, with a trailing "/"
        self.rels, self.sizes, self.modes, self.mtimes = rels, sizes, modes, mtimes
        self.targets, self.datas, self.digests, self.routes = targets, datas, digests, routes
        self.unplain = unplain

    def __len__(self) -> int:
        return len(self.rels)

    def origin(self, i: int) -> str:
        """How errors name entry ``i`` (as :attr:`Entry.origin` does)."""
        rel = self.rels[i]
        return self.base + rel if self.targets[i] is None else data_origin(rel)

    def entries(self) -> list[Entry]:
        base = self.base
        return [Entry(rel, file=base + rel, known_size=size, mode=mode, mtime_ns=mtime,
                      route=route, ahead=None if data is None else (data, digest))
                if target is None else
                Entry(rel, data=os.fsencode(target), link=target, mode=mode, mtime_ns=mtime)
                for rel, size, mode, mtime, target, data, digest, route in zip(
                    self.rels, self.sizes, self.modes, self.mtimes, self.targets, self.datas,
                    self.digests, self.routes)]

    def without(self, drop: Collection[int]) -> "Batch":
        """This batch less the entries at the indexes ``drop`` (unsafe paths skipped, links
        left out), its ``unplain`` indexes renumbered."""
        keep = [i for i in range(len(self.rels)) if i not in drop]
        new = {old: at for at, old in enumerate(keep)}
        rels, sizes, modes, mtimes = self.rels, self.sizes, self.modes, self.mtimes
        targets, datas, digests, routes = self.targets, self.datas, self.digests, self.routes
        return Batch(self.base, [rels[i] for i in keep], [sizes[i] for i in keep],
                     [modes[i] for i in keep], [mtimes[i] for i in keep],
                     [targets[i] for i in keep], [datas[i] for i in keep],
                     [digests[i] for i in keep], [routes[i] for i in keep],
                     [new[i] for i in self.unplain if i in new])


#: the walk :meth:`Walk.start` started, by what it walks (taken by the first equal walk)
_STARTED: dict[tuple[object, ...], Any] = {}


def discard_started() -> None:
    """Stop the started walk no :meth:`Walk.batches` took."""
    for key in list(_STARTED):
        corelib.walk_close(_STARTED.pop(key), str(key[0]))


def _inside(root_real: str, path: str | os.PathLike[str]) -> str | None:
    """``path`` relative to the real path of the walk's root, ``/``-separated, or None when
    it is not under it."""
    full = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))),
                        os.path.basename(os.fspath(path)))
    rel = os.path.relpath(full, root_real)
    if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def as_entry(entry: Entry | str, data: bytes | None = None, *,
             file: str | os.PathLike[str] | None = None, repo: str | None = None,
             pkg_type: int | str | None = None) -> Entry:
    """What the writers' ``add`` takes: an :class:`Entry`, or a path with ``data=`` or
    ``file=`` (and optionally ``repo=``/``pkg_type=``)."""
    if isinstance(entry, Entry):
        return entry
    return Entry(entry, data=data, file=file, repo=repo, pkg_type=pkg_type)


def as_entries(source: str | os.PathLike[str] | Iterable[Entry]) -> Iterable[Entry]:
    if isinstance(source, (str, os.PathLike)):
        return walk_directory(source)
    return source


def is_symlink_mode(mode: int | None) -> bool:
    return mode is not None and stat.S_ISLNK(mode)
