"""What a ``relative_path`` may be (FORMAT §3), checked on write and again before extract."""

from __future__ import annotations

import os
import re

from .errors import UnsafePathError

MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
_DRIVE = re.compile(r"^[A-Za-z]:")


def check_relative_path(path: str, *, archive: str | None = None) -> str:
    """Return ``path`` if it is a plain relative ``/``-path, else raise UnsafePathError."""
    def bad(why: str) -> UnsafePathError:
        return UnsafePathError(f"unsafe entry path {path!r}: {why}", path=archive)

    if not isinstance(path, str) or not path:
        raise bad("empty")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
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
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise bad(f"a component longer than {MAX_NAME_BYTES} bytes")
    return path


def contained_target(dest: str, path: str, *, archive: str | None = None) -> str:
    """The absolute target for ``path`` under ``dest``; refuses anything that would escape."""
    check_relative_path(path, archive=archive)
    root = os.path.realpath(dest)
    target = os.path.join(root, *path.split("/"))
    parent = os.path.realpath(os.path.dirname(target))
    if parent != root and not parent.startswith(root + os.sep):
        raise UnsafePathError(f"entry path {path!r} resolves outside {dest}", path=archive)
    if os.path.islink(target):
        raise UnsafePathError(f"entry path {path!r} points at an existing symlink", path=archive)
    return target
