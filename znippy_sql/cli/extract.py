"""``znippy-sql extract ARCHIVE [PATH...] -o DIR|-``: files out of an archive, every one checked.

Selection as :mod:`.select` says (named members, ``--glob``, ``--exclude``, ``--repo``,
``--pkg-type``), checked before anything is written. ``-o -`` writes the selected files'
bytes to stdout, in path order (as ``cat`` does with several paths). ``--strip-components``,
``--preserve`` and ``--symlinks`` as tar has them (docs/posix.md). A file already in DIR is
replaced, as tar does, unless ``--keep-old-files`` (an error, nothing written) or
``--skip-old-files`` (kept, listed); a member or a ``--glob`` that selects nothing is "Not
found in archive" (exit 2), as tar says. A full disk
or a read-only destination stops at the first failure and says what was written before it;
Ctrl-C too (exit 130).
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from typing import Any

from ..errors import ChecksumError, CodecError, NotFoundError, OutputError, ZnippyError
from .common import (ARCHIVE_HELP, Interrupted, add_filter_options, count_arg, counted, done,
                     human, open_archive_arg, progress_for)
from .findings import print_findings
from .select import PathFilter


def selected_paths(archive: Any, args: argparse.Namespace, *, directories: bool = False
                   ) -> list[str] | None:
    """The archive paths the options select, in path order; None for "everything"."""
    paths_filter = PathFilter(members=getattr(args, "paths", None) or (),
                              globs=args.glob or (), excludes=getattr(args, "exclude", None) or ())
    if not paths_filter and args.repo is None and args.pkg_type is None:
        return None
    candidates = archive.select(repo=args.repo, pkg_type=args.pkg_type)
    if directories and args.repo is None and args.pkg_type is None:
        from ..read.posix import directories as recorded

        dirs = recorded(archive)
        if dirs:
            candidates = sorted({*candidates, *dirs}, key=lambda p: p.encode("utf-8"))
    kept = paths_filter.apply(candidates, archive=archive.path)
    unmatched = [g for g in args.glob or ()
                 if not any(map(re.compile(fnmatch.translate(g)).match, kept))]
    if unmatched:  # as tar: a pattern that selects nothing is an error
        raise NotFoundError(f"{', '.join(map(repr, unmatched))}: Not found in archive",
                            path=archive.path)
    return kept


def to_stdout(archive: Any, paths: list[str], *, command: str) -> int:
    """Each file's bytes, checked, to stdout in order; 1 at the first corrupt chunk."""
    from ..read.posix import links

    out = getattr(sys.stdout, "buffer", sys.stdout)
    skip = links(archive)
    sys.stdout.flush()
    for path in paths:
        if path in skip:
            continue
        try:
            info = archive.find(path)
            if info is None:
                raise NotFoundError(f"no file {path!r} in the archive", path=archive.path)
            for chunk in info.chunks:
                for data in archive.checked_pieces(path, chunk):  # bounded memory, checked
                    out.write(data)
        except (ChecksumError, CodecError) as exc:
            out.flush()
            print(f"znippy-sql: {command}: {exc}", file=sys.stderr)
            return 1
    out.flush()
    return 0


def _tune_process() -> None:
    """A CLI extract is a short process that decodes blob after blob: the objects of its
    imports are frozen out of the garbage collector's full passes (``gc.freeze``), and glibc
    keeps freed decode buffers for the next one instead of returning them to the kernel and
    faulting fresh zeroed pages in (src_tree: ~60,000 page faults → ~18,000). Peak memory is
    what it was; only its release waits for the exit."""
    import ctypes
    import gc

    gc.freeze()
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt(-1, 128 << 20)  # M_TRIM_THRESHOLD
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (its maximum on 64-bit glibc)


