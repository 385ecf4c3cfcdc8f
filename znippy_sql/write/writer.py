"""The one-shot writer: ``write_archive`` and the ``ArchiveWriter`` context manager.

Bytes go to a staging sibling (:mod:`~znippy_sql.write.staging`); only a clean exit writes
the tail, fsyncs, renames into place and fsyncs the directory. Any exception removes the staging
file, so no half-written archive ever stands under the final name. A directory source never
yields the output itself or a staging sibling of it, when they lie inside it.

``posix=True`` records each walked file's mode and mtime, symbolic links (stored as files
holding their target) and every directory as ``posix.*`` rows of ``__meta__``
(:mod:`~znippy_sql.write.posix`). ``skip_unsafe=True`` skips a file whose path the format
refuses (a newline in a name ...) and lists it in ``WriteReport.skipped`` instead of failing;
``skip_unreadable=True`` leaves out a file or directory of the source that cannot be read
(``WriteReport.unreadable``) instead of failing with ``UnreadableSourceError``.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Unpack

import pyarrow as pa

from ..errors import ZnippyError
from ..format.schema import META
from .feed import Feed
from .ingest import Ingest
from .options import OptionKwargs, Provenance, WriteOptions, resolve
from .posix import with_rows
from .rust10 import RUST10, RUST_INDEXED
from ..interop.layouts import FSMETA
from .source import Entry, as_entry
from ..format.sections import ReservedSection, SectionBuilder, check_sections
from .compat import check_compat
from .staging import Staging, staging_prefix
from .tail import TailInfo, write_tail
from ..modules.pkgtypes import resolve_pkg_type


@dataclass(frozen=True)
class WriteReport:
    path: str
    files: int
    chunks: int
    compressed_chunks: int
    raw_chunks: int
    bytes_in: int
    blob_bytes: int
    archive_bytes: int
    groups: int
    seconds: float
    #: (path as found, why) of each file ``skip_unsafe`` left out
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: (path as found, why) of each file and directory ``skip_unreadable`` left out
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    #: symbolic links and directories recorded (``posix=True``)
    symlinks: int = 0
    directories: int = 0
    #: symbolic links a walk without ``posix`` left out; special files (FIFOs, sockets,
    #: devices) any walk leaves out
    links_left_out: int = 0
    special_left_out: list[str] = field(default_factory=list)
    #: rows that point at a blob written for an earlier identical chunk, and the blob bytes
    #: they did not write (0 with ``dedup=False``)
    shared_chunks: int = 0
    bytes_saved: int = 0
    #: packed blobs written (one frame holding several small files) and the files in them
    packs: int = 0
    packed_files: int = 0

    @property
    def ratio(self) -> float:
        return self.bytes_in / self.archive_bytes if self.archive_bytes else 0.0


def meta_of(sections: Iterable[ReservedSection]) -> pa.Table | None:
    """The ``__meta__`` rows among ``sections`` (an Arrow section), or None."""
    for s in sections:
        if s.name == META and isinstance(s.payload, pa.Table):
            return s.payload
    return None


def optional_sections(meta: Any, signer: Any, compat: str | None = None
                      ) -> tuple[list[ReservedSection], list[SectionBuilder]]:
    """Sections for the ``meta=`` and ``signer=`` options (resolved lazily, issue 5); with
    ``compat="rust-0.9"`` or ``"rust-0.10"`` the signatures are over the Rust digests
    (``write/rust10.py``)."""
    sections: list[ReservedSection] = []
    builders: list[SectionBuilder] = []
    if meta is not None:
        from ..provenance.meta import meta_section

        sections.append(meta_section(meta))
    if signer is not None:
        from ..provenance.sign import signature_builder

        builders.append(signature_builder(signer, rust=compat in RUST_INDEXED,
                                          compat=compat or RUST10))
    return sections, builders


class ArchiveWriter:
    """Write an archive entry by entry; the tail is written on a clean ``with`` exit.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with ArchiveWriter(os.path.join(d, "a.znippy")) as w:
    ...     w.add(Entry("hello.txt", data=b"hello"))
    >>> w.report.files
    1
    """

    def __init__(
        self,
        out: str | os.PathLike[str],
        *,
        options: WriteOptions | None = None,
        provenance: Provenance | None = None,
        repo: str = "",
        pkg_type: int | str = 0,
        reserved_sections: Sequence[ReservedSection] = (),
        section_builders: Sequence[SectionBuilder] = (),
        progress: Callable[[int, int], None] | None = None,
        **kwargs: Unpack[OptionKwargs],
    ) -> None:
        """``options``/``provenance``: how to write and what the archive says about itself
        (:mod:`.options`); the keyword arguments ``level=``, ``meta=``, ... map onto them."""
        self.path = os.fspath(out)
        self.options, self.provenance = resolve(options, provenance, what="ArchiveWriter",
                                                **kwargs)
        meta, signer = self.provenance.meta, self.provenance.signer
        check_compat(self.options.compat, sections=reserved_sections, builders=section_builders,
                     meta=meta, signer=signer)
        extra_sections, extra_builders = optional_sections(meta, signer, self.options.compat)
        self.sections = [*reserved_sections, *extra_sections]
        check_sections(self.sections)  # refuse bad names now, not after all the compression
        self.builders = [*section_builders, *extra_builders]
        self.progress = progress
        self.report: WriteReport | None = None
        self.tail: TailInfo | None = None
        self._repo = repo
        self._pkg_type = pkg_type
        self._fh: BinaryIO | None = None
        self._ingest: Ingest | None = None
        self._started = 0.0
        if not (isinstance(pkg_type, str) and pkg_type.strip().lower() == "auto"):
            resolve_pkg_type(pkg_type)  # an unknown one is refused before any work
        #: every staging sibling of this output starts so (the walk of a source holding the
        #: output skips them all, those of crashed runs too)
        self.staging_prefix = staging_prefix(self.path)
        self._staged = Staging(self.path)
        self.staging = self._staged.name

    def __enter__(self) -> "ArchiveWriter":
        self._started = time.perf_counter()
        check_output(self.path)
        self._staged.start()  # what a killed writer of the same name left behind
        try:
            self._fh = open(self.staging, "w+b")
        except OSError as exc:
            raise ZnippyError(f"cannot write here: {exc.strerror or exc}", path=self.path) \
                from None
        self._ingest = Ingest(self._fh.fileno(), 0, self.options, repo=self._repo,
                              pkg_type=self._pkg_type)
        self._feed = Feed(self._ingest.add, posix=self.options.posix,
                          links=self.options.compat != RUST10,
                          skip_unsafe=self.options.skip_unsafe,
                          skip_unreadable=self.options.skip_unreadable,
                          exclude=[self.path], exclude_prefixes=[self.staging_prefix],
                          ahead=self._ingest.read_ahead, take_batch=self._ingest.add_batch)
        return self

    def add(self, entry: Entry | str, data: bytes | None = None, *,
            file: str | os.PathLike[str] | None = None, repo: str | None = None,
            pkg_type: int | str | None = None) -> None:
        """Add one file: an :class:`Entry`, or a path with ``data=`` or ``file=``."""
        if self._ingest is None:
            raise RuntimeError("ArchiveWriter.add outside its 'with' block")
        if self._feed.add(as_entry(entry, data, file=file, repo=repo, pkg_type=pkg_type)):
            self._progress()

    def _progress(self) -> None:
        if self.progress is not None and self._ingest is not None:
            self.progress(self._ingest.files, self._ingest.bytes_in)

    def add_all(self, source: str | os.PathLike[str] | Iterable[Entry]) -> None:
        """Add every entry of ``source``: an iterable of :class:`Entry`, or a directory
        (walked in path order; this writer's own output and staging files left out)."""
        if self._ingest is None:
            raise RuntimeError("ArchiveWriter.add_all outside its 'with' block")
        self._feed.add_all(source, None if self.progress is None else self._progress)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        return self._feed.skipped

    def _final_sections(self) -> list[ReservedSection]:
        """The sections, ``__meta__`` with the POSIX facts of the files written."""
        if not self._feed.facts:
            return self.sections
        if self.options.compat == RUST10:  # the Rust __znippy_fsmeta__ (write/rust10.py)
            shape = self._feed.facts.fsmeta()
            return self.sections if shape is None else \
                [*self.sections, ReservedSection(FSMETA, shape)]
        rows = self._feed.facts.rows()
        out = [s for s in self.sections if s.name != META]
        out.append(ReservedSection(META, with_rows(meta_of(self.sections), rows)))
        return out

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        assert self._fh is not None and self._ingest is not None
        try:
            if exc_type is not None:
                self._ingest.abort()
                return
            sink = self._ingest.finish()
            self.tail = write_tail(
                self._fh, sink.cursor, sink.tables(), sections=self._final_sections(),
                section_builders=self.builders,
                schema_metadata=self.options.schema_metadata(), fsync=self.options.fsync,
                compat=self.options.compat, index_compression=self.options.index_compression,
            )
            self._fh.close()
            self._staged.commit(fsync=self.options.fsync)
            self.report = WriteReport(
                path=self.path, files=self._ingest.files,
                chunks=sink.compressed_chunks + sink.raw_chunks,
                compressed_chunks=sink.compressed_chunks, raw_chunks=sink.raw_chunks,
                bytes_in=self._ingest.bytes_in, blob_bytes=sink.cursor,
                archive_bytes=self.tail.file_size, groups=len(sink.groups),
                seconds=time.perf_counter() - self._started, skipped=list(self.skipped),
                unreadable=list(self._feed.unreadable),
                symlinks=self._feed.facts.symlinks, directories=self._feed.directories,
                links_left_out=self._feed.links_left_out,
                special_left_out=list(self._feed.special_left_out),
                shared_chunks=0 if sink.dedup is None else sink.dedup.hits,
                bytes_saved=0 if sink.dedup is None else sink.dedup.saved,
                packs=sink.packs, packed_files=sink.packed_files,
            )
        finally:
            self._ingest = None  # its rows and path set are the tail's now: not kept with us
            if not self._fh.closed:
                self._fh.close()
            self._staged.discard()


def check_output(path: str) -> None:
    """Refuse, before any work, an output that cannot be written: a directory, or one whose
    parent directory does not exist; a URL that names no object."""
    from ..remote import is_url, local_path

    if is_url(path):
        local = local_path(path)
        if local is None:
            from ..remote.url import parse

            parse(path)  # staged locally, uploaded at the end (remote/upload.py)
            return
        path = local
    if os.path.isdir(path):
        raise ZnippyError("is a directory: give the archive's file name", path=path)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ZnippyError(f"cannot write: directory {parent} does not exist", path=path)


def write_archive(
    out: str | os.PathLike[str],
    source: str | os.PathLike[str] | Iterable[Entry],
    *,
    options: WriteOptions | None = None,
    provenance: Provenance | None = None,
    repo: str = "",
    pkg_type: int | str = 0,
    reserved_sections: Sequence[ReservedSection] = (),
    section_builders: Sequence[SectionBuilder] = (),
    progress: Callable[[int, int], None] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    **kwargs: Unpack[OptionKwargs],
) -> WriteReport:
    """Write ``source`` (a directory, or an iterable of :class:`Entry`) as one archive.

    ``options``: a :class:`~znippy_sql.WriteOptions` (how to write; its fields are the
    defaults); ``provenance``: a :class:`~znippy_sql.Provenance` (``meta``, ``signer``). The
    keyword arguments ``level``, ``block_size``, ``workers``, ``dedup``, ``pack``,
    ``index_compression``, ``compat``, ``posix``, ``skip_unsafe``, ``skip_unreadable``,
    ``fsync``, ``meta`` and ``signer`` are still taken and override the same fields
    (``write/options.py``).

    ``posix=True``: record modes, mtimes, symbolic links and directories of a walked source
    in ``__meta__``. ``skip_unsafe=True``: leave out files whose paths the format refuses
    (listed in the report) instead of failing; ``skip_unreadable=True``: leave out files and
    directories that cannot be read (``report.unreadable``) instead of raising
    :class:`~znippy_sql.errors.UnreadableSourceError`. ``compat="rust-0.8"``: an archive the
    Rust tool 0.8 reads (:mod:`.compat`; no ``meta``, ``posix``, ``signer`` or reserved
    sections).
    ``out`` may be a URL (``s3://``, ...): the archive is staged locally and uploaded on a
    clean finish only (``znippy_sql.remote.upload``), with ``storage_options``.
    ``dedup=False``: every file in ``block_size`` chunks, skip-listed files stored raw, every
    chunk its own blob (no zip-entry cuts, no probe, no shared blobs). ``pack`` (default on):
    small files packed into shared frames (docs/format.md, "Packed blobs");
    ``index_compression`` (default on): the index streams' record batches ZSTD-compressed
    (docs/format.md, "Compressed index streams"). Both off: the layout before them, byte for
    byte; ``compat="rust-0.8"`` turns both off."""
    from ..remote import is_url, local_path

    options, provenance = resolve(options, provenance, what="write_archive", **kwargs)
    if is_url(out):
        local = local_path(os.fspath(out))
        if local is None:
            from ..remote.upload import upload_on_exit

            with upload_on_exit(os.fspath(out), storage_options=storage_options) as staging:
                report = write_archive(staging, source,
                                       options=dataclasses.replace(options, fsync=False),
                                       provenance=provenance, repo=repo, pkg_type=pkg_type,
                                       reserved_sections=reserved_sections,
                                       section_builders=section_builders, progress=progress)
            return dataclasses.replace(report, path=os.fspath(out))
        out = local
    if provenance.meta is not None and isinstance(source, (str, os.PathLike)):
        from ..provenance.meta import with_source

        provenance = dataclasses.replace(provenance, meta=with_source(provenance.meta, source))
    writer = ArchiveWriter(
        out, options=options, provenance=provenance, repo=repo, pkg_type=pkg_type,
        reserved_sections=reserved_sections, section_builders=section_builders,
        progress=progress,
    )
    with writer:
        writer.add_all(source)
    assert writer.report is not None
    return writer.report
