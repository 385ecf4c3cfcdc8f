"""Generation 0: a blob file of pushed packs and its journal → a static archive (FORMAT §6).

Order: the blob file is copied whole into a staging sibling first and the journal read second
(the blob file only grows, so every extent the journal names within the copied length is
there). One data row per live acked pack: ``objects.pack.<ordinal>``, ``compressed = false``,
BLAKE3 over the stored bytes. Retired packs and packs past the copied length are counted, not
rowed. The tail goes after the whole copied blob region through ``write_tail``; then the
staging file is renamed onto the archive's name and the directory fsynced. Nothing under the
archive's name is ever half written.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..format import b3 as blake3
import pyarrow as pa

from ..errors import FormatError, ZnippyError
from ..format.fsio import copy_range, fsync_dir
from ..format.schema import BASE_SCHEMA, GroupKey
from ..format.sections import ReservedSection
from ..write.tail import write_tail
from .journal import JournalState, read_journal
from .pack import ParsedPack, index_pack, read_object
from .sections import WALK_BOUND, git_sections

PACK_PREFIX = "objects.pack."


@dataclass(frozen=True)
class GitSealReport:
    """What one seal put on disk (counts taken from the journal and the sealed file)."""

    archive: str
    packs_sealed: int
    packs_retired: int
    packs_after_copy: int
    blob_bytes: int
    sealed_total_bytes: int
    objects: int
    commits: int


def pack_path(ordinal: int) -> str:
    return f"{PACK_PREFIX}{ordinal}"


class PackSet:
    """Objects of packs already parsed, readable by id: the external delta bases of the next
    pack (a REF delta may name an object of an earlier pack, as a thin push does). The id
    table is built at the first lookup (most imports never need one)."""

    def __init__(self) -> None:
        self._packs: list[tuple[memoryview, ParsedPack]] = []
        self._where: dict[bytes, tuple[memoryview, int, str]] = {}
        self._indexed = 0

    def add(self, view: memoryview, pack: ParsedPack) -> None:
        self._packs.append((view, pack))

    def __call__(self, oid: bytes) -> tuple[int, bytes] | None:
        for view, pack in self._packs[self._indexed:]:
            for o, offset in zip(pack.oids, pack.offsets):
                self._where.setdefault(o, (view, offset, pack.name))
        self._indexed = len(self._packs)
        hit = self._where.get(oid)
        if hit is None:
            return None
        view, offset, name = hit
        return read_object(view, offset, name=name, external=self)


def seal_generation_zero(blobs: str | os.PathLike[str], journal: str | os.PathLike[str] | None,
                         archive: str | os.PathLike[str],
                         reserved: Sequence[ReservedSection] = (), *, git: bool = True,
                         parsed: Mapping[int, ParsedPack] | None = None,
                         walk_bound: int = WALK_BOUND,
                         prefer: Collection[bytes] = ()) -> GitSealReport:
    """Seal the blob file and journal into ``archive``. ``git``: also write the three git
    sections, parsing each live pack (or taking it from ``parsed``, by blob offset)."""
    archive = os.fspath(archive)
    with _staged(archive) as staged:
        try:
            with open(blobs, "rb") as src, open(staged, "wb") as dst:
                copy_range(src.fileno(), dst.fileno(), os.fstat(src.fileno()).st_size)
        except (OSError, EOFError) as exc:
            raise ZnippyError(f"cannot copy the blob file into {staged}: "
                              f"{getattr(exc, 'strerror', None) or exc}",
                              path=os.fspath(blobs)) from None
        blob_bytes = os.path.getsize(staged)
        state = JournalState.of(read_journal(journal) if journal is not None else [])
        _check_order(state, blob_bytes, journal)
        return _seal_into(staged, archive, blob_bytes, state, reserved, git=git,
                          parsed=parsed or {}, every=walk_bound, prefer=prefer)


def seal_packs(packs: Sequence[tuple[bytes | memoryview, ParsedPack]],
               archive: str | os.PathLike[str], reserved: Sequence[ReservedSection] = (), *,
               walk_bound: int = WALK_BOUND, prefer: Collection[bytes] = ()) -> GitSealReport:
    """Packs already parsed (``git import``) → ``archive``, without a blob file or journal:
    the same bytes :func:`seal_generation_zero` writes after the packs were pushed in this
    order (the packs back to back from offset 0, then the tail)."""
    archive = os.fspath(archive)
    with _staged(archive) as staged:
        extents: list[tuple[int, int]] = []
        at = 0
        try:
            with open(staged, "wb") as fh:
                for data, _pack in packs:
                    fh.write(data)
                    extents.append((at, len(data)))
                    at += len(data)
        except OSError as exc:
            raise ZnippyError(f"cannot write the staging file {staged}: "
                              f"{exc.strerror or exc}", path=archive) from None
        parsed = {e[0]: p for e, (_d, p) in zip(extents, packs)}
        return _seal_into(staged, archive, at, JournalState(extents, frozenset()), reserved,
                          git=True, parsed=parsed, every=walk_bound, prefer=prefer)


@contextmanager
def _staged(archive: str) -> Iterator[str]:
    """A staging name beside ``archive``: renamed onto it (and the folder fsynced) when the
    block returns, removed when it raises."""
    staged = f"{archive}.seal-{os.getpid()}-{time.monotonic_ns()}"
    try:
        yield staged
        os.replace(staged, archive)
    except BaseException:
        if os.path.exists(staged):
            os.unlink(staged)
        raise
    fsync_dir(archive)


def _check_order(state: JournalState, blob_bytes: int,
                 journal: str | os.PathLike[str] | None) -> None:
    """Acked packs are appended: each live pack starts where the one before it ended or later
    (a journal whose extents overlap does not describe this blob file)."""
    end = 0
    for i, (offset, size) in state.live():
        if offset + size > blob_bytes:
            continue  # acked after the blob file was copied: counted in ``after``
        if offset < end:
            raise FormatError(f"pack {i} at [{offset}, {offset + size}) overlaps the pack "
                              f"before it (which ends at {end}): this journal does not "
                              "describe the blob file", path=journal)
        end = offset + size


def _seal_into(staged: str, archive: str, blob_bytes: int, state: JournalState,
               reserved: Sequence[ReservedSection], *, git: bool,
               parsed: Mapping[int, ParsedPack], every: int,
               prefer: Collection[bytes]) -> GitSealReport:
    live = [(i, e) for i, e in state.live() if e[0] + e[1] <= blob_bytes]
    retired = sum(1 for e in state.packs if e[0] in state.retired)
    after = len(state.live()) - len(live)
    with open(staged, "r+b") as fh:
        view = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)) if blob_bytes \
            else memoryview(b"")
        try:
            rows = pa.table({
                "relative_path": pa.array([pack_path(i) for i, _ in live], pa.utf8()),
                "chunk_seq": pa.array([0] * len(live), pa.uint32()),
                "fdata_offset": pa.array([0] * len(live), pa.uint64()),
                "compressed": pa.array([False] * len(live), pa.bool_()),
                "uncompressed_size": pa.array([s for _, (_, s) in live], pa.uint64()),
                "blob_offset": pa.array([o for _, (o, _) in live], pa.uint64()),
                "blob_size": pa.array([s for _, (_, s) in live], pa.uint64()),
                "checksum": pa.array([blake3.blake3(view[o:o + s]).digest()
                                      for _, (o, s) in live], pa.binary(32)),
            }, schema=BASE_SCHEMA)
            counts = [0, 0]
            builders = []
            if git:
                def build(lookup: pa.Table) -> list[ReservedSection]:
                    row_of = {p: r for r, p in enumerate(lookup.column("relative_path")
                                                         .to_pylist())}
                    packs = _parse_live(view, live, parsed)
                    made = git_sections([(row_of[pack_path(i)], p) for i, p in packs],
                                        walk_bound=every, prefer=prefer)
                    counts[0], counts[1] = made.objects, made.commits
                    return made.sections
                builders.append(build)
            groups = {GroupKey(0, "", ""): rows} if live else {}
            info = write_tail(fh, blob_bytes, groups, sections=reserved,
                              section_builders=builders)
        finally:
            del view
    return GitSealReport(archive, len(live), retired, after, blob_bytes, info.file_size,
                      counts[0], counts[1])


def _parse_live(view: memoryview, live: list[tuple[int, tuple[int, int]]],
                parsed: Mapping[int, ParsedPack]) -> list[tuple[int, ParsedPack]]:
    """Every live pack parsed, in ordinal order; earlier packs resolve later REF deltas."""
    bases = PackSet()
    out = []
    for ordinal, (offset, size) in live:
        pack_view = view[offset:offset + size]
        pack = parsed.get(offset)
        if pack is None:
            pack = index_pack(pack_view, name=pack_path(ordinal), external=bases)
        pack.name = pack_path(ordinal)
        bases.add(pack_view, pack)
        out.append((ordinal, pack))
    return out
