"""Receiving packs: each pack is parsed and checked whole before a byte of it is appended, so
a bad pack is refused with nothing acked; the parsed objects are kept for the seal."""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

from ..format.sections import ReservedSection
from .journal import Extent, JournalState, read_journal
from .pack import ParsedPack, index_pack
from .seal import GitSealReport, PackSet, pack_path, seal_generation_zero
from .sections import WALK_BOUND
from .writers import Faults, SafeWriter


class Receiver:
    """A blob file that takes pushes through a :class:`SafeWriter` (its lock, its journal).

    The packs already acked are parsed at open: a new pack's REF deltas may name their
    objects (a thin push), and the seal needs them anyway.
    """

    def __init__(self, blobs: str | os.PathLike[str], *, faults: Faults = Faults()) -> None:
        self.writer = SafeWriter(blobs, faults=faults)
        self.blobs = self.writer.path
        self.bases = PackSet()
        self.parsed: dict[int, ParsedPack] = {}
        try:
            state = JournalState.of(read_journal(self.writer.journal))
            self._ordinal = len(state.packs)
            for ordinal, (offset, size) in state.live():
                data = self.writer.pread(offset, size)
                self._keep(offset, memoryview(data),
                           index_pack(data, name=pack_path(ordinal), external=self.bases))
        except BaseException:
            self.writer.close()
            raise

    def _keep(self, offset: int, view: memoryview, pack: ParsedPack) -> None:
        self.bases.add(view, pack)
        self.parsed[offset] = pack

    def push(self, data: bytes | memoryview, *, name: str | None = None) -> Extent:
        """Check ``data`` as a pack (a :class:`PackError` names the pack and the object),
        then append it durably; returns its extent once it is acked."""
        label = name or pack_path(self._ordinal)
        pack = index_pack(data, name=label, external=self.bases)
        extent = self.writer.append(data)
        self._ordinal += 1
        self._keep(extent[0], memoryview(data), pack)
        return extent

    def seal(self, archive: str | os.PathLike[str], reserved: Sequence[ReservedSection] = (),
             *, walk_bound: int = WALK_BOUND, prefer: Collection[bytes] = ()) -> GitSealReport:
        return seal_generation_zero(self.blobs, self.writer.journal, archive, reserved,
                                    parsed=self.parsed, walk_bound=walk_bound,
                                    prefer=prefer)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
