"""Extract: every target checked before anything is written, streamed chunk by chunk, verified.

Memory is bounded by one chunk (the block size). Files are written to a temporary sibling and
renamed, so a checksum failure leaves no partial file under the entry's name. No symlink is ever
created; modes are plain files (0o644 under the umask).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ChecksumError, CodecError, FormatError
from .paths import contained_target

if TYPE_CHECKING:
    from .reader import Archive, FileInfo


@dataclass
class ExtractReport:
    dest: str
    files: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def extract(archive: "Archive", dest: str, *, repo: str | None = None,
            pkg_type: int | str | None = None, glob: str | None = None,
            paths: list[str] | None = None,
            progress: Callable[[int, int], None] | None = None) -> ExtractReport:
    started = time.perf_counter()
    selected = paths if paths is not None else archive.select(repo=repo, pkg_type=pkg_type,
                                                              glob=glob)
    targets = [(p, contained_target(dest, p, archive=archive.path)) for p in selected]
    infos = [(p, t, archive.find(p)) for p, t in targets]
    report = ExtractReport(dest=dest)
    os.makedirs(dest, exist_ok=True)
    for path, target, info in infos:
        if info is None:
            report.failed[path] = "not in the archive"
            continue
        try:
            n = _extract_one(archive, dest, path, target, info)
        except (ChecksumError, CodecError, FormatError) as exc:
            report.failed[path] = exc.problem
            continue
        except OSError as exc:  # e.g. "a" and "a/b" both in the archive
            report.failed[path] = f"cannot write: {exc.strerror or exc}"
            continue
        report.files += 1
        report.bytes_written += n
        report.written.append(path)
        if progress is not None:
            progress(report.files, report.bytes_written)
    report.seconds = time.perf_counter() - started
    return report


def _extract_one(archive: "Archive", dest: str, path: str, target: str, info: "FileInfo") -> int:
    """Write one file through a hidden temporary sibling, created exclusively (never followed)."""
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    contained_target(dest, path, archive=archive.path)  # re-check after makedirs
    tmp = os.path.join(parent, f".{os.path.basename(target)}.znippy-part-{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        n = 0
        try:
            for chunk in info.chunks:
                data = archive.read_chunk(path, chunk, verify=True)
                _write_all(fd, data)
                n += len(data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    return n


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
