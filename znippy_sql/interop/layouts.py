"""The manifest of a Rust 0.9+ archive in this reader's terms (docs/interop.md, "Layouts").

From ``znippy-common`` 0.9.1 on, the Rust writer marks its reserved manifest rows with
``pkg_type = i8::MIN`` (-128; this project writes -1) and spells its section names
``__znippy_<name>__``. Five of them hold what this project's sections hold and are read as
those: ``__znippy_lookup__`` is ``__lookup__`` (the base columns, sorted by ``relative_path``
then ``chunk_seq``), ``__znippy_trie__`` is ``__trie__`` (an fst map of each path to its first
lookup row) and ``__znippy_meta__`` is ``__meta__`` (typed: :mod:`.meta`). Every other
reserved name keeps its spelling (``__znippy_delta__``, ``__znippy_fsmeta__``, the signature
and ``__gunnar_*`` sections). The manifest table itself (``Archive.manifest``, the ``manifest``
view) stays as written.
"""

from __future__ import annotations

from dataclasses import replace

from ..format.manifest import ManifestRow
from ..format.schema import (LOOKUP, META, RESERVED_PKG_TYPE, TRIE, GroupKey, is_reserved)
from ..format.schema import SIGN_ARCHIVE as OUR_SIGN_ARCHIVE
from ..format.schema import SIGN_ARTIFACTS as OUR_SIGN_ARTIFACTS

#: ``RESERVED_PKG_TYPE`` of the Rust writer from 0.9.1 on (``i8::MIN``)
RUST_RESERVED_PKG_TYPE = -128
#: Rust reserved names that mean one of this project's sections
SIGN_ARTIFACTS = "__znippy_sign_artifacts__"
SIGN_ARCHIVE = "__znippy_sign_archive__"
RENAMED = {"__znippy_lookup__": LOOKUP, "__znippy_trie__": TRIE, "__znippy_meta__": META,
           SIGN_ARTIFACTS: OUR_SIGN_ARTIFACTS, SIGN_ARCHIVE: OUR_SIGN_ARCHIVE}
DELTA = "__znippy_delta__"
FSMETA = "__znippy_fsmeta__"
#: the Rust 0.9/0.10 package-type ids of its plugins (``znippy_common::views``; this
#: project's numbers differ: docs/interop.md)
RUST_PKG_TYPES = {1: "rust", 2: "python", 3: "maven", 6: "npm", 7: "elf", 8: "rpm", 9: "deb",
                  11: "gem", 14: "conda"}
#: the reserved names a Rust 0.9+ archive may hold (``RESERVED_MODULES`` of 0.10.6)
RUST_SECTIONS = frozenset({*RENAMED, DELTA, FSMETA, SIGN_ARTIFACTS, SIGN_ARCHIVE,
                           "__gunnar_oid__", "__gunnar_graph__", "__gunnar_reach__",
                           "__gunnar_refs__", "__gunnar_secrets__"})


#: marks the second and later data sub-index of one group (see :func:`rust_rows`)
REPEAT = "\0repeat "


def rust_rows(rows: list[ManifestRow]) -> list[ManifestRow]:
    """``rows`` with each Rust 0.9+ reserved row as this reader names it (``pkg_type`` -1,
    the section names of :data:`RENAMED`); the rows of any other manifest unchanged.

    ``znippy append`` (0.9.13+) writes the appended rows and the carried ones as two data
    sub-indexes of the same group; the second and later are renamed ``<module_name>`` +
    :data:`REPEAT` + their number here, and :mod:`.delta` lays the archive anew with each
    group's sub-indexes as one."""
    if not any(r.key.pkg_type == RUST_RESERVED_PKG_TYPE for r in rows):
        return rows
    out = []
    seen: dict[GroupKey, int] = {}
    for row in rows:
        key = row.key
        if key.pkg_type == RUST_RESERVED_PKG_TYPE and is_reserved(key.module_name):
            name = RENAMED.get(key.module_name, key.module_name)
            row = replace(row, key=GroupKey(RESERVED_PKG_TYPE, key.repo, name))
        elif key in seen:
            seen[key] += 1
            row = replace(row, key=key._replace(module_name=f"{key.module_name}{REPEAT}"
                                                            f"{seen[key]}"))
        else:
            seen[key] = 0
        out.append(row)
    return out


def group_of(key: GroupKey) -> GroupKey:
    """The group a (possibly repeated, :func:`rust_rows`) data sub-index belongs to."""
    return key._replace(module_name=key.module_name.split(REPEAT, 1)[0])
