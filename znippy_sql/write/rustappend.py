"""Appending to an archive written for the Rust readers (``compat``) keeps its layout.

An archive written with ``compat="rust-0.8"``, ``"rust-0.9"`` or ``"rust-0.10"`` records the
mode on every data sub-index (``znippy.compat``, :mod:`.compat`); an append follows it, so the
real ``znippy verify``, ``decompress``, ``list`` and ``get`` still take the result
(docs/interop.md):

- the new groups become what that mode writes before they are merged with the old ones
  (:func:`rust_groups`: the Rust plugins' groups and columns for ``rust-0.10``, then one schema
  for old and new rows, since the Rust reader concatenates the sub-indexes by position);
- ``rust-0.10``: the walk's modes and directories go to ``__znippy_fsmeta__``, merged with the
  archive's (:func:`merged_fsmeta`), not to ``__meta__``; ``__meta__`` stays the typed
  ``__znippy_meta__`` and a re-signature is over the Rust digests (``write/tail.py``);
- ``rust-0.8``: no facts are recorded (the Rust 0.8 reader reads every section as an index),
  ``meta=`` and ``signer=`` are refused as by the one-shot writer; ``rust-0.9``: no facts
  either (``meta=`` refused), a re-signature over the Rust digests.

The rows are this writer's (not the Rust ``append``'s two sub-indexes of group ``(0, "", "")``):
each group keeps its key, as a one-shot write of the live files gives it.

An archive the real Rust tool wrote (:func:`written_layout`: no section digests of this
project, ``znippy_format_version`` 3 on its data sub-indexes) is appended to the same way, in
the layout it has: ``rust-0.10`` when its manifest has the Rust reserved rows (``pkg_type``
-128: the 0.9.1+ lookup and trie, the typed meta, ``__znippy_fsmeta__``), ``rust-0.8`` when it
has none. Its groups and plugin columns stay as written (a Rust ``append``'s repeated
sub-indexes of ``(0, "", "")`` become one); a file given no package type joins the archive's
one group (:func:`home_group`: the ``--format`` of its compress, 26 generic, 1 rust, ...), as
the Rust ``append`` keeps every file in one group; the typed meta keeps each old fact's value
kind (:func:`~znippy_sql.interop.meta.as_typed`). A signed one is refused unless re-signed or
its signatures are dropped, as any signed archive (``write/append.py``). One of a release
before 0.9.15 (no ``__znippy_fsmeta__``) gets no section its readers do not know
(:func:`check_early`), nor does any later append of ours (:data:`EARLY_KEY`).
"""

from __future__ import annotations

import stat
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from ..errors import ZnippyError
from ..format.schema import GroupKey
from ..interop.layouts import FSMETA, RUST_RESERVED_PKG_TYPE
from ..read.foreign import RUST_VERSION_KEY, own_writer
from .compat import COMPAT_KEY, COMPAT_MODES, Compat, one_schema
from .posix import PosixFacts
from .rust10 import (DEFAULT_FILE, DIR, FILE, RUST10, RUST_INDEXED, fsmeta_table,
                     rust_plugin_groups)


def written_layout(archive: Any, metadata: Mapping[str, str]) -> tuple[str | None, bool]:
    """The ``compat`` layout ``archive`` (open, ``metadata`` its data sub-indexes' schema
    metadata) is in, and whether the real Rust tool wrote it: the mode recorded by this
    project's writer; else, for an archive of the Rust tool (no section digests of ours, its
    ``znippy_format_version`` 3), ``rust-0.10`` when its manifest has reserved rows at
    ``pkg_type`` -128 (0.9.1+), ``rust-0.8`` when not; else None (this project's layout, or
    a later Rust release: appended to in this project's layout)."""
    own = metadata.get(COMPAT_KEY)
    if own is not None:
        return own, False
    if own_writer(archive) or metadata.get(RUST_VERSION_KEY) != "3":
        return None, False
    rust10 = RUST_RESERVED_PKG_TYPE in archive.manifest.column("pkg_type").to_pylist()
    return (RUST10 if rust10 else "rust-0.8"), True


