"""Extract: every target checked before anything is written, streamed chunk by chunk, verified.

Order of work: every selected path is checked (:class:`~znippy_sql.format.paths.Targets`: no
``..``, absolute or drive paths, no symlink on the way or at the target) before anything is
written; then the files (and their directories) are written, by worker threads when there is
enough to do: decoding (:mod:`~znippy_sql.format.zlframe`), BLAKE3 of large chunks and every system
call release the GIL, so two threads also create files in parallel.
Work is cut into units of about ``UNIT_BYTES`` (at most ``UNIT_FILES`` files): runs of small
files, or runs of chunks of one large file, which its workers fill with positioned writes.
Workers get each file's lookup rows from the caller (no trie search per file; the rows are
checked again).

Memory is bounded by one chunk (the block size) per worker. Every file is written to a hidden
temporary sibling (``.NAME.znippy-part-PID``, created with ``O_EXCL``, never through a symlink)
and renamed to its name only once its bytes are complete and checked (:mod:`.partfile`): a
failure, Ctrl-C or even SIGKILL never leaves a partly written file under its name, and an
existing file stays as it was until replaced whole. The next extract into the same directories
removes temporaries left by a killed one. Links and recorded directories are made after the
files (``symlinks=True``: only links that resolve inside ``dest``); modes are plain files
(0o644 under umask) unless ``preserve=True``.

An existing file is replaced, as tar does by default; ``existing="error"`` (tar's
``--keep-old-files``) refuses the extract before anything is written when a name is taken,
``existing="skip"`` (``--skip-old-files``) leaves such files as they are and reports them in
``report.skipped``. Either way the final rename never replaces a file that appeared meanwhile.
"""

from __future__ import annotations

import errno
import fnmatch
import itertools
import operator
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Union

import numpy as np

from ..errors import FormatError, NotFoundError, OptionError, OutputError, ZnippyError
from ..format.fsio import write_all
from ..format.kernels import one_array, take, utf8_parts
from ..format.paths import Targets, plain_paths
from ..format.units import human
from ..format.validate import MAX_CHUNK_BYTES
from . import partfile
from .fileviews import file_views
from .partfile import Sink

if TYPE_CHECKING:
    from .posix import Facts
    from .columns import Chunk
    from .core import ArchiveCore as Archive

_OPEN = os.O_WRONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)

UNIT_BYTES = 8 << 20        # work handed to a worker at a time
UNIT_FILES = 256            # and at most this many files (small units balance the workers)
#: Threads are used from this much work: the bytes written, each file counted as at least
#: PER_FILE_BYTES (creating a file costs about as much as writing that many bytes).
THREAD_BYTES = 4 << 20
PER_FILE_BYTES = 16 << 10
#: a blob at least this big has its mapped pages dropped from RSS once written out
#: (RangeSource.release): memory stays bounded by the block size, not the archive size
RELEASE_BYTES = 256 << 10
WRITEV_BYTES = 1 << 20  # a file's chunks are written in one writev up to this many bytes
WRITEV_PIECES = 256  # or this many chunks (IOV_MAX is 1024)

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

    @property
    def ok(self) -> bool:
        return not self.failed


class ExtractInterrupted(KeyboardInterrupt):
    """Ctrl-C during an extract; ``report`` says what was written before it."""

    def __init__(self, report: ExtractReport) -> None:
        super().__init__()
        self.report = report


class _Part(NamedTuple):
    """A whole file (``chunks`` None: the worker finds them from lookup rows ``row`` to
    ``end``) or a run of chunks of a pre-created one."""

    path: str
    target: str       # where a run's bytes go (its pre-created file), or a whole file's
    #                   target when it is not Targets.prefix + path; "" for Targets.prefix +
    #                   path (one string less per file to keep)
    chunks: tuple["Chunk", ...] | None
    row: int = -1     # the file's first lookup row (-1: ask the trie)
    end: int = -1     # the lookup row after its last chunk
    nbytes: int = 0   # how much it writes (for scheduling only)


class _Fatal(str):
    """The problem of a write the destination refused for good (disk full, read-only)."""


