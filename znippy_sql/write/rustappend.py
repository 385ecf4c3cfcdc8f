"""Appending to an archive written for the Rust readers (``compat``) keeps its layout.

An archive written with ``compat="rust-0.8"`` or ``"rust-0.10"`` records the mode on every data
sub-index (``znippy.compat``, :mod:`.compat`); an append follows it, so the real ``znippy
verify``, ``decompress``, ``list`` and ``get`` still take the result (docs/interop.md):

- the new groups become what that mode writes before they are merged with the old ones
  (:func:`rust_groups`: the Rust plugins' groups and columns for ``rust-0.10``, then one schema
  for old and new rows, since the Rust reader concatenates the sub-indexes by position);
- ``rust-0.10``: the walk's modes and directories go to ``__znippy_fsmeta__``, merged with the
  archive's (:func:`merged_fsmeta`), not to ``__meta__``; ``__meta__`` stays the typed
  ``__znippy_meta__`` and a re-signature is over the Rust digests (``write/tail.py``);
- ``rust-0.8``: no facts are recorded (the Rust 0.8 reader reads every section as an index),
  ``meta=`` and ``signer=`` are refused as by the one-shot writer.

The rows are this writer's (not the Rust ``append``'s two sub-indexes of group ``(0, "", "")``):
each group keeps its key, as a one-shot write of the live files gives it.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from ..errors import ZnippyError
from ..format.schema import GroupKey
from .compat import COMPAT_KEY, Compat, one_schema
from .posix import PosixFacts
from .rust10 import DEFAULT_FILE, DIR, FILE, RUST10, fsmeta_table, rust_plugin_groups


def archive_compat(path: str, metadata: Mapping[str, str], given: str | None
                   ) -> Compat | None:
    """The ``compat`` mode of an append: the archive's own; another one given is refused."""
    own = metadata.get(COMPAT_KEY)
    if own is not None and own not in ("rust-0.8", RUST10):
        raise ZnippyError(f"archive was written with compat={own!r}, a mode this version does "
                          "not write: append with the tool that wrote it", path=path)
    if given is not None and given != own:
        held = f"compat={own!r}" if own else "this project's layout"
        raise ZnippyError(f"archive is in {held}; appending with compat={given!r} would mix "
                          "two layouts (compat is chosen when the archive is created)",
                          path=path)
    return own  # type: ignore[return-value]


def rust_groups(old: Mapping[GroupKey, pa.Table], new: Mapping[GroupKey, pa.Table],
                compat: Compat) -> tuple[dict[GroupKey, pa.Table], dict[GroupKey, pa.Table]]:
    """``old`` and ``new`` rows as ``compat`` writes them: ``new`` module groups as the Rust
    plugins' (``rust-0.10``), then every table under the one schema of them all."""
    fresh = rust_plugin_groups(dict(new)) if compat == RUST10 else dict(new)
    tables = list(old.items()) + list(fresh.items())
    # one_schema wants distinct keys: number them, keeping the group order of its field list
    keyed = {GroupKey(k.pkg_type, k.repo, f"{k.module_name}\0{i}"): t
             for i, (k, t) in enumerate(tables)}
    conformed = list(one_schema(keyed).values())
    return (dict(zip(old, conformed[:len(old)])), dict(zip(fresh, conformed[len(old):])))


def merged_fsmeta(old: pa.Table | None, live: Iterable[str], facts: PosixFacts | None
                  ) -> pa.Table | None:
    """``__znippy_fsmeta__`` of the files ``live`` after the append: each file's mode from the
    walk when this append walked it, else from the archive's rows (its own row, else the
    archive's usual file mode); the archive's directories, then the walked ones."""
    dirs: dict[str, int] = {}
    files: dict[str, int] = {}
    default: int | None = None
    if old is not None:
        for path, kind, mode in zip(*(old.column(n).to_pylist()
                                      for n in ("relative_path", "kind", "mode"))):
            if kind == DIR and path:
                dirs[path] = mode
            elif kind == FILE and path:
                files[path] = mode
            elif kind == DEFAULT_FILE:
                default = mode
    walked: dict[str, int] = {}
    for path, mode in zip(facts.paths, facts.modes) if facts is not None else ():
        if stat.S_ISDIR(mode):
            dirs[path] = mode & 0o7777
        elif stat.S_ISREG(mode):
            walked[path] = mode & 0o7777
    rows = []
    for path in live:
        mode = walked.get(path, files.get(path, default))
        if mode is not None:
            rows.append((path, mode))
    return fsmeta_table(rows, list(dirs.items()))


def live_paths(groups: Mapping[GroupKey, pa.Table]) -> list[str]:
    """Every file of ``groups`` once (its first chunk's row)."""
    out: list[str] = []
    for table in groups.values():
        seqs = table.column("chunk_seq").to_pylist()
        out += [p for p, s in zip(table.column("relative_path").to_pylist(), seqs) if s == 0]
    return out


def follow_given(compat: Compat | None, given: dict[str, Any]) -> dict[str, Any]:
    """The write keywords of an append to a ``compat`` archive: ``rust-0.8`` records no
    facts (``posix`` off, as its one-shot writer refuses them)."""
    if compat == "rust-0.8":
        return {**given, "posix": False}
    return given
