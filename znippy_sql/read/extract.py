"""Extract: every target checked before anything is written, streamed chunk by chunk, verified.

Order of work: every selected path is checked (:class:`~znippy_sql.format.paths.Targets`'
rules: no ``..``, absolute or drive paths, no symlink on the way or at the target) before
anything is written; then the compiled core writes the files (``native/src/extract/``,
docs/design.md "The native core"): this module plans which files go where and hands the core
their first lookup rows, names, modes and mtimes in one call; the core, without the GIL and
with ``workers`` threads, takes units of about ``UNIT_BYTES`` (at most ``UNIT_FILES`` files,
never cutting a packed blob), checks each file's rows, reads, decodes and checks every chunk
(BLAKE3) and writes through directory-relative opens (``O_NOFOLLOW``: nothing is written
outside ``dest``).

Memory is bounded by one chunk (the block size; a piece of a streamed chunk) per worker.
Every file is written to a hidden temporary sibling (``.NAME.znippy-part-PID``, created with
``O_EXCL``, never through a symlink) and renamed to its name only once its bytes are complete
and checked (a name too long for the file system: the first 32 hex digits of its BLAKE3 for
NAME): a failure, Ctrl-C or even SIGKILL (the OOM killer, a CI timeout) never leaves a partly
written file under its name, and an existing file stays as it was until replaced whole. The
next extract into the same directories removes temporaries left by a killed one (those of
processes no longer running). Links and recorded directories are made after the files
(``symlinks=True``: only links that resolve inside ``dest``); modes are plain files
(0o644 under umask) unless ``preserve=True``.

An existing file is replaced, as tar does by default; ``existing="error"`` (tar's
``--keep-old-files``) refuses the extract before anything is written when a name is taken,
``existing="skip"`` (``--skip-old-files``) leaves such files as they are and reports them in
``report.skipped``. Either way the final rename never replaces a file that appeared meanwhile.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import operator
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from .. import corelib
from ..errors import OptionError, OutputError, UnsafePathError, ZnippyError
from ..format.kernels import one_array, take, utf8_parts
from ..format.paths import Targets, check_relative_path, plain_paths
from ..format.units import human
from ..format.validate import MAX_CHUNK_BYTES
from .many import decode_frame

if TYPE_CHECKING:
    from .posix import Facts
    from .core import ArchiveCore as Archive

UNIT_BYTES = corelib.UNIT_BYTES  # work handed to a worker at a time
UNIT_FILES = corelib.UNIT_FILES  # and at most this many files (small units balance the workers)
#: Threads are used from this much work: the bytes written, each file counted as at least
#: PER_FILE_BYTES (creating a file costs about as much as writing that many bytes).
THREAD_BYTES = 4 << 20
PER_FILE_BYTES = 16 << 10
#: what to do with a name taken already under ``dest``: replace it (tar's default), refuse the
#: whole extract (``--keep-old-files``), keep it and go on (``--skip-old-files``)
Existing = Literal["replace", "error", "skip"]
EXISTING: tuple[Existing, ...] = ("replace", "error", "skip")
KEPT = "exists already, kept (--skip-old-files)"


@dataclass
class ExtractReport:
    dest: str
    files: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    written: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    #: paths left out on purpose, and why (a link without ``symlinks=True``, a link that
    #: would resolve outside, a path with no more than ``strip_components`` components)
    skipped: dict[str, str] = field(default_factory=dict)
    links: int = 0
    directories: int = 0
    #: the links made (archive paths), with ``symlinks=True``
    linked: list[str] = field(default_factory=list)
    #: big files written in runs of chunks by several workers (when there are fewer big
    #: files than workers)
    split: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed


class ExtractInterrupted(KeyboardInterrupt):
    """Ctrl-C during an extract; ``report`` says what was written before it."""

    def __init__(self, report: ExtractReport) -> None:
        super().__init__()
        self.report = report


def extract(archive: "Archive", dest: str, *, repo: str | None = None,
            pkg_type: int | str | None = None, glob: str | None = None,
            paths: list[str] | None = None, workers: int | None = None,
            progress: Callable[[int, int], None] | None = None, strip_components: int = 0,
            preserve: bool = False, symlinks: bool = False, existing: Existing = "replace"
            ) -> ExtractReport:
    """Extract the selected files under ``dest`` (see the module doc).

    ``strip_components=N`` drops the first N components of every path (a path with no more
    is skipped). Files recorded as symbolic links (``posix.symlink`` in ``__meta__``) are made
    as links with ``symlinks=True`` when they resolve inside ``dest`` (else skipped, said
    in ``report.skipped``); recorded directories are made. ``preserve=True`` sets the
    recorded permission bits (never setuid/setgid) and mtimes. A progress object with
    ``total``/``total_bytes`` attributes gets the totals first. A full disk or a read-only
    destination stops the extract at once (:class:`~znippy_sql.errors.OutputError`, with the
    report as its ``report``). ``existing``: what a name taken already under ``dest`` gets
    (the module doc; ``"error"`` raises :class:`~znippy_sql.errors.OutputError` before
    anything is written).
    """
    from . import posix

    started = time.perf_counter()
    if strip_components < 0:
        raise ValueError("strip_components must be 0 or more")
    if existing not in EXISTING:
        raise OptionError(f"existing={existing!r}: one of {', '.join(EXISTING)}")
    files = _files(archive)
    link_text = posix.links(archive)
    recorded_dirs = posix.directories(archive)
    everything = paths is None and repo is None and pkg_type is None and glob is None
    dirs: list[str] = []
    if everything and _strictly_increasing(files.paths):  # a sound lookup: paths in order
        selected, found = files.paths, list(range(len(files.paths)))
        dirs = list(recorded_dirs)
    else:
        if paths is not None:
            selected = list(dict.fromkeys(paths))
            dirs = [p for p in selected if p in recorded_dirs]
            selected = [p for p in selected if p not in recorded_dirs]
        elif everything:  # what select() would list, each path once
            selected = sorted(set(files.paths))
            dirs = list(recorded_dirs)
        else:
            selected = archive.select(repo=repo, pkg_type=pkg_type, glob=glob)
            if repo is None and pkg_type is None and glob is not None:
                rx = re.compile(fnmatch.translate(glob))
                dirs = [d for d in recorded_dirs if rx.match(d)]
        where = dict(zip(files.paths, range(len(files.paths))))  # (twice in a damaged lookup:
        found = [where.get(p, -1) for p in selected]  # its last place), or -1: not there
    report = ExtractReport(dest=dest)
    links: dict[str, str] = {}  # archive path → link text
    if link_text:  # links are made after the files, never written as files
        keep = [k for k, p in enumerate(selected) if p not in link_text]
        links = {p: link_text[p] for p in selected if p in link_text}
        selected, found = [selected[k] for k in keep], [found[k] for k in keep]
    names: list[str] | None = None
    out_links = {p: p for p in links}  # archive path → name under dest
    out_dirs = {d: d for d in dirs}
    if strip_components:
        selected, found, names = _stripped(selected, found, strip_components, report)
        out_links = _strip_names(list(links), strip_components, report)
        out_dirs = _strip_names(dirs, strip_components, None)
    outs = names if names is not None else selected
    targets = Targets(dest, archive=archive.path)
    exists, existing_dirs = _check_targets(targets, outs, found, files.plain, names is None)
    if existing != "replace":  # names taken already: refused, or kept and left out
        selected, found, names = _old_files(dest, selected, found, names, out_links, existing,
                                            report, exists)
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError("workers must be at least 1")
    sizes = np.asarray(files.sizes + [0], dtype=np.int64)[np.asarray(found, dtype=np.int64)]
    if progress is not None and hasattr(progress, "total_bytes"):
        progress.total = len(selected)  # type: ignore[attr-defined]  # has totals (above)
        progress.total_bytes = int(sizes.sum())  # (a file not there: the 0 appended)
    work = int(np.maximum(sizes, PER_FILE_BYTES).sum())
    facts = posix.facts(archive) if preserve else None
    _extract(archive, targets, selected, found, names, existing_dirs,
             workers=n if work >= THREAD_BYTES else 1, progress=progress, report=report,
             facts=facts, replace=existing == "replace")
    _finish(archive, dest, report, {out: (p, links[p]) for p, out in out_links.items()},
            {out: d for d, out in out_dirs.items()}, symlinks=symlinks, facts=facts)
    report.seconds = time.perf_counter() - started
    return report


def _old_files(dest: str, selected: list[str], found: list[int], names: list[str] | None,
               out_links: dict[str, str], existing: Existing, report: ExtractReport,
               exists: np.ndarray) -> tuple[list[str], list[int], list[str] | None]:
    """``existing="error"``: an OutputError naming the files and links whose name is taken
    (nothing written yet); ``"skip"``: those left out (``report.skipped``). ``exists``: which
    targets exist (:func:`_check_targets`). A directory already there is no problem (the
    files go into it)."""
    root = os.path.join(dest, "")
    if not os.path.isdir(root):  # a new destination: nothing can be in the way
        return selected, found, names
    taken = np.flatnonzero(exists).tolist()
    links = [p for p, out in out_links.items() if os.path.lexists(root + out)]
    if existing == "error" and (taken or links):
        old = [selected[k] for k in taken] + links
        shown = ", ".join(repr(p) for p in old[:5]) + (f" and {len(old) - 5:,} more"
                                                         if len(old) > 5 else "")
        raise OutputError(f"would replace {len(old):,} existing file(s) ({shown}); nothing "
                          "was extracted (--keep-old-files)", path=dest)
    for k in taken:
        report.skipped[selected[k]] = KEPT
    for p in links:
        del out_links[p]
        report.skipped[p] = KEPT
    if not taken:
        return selected, found, names
    gone = set(taken)
    keep = [k for k in range(len(selected)) if k not in gone]
    return ([selected[k] for k in keep], [found[k] for k in keep],
            None if names is None else [names[k] for k in keep])


def outcomes(archive: "Archive", report: ExtractReport) -> list[dict[str, Any]]:
    """One row per path the extract dealt with, in path order (UTF-8 byte order): its
    ``relative_path``, ``status`` (``extracted``, ``link``, ``skipped``, ``failed``),
    ``bytes_written``, ``checksum_ok`` (None for a link or a skipped path) and ``problem``
    (why it was skipped or failed). What ``znippy_extract`` (SQL) returns."""
    sizes = dict(zip(*_files(archive)[:2])) if report.written else {}
    rows: dict[str, dict[str, Any]] = {}

    def row(path: str, status: str, size: int, ok: bool | None, problem: str | None) -> None:
        rows[path] = {"relative_path": path, "status": status, "bytes_written": size,
                      "checksum_ok": ok, "problem": problem}

    for path in report.written:  # written whole and checked: its size is the archive's
        row(path, "extracted", sizes.get(path, 0), True, None)
    for path in report.linked:
        row(path, "link", 0, None, None)
    for path, why in report.skipped.items():
        row(path, "skipped", 0, None, why)
    for path, why in report.failed.items():
        row(path, "failed", 0, False, why)
    return [rows[p] for p in sorted(rows, key=lambda p: p.encode("utf-8", "surrogatepass"))]


def _stripped(selected: list[str], found: list[int], n: int, report: ExtractReport
              ) -> tuple[list[str], list[int], list[str]]:
    """The paths that keep a name once their first ``n`` components go, and those names;
    a name two paths would share is extracted once (the first) and the other skipped."""
    keep_sel: list[str] = []
    keep_found: list[int] = []
    names: list[str] = []
    taken: dict[str, str] = {}
    for path, i in zip(selected, found):
        parts = path.split("/")
        if len(parts) <= n:
            report.skipped[path] = f"no more than {n} path component(s) (--strip-components)"
            continue
        out = "/".join(parts[n:])
        first = taken.get(out)
        if first is not None:
            report.failed[path] = f"same name {out!r} as {first!r} once stripped"
            continue
        taken[out] = path
        keep_sel.append(path)
        keep_found.append(i)
        names.append(out)
    return keep_sel, keep_found, names


def _strip_names(paths: list[str], n: int, report: ExtractReport | None) -> dict[str, str]:
    """archive path → its name with the first ``n`` components gone (those with no more are
    left out, and said in ``report`` when given)."""
    out: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        if len(parts) > n:
            out[path] = "/".join(parts[n:])
        elif report is not None:
            report.skipped[path] = f"no more than {n} path component(s) (--strip-components)"
    return out


def _finish(archive: "Archive", dest: str, report: ExtractReport,
            links: dict[str, tuple[str, str]], dirs: dict[str, str], *, symlinks: bool,
            facts: "Facts | None") -> None:
    """After every file: recorded directories, links (``symlinks``), then modes and mtimes
    (``preserve``): files and links first, directories last, deepest first (writing into a
    directory changes its mtime). ``links``: name under dest → (archive path, link text);
    ``dirs``: name under dest → archive path. (Files had their mode and mtime set before
    their rename.)"""
    from . import posix

    targets = Targets(dest, archive=archive.path)
    made_dirs: list[str] = []
    for out, path in dirs.items():
        try:
            targets.target(out)  # its path, its parents and itself: no symlink
        except ZnippyError as exc:
            report.failed[path] = exc.problem
            continue
        try:
            targets.make_parent(out + "/-")  # the parents of a name inside it: itself
            made_dirs.append(out)
        except ZnippyError as exc:
            report.failed[path] = exc.problem
        except OSError as exc:
            report.failed[path] = f"cannot create directory: {exc.strerror or exc}"
    report.directories = len(made_dirs)
    made: list[str] = []
    if links and symlinks:
        ready: dict[str, str] = {}
        for out, (path, text) in links.items():  # the parents checked and made, as for files
            try:
                targets.target(out)
                targets.make_parent(out)
                ready[out] = text
            except ZnippyError as exc:
                report.failed[path] = exc.problem
            except OSError as exc:
                report.failed[path] = f"cannot create its directory: {exc.strerror or exc}"
        made, refused = posix.make_links(dest, ready)
        report.skipped.update({links[out][0]: why for out, why in refused.items()})
        report.links = len(made)
        report.linked = [links[out][0] for out in made]
    else:
        for path, _ in links.values():
            report.skipped[path] = "symbolic link, not made (give --symlinks)"
    if facts is None:
        return
    root = targets.root

    def apply(out: str, path: str, *, is_link: bool = False) -> None:
        try:
            posix.preserve(os.path.join(root, out), facts.modes.get(path),
                           facts.mtimes.get(path), is_link=is_link)
        except OSError as exc:
            report.failed[path] = f"cannot set mode or mtime: {exc.strerror or exc}"

    for out in made:  # (files had theirs set before their rename)
        apply(out, links[out][0], is_link=True)
    for out in sorted(made_dirs, key=lambda p: p.count("/"), reverse=True):
        apply(out, dirs[out])

def _joined(names: list[str]) -> tuple[bytes, bytes]:
    """UTF-8 names back to back, and their offsets (little-endian u64, one more than names)."""
    encoded = list(map(str.encode, names))
    offsets = np.zeros(len(encoded) + 1, dtype="<u8")
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)),
              out=offsets[1:])
    return b"".join(encoded), offsets.tobytes()


def _check_targets(targets: Targets, outs: list[str], found: list[int], plain: list[bool],
                   as_paths: bool) -> tuple[np.ndarray, list[str]]:
    """Every target checked before anything is written (:class:`Targets`' rules): a name
    not known plain by :func:`check_relative_path`, then each directory on the way and each
    target by the core (an ``lstat`` each, a symlink refused). Which targets exist, and the
    existing directories they go into."""
    plains = np.asarray(plain + [False], dtype=bool)[np.asarray(found, dtype=np.int64)] \
        if as_paths else np.zeros(len(outs), dtype=bool)
    for k in np.flatnonzero(~plains).tolist():  # paths a hostile archive may hold
        check_relative_path(outs[k], archive=targets.archive)
    data, offsets = _joined(outs)
    problem, exists, dirs = corelib.check_targets(targets.dest, targets.root, data, offsets)
    if problem is not None:
        raise UnsafePathError(problem[1], path=targets.archive)
    return np.frombuffer(exists, dtype=np.uint8).astype(bool), dirs


def _extract(archive: "Archive", targets: Targets, selected: list[str], found: list[int],
             names: list[str] | None, existing_dirs: list[str], *, workers: int,
             progress: Callable[[int, int], None] | None, report: ExtractReport,
             facts: "Facts | None", replace: bool) -> None:
    """The files written by the core (docs/design.md, "The native core")."""
    from .many import fetch_blobs, local_path, lookup_buffers

    outs = names if names is not None else selected
    at = np.asarray(found, dtype=np.int64)
    there = at >= 0
    for k in np.flatnonzero(~there).tolist():
        report.failed[selected[k]] = "not in the archive"
    try:
        os.makedirs(targets.dest, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the destination: {exc.strerror or exc}",
                          path=targets.dest) from None
    corelib.remove_leftovers(existing_dirs)  # a killed extract's temporaries
    if not bool(there.all()):
        keep = np.flatnonzero(there).tolist()
        selected, outs = list(map(selected.__getitem__, keep)), list(map(outs.__getitem__, keep))
        at = at[there]
    if not selected:
        return
    c = archive.lookup_columns
    firsts = np.asarray(c.first_rows, dtype="<u8")[at]
    data, offsets = _joined(outs)
    modes = mtimes = None
    if facts is not None:  # set on the temporary, before its rename
        modes = np.fromiter(map(facts.modes.get, selected, itertools.repeat(-1)),
                            dtype="<i8", count=len(selected)).tobytes()
        mtimes = np.fromiter(map(facts.mtimes.get, selected, itertools.repeat(_NO_MTIME)),
                             dtype="<i8", count=len(selected)).tobytes()
    cols = lookup_buffers(archive)
    source = archive.source
    local = local_path(archive)
    fetch = None if local is not None else functools.partial(fetch_blobs, archive)
    got, problems, fatal, read, stopped, report.split = corelib.extract_files(
        cols, archive.tail_offset, bool(c.packed), local, fetch, decode_frame,
        targets.root, firsts.tobytes(), data, offsets, modes, mtimes, replace, workers,
        UNIT_BYTES, UNIT_FILES, progress, archive=archive.path)
    if local is not None:
        source.bytes_read += read
    outcome = np.frombuffer(got, dtype="<i8")
    done = outcome >= 0
    report.written = list(itertools.compress(selected, done.tolist()))
    report.files = len(report.written)
    report.bytes_written = int(outcome[done].sum())
    for k, why in problems:
        report.failed[selected[k]] = why
    if stopped:
        raise ExtractInterrupted(report)
    if fatal is not None:
        raise fatal_error(report, targets.dest, selected[fatal[0]], fatal[1])


def fatal_error(report: ExtractReport, dest: str, path: str, why: str) -> OutputError:
    """The error of an extract stopped by a write the destination refused for good."""
    error = OutputError(
        f"stopped at the first {why!r} (writing {path!r}): {report.files:,} files "
        f"({human(report.bytes_written)}) were extracted before it, complete and checked; "
        "no partly written file is left", path=dest)
    error.report = report  # type: ignore[attr-defined]  # what was extracted, for callers
    return error


#: no recorded mtime (``--preserve``): the core leaves the file's own
_NO_MTIME = -(1 << 63)


class _Files(NamedTuple):
    """The lookup's files by place: ``paths`` in lookup order; ``sizes`` counts only chunks
    whose sizes can be true (a corrupt index must not pre-create huge files); ``firsts[i]`` is
    the first lookup row of file ``i`` and its rows end where the next file's begin (workers
    need no trie search; the rows are checked again where they are used)."""

    paths: list[str]
    sizes: list[int]
    firsts: list[int]
    n: int  # lookup rows
    plain: list[bool]  # the path passes check_relative_path's fast path (paths.plain_paths)


def _files(archive: "Archive") -> _Files:
    c = archive.lookup_columns
    if c.n == 0 or len(c.first_rows) == 0:
        return _Files([], [], [], c.n, [])
    tail = archive.tail_offset
    inside = (c.blob_size <= tail) & (c.blob_offset <= tail - np.minimum(c.blob_size, tail))
    raw = c.uncompressed_size == c.blob_size
    packed = c.compressed & (c.uncompressed_size <= MAX_CHUNK_BYTES)
    usable = np.where(inside & (raw | packed), c.uncompressed_size, 0)
    paths = archive.first_paths()
    if len(c.first_rows) == c.n:
        offsets, data = c.path_offsets, c.path_data
    else:  # the first rows' paths only (a cut jar has hundreds of rows of one path)
        offsets, data = utf8_parts(take(one_array(archive.lookup.column("relative_path")),
                                        c.first_rows))
    plain = plain_paths(np.frombuffer(data, dtype=np.uint8), offsets[:-1], offsets[1:])
    return _Files(paths, np.add.reduceat(usable, c.first_rows).tolist(),
                  c.first_rows.tolist(), c.n, plain.tolist())


def _strictly_increasing(paths: list[str]) -> bool:
    """Each path after the one before (code point order = UTF-8 byte order): sorted, no path
    twice."""
    return all(map(operator.lt, paths, islice(paths, 1, None)))


