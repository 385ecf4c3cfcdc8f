"""Generation 0: a blob file of pushed packs and its journal → a static archive (FORMAT §6).

Order: the blob file is copied whole into a staging sibling (``write/staging.py``: those a
killed seal or import left are removed first) and the journal read second
(the blob file only grows, so every extent the journal names within the copied length is
there). One data row per live acked pack: ``objects.pack.<ordinal>``, ``compressed = false``,
BLAKE3 over the stored bytes. Retired packs and packs past the copied length are counted, not
rowed. The tail goes after the whole copied blob region, written by the core
(``native/src/git/seal.rs``: the packs' data sub-index, ``__lookup__``, ``__trie__``, the git
sections, the sections given, the manifest and the footer, as Arrow IPC streams it writes
itself, so ``git import`` never loads pyarrow); then the staging file is renamed onto the
archive's name and the directory fsynced. Nothing under the archive's name is ever half
written.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO

from .. import corelib
from ..format import b3 as blake3
from ..errors import FormatError, ZnippyError
from ..format.fsio import copy_range, write_all
from ..write.staging import Staging
from .pack import ParsedPack, index_pack, read_object
from .sections import WALK_BOUND

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..format.sections import ReservedSection
    from .journal import JournalState

#: a section as the core writes it: name, Arrow IPC stream (or raw bytes), rows (0: raw)
Encoded = tuple[str, bytes, int]
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
    from .journal import JournalState, read_journal

    archive = os.fspath(archive)
    sections = encode_sections(reserved)
    with Staging(archive) as staging:
        staged = staging.name
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
        live = [(i, e) for i, e in state.live() if e[0] + e[1] <= blob_bytes]
        retired = sum(1 for e in state.packs if e[0] in state.retired)
        with open(staged, "r+b") as fh:
            report = _seal_into(fh, archive, blob_bytes, live, sections, git=git,
                                parsed=parsed or {}, every=walk_bound, prefer=prefer,
                                retired=retired, after=len(state.live()) - len(live))
        staging.commit()
    return report


def encode_sections(reserved: Sequence[ReservedSection]) -> list[Encoded]:
    """The sections a push seal is given, checked (``check_sections``) and encoded in tail
    order: ``__meta__`` and ``__gunnar_refs__`` of their exact schemas by the core (the
    encoder ``git import`` uses, so both paths write the same bytes), other tables by
    pyarrow (plain streams, as ``write/tail.py`` writes them), bytes as they are."""
    import pyarrow as pa

    from ..format.ipc import stream_bytes
    from ..format.schema import GIT_REFS, META, META_SCHEMA, RAW_SECTIONS, section_rank
    from ..format.sections import check_sections
    from .refs import refs_schema

    check_sections(reserved)
    out: list[Encoded] = []
    for s in sorted(reserved, key=lambda s: section_rank(s.name)):
        payload = s.payload
        if not isinstance(payload, pa.Table):
            out.append((s.name, bytes(payload), 0))
            continue
        cols = payload.to_pydict()
        if s.name == META and payload.schema.equals(META_SCHEMA, check_metadata=True):
            data = corelib.meta_stream(cols["relative_path"], cols["key"], cols["value"])
        elif s.name == GIT_REFS and payload.schema.equals(refs_schema(), check_metadata=True):
            data = corelib.git_refs_stream(cols["name"], cols["target"], cols["peeled"],
                                           cols["symbolic"])
        else:
            data = stream_bytes(payload)
        out.append((s.name, data, 0 if s.name in RAW_SECTIONS else payload.num_rows))
    return out


class StagedPacks:
    """Packs written into a staging sibling of ``archive`` by one background thread while the
    caller indexes them (``git import``): each pack written where the one before it ended,
    its BLAKE3 taken, and the whole region flushed (``fdatasync``) before :meth:`seal` writes
    the tail — so the tail's fsync has only the tail left to flush. The bytes written are
    the caller's (read once), not read again. Used as a context manager: on an error the
    staging file is removed; :meth:`seal` renames it onto ``archive``. The packs then lie
    from offset 0, back to back, as :func:`seal_generation_zero` seals them after the same
    packs were pushed in this order: the same bytes."""

    def __init__(self, archive: str | os.PathLike[str]) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.archive = os.fspath(archive)
        self._staging = Staging(self.archive)
        self._staging.start()
        self.staged = self._staging.name
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="znippy-stage")
        self._jobs: list[Future[bytes]] = []
        self._extents: list[tuple[int, int]] = []
        self._end = 0
        try:
            self._fd = os.open(self.staged, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            self._pool.shutdown()
            raise ZnippyError(f"cannot write the staging file {self.staged}: "
                              f"{exc.strerror or exc}", path=self.archive) from None

    def __enter__(self) -> StagedPacks:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._staging.discard()

    def add(self, data: bytes | memoryview, source: BinaryIO | None = None) -> None:
        """Queue one pack's bytes (kept unchanged until :meth:`seal`). ``source``: the open
        file ``data`` maps (whole), which this takes over and closes: its bytes are copied
        file to file in the kernel (``copy_range``: ``copy_file_range``, read and write only
        where the kernel refuses), not through this process."""
        at, size = self._end, len(data)
        self._extents.append((at, size))
        self._end += size
        self._jobs.append(self._pool.submit(self._write, memoryview(data), at, source))

    def _write(self, view: memoryview, at: int, source: BinaryIO | None) -> bytes:
        try:
            if source is None:
                write_all(self._fd, view, at)
            else:
                with source:
                    copy_range(source.fileno(), self._fd, len(view), 0, at)
        except (OSError, EOFError) as exc:
            raise ZnippyError(f"cannot write the staging file {self.staged}: "
                              f"{getattr(exc, 'strerror', None) or exc}",
                              path=self.archive) from None
        return bytes(blake3.blake3(view).digest())

    def seal(self, parsed: Sequence[ParsedPack], sections: Sequence[Encoded] = (),
             *, walk_bound: int = WALK_BOUND, prefer: Collection[bytes] = ()) -> GitSealReport:
        """The tail after the packs (their ``parsed`` indexes, in :meth:`add` order; the
        ``sections`` encoded, in tail order), then the staging file renamed onto the archive
        and the folder fsynced."""
        flushed = self._pool.submit(os.fdatasync, self._fd)
        digests = [job.result() for job in self._jobs]
        flushed.result()
        extents = self._extents
        parsed_at = {e[0]: p for e, p in zip(extents, parsed)}
        with open(self._fd, "r+b", closefd=False) as fh:
            report = _seal_into(fh, self.archive, self._end, list(enumerate(extents)),
                                sections, git=True, parsed=parsed_at, every=walk_bound,
                                prefer=prefer, checksums=digests)
        self._staging.commit()
        return report


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


def _seal_into(fh: BinaryIO, archive: str, blob_bytes: int,
               live: Sequence[tuple[int, tuple[int, int]]], sections: Sequence[Encoded], *,
               git: bool, parsed: Mapping[int, ParsedPack], every: int,
               prefer: Collection[bytes], checksums: Sequence[bytes] | None = None,
               retired: int = 0, after: int = 0) -> GitSealReport:
    """The tail written into ``fh`` (the staging file, the packs in it) by the core;
    ``live``: ``(ordinal, (offset, size))`` of each pack; ``checksums``: each live pack's
    BLAKE3 when the caller took them (else read back here)."""
    view = memoryview(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)) if blob_bytes \
        else memoryview(b"")
    try:
        digests = list(checksums) if checksums is not None else [
            blake3.blake3(view[o:o + s]).digest() for _, (o, s) in live]
        packs = [p.core for _, p in _parse_live(view, live, parsed)] if git else None
        size, objects, commits = corelib.git_seal_tail(
            archive, fh.fileno(), blob_bytes,
            [(i, o, s, d) for (i, (o, s)), d in zip(live, digests)], packs,
            b"".join([o for o in prefer if len(o) == 20]), every, sections)
    finally:
        del view
    return GitSealReport(archive, len(live), retired, after, blob_bytes, size, objects,
                         commits)


def _parse_live(view: memoryview, live: Sequence[tuple[int, tuple[int, int]]],
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
