"""POSIX facts of written files as ``__meta__`` rows: mode, mtime, symlink target.

One row per fact, keys ``posix.mode`` (``st_mode`` in octal, type bits included, as git writes
modes: ``100644``, ``100755``, ``120777``, ``40755``), ``posix.mtime`` (seconds since the epoch
as a decimal, up to nanoseconds: ``1700000000.123456789``) and, for a symbolic link,
``posix.symlink`` (its target). A directory has a mode and an mtime under its own path (no
trailing ``/``); an empty directory is known only by these rows. The data schema is untouched:
a link is an ordinary file whose bytes are its target (docs/posix.md).
"""

from __future__ import annotations

import stat

import pyarrow as pa

from ..format import build
from ..format.kernels import SortOptions, call_function, take
from ..format.schema import META_SCHEMA
from ..read.posix import MODE, MTIME, SYMLINK, mode_text, mtime_text


class PosixFacts:
    """The facts of the files (and directories) of one write, kept as three lists."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.modes: list[int] = []
        self.mtimes: list[int | None] = []
        self.links: dict[str, str] = {}

    def add(self, path: str, mode: int, mtime_ns: int | None, link: str | None = None) -> None:
        self.paths.append(path)
        self.modes.append(mode)
        self.mtimes.append(mtime_ns)
        if link is not None:
            self.links[path] = link

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def symlinks(self) -> int:
        return len(self.links)

    def fsmeta(self) -> pa.Table | None:
        """The Rust ``__znippy_fsmeta__`` rows of these facts (``write/rust10.py``; mtimes
        and links have no place there)."""
        from .rust10 import fsmeta_table

        dirs = [(p, m) for p, m in zip(self.paths, self.modes) if stat.S_ISDIR(m)]
        files = [(p, m) for p, m in zip(self.paths, self.modes) if stat.S_ISREG(m)]
        return fsmeta_table(files, dirs)

    def rows(self) -> pa.Table:
        """The rows in ``__meta__``'s canonical order (by path bytes, then key)."""
        names = self.paths
        keys = [p.encode("utf-8") for p in names]
        order = sorted(range(len(names)), key=keys.__getitem__)
        modes, mtimes = self.modes, self.mtimes
        mode_of = {m: mode_text(m) for m in set(modes)}  # a tree has a few distinct modes
        paths: list[str]
        if not self.links and None not in mtimes:  # every row a mode and an mtime: in bulk
            paths = [names[i] for i in order for _ in (0, 1)]
            values = [v for i in order  # (no None among mtimes: checked just above)
                      for v in (mode_of[modes[i]], mtime_text(mtimes[i]))]  # type: ignore[arg-type]
            return build.table({"relative_path": paths, "key": [MODE, MTIME] * len(order),
                                "value": values}, META_SCHEMA)
        paths = []
        keys_out: list[str] = []
        values = []
        for i in order:
            path = names[i]
            paths.append(path)
            keys_out.append(MODE)
            values.append(mode_of[modes[i]])
            mtime = mtimes[i]
            if mtime is not None:
                paths.append(path)
                keys_out.append(MTIME)
                values.append(mtime_text(mtime))
            link = self.links.get(path)
            if link is not None:
                paths.append(path)
                keys_out.append(SYMLINK)
                values.append(link)
        return build.table({"relative_path": paths, "key": keys_out, "value": values},
                           META_SCHEMA)


def with_rows(meta: pa.Table | None, rows: pa.Table) -> pa.Table:
    """``meta`` (canonical ``__meta__`` rows, or None) and per-file ``rows`` as one canonical
    table: archive facts first, then by path bytes, by key inside a path, a key's values in
    the order given (Arrow's sort is stable)."""
    if meta is None or meta.num_rows == 0:
        return rows
    # canonical order puts the archive facts (null path) first: a prefix of ``meta``
    archive_rows = meta.column("relative_path").null_count
    head, files = meta.slice(0, archive_rows), meta.slice(archive_rows)
    both = pa.concat_tables([files, rows])
    order = call_function("sort_indices", [both], SortOptions(
        [("relative_path", "ascending"), ("key", "ascending")]))
    return pa.concat_tables([head, take(both, order)])
