"""What a ``relative_path`` may be (FORMAT §3), checked on write and again before extract."""

from __future__ import annotations

import os
import re
import stat

import numpy as np

from ..errors import UnsafePathError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: printable ASCII but the backslash: a path made only of these, short enough that no
#: component can exceed ``MAX_NAME_BYTES``, needs only the cheap checks of the fast path
_PLAIN = re.compile(r"[\x20-\x5b\x5d-\x7e]+")


def check_relative_path(path: str, *, archive: str | None = None) -> str:
    """Return ``path`` if it is a plain relative ``/``-path, else raise UnsafePathError."""
    if (type(path) is str and len(path) <= MAX_NAME_BYTES and _PLAIN.fullmatch(path)
            and path[0] != "/" and path[-1] != "/" and "//" not in path and path[0] != "."
            and "/." not in path and path[1:2] != ":"):
        return path  # the common case, ~0.3 us: every rule below holds (tested against it)
    return _check_slow(path, archive)


def plain_paths(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which of the UTF-8 paths ``data[starts[i]:ends[i]]`` pass :func:`check_relative_path`'s
    fast path, for all of them at once (~1 µs a path less for extract's plan; a path marked
    False is simply checked one by one). The same rules: 1-255 bytes, each printable ASCII
    but the backslash (so bytes are characters), no ``/`` first or last, no ``.`` first, no
    ``//`` or ``/.``, no ``:`` second. Works through the paths in blocks, so its temporary
    arrays stay small whatever the number of paths."""
    out = np.zeros(len(starts), dtype=bool)
    for b in range(0, len(starts), _PLAIN_BLOCK):
        s, e = starts[b : b + _PLAIN_BLOCK], ends[b : b + _PLAIN_BLOCK]
        lo, hi = int(s.min()), int(e.max())
        if hi > lo:
            out[b : b + len(s)] = _plain_block(data[lo:hi], s - lo, e - lo)
    return out


_PLAIN_BLOCK = 1 << 16


def _plain_block(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    lens = ends - starts
    bad = (data < 0x20) | (data > 0x7E) | (data == 0x5C)
    slash = data == 0x2F
    pair = np.zeros(len(data), dtype=bool)  # "//" or "/." starting at each byte
    pair[:-1] = slash[:-1] & (slash[1:] | (data[1:] == 0x2E))
    bad_before = np.concatenate(([0], np.cumsum(bad, dtype=np.int32)))
    pair_before = np.concatenate(([0], np.cumsum(pair, dtype=np.int32)))
    ok = (lens >= 1) & (lens <= MAX_NAME_BYTES)
    s, e = np.where(ok, starts, 0), np.where(ok, ends, 1)  # safe indexes for empty paths
    ok &= bad_before[e] == bad_before[s]
    ok &= pair_before[e - 1] == pair_before[s]  # a pair must start before the last byte
    first, last = data[s], data[e - 1]
    ok &= (first != 0x2F) & (first != 0x2E) & (last != 0x2F)
    second = data[np.minimum(s + 1, len(data) - 1)]
    ok &= (lens < 2) | (second != 0x3A)
    return ok


def _check_slow(path: str, archive: str | None) -> str:
    def bad(why: str) -> UnsafePathError:
        return UnsafePathError(f"unsafe entry path {path!r}: {why}", path=archive)

    if not isinstance(path, str) or not path:
        raise bad("empty")
    if _CONTROL.search(path):
        raise bad("NUL or control character")
    if "\\" in path:
        raise bad("backslash")
    if path.startswith("/"):
        raise bad("absolute path")
    if _DRIVE.match(path):
        raise bad("drive letter")
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise bad("not valid UTF-8") from None
    if len(raw) > MAX_PATH_BYTES:
        raise bad(f"longer than {MAX_PATH_BYTES} bytes")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise bad("empty, '.' or '..' component")
        if len(part) > MAX_NAME_BYTES // 4 and len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise bad(f"a component longer than {MAX_NAME_BYTES} bytes")
    return path


class Targets:
    """Targets under one extraction root, checked with one ``lstat`` per new directory.

    Paths are checked by :func:`check_relative_path` (no ``..``, no absolute or drive paths),
    so a target can only leave the root through a symlink: every directory on the way and the
    target itself are ``lstat``-ed (once each, cached) and a symlink there is refused.
    """

    def __init__(self, dest: str, *, archive: str | None = None) -> None:
        self.dest = dest
        self.root = os.path.realpath(dest)
        #: the root with a separator: + a checked path = where that file goes (what
        #: :meth:`target` returns for it, without its checks)
        self.prefix = os.path.join(self.root, "")
        self.archive = archive
        self._dirs: dict[str, bool] = {"": True}  # relative dir → exists as a real directory
        self._parents: dict[str, tuple[str, bool]] = {}  # relative dir → (absolute/, exists)

    def target(self, path: str, *, checked: bool = False) -> str:
        """Where ``path`` goes; ``checked``: it passed :func:`plain_paths` already."""
        if not checked:
            check_relative_path(path, archive=self.archive)
        rel, _, name = path.rpartition("/")
        parent = self._parents.get(rel)
        if parent is None:  # once per directory: its components are probed
            parent = self._parents[rel] = self._parent(path, rel)
        directory, parent_exists = parent
        target = directory + name
        if not parent_exists:
            return target  # nothing can exist under a directory that does not
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return target
        except NotADirectoryError:
            return target  # a parent is a file: writing will fail and be reported
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"entry path {path!r} points at an existing symlink",
                                  path=self.archive)
        return target

    def _parent(self, path: str, rel: str) -> tuple[str, bool]:
        """The absolute directory (with a trailing separator) and whether it exists."""
        parts = rel.split("/") if rel else []
        prefix = ""
        exists = True
        for part in parts:
            prefix = f"{prefix}/{part}" if prefix else part
            if prefix not in self._dirs:
                self._dirs[prefix] = self._probe_dir(path, prefix)
            exists = self._dirs[prefix]
        return os.path.join(self.root, *parts, ""), exists

    def _probe_dir(self, path: str, rel: str) -> bool:
        try:
            st = os.lstat(os.path.join(self.root, rel))
        except (FileNotFoundError, NotADirectoryError):
            return False
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePathError(f"entry path {path!r} resolves outside {self.dest} "
                                  f"(through the symlink {rel!r})", path=self.archive)
        return stat.S_ISDIR(st.st_mode)

    def existing_dirs(self) -> list[str]:
        """The parent directories (absolute) of the targets asked for so far that exist."""
        return [d for d, exists in self._parents.values() if exists]

    def make_parent(self, path: str) -> None:
        """Create the missing parent directories of ``path`` (never through a symlink)."""
        rel = path.rpartition("/")[0]
        if self._dirs.get(rel):
            return
        self._parents.clear()  # their "exists" answers may be out of date now
        os.makedirs(os.path.join(self.root, rel), exist_ok=True)
        parts = rel.split("/")
        for i in range(len(parts)):
            prefix = "/".join(parts[: i + 1])
            if not self._dirs.get(prefix):
                if os.path.islink(os.path.join(self.root, prefix)):
                    raise UnsafePathError(f"{prefix!r} became a symlink during extract",
                                          path=self.archive)
                self._dirs[prefix] = True
