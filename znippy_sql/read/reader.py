"""``open_archive``: footer → manifest → checked byte ranges → zero-copy Arrow tables.

Nothing is read until asked for: opening reads the footer and the manifest only. Every range
comes from the manifest and is checked against the file before it is sliced out of the map.
A point read goes trie → lookup row → that file's blobs, through numpy views of the lookup
columns made once, so it costs microseconds and touches only the file's own bytes.

:class:`Archive` is the facade: :class:`~.core.ArchiveCore` (structure, lookup, point reads,
checked chunks; each part in its own module) and the work over whole archives, each in its
module, imported where it is called: extract (:mod:`.extract`), verify (:mod:`.verify`),
many files at once (:mod:`.many`), a file object (:mod:`.fileobj`), ``__meta__``
(:mod:`.metasection`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..format.validate import MAX_CHUNK_BYTES
from .blobcache import PREFIX_MIN
from .columns import Chunk, FileInfo
from .core import ArchiveCore
from .metasection import read_meta
from .tail import group_what, label_groups

if TYPE_CHECKING:
    from .extract import Existing, ExtractReport
    from .fileobj import ArchiveFile
    from .verify import VerifyReport

__all__ = ["Archive", "ArchiveCore", "Chunk", "FileInfo", "MAX_CHUNK_BYTES", "PREFIX_MIN",
           "group_what", "label_groups", "open_archive"]


class Archive(ArchiveCore):
    """A read-only view of one archive file. Use :func:`open_archive`."""

    def read_many(self, paths: Iterable[str], *, verify: bool | None = None,
                  workers: int | None = None, ordered: bool = False
                  ) -> Iterator[tuple[str, bytes]]:
        """``(path, bytes)`` of many files: found first, read in blob order (``ordered=True``:
        the given order), decoded in worker threads, remote ranges coalesced, memory bounded
        (:mod:`.many`)."""
        from .many import read_many

        return read_many(self, paths, verify=verify, workers=workers, ordered=ordered)

    def iter_files(self, rows: Any, *, verify: bool | None = None, workers: int | None = None,
                   ordered: bool = False) -> Iterator[tuple[str, bytes]]:
        """:meth:`read_many` of the ``relative_path`` of ``rows`` (an Arrow table, batch or
        reader: the rows of the ``files`` view; or mappings)."""
        from .many import read_many, rows_paths

        return read_many(self, rows_paths(rows), verify=verify, workers=workers,
                         ordered=ordered)

    def open(self, path: str) -> "ArchiveFile":
        """A streaming, seekable binary file object over one file."""
        from .fileobj import ArchiveFile

        return ArchiveFile(self, self.must_find(path))

    def extract(self, dest: str | os.PathLike[str], *, repo: str | None = None,
                pkg_type: int | str | None = None, glob: str | None = None,
                paths: list[str] | None = None, workers: int | None = None,
                progress: Any = None, strip_components: int = 0, preserve: bool = False,
                symlinks: bool = False, existing: "Existing" = "replace") -> "ExtractReport":
        """Extract the matching files under ``dest`` (see :mod:`znippy_sql.read.extract`).
        ``existing``: ``"replace"`` a file already there (the default, as tar), ``"error"``
        (tar's ``--keep-old-files``: nothing is written) or ``"skip"`` it
        (``--skip-old-files``: kept, reported in ``report.skipped``)."""
        from .extract import extract

        return extract(self, os.fspath(dest), repo=repo, pkg_type=pkg_type, glob=glob,
                       paths=paths, workers=workers, progress=progress,
                       strip_components=strip_components, preserve=preserve, symlinks=symlinks,
                       existing=existing)

    def verify(self, *, progress: Any = None, content: bool = True) -> "VerifyReport":
        """Structure and (unless ``content=False``) every blob's content: all findings."""
        from .verify import verify

        return verify(self, progress=progress, content=content, meta=lambda: self.meta)

    @property
    def meta(self) -> pa.Table | None:
        """``__meta__`` facts, or ``None`` when the archive records no metadata at all."""
        return read_meta(self)


def open_archive(path: str | os.PathLike[str], *, verify_checksums: bool = True,
                 storage_options: Mapping[str, Any] | None = None,
                 cache: bool | str | os.PathLike[str] | None = None,
                 verify_sections: bool = True,
                 warehouse: str | os.PathLike[str] | None = None,
                 namespace: str | None = None) -> Archive:
    """Open an archive: reads the footer and the manifest, nothing else.

    ``path``: a local path, or a URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``,
    ``file://``; see ``docs/remote.md``). ``storage_options``: endpoint, region, credentials,
    retries, timeouts of a remote store. ``cache``: where remote tails are kept (True: the
    user cache directory; a directory; False: not at all; None: the process default).
    ``verify_checksums=False`` skips the BLAKE3 of each chunk read; ``verify_sections=False``
    skips the BLAKE3 of each sub-index and section the manifest records (checked the first
    time one is read), for callers that verified the archive already. ``warehouse``: ``path``
    is the blob sidecar of a Rust Iceberg-backed archive (``znippy compress --meta-format
    iceberg``) whose tables are in this skade warehouse, ``namespace`` (default: the one the
    Rust compress named after the sidecar) in it (docs/interop.md)."""
    return Archive(path, verify_checksums=verify_checksums, storage_options=storage_options,
                   cache=cache, verify_sections=verify_sections, warehouse=warehouse,
                   namespace=namespace)
