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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnreadableSourceError, ZnippyError, missing_or

#: the hint every "cannot read" error of a write for want of permission carries
UNREADABLE_HINT = "give --skip-unreadable (skip_unreadable=True) to leave such paths out"


@dataclass(frozen=True)
class Entry:
    """One file to write: its archive path and either its bytes (``data``) or a ``file`` path.

    ``repo`` and ``pkg_type`` choose the group; ``None`` takes the writer's defaults.
    """

    relative_path: str
    data: bytes | None = None
    file: str | os.PathLike[str] | None = None
    repo: str | None = None
    pkg_type: int | str | None = None
    #: the size the directory walk already read (``lstat``); ``size()`` asks the file otherwise
    known_size: int | None = field(default=None, repr=False, compare=False)
    #: ``st_mode`` and ``st_mtime_ns`` (a ``posix=True`` walk), recorded as ``posix.*`` facts
    mode: int | None = field(default=None, repr=False, compare=False)
    mtime_ns: int | None = field(default=None, repr=False, compare=False)
    #: the target of a symbolic link (its bytes are ``data``)
    link: str | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.data is None) == (self.file is None):
            raise ValueError(f"Entry {self.relative_path!r}: give exactly one of data= or file=")

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

    Lazy, depth first: a directory is listed when the walk gets to it, so the writer is already
    compressing the first files while the rest are being listed. Each directory's entries are
    sorted by name bytes with ``/`` appended to the names of subdirectories; then depth-first
    order is exactly the byte order of the whole relative paths (``a.txt`` comes before
    ``a/b`` because ``.`` < ``/``, and nothing sorts between the paths under ``a/``).
    One ``scandir`` per directory, on an open descriptor of it: ``d_type`` answers
    is_dir/is_file, and the size comes from an ``lstat`` relative to that descriptor (one path
    component to resolve, not the whole path), carried in the :class:`Entry`.

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
        real = os.path.realpath(self.root)
        self._exclude = frozenset(r for r in (_inside(real, x) for x in exclude) if r)
        self._prefixes = tuple(r for r in (_inside(real, x) for x in exclude_prefixes) if r)

    def __iter__(self) -> Iterator[Entry]:
        base = self.root if self.root.endswith("/") else self.root + "/"
        self.directories = []
        self.links_left_out = 0
        self.special_left_out = []
        self.unreadable = []
        for rel, size, st in self._walk():
            if size is _DIR:
                if st is not None:
                    self.directories.append((rel, st.st_mode, st.st_mtime_ns))
            elif size is _LINK:
                target, lst = st
                yield Entry(rel, data=os.fsencode(target), link=target, mode=lst.st_mode,
                            mtime_ns=lst.st_mtime_ns)
            elif st is not None:
                yield Entry(rel, file=base + rel, known_size=size, mode=st.st_mode,
                            mtime_ns=st.st_mtime_ns)
            else:
                yield Entry(rel, file=base + rel, known_size=size)  # the writer checks the path

    def count(self) -> tuple[int, int]:
        """``(files, bytes)`` the walk would yield, from a listing alone (a progress bar's
        total): the directory tree listed once more, no file opened (but with
        ``skip_unreadable``, each opened and closed)."""
        files = nbytes = 0
        for _rel, size, st in self._walk():
            if size is _DIR:
                continue
            files += 1
            nbytes += len(os.fsencode(st[0])) if size is _LINK else (size or 0)
        return files, nbytes

    def _walk(self) -> Iterator[tuple[str, Any, Any]]:
        """``(relative path, size or _DIR/_LINK, stat result / (target, lstat) / None)`` in
        path order, directories before what they hold (a directory listed before it is
        yielded: one ``skip_unreadable`` leaves out is not yielded at all)."""
        root = self.root
        if not os.path.isdir(root):
            raise missing_or(root, "source is not a directory", "source")
        base = root if root.endswith("/") else root + "/"
        stack = self._listing("", root) or []
        while stack:
            _key, rel, size, st = stack.pop()
            if size is _DIR:
                listing = self._listing(rel + "/", base + rel)
                if listing is None:
                    continue
                yield rel, size, st
                stack += listing
            else:
                yield rel, size, st

    def _listing(self, prefix: str, directory: str) -> list[tuple[bytes, str, Any, Any]] | None:
        """One directory's entries as ``(sort key, relative path, size or _DIR/_LINK, stat)``,
        in reverse order (the walk pops from the end); None: it cannot be listed and
        ``skip_unreadable`` leaves it out."""
        found: list[tuple[bytes, str, Any, Any]] = []
        exclude, prefixes, posix = self._exclude, self._prefixes, self.posix
        opens = self.skip_unreadable  # each file opened once: the ones that do not are left out
        try:
            fd = os.open(directory, _DIR_FLAGS)
        except OSError as exc:
            self._unreadable(directory, exc)
            return None
        try:
            with os.scandir(fd) as it:
                for item in it:
                    name = item.name
                    rel = prefix + name
                    if (exclude and rel in exclude) or (prefixes and rel.startswith(prefixes)):
                        continue
                    key = name.encode("utf-8", "surrogateescape")
                    if item.is_dir(follow_symlinks=False):
                        found.append((key + b"/", rel, _DIR, _lstat(item) if posix else None))
                    elif item.is_file(follow_symlinks=False):
                        why = can_open(name, fd) if opens else None
                        if why is not None:
                            self.unreadable.append((os.path.join(directory, name), why))
                            continue
                        st = _lstat(item)
                        size = None if st is None else st.st_size  # None: Entry.size() says
                        found.append((key, rel, size, st if posix else None))
                    elif item.is_symlink():
                        if not posix:
                            self.links_left_out += 1
                            continue
                        try:
                            link = (os.readlink(name, dir_fd=fd), item.stat(follow_symlinks=False))
                        except OSError:
                            continue  # gone since the listing
                        found.append((key, rel, _LINK, link))
                    else:
                        self.special_left_out.append(rel)
        except OSError as exc:
            self._unreadable(directory, exc)
            return None
        finally:
            os.close(fd)
        found.sort(key=_first, reverse=True)
        return found

    def _unreadable(self, directory: str, exc: OSError) -> None:
        """A directory that cannot be listed: left out and named (``skip_unreadable``), or
        the error."""
        if not self.skip_unreadable:
            raise UnreadableSourceError(unreadable_problem(exc, "directory"),
                                        path=directory) from None
        self.unreadable.append((directory, exc.strerror or str(exc)))


_DIR = -1  # the size slot of a subdirectory in a listing
_LINK = -2  # ... and of a symbolic link


def _lstat(item: os.DirEntry[str]) -> os.stat_result | None:
    try:
        return item.stat(follow_symlinks=False)
    except OSError:
        return None


def _inside(root_real: str, path: str | os.PathLike[str]) -> str | None:
    """``path`` relative to the real path of the walk's root, ``/``-separated, or None when
    it is not under it."""
    full = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))),
                        os.path.basename(os.fspath(path)))
    rel = os.path.relpath(full, root_real)
    if rel == "." or rel.startswith(".." + os.sep) or rel == ".." or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _first(item: tuple[bytes, str, Any, Any]) -> bytes:
    return item[0]


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