Outcome = Union[int, str]  # bytes written, or the problem
#: a write failing so stops the extract: the next one will not do better
FATAL_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


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
    if existing != "replace":  # names taken already: refused, or kept and left out
        selected, found, names = _old_files(dest, selected, found, names, out_links, existing,
                                            report)
    n = workers if workers is not None else (os.cpu_count() or 1)
    if n < 1:
        raise ValueError("workers must be at least 1")
    sizes = files.sizes
    if progress is not None and hasattr(progress, "total_bytes"):
        progress.total = len(selected)  # type: ignore[attr-defined]  # has totals (above)
        progress.total_bytes = sum(sizes[i] for i in found if i >= 0)
    work = sum(max(sizes[i], PER_FILE_BYTES) if i >= 0 else PER_FILE_BYTES for i in found)
    pool: ThreadPoolExecutor | None = None
    if n > 1 and work >= THREAD_BYTES:
        archive.trie, archive.lookup_columns  # noqa: B018  (load them before the threads share them)
        pool = ThreadPoolExecutor(n, thread_name_prefix="znippy-extract")
    finish = None
    facts = posix.facts(archive) if preserve else None
    if facts is not None:  # mode and mtime set on the temporary, before its rename

        def finish(tmp: str, path: str) -> None:
            posix.preserve(tmp, facts.modes.get(path), facts.mtimes.get(path))
    sink = Sink("", finish, replace=existing == "replace")
    try:
        _extract(archive, dest, selected, found, files, pool, n, progress, report, names, sink)
    except KeyboardInterrupt:
        if pool is not None:  # the units in flight finish (or remove) their files first
            pool.shutdown(wait=True, cancel_futures=True)
            pool = None
        report.written = list(sink.done)  # what is on disk under its name, complete
        report.files = len(report.written)
        raise ExtractInterrupted(report) from None
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    _finish(archive, dest, report, {out: (p, links[p]) for p, out in out_links.items()},
            {out: d for d, out in out_dirs.items()}, symlinks=symlinks, facts=facts)
    report.seconds = time.perf_counter() - started
    return report


def _old_files(dest: str, selected: list[str], found: list[int], names: list[str] | None,
               out_links: dict[str, str], existing: Existing, report: ExtractReport
               ) -> tuple[list[str], list[int], list[str] | None]:
    """``existing="error"``: an OutputError naming the files and links whose name is taken
    (nothing written yet); ``"skip"``: those left out (``report.skipped``). A directory
    already there is no problem (the files go into it)."""
    root = os.path.join(dest, "")
    if not os.path.isdir(root):  # a new destination: nothing can be in the way
        return selected, found, names
    outs = names if names is not None else selected
    taken = [k for k, out in enumerate(outs) if os.path.lexists(root + out)]
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


def _extract(archive: "Archive", dest: str, selected: list[str], found: list[int],
             files: "_Files", pool: ThreadPoolExecutor | None, n_workers: int,
             progress: Callable[[int, int], None] | None, report: ExtractReport,
             names: list[str] | None, sink: Sink) -> None:
    targets = Targets(dest, archive=archive.path)
    sink.prefix = targets.prefix
    plain = files.plain
    outs = names if names is not None else selected
    for out, i in zip(outs, found):  # every path checked before any write
        targets.target(out, checked=i >= 0 and plain[i] and names is None)
    for path, i in zip(selected, found):
        if i < 0:
            report.failed[path] = "not in the archive"
    try:
        os.makedirs(dest, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot create the destination: {exc.strerror or exc}",
                          path=dest) from None
    partfile.remove_leftovers(targets.existing_dirs())  # a killed extract's temporaries
    # Big files are cut into runs of chunks only when there are too few of them to keep every
    # worker busy: threads writing into the same file wait for its inode lock (perf: ~15 % of
    # the samples of extracting `random` spinning in rwsem_spin_on_owner).
    sizes = files.sizes
    big = sum(1 for i in found if i >= 0 and sizes[i] > UNIT_BYTES)
    parts, split = _parts(archive, targets, selected, found, files,
                          split=pool is not None and big < n_workers, report=report,
                          names=names)
    runs: dict[str, list[Outcome]] = {}  # results so far of the files written in runs
    done_files = done_bytes = 0
    stop: list[str] = []  # the first fatal problem: no unit is started after it
    fatal: tuple[str, str] | None = None
    try:
        for unit_result in _run(archive, parts, pool, n_workers, sink, stop):
            for path, result in unit_result:
                if isinstance(result, int):
                    done_bytes += result
                if path in split:
                    got = runs.setdefault(path, [])
                    got.append(result)
                    if len(got) < split[path][2] and not stop and not isinstance(result, _Fatal):
                        continue
                    result = _finish_split(split[path], runs.pop(path), sink, path)
                if isinstance(result, str):
                    report.failed[path] = result
                    if isinstance(result, _Fatal) and fatal is None:
                        fatal = (path, str(result))
                        stop.append(result)
                else:
                    report.files += 1
                    report.bytes_written += result
                    report.written.append(path)
                done_files += 1
                if progress is not None:
                    progress(done_files, done_bytes)
    except BaseException:
        for path in split.keys() - set(report.written) - report.failed.keys():
            _remove(split[path][0])
        raise
    for path in split.keys() - set(report.written):  # runs never started after a stop
        _remove(split[path][0])
    if fatal is not None:
        path, why = fatal
        error = OutputError(
            f"stopped at the first {why!r} (writing {path!r}): {report.files:,} files "
            f"({human(report.bytes_written)}) were extracted before it, complete and checked; "
            "no partly written file is left", path=dest)
        error.report = report  # type: ignore[attr-defined]  # what was extracted, for callers
        raise error


