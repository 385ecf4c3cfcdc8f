"""``znippy-sql create SRC -o OUT``: a directory into a new archive.

Checked before any work: ``SRC`` is a directory, ``OUT`` is not a directory and its parent
exists, ``--level`` is in range. The source is walked once for the progress bar's totals
(a listing, no file opened) when stderr is a terminal. A full disk, a read-only destination
or Ctrl-C ends with one line and nothing under ``OUT`` (the staging file is removed).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import ZnippyError, missing_or
from ..format.codec import DEFAULT_LEVEL
from ..write.compat import COMPAT_MODES
from .common import (Interrupted, PkgTypeHelp, counted, create_pkg_type_arg, done, human,
                     level_arg, os_problem, positive_int, progress_for, size_arg)


def cmd_create(args: argparse.Namespace) -> int:
    from ..write import early

    if not os.path.isdir(args.src):
        raise missing_or(args.src, "source is not a directory", "source")
    options = options_from(args)
    early.start(args.src, args.out, options)  # the walk works while pyarrow is imported
    try:
        return _create(args, options)
    finally:
        early.discard()


def _create(args: argparse.Namespace, options: Any) -> int:
    from ..write.source import Walk
    from ..write.writer import check_output, write_archive

    check_output(args.out)
    extra: dict[str, Any] = {}
    from . import provenance as prov

    if args.compat == "rust-0.10":  # facts and signatures the Rust way (write/rust10.py)
        extra.update(prov.writer_kwargs(args))
    elif args.compat is not None:  # data sub-indexes and a manifest only: no provenance either
        signs = args.compat == "rust-0.9"  # signatures the Rust way (write/rust10.py)
        given = [opt for opt in _SECTION_OPTIONS if getattr(args, opt[2:].replace("-", "_"), None)
                 and not (signs and opt.startswith("--sign"))]
        if given:
            why = ("metadata (the Rust 0.9.1 to 0.9.5 readers take __znippy_meta__ for a data "
                   "sub-index; rust-0.10 writes it)" if signs else "metadata or signatures (the "
                   "Rust 0.8 reader reads every section as an index)")
            raise ZnippyError(f"--compat {args.compat} writes no {why}: {', '.join(given)} "
                              "cannot be used with it")
        if signs:
            extra["signer"] = prov.writer_kwargs(args)["signer"]
    else:
        extra.update(prov.writer_kwargs(args))
    progress = progress_for("create")
    if progress is not None:  # a terminal: totals first, from a listing of the tree
        progress.total, progress.total_bytes = Walk(
            args.src, skip_unreadable=args.skip_unreadable).count()
    try:
        report = write_archive(args.out, args.src, options=options,
                               repo=args.repo, pkg_type=args.pkg_type, progress=progress,
                               **extra)
    except KeyboardInterrupt:
        raise Interrupted(f"create: interrupted; nothing was written under {args.out}") \
            from None
    except OSError as exc:
        raise ZnippyError(f"cannot write: {os_problem(exc)}; nothing was written under "
                          "this name", path=args.out) from None
    finally:
        done(progress)
    print(f"{report.path}: {counted(report.files, 'file')} in {counted(report.groups, 'group')}, "
          f"{counted(report.chunks, 'chunk')} ({report.compressed_chunks} compressed, "
          f"{report.raw_chunks} raw), {human(report.bytes_in)} -> "
          f"{human(report.archive_bytes)} (ratio {report.ratio:.2f}) in {report.seconds:.2f} s")
    if report.packs:
        print(f"packed {counted(report.packed_files, 'small file')} into "
              f"{counted(report.packs, 'shared frame')} (--no-pack: one frame each)")
    rust = args.compat == "rust-0.10"
    if rust and report.directories:
        print(f"recorded {counted(report.directories, 'directory').replace('ys', 'ies')} and "
              "the file modes (__znippy_fsmeta__)")
    elif report.symlinks or report.directories:
        print(f"recorded {counted(report.directories, 'directory').replace('ys', 'ies')} and "
              f"{counted(report.symlinks, 'symbolic link')} with modes and mtimes (__meta__)")
    if report.links_left_out:
        print(f"left out {counted(report.links_left_out, 'symbolic link')} "
              f"({'the Rust tool stores none' if rust and not args.no_posix else '--no-posix'})")
    if report.special_left_out:
        first = ", ".join(repr(p) for p in report.special_left_out[:3])
        print(f"left out {counted(len(report.special_left_out), 'special file')} (FIFO, "
              f"socket or device: an archive holds files): {first}"
              + (", ..." if len(report.special_left_out) > 3 else ""))
    if report.unreadable:
        print(unreadable_lines(report.unreadable))
    if report.skipped:
        print(f"skipped {counted(len(report.skipped), 'file')} with a name the format refuses "
              "(--skip-unsafe):")
        for where, why in report.skipped:
            print(f"  {where}: {why}")
    return 1 if report.skipped or report.unreadable else 0


def unreadable_lines(unreadable: list[tuple[str, str]]) -> str:
    """What ``create``/``append`` say of the paths ``--skip-unreadable`` left out."""
    return (f"skipped {counted(len(unreadable), 'unreadable path')} (--skip-unreadable):"
            + "".join(f"\n  {where}: {why}" for where, why in unreadable))


#: create's options that write reserved sections, refused with --compat
_SECTION_OPTIONS = ("--meta", "--meta-file", "--sign-key", "--sign-cert")


def add_unreadable_option(p: Any) -> None:
    """``--skip-unreadable``: leave out what cannot be read instead of stopping (exit 2)."""
    p.add_argument("--skip-unreadable", action="store_true",
                   help="skip (and list) files and directories that cannot be read "
                        "(permissions); exit 1. Without it such a path stops the write")


def add_dedup_option(p: Any) -> None:
    """``--no-dedup``: fixed-size chunks, skip-listed files raw, no shared blobs."""
    p.add_argument("--no-dedup", dest="dedup", action="store_false", default=None,
                   help="no zip-entry chunks, no probe of skip-listed files, no shared blobs "
                        "(the layout of archives written before dedup)")


def add_layout_options(p: Any) -> None:
    """``--pack``/``--no-pack`` and ``--index-compression``/``--no-index-compression``
    (docs/format.md, "Packed blobs" and "Compressed index streams"); unset: the default of
    ``WriteOptions``, or for ``append`` what the archive was written with."""
    p.add_argument("--pack", action=argparse.BooleanOptionalAction, default=None,
                   help="pack small files into shared frames (the default; --no-pack: "
                        "each its own frame, the layout before packing)")
    p.add_argument("--index-compression", action=argparse.BooleanOptionalAction, default=None,
                   help="ZSTD-compress the index streams' record batches (the default; "
                        "--no-index-compression: stored as they are)")


#: the flags that name a ``WriteOptions`` field (``--block-size`` → ``block_size``); unset
#: (None): the field's default, or for ``append`` the archive's own
_OPTION_FLAGS = ("level", "block_size", "workers", "dedup", "pack", "index_compression",
                 "compat")


def option_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The write options a command line gives, as the keywords every writer takes (those not
    given left out); ``--no-posix``/``--skip-unsafe``/``--skip-unreadable`` where the
    command has them."""
    out = {name: getattr(args, name) for name in _OPTION_FLAGS
           if getattr(args, name, None) is not None}
    for name in ("skip_unsafe", "skip_unreadable"):
        if getattr(args, name, False):
            out[name] = True
    if hasattr(args, "no_posix"):  # recorded by default (rust-0.10: as __znippy_fsmeta__;
        # never with rust-0.8)
        out["posix"] = not args.no_posix and getattr(args, "compat", None) in (None,
                                                                               "rust-0.10")
    return out


