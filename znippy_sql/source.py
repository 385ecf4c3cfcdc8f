"""What the writer takes: :class:`Entry` objects, or a directory walked in path order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .errors import ZnippyError
from .paths import check_relative_path


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

    def __post_init__(self) -> None:
        if (self.data is None) == (self.file is None):
            raise ValueError(f"Entry {self.relative_path!r}: give exactly one of data= or file=")

    @property
    def origin(self) -> str:
        return os.fspath(self.file) if self.file is not None else f"<data {self.relative_path}>"

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        try:
            return os.stat(self.file).st_size  # type: ignore[arg-type]
        except OSError as exc:
            raise ZnippyError(f"cannot read source file: {exc.strerror}", path=self.origin) from None


def walk_directory(root: str | os.PathLike[str]) -> Iterator[Entry]:
    """Regular files under ``root`` in sorted relative-path order; symlinks are not followed."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise ZnippyError("source is not a directory", path=root)
    rels: list[str] = []
    stack = [("", root)]
    while stack:  # one scandir per directory: the d_type answers is_dir/is_file, no stat
        prefix, directory = stack.pop()
        try:
            with os.scandir(directory) as it:
                for item in it:
                    if item.is_dir(follow_symlinks=False):
                        stack.append((f"{prefix}{item.name}/", item.path))
                    elif item.is_file(follow_symlinks=False):
                        rels.append(prefix + item.name)
        except OSError:
            continue  # unreadable directory: skipped, as os.walk does
    rels.sort(key=lambda p: p.encode("utf-8", "surrogateescape"))
    for rel in rels:
        yield Entry(check_relative_path(rel), file=os.path.join(root, *rel.split("/")))


def as_entries(source: str | os.PathLike[str] | Iterable[Entry]) -> Iterable[Entry]:
    if isinstance(source, (str, os.PathLike)):
        return walk_directory(source)
    return source