def _finish_split(split: tuple[str, str, int], results: list[Outcome], sink: Sink,
                  path: str) -> Outcome:
    """A file written in runs: renamed into place when every run wrote its part."""
    written, target, _ = split
    problems = [r for r in results if isinstance(r, str)]
    if problems:
        _remove(written)
        return problems[0]
    sizes = [r for r in results if isinstance(r, int)]  # all of them: no problem
    try:
        sink.publish(written, target, path)
    except OSError as exc:
        return f"cannot write: {exc.strerror or exc}"
    return sum(sizes)


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


def _parts(archive: "Archive", targets: Targets, selected: list[str], found: list[int],
           files: _Files, *, split: bool, report: ExtractReport, names: list[str] | None = None
           ) -> tuple[list[list[_Part]], dict[str, tuple[str, str, int]]]:
    """Units of work. A large file (when ``split``) is pre-created here and cut into runs of
    chunks; ``split`` maps its path → (the file its runs write, its target, how many runs).
    ``names``: each path's name under the destination, when it is not the path itself."""
    units: list[list[_Part]] = []
    unit: list[_Part] = []
    size = 0
    pre: dict[str, tuple[str, str, int]] = {}
    sizes, firsts, last = files.sizes, files.firsts, len(files.firsts) - 1
    new_part = tuple.__new__  # _Part(...) goes through a Python-level __new__: ~1 µs a file
    c = archive.lookup_columns
    # packed archives: each row's compressed blob (-1: raw), so no pack spans two units
    pack_of = np.where(c.compressed, c.blob_offset.astype(np.int64), -1).tolist() \
        if c.packed else None
    full = False
    outs = names if names is not None else selected
    for path, i, out in zip(selected, found, outs):
        if i < 0:
            continue
        nbytes = sizes[i]
        if split and nbytes > UNIT_BYTES:
            try:
                info = archive.find(path)
                if info is None:
                    raise FormatError(f"{path!r} is in the lookup but not in the trie")
                if len(info.chunks) > 1:
                    targets.make_parent(out)
                    target = targets.prefix + out
                    written = _precreate(target)
                    runs = _runs(info.chunks)
                    pre[path] = (written, target, len(runs))
                    units.extend([[_Part(path, written, run,
                                         nbytes=sum(c.uncompressed_size for c in run))]
                                  for run in runs])
                    continue
            except ZnippyError as exc:
                report.failed[path] = exc.problem
                continue
            except OSError as exc:
                report.failed[path] = f"cannot write: {exc.strerror or exc}"
                continue
        end = firsts[i + 1] if i < last else files.n
        whole = "" if names is None else targets.prefix + out
        if full and (pack_of is None or pack_of[firsts[i]] != pack_of[unit[-1].row]):
            units.append(unit)  # a full unit ends where a packed blob ends (one decode each)
            unit, size, full = [], 0, False
        unit.append(new_part(_Part, (path, whole, None, firsts[i], end, nbytes)))
        size += nbytes + 4096
        full = size >= UNIT_BYTES or len(unit) >= UNIT_FILES
    if unit:
        units.append(unit)
    return units, pre


