"""The Rust pack tier (``znippy-plugin-git`` 0.2.4, ``GitIndexBuilder::pack_tier``) as an
object store for this project's git commands (``git/objects.py``).

What the library writes (``object.rs`` ``pack_path_kind``, ``sections.rs`` ``pack_tier``):
the repository's packs as data entries under git's own names, ``pack-<id>.pack`` (magic
``PACK``) and ``pack-<id>.idx`` (git's ``.idx`` version 2, magic ``\\xfftOc``), ``<id>`` 40
or 64 lowercase hex, at the top level or under a folder; **no** ``__gunnar_oid__``,
``__gunnar_graph__`` or ``__gunnar_reach__`` (the ``.idx`` is the oid index); the push logs
``__gunnar_refs__``/``__gunnar_secrets__`` when the writer handed them in (read by
``git/refs.py`` as for the loose tier).

Here each pack entry is read whole (``Archive.read``: any codec, any chunking) and indexed by
the core, as ``git import`` indexes a pack (``corelib.git_index_pack``: from its ``.idx``
when that describes the pack, else parsed whole); the core then lays the objects out as this
project's sections (``corelib.git_sections``: oid index with positions, graph, bitmaps), held
in memory. :class:`PackTier` answers with them in the shapes ``GitObjects`` reads for this
project's own archives, so every command above is the same code. A REF delta whose base is
in another pack (a thin pack) is refused: the library's ``repack()`` writes self-contained
packs. SHA-256 packs are refused: the commands hash with SHA-1.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import corelib
from ..errors import FormatError, PackError
from ..format.gitindex import OidIndex, encode_sorted

__all__ = ["PackTier", "pack_entries"]

_NAME = re.compile(r"(?:.*/)?pack-([0-9a-f]{40}|[0-9a-f]{64})\.(pack|idx)")
PACK_MAGIC = b"PACK"
IDX_V2 = b"\xfftOc\x00\x00\x00\x02"
#: as ``git/sections.py``: a commit is stored when completing it walks more commits
WALK_BOUND = 1000


def pack_entries(lookup: pa.Table) -> list[tuple[int, str, str | None]]:
    """``(lookup row, .pack name, .idx name or None)`` of the tier's packs, by name; empty
    when the archive holds none (the first row of each file: its chunk 0)."""
    if lookup.num_rows == 0:  # (pyarrow 25's indices_nonzero crashes on a chunkless column)
        return []
    paths = lookup.column("relative_path").combine_chunks()
    hits = pc.indices_nonzero(pc.fill_null(pc.or_(pc.ends_with(paths, ".pack"),
                                                  pc.ends_with(paths, ".idx")), False))
    first: dict[str, int] = {}
    for row, name in zip(hits.to_pylist(), paths.take(hits).to_pylist()):
        first.setdefault(name, row)
    out = []
    for name, row in sorted(first.items()):
        hit = _NAME.fullmatch(name)
        if hit and hit.group(2) == "pack":
            idx = name[:-len("pack")] + "idx"
            out.append((row, name, idx if idx in first else None))
    return out


class PackTier:
    """The packs of a Rust pack-tier archive, indexed here: ``index`` (an ``OidIndex`` of
    version 2), :meth:`pack` (an entry's bytes by lookup row), :meth:`graph`,
    :meth:`bitmaps`."""

    def __init__(self, archive: Any) -> None:
        self.path: str = archive.path
        found = pack_entries(archive.lookup)
        if not found:
            raise FormatError("no git sections and no pack-<id>.pack entry", path=self.path)
        self._views: dict[int, memoryview] = {}
        cores = []
        for row, name, idx_name in found:
            if len(_NAME.fullmatch(name).group(1)) != 40:  # type: ignore[union-attr]
                raise FormatError(f"{name}: a SHA-256 pack; the git commands read SHA-1 ones",
                                  path=self.path)
            data = memoryview(archive.read(name))
            if bytes(data[:4]) != PACK_MAGIC:
                raise FormatError(f"entry {name} is not a git pack (no PACK magic)",
                                  path=self.path)
            idx = archive.read(idx_name) if idx_name else None
            if idx is not None and idx[:8] != IDX_V2:
                raise FormatError(f"entry {idx_name} is not a git pack index version 2",
                                  path=self.path)
            try:
                core = corelib.git_index_pack(data, idx, name=name)
            except PackError as exc:  # the core names the entry; the archive is named here
                raise PackError(exc.problem, path=self.path) from None
            if core.idx_mismatch is not None:
                raise FormatError(f"entry {idx_name} does not describe {name}: "
                                  f"{core.idx_mismatch}", path=self.path)
            self._views[row] = data
            cores.append((core, row))
        self._cols = corelib.git_sections(cores, b"", WALK_BOUND)
        self.index = self._oid_index()

    def _u(self, key: str, dtype: str) -> np.ndarray:
        return np.frombuffer(self._cols[key], dtype=dtype)

    def _oid_index(self) -> OidIndex:
        ids = self._u("ids", "u1").reshape(-1, 20)
        data = encode_sorted(ids, self._u("pack_rows", "<u4"), self._u("offsets", "<u8"),
                             self._u("types", "u1"), order=self._u("order", "<u4"))
        return OidIndex(data, path=self.path)

    def pack(self, row: int) -> memoryview:
        """The bytes of the ``.pack`` entry at this lookup row."""
        view = self._views.get(row)
        if view is None:
            raise FormatError(f"no pack entry at lookup row {row}", path=self.path)
        return view

    def graph(self) -> pa.Table:
        """The commits as ``__gunnar_graph__`` (``docs/git-sections.md``), with the count
        of absent objects in its metadata."""
        c = self._cols
        ids = pa.binary(20)

        def fixed(raw: bytes) -> pa.Array:
            return pa.FixedSizeBinaryArray.from_buffers(ids, len(raw) // 20,
                                                        [None, pa.py_buffer(raw)])
        parents = pa.ListArray.from_arrays(pa.array(self._u("parent_offsets", "<i4")),
                                           fixed(c["parent_ids"]))
        table = pa.table({
            "oid": fixed(c["commit_ids"]), "parents": parents, "tree": fixed(c["tree_of"]),
            "generation": pa.array(self._u("generation", "<u4")),
            "commit_time": pa.array(self._u("times", "<i8")),
            "corrected_date": pa.array(self._u("corrected", "<i8")),
            "position": pa.array(self._u("position", "<u4")),
            "block": pa.array(self._u("block", "<u4"))})
        return table.replace_schema_metadata(
            {"znippy.git.absent_objects": str(int(c["absent"]))})

    def bitmaps(self) -> dict[bytes, bytes]:
        """commit id → its serialized bitmap (over positions), of the selected commits."""
        ids, data = self._cols["reach_ids"], self._cols["reach_data"]
        bounds = self._u("reach_offsets", "<i4").tolist()
        return {ids[20 * i:20 * i + 20]: data[bounds[i]:bounds[i + 1]]
                for i in range(len(bounds) - 1)}