def cmd_extract(args: argparse.Namespace) -> int:
    if args.out != "-":
        _tune_process()
    with open_archive_arg(args.archive) as archive:
        paths = selected_paths(archive, args, directories=True)
        if args.out == "-":
            if paths is None:
                paths = archive.select()
            return to_stdout(archive, paths, command="extract")
        progress = progress_for("extract")
        if progress is not None:
            progress.unit = "files"
        try:
            report = archive.extract(args.out, paths=paths, progress=progress,
                                     strip_components=args.strip_components,
                                     preserve=args.preserve, symlinks=args.symlinks,
                                     existing=args.existing)
        except KeyboardInterrupt as exc:
            done(progress)
            partial = getattr(exc, "report", None)
            n = partial.files if partial is not None else 0
            raise Interrupted(
                f"extract: interrupted; {n:,} files were extracted under {args.out} before "
                "it, each complete and checked; a file being written was finished or "
                "removed: no partly written file is left") from None
        except OutputError:
            done(progress)
            raise
        done(progress)
    failures = [why if why.startswith(repr(path)) else f"{path!r}: {why}"
                for path, why in sorted(report.failed.items())]
    print_findings(failures, sys.stderr, prefix="znippy-sql: extract: ",
                   verbose=args.verbose)
    print(f"{report.dest}: {counted(report.files, 'file')}, {human(report.bytes_written)} extracted"
          + (f", {len(report.failed)} failed" if report.failed else "")
          + (f", {counted(report.links, 'symbolic link')}" if report.links else "")
          + f" in {report.seconds:.2f} s")
    for line in skipped_lines(report.skipped, verbose=args.verbose):
        print(line)
    return 0 if report.ok else 1


def skipped_lines(skipped: dict[str, str], *, verbose: bool = False, shown: int = 3
                  ) -> list[str]:
    """What was left out, and why: each path named (``skipped 'a/l': symlink to ...``), or one
    line a reason naming the first ``shown`` (every one on its own line with ``verbose``)."""
    by_why: dict[str, list[str]] = {}
    for path, why in skipped.items():
        by_why.setdefault(why, []).append(path)
    lines: list[str] = []
    for why, paths in sorted(by_why.items(), key=lambda kv: -len(kv[1])):
        paths.sort(key=lambda p: p.encode("utf-8", "surrogatepass"))
        if len(paths) == 1 or verbose:
            lines.extend(f"skipped {p!r}: {why}" for p in paths)
            continue
        named = ", ".join(map(repr, paths[:shown]))
        more = ", ... (every one with -v)" if len(paths) > shown else ""
        lines.append(f"skipped {counted(len(paths), 'path')}: {why}: {named}{more}")
    return lines


def cmd_cat(args: argparse.Namespace) -> int:
    with open_archive_arg(args.archive) as archive:
        for path in args.paths:
            if archive.find(path) is None:
                raise ZnippyError(f"no file {path!r} in the archive", path=archive.path)
        return to_stdout(archive, args.paths, command="cat")


def add_selection(p: argparse.ArgumentParser) -> None:
    """Named members, ``--repo``/``--pkg-type``, repeated ``--glob`` and ``--exclude``."""
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files, or directories for everything under them")
    add_filter_options(p)
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="leave out paths (or directories) matching this (repeatable)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("extract", help="extract files into a directory (or stdout)")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="destination directory, or '-' for the files' bytes on stdout")
    add_selection(p)
    p.add_argument("--strip-components", type=count_arg, default=0, metavar="N",
                   help="drop the first N components of every path (shorter paths skipped)")
    p.add_argument("--preserve", action="store_true",
                   help="set the recorded permission bits and mtimes (never setuid/setgid, "
                        "never ownership)")
    p.add_argument("--symlinks", action="store_true",
                   help="make recorded symbolic links (only those that resolve inside DIR)")
    old = p.add_mutually_exclusive_group()
    old.add_argument("-k", "--keep-old-files", dest="existing", action="store_const",
                     const="error", default="replace",
                     help="a file already in DIR is an error: nothing is extracted (exit 2); "
                          "by default existing files are replaced, as tar does")
    old.add_argument("--skip-old-files", dest="existing", action="store_const", const="skip",
                     help="keep the files already in DIR, extract the others, list those kept")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every failure on its own line (repeated ones are grouped otherwise)")
    p.set_defaults(func=cmd_extract)

    p = subparsers.add_parser("cat", help="write files' bytes to stdout")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    p.add_argument("paths", nargs="+", metavar="PATH", help="relative_path inside the archive")
    p.set_defaults(func=cmd_cat)