def _runs(chunks: Sequence["Chunk"]) -> list[tuple["Chunk", ...]]:
    runs: list[tuple["Chunk", ...]] = []
    run: list["Chunk"] = []
    size = 0
    for c in chunks:
        run.append(c)
        size += c.uncompressed_size
        if size >= UNIT_BYTES:
            runs.append(tuple(run))
            run, size = [], 0
    if run:
        runs.append(tuple(run))
    return runs


def _precreate(target: str) -> str:
    """Create the temporary file a split extraction fills (renamed to ``target`` at the end)."""
    fd, written = partfile.create(target)
    os.close(fd)
    return written


def _run(archive: "Archive", units: list[list[_Part]], pool: ThreadPoolExecutor | None,
         n_workers: int, sink: Sink, stop: list[str]
         ) -> Iterator[list[tuple[str, Outcome]]]:
    """Results of each unit, in unit order; at most ``2 × workers`` units in flight. Once
    ``stop`` holds something, no further unit starts (those in flight still report)."""
    if pool is None or len(units) < 2:
        for unit in units:
            if stop:
                return
            yield _write_unit(archive, unit, sink)
        return
    window: deque[Future[list[tuple[str, Outcome]]]] = deque()
    for unit in units:
        if stop:
            break
        window.append(pool.submit(_write_unit, archive, unit, sink))
        while window and (len(window) > 2 * n_workers or window[0].done()):
            yield window.popleft().result()
    while window:
        yield window.popleft().result()


def _write_unit(archive: "Archive", unit: list[_Part], sink: Sink
                ) -> list[tuple[str, Outcome]]:
    """One unit through :func:`~znippy_sql.read.many.unit_views` (the bulk reader's unit:
    its blobs fetched at once when remote, its one-chunk files decoded together)."""
    from .many import unit_views

    items = [(p.path, p.row, p.end) if p.chunks is None else (p.path, -1, -1) for p in unit]
    runs = [ch for p in unit for ch in p.chunks or ()]
    with unit_views(archive, items, runs, verify=True) as ready:
        return _write_parts(archive, unit, ready, sink)


def _write_parts(archive: "Archive", unit: list[_Part], ready: list[memoryview | None],
                 sink: Sink) -> list[tuple[str, Outcome]]:
    out: list[tuple[str, Outcome]] = []
    made: set[str] = set()  # directories this unit has made sure of
    for part, data in zip(unit, ready):
        try:
            if part.chunks is None:
                target = part.target or sink.prefix + part.path
                if data is not None:  # a one-chunk file, its bytes checked already
                    n = _write_small(sink, part.path, target, made, data)
                else:
                    n = _write_file(archive, part, target, made, sink)
            else:
                n = _write_run(archive, part)
            out.append((part.path, n))
        except ZnippyError as exc:
            out.append((part.path, exc.problem))
        except OSError as exc:  # e.g. "a" and "a/b" both in the archive
            why = f"cannot write: {exc.strerror or exc}"
            if exc.errno in FATAL_ERRNOS:  # the rest of the unit would fail the same way
                out.append((part.path, _Fatal(why)))
                break
            out.append((part.path, why))
    return out


def _write_small(sink: Sink, path: str, target: str, made: set[str], data: memoryview) -> int:
    """:func:`_write_new` of one buffer (most files of a source tree)."""
    return _write_new(sink, path, target, made, (data,))


def _write_new(sink: Sink, path: str, target: str, made: set[str],
               pieces: Iterable[bytes | memoryview]) -> int:
    """Write ``target`` from ``pieces`` in order to a temporary sibling, renamed to ``target``
    when complete (:mod:`.partfile`); its size. On any failure nothing is left under either
    name."""
    fd, written = partfile.create(target, made)
    try:
        n = 0
        try:
            pending: list[bytes | memoryview] = []
            held = 0
            for data in pieces:  # many small chunks (a jar's entries): one writev a MiB
                pending.append(data)
                held += len(data)
                if held >= WRITEV_BYTES or len(pending) >= WRITEV_PIECES:
                    _write_pieces(fd, pending)
                    n += held
                    pending, held = [], 0
            _write_pieces(fd, pending)
            n += held
        finally:
            os.close(fd)
    except BaseException:
        _remove(written)
        raise
    sink.publish(written, target, path)
    return n


