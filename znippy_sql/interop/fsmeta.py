"""The Rust tool's ``__znippy_fsmeta__`` (0.9.15+, ``fsmeta.rs``) as POSIX facts.

An Arrow IPC stream of ``relative_path: utf8, kind: uint8, mode: uint32``: kind 0 is a
directory (every directory of the tree, so an empty one survives), kind 1 a file whose mode is
not the tree's usual one, kind 2 (empty path) the mode every other file has; ``mode`` is
``st_mode & 0o7777``, 0 for "not recorded"; an unknown kind is skipped. Read here as the
``posix.mode`` facts of docs/posix.md (type bits added: ``40755`` for a directory,
``100644`` for a file), so ``extract`` makes the recorded directories and ``extract
--preserve`` sets the modes.
"""

from __future__ import annotations

import stat
from typing import Any

import pyarrow as pa

from ..errors import FormatError
from ..format import build
from ..format.ipc import read_table
from ..format.schema import META_SCHEMA, RESERVED_PKG_TYPE, GroupKey
from .layouts import FSMETA

#: an open archive (``read.core.ArchiveCore``), not imported: the reader calls into this
#: package, so it cannot be imported back (tests/test_layers.py)
Archive = Any

MODE_KEY = "posix.mode"
DIR, FILE, DEFAULT_FILE = 0, 1, 2


def fsmeta_facts(archive: "Archive") -> pa.Table | None:
    """``posix.mode`` rows (``META_SCHEMA``) of the archive's ``__znippy_fsmeta__``; None
    when it has none."""
    if not archive.has_section(FSMETA):
        return None
    buf = archive.range_bytes(GroupKey(RESERVED_PKG_TYPE, "", FSMETA), FSMETA)
    table = read_table(buf, FSMETA, archive.path)
    names = table.schema.names
    if not {"relative_path", "kind", "mode"} <= set(names):
        raise FormatError(f"{FSMETA} has columns {names}, not relative_path, kind, mode",
                          path=archive.path)
    cols = table.to_pydict()
    modes: dict[str, int] = {}
    default = 0
    for path, kind, mode in zip(cols["relative_path"], cols["kind"], cols["mode"]):
        if path is None or kind is None or not mode:
            continue
        if kind == DIR and path:
            modes[path] = stat.S_IFDIR | (mode & 0o7777)
        elif kind == FILE and path:
            modes[path] = stat.S_IFREG | (mode & 0o7777)
        elif kind == DEFAULT_FILE:
            default = mode & 0o7777
    if default:
        for path in archive.first_paths():
            modes.setdefault(path, stat.S_IFREG | default)
    paths = sorted(modes, key=lambda p: p.encode("utf-8"))
    return build.table({"relative_path": paths, "key": [MODE_KEY] * len(paths),
                        "value": [f"{modes[p]:o}" for p in paths]}, META_SCHEMA)