def options_from(args: argparse.Namespace) -> Any:
    """The :class:`~znippy_sql.WriteOptions` of a ``create`` command line (checked once)."""
    from ..write.options import resolve

    return resolve(None, what="create", **option_kwargs(args))[0]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("create", help="write an archive from a directory")
    p.add_argument("src", metavar="SRC", help="directory to archive (walked in path order)")
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="archive to write")
    p.add_argument("--repo", default="", help="repo of every file (default: '')")
    p.add_argument("--pkg-type", type=create_pkg_type_arg, default=0, metavar="TYPE",
                   help=PkgTypeHelp("package type: a module's name ({types}), raw, auto "
                                    "(modules claim files) or a number (default: raw)"))
    p.add_argument("--level", type=level_arg, default=None, metavar="L",
                   help=f"OpenZL compression level, 1..22 (default: {DEFAULT_LEVEL})")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="compression threads (default: CPU count)")
    p.add_argument("--block-size", type=size_arg, default=None, metavar="BYTES",
                   help="chunk size, e.g. 10M (default: 10 MiB)")
    p.add_argument("--no-posix", action="store_true",
                   help="do not record modes, mtimes, symbolic links and directories "
                        "(as posix.* rows of __meta__; with --compat rust-0.10 directories "
                        "and modes as the Rust __znippy_fsmeta__; never with rust-0.8 or 0.9)")
    p.add_argument("--compat", choices=COMPAT_MODES, default=None,
                   help="write an archive the Rust znippy reads: rust-0.8, data sub-indexes "
                        "and the manifest only; rust-0.9 (0.9.1+), with the Rust lookup, trie "
                        "and signatures; rust-0.10 (0.9.13+), also typed facts and "
                        "directories and modes (docs/interop.md)")
    p.add_argument("--skip-unsafe", action="store_true",
                   help="skip (and list) files whose names the format refuses, e.g. a "
                        "newline in a name; exit 1")
    add_unreadable_option(p)
    add_dedup_option(p)
    add_layout_options(p)
    from .provenance import add_create_options

    add_create_options(p)
    p.set_defaults(func=cmd_create)