def _write_pieces(fd: int, pieces: list[bytes | memoryview]) -> None:
    """``pieces`` back to back at the file position: one ``writev`` unless it falls short."""
    if len(pieces) == 1:
        write_all(fd, pieces[0])
    elif pieces:
        done = os.writev(fd, pieces)
        if done < sum(len(p) for p in pieces):
            for piece in pieces:  # the rest, piece by piece
                size = len(piece)
                if done < size:
                    write_all(fd, memoryview(piece)[done:])
                done = max(0, done - size)


def _file_chunks(archive: "Archive", part: _Part) -> tuple["Chunk", ...]:
    """The chunks of a whole file: from its lookup rows (or the trie), checked by the reader."""
    if part.row < 0:
        info = archive.find(part.path)
        if info is None:
            raise NotFoundError(f"{part.path!r} is not in the archive", path=archive.path)
        return info.chunks
    return archive.file_at(part.path, part.row).chunks


def _write_file(archive: "Archive", part: _Part, target: str, made: set[str], sink: Sink) -> int:
    """A whole file: its chunks at once when :func:`.fileviews.file_views` can (a cut jar's
    hundreds of small chunks), else chunk by chunk; checked before anything is created."""
    if part.row >= 0:
        views = file_views(archive, part.path, part.row, part.end, verify=True)
        if views is not None:
            n = _write_new(sink, part.path, target, made, views)
            if n >= RELEASE_BYTES:
                _release_rows(archive, part.row, part.end)
            return n
    chunks = _file_chunks(archive, part)
    return _write_new(sink, part.path, target, made,
                      (data for _, data, _ in _decoded(archive, part.path, chunks)))


def _release_rows(archive: "Archive", row: int, end: int) -> None:
    """Drop the mapped pages of the blobs of lookup rows ``[row, end)`` (one span)."""
    c = archive.lookup_columns
    start = int(c.blob_offset[row:end].min())
    archive.source.release(start, int((c.blob_offset[row:end] + c.blob_size[row:end]).max())
                           - start)


def _decoded(archive: "Archive", path: str, chunks: Iterable["Chunk"]
             ) -> Iterator[tuple["Chunk", bytes | memoryview, int]]:
    """Each chunk, its checked bytes and where they start in the chunk; a big blob's mapped
    pages are dropped once the caller has written it (when it asks for the next). A chunk
    that decodes to more than ``codec.STREAM_BYTES`` comes in pieces (bounded memory), its
    BLAKE3 checked after the last: the caller writes a temporary file only."""
    from ..format.codec import STREAM_BYTES

    batch: list["Chunk"] = []
    held = 0
    for chunk in chunks:
        if chunk.compressed and chunk.uncompressed_size > STREAM_BYTES:
            if batch:
                yield from zip(batch, archive.chunk_views(path, batch, verify=True), _ZEROS)
                batch, held = [], 0
            at = 0
            for piece in archive.chunk_pieces(path, chunk, verify=True):
                yield chunk, piece, at
                at += len(piece)
            archive.source.release(chunk.blob_offset, chunk.blob_size)
            continue
        if chunk.blob_size < RELEASE_BYTES:  # small chunks (a cut jar): decoded in batches
            batch.append(chunk)
            held += chunk.uncompressed_size
            if held < WRITEV_BYTES and len(batch) < WRITEV_PIECES:
                continue
            yield from zip(batch, archive.chunk_views(path, batch, verify=True), _ZEROS)
            batch, held = [], 0
            continue
        if batch:
            yield from zip(batch, archive.chunk_views(path, batch, verify=True), _ZEROS)
            batch, held = [], 0
        yield chunk, archive.chunk_view(path, chunk, verify=True), 0
        archive.source.release(chunk.blob_offset, chunk.blob_size)
    if batch:
        yield from zip(batch, archive.chunk_views(path, batch, verify=True), _ZEROS)


_ZEROS = itertools.repeat(0)


def _write_run(archive: "Archive", part: _Part) -> int:
    """A run of chunks of a pre-created file, each at its offset."""
    fd = os.open(part.target, _OPEN)
    try:
        n = 0
        for chunk, data, at in _decoded(archive, part.path, part.chunks or ()):
            write_all(fd, data, chunk.fdata_offset + at)
            n += len(data)
        return n
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    if os.path.lexists(path):
        os.unlink(path)

