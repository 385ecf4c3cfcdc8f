"""What the writer takes: :class:`Entry` objects, or a directory walked in path order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import ZnippyError


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
            raise ZnippyError(f"cannot read source file: {exc.strerror}", path=self.origin) from None


def data_origin(path: str) -> str:
    """How errors name an entry whose bytes came as ``data=``."""
    return f"<data {path}>"


def walk_directory(root: str | os.PathLike[str]) -> Iterator[Entry]:
    """Regular files under ``root`` in sorted relative-path order (UTF-8 bytes); symlinks are
    not followed.

    Lazy, depth first: a directory is listed when the walk gets to it, so the writer is already
    compressing the first files while the rest are being listed. Each directory's entries are
    sorted by name bytes with ``/`` appended to the names of subdirectories; then depth-first
    order is exactly the byte order of the whole relative paths (``a.txt`` comes before
    ``a/b`` because ``.`` < ``/``, and nothing sorts between the paths under ``a/``).
    One ``scandir`` per directory, on an open descriptor of it: ``d_type`` answers
    is_dir/is_file, and the size comes from an ``lstat`` relative to that descriptor (one path
    component to resolve, not the whole path), carried in the :class:`Entry`.
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise ZnippyError("source is not a directory", path=root)
    base = root if root.endswith("/") else root + "/"
    stack = _listing("", root)
    while stack:
        _key, rel, size = stack.pop()
        if size is _DIR:
            stack += _listing(rel + "/", base + rel)
        else:
            yield Entry(rel, file=base + rel, known_size=size)  # the writer checks the path


_DIR = -1  # the size slot of a subdirectory in a listing


def _listing(prefix: str, directory: str) -> list[tuple[bytes, str, int | None]]:
    """One directory's entries as ``(sort key, relative path, size or _DIR)``, in reverse
    order (the walk pops from the end)."""
    found: list[tuple[bytes, str, int | None]] = []
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError:
        return found  # unreadable directory: skipped, as os.walk does
    try:
        with os.scandir(fd) as it:
            for item in it:
                name = item.name
                if item.is_dir(follow_symlinks=False):
                    found.append((name.encode("utf-8", "surrogateescape") + b"/",
                                  prefix + name, _DIR))
                elif item.is_file(follow_symlinks=False):
                    try:
                        size: int | None = item.stat(follow_symlinks=False).st_size
                    except OSError:
                        size = None  # reported by Entry.size() when the writer asks
                    found.append((name.encode("utf-8", "surrogateescape"), prefix + name, size))
    except OSError:
        pass
    finally:
        os.close(fd)
    found.sort(key=_first, reverse=True)
    return found


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _first(item: tuple[bytes, str, int | None]) -> bytes:
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