#: recorded on the data sub-indexes by an append of ours to such an early archive: the next
#: append, which no longer takes the archive for the real tool's (it carries our compat mark),
#: still writes no ``__znippy_fsmeta__`` (its readers would panic on one)
EARLY_KEY = "znippy.rust.pre_fsmeta"


def check_early(path: str, meta: Any, signer: Any, *, signed: bool, has_meta: bool = False
                ) -> None:
    """Refuse what an archive the real tool wrote before 0.9.15 cannot hold: it has the
    0.9.1+ layout but no ``__znippy_fsmeta__`` (every compress since writes one), and the
    readers of those releases take a reserved section they do not know for a data sub-index
    (0.9.5: "concat sub-indexes: ... UInt32, UInt8" on an fsmeta): no ``meta`` unless it
    has its typed ``__znippy_meta__`` already (``has_meta``: 0.9.9 writes one and reads
    it), no signatures unless it was signed already (0.9.8+). The walk's modes are not
    recorded for it either (``write/append.py``)."""
    given = [what for what, value in (("meta", None if has_meta else meta),
                                      ("a signer", None if signed else signer)) if value]
    if given:
        raise ZnippyError(f"archive was written by a znippy before 0.9.15 (it has no "
                          f"{FSMETA}), whose readers take a section they do not know for "
                          f"data: {', '.join(given)} cannot be written to it", path=path)


def home_group(groups: Iterable[GroupKey]) -> GroupKey | None:
    """The group of an archive the real tool wrote that new files without a package type
    join: its one data group (None when it has several)."""
    keys = list(groups)
    return keys[0] if len(keys) == 1 else None


def at_home(key: GroupKey, home: GroupKey | None) -> GroupKey:
    """``key`` of a new group, ``home`` for a group of files given no package type."""
    if home is not None and key == GroupKey(0, home.repo, ""):
        return home
    return key


def archive_compat(path: str, own: str | None, given: str | None, *, real: bool = False
                   ) -> Compat | None:
    """The ``compat`` mode of an append: the archive's own (``own``, :func:`written_layout`;
    ``real``: the real Rust tool wrote it); another one given is refused."""
    if own is not None and own not in COMPAT_MODES:
        raise ZnippyError(f"archive was written with compat={own!r}, a mode this version does "
                          "not write: append with the tool that wrote it", path=path)
    if given is not None and given != own:
        held = (f"the {own} layout of the real znippy" if real else f"compat={own!r}") \
            if own else "this project's layout"
        raise ZnippyError(f"archive is in {held}; appending with compat={given!r} would mix "
                          "two layouts (compat is chosen when the archive is created)",
                          path=path)
    return own  # type: ignore[return-value]


def rust_groups(old: Mapping[GroupKey, pa.Table], new: Mapping[GroupKey, pa.Table],
                compat: Compat, home: GroupKey | None = None
                ) -> tuple[dict[GroupKey, pa.Table], dict[GroupKey, pa.Table]]:
    """``old`` and ``new`` rows as ``compat`` writes them: ``new`` module groups as the Rust
    plugins' (``rust-0.10``), files of no package type in ``home`` (:func:`at_home`), then
    every table under the one schema of them all."""
    fresh = rust_plugin_groups(dict(new), compat) if compat in RUST_INDEXED else dict(new)
    tables = list(old.items()) + [(at_home(k, home), t) for k, t in fresh.items()]
    # one_schema wants distinct keys: number them, keeping the group order of its field list
    keyed = {GroupKey(k.pkg_type, k.repo, f"{k.module_name}\0{i}"): t
             for i, (k, t) in enumerate(tables)}
    conformed = list(one_schema(keyed).values())
    added: dict[GroupKey, pa.Table] = {}
    for (key, _), table in zip(tables[len(old):], conformed[len(old):]):
        added[key] = pa.concat_tables([added[key], table]) if key in added else table
    return dict(zip(old, conformed[:len(old)])), added


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
    facts (``posix`` off, as its one-shot writer refuses them), nor does ``rust-0.9``."""
    if compat in ("rust-0.8", "rust-0.9"):
        return {**given, "posix": False}
    return given
