"""Extract: every target checked before anything is written, streamed chunk by chunk, verified.

Memory is bounded by one chunk (the block size). A new file is created exclusively (``O_EXCL``,
never through a symlink) and removed again if a chunk fails its check; a file that already
exists is replaced through a hidden temporary sibling and a rename, so a failure leaves the old
file as it was. No symlink is ever created; modes are plain files (0o644 under the umask).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import ChecksumError, CodecError, FormatError
from .paths import Targets

if TYPE_CHECKING:
    from .reader import Archive, FileInfo

_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


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
    targets = Targets(dest, archive=archive.path)
    plan = [(p, targets.target(p)) for p in selected]  # every path checked before any write
    infos = [(p, t, archive.find(p)) for p, t in plan]
    report = ExtractReport(dest=dest)
    os.makedirs(dest, exist_ok=True)
    for path, target, info in infos:
        if info is None:
            report.failed[path] = "not in the archive"
            continue
        try:
            targets.make_parent(path)
            n = _extract_one(archive, path, target, info)
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


def _extract_one(archive: "Archive", path: str, target: str, info: "FileInfo") -> int:
    try:
        fd = os.open(target, _CREATE, 0o644)
        tmp = None
    except FileExistsError:  # replace an existing file through a temporary sibling
        tmp = os.path.join(os.path.dirname(target),
                           f".{os.path.basename(target)}.znippy-part-{os.getpid()}")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        fd = os.open(tmp, _CREATE, 0o644)
    written = tmp if tmp is not None else target
    try:
        n = 0
        try:
            for chunk in info.chunks:
                data = archive.read_chunk(path, chunk, verify=True)
                _write_all(fd, data)
                n += len(data)
        finally:
            os.close(fd)
        if tmp is not None:
            os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(written):
            os.unlink(written)
        raise
    return n


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
