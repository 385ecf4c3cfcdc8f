"""Lifecycle subcommands: ``append`` to a static archive; ``store add|ls|seal`` for the dynamic store.

``--json`` prints the report as JSON; otherwise a human summary. Exit codes as everywhere: 0 ok,
2 usage or unreadable input (any :class:`ZnippyError`). ``store seal`` takes the ``create``
options for ``__meta__`` and signatures (provenance recorded by default, as ``create``); given
a ``--sidecar`` with a Rust ``<name>.hot.NNNNN`` journal beside it, it seals that Rust hot
archive in place instead (``write/rustseal.py``);
``append`` takes them too but, given none, keeps the archive's own ``__meta__``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from typing import Any

from ..errors import ZnippyError, missing_or
from .common import Interrupted, PkgTypeHelp, os_problem
from .core import counted, create_pkg_type_arg, human, positive_int, size_arg
from .create import (add_dedup_option, add_layout_options, add_unreadable_option,
                     option_kwargs, unreadable_lines)


def _writer_kwargs(args: argparse.Namespace, *, only_if_asked: bool) -> dict[str, Any]:
    """``meta=``/``signer=`` from the provenance options. ``only_if_asked`` (append): none
    unless an option was given, so the archive keeps its own ``__meta__``."""
    from . import provenance as prov

    asked = any(getattr(args, n, None) for n in ("meta", "meta_file", "sign_key",
                                                  "no_provenance"))
    if only_if_asked and not asked:
        return {}
    return dict(prov.writer_kwargs(args))


def _add_provenance_options(parser: argparse.ArgumentParser) -> None:
    from .provenance import add_create_options

    add_create_options(parser)


def _emit(report: Any, args: argparse.Namespace, line: str) -> None:
    if args.json:
        json.dump(dataclasses.asdict(report), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(line)


def _catalog(args: argparse.Namespace) -> dict[str, str] | None:
    """``--catalog-uri`` (a SQLAlchemy URL or ``http(s)://`` REST endpoint) + ``--catalog-prop``."""
    props: dict[str, str] = {}
    for item in args.catalog_prop or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"znippy-sql: --catalog-prop wants KEY=VALUE, got {item!r}")
        props[key] = value
    if args.catalog_uri:
        props["uri"] = args.catalog_uri
        if args.catalog_uri.startswith(("http://", "https://")):
            props.setdefault("type", "rest")
    return props or None


# -- append -------------------------------------------------------------------------------------
def cmd_append(args: argparse.Namespace) -> int:
    from ..write.append import append_archive

    if not os.path.isdir(args.source):
        raise missing_or(args.source, "source is not a directory", "source")
    try:
        r = append_archive(args.archive, args.source, repo=args.repo, pkg_type=args.pkg_type,
                           drop_signatures=args.drop_signatures, move=args.move,
                           **option_kwargs(args), **_writer_kwargs(args, only_if_asked=True))
    except KeyboardInterrupt:
        raise Interrupted(f"append: interrupted; {args.archive} was rolled back to what it "
                          "was") from None
    except OSError as exc:
        raise ZnippyError(f"cannot write: {os_problem(exc)}; the append was rolled back",
                          path=args.archive) from None
    line = (f"{r.path}: +{counted(r.files_added, 'file')} "
            f"({human(r.blob_bytes_written)} of blobs), {r.files_unchanged} unchanged, "
            f"{r.files_replaced} replaced, {r.files_moved} moved ({human(r.dead_bytes)} dead), "
            f"{human(r.archive_bytes)} in {r.seconds:.2f}s"
            + (" [rolled back an interrupted append first]" if r.recovered else ""))
    if r.dropped_sections:
        line += f"\nsignatures dropped (--drop-signatures): {', '.join(r.dropped_sections)}"
    if r.meta != "none":
        line += f"\n__meta__ {r.meta}"
    if r.moves and not args.json:
        line += "".join(f"\nmoved {p}: {a} -> {b}" for p, a, b in r.moves)
    if r.skipped and not args.json:
        line += (f"\nskipped {counted(len(r.skipped), 'file')} with a name the format refuses "
                 "(--skip-unsafe):" + "".join(f"\n  {w}: {why}" for w, why in r.skipped))
    if r.unreadable and not args.json:
        line += "\n" + unreadable_lines(r.unreadable)
    _emit(r, args, line)
    return 1 if r.skipped or r.unreadable else 0


# -- compact ----------------------------------------------------------------------------------
def cmd_compact(args: argparse.Namespace) -> int:
    from ..write.compact import compact_archive

    try:
        r = compact_archive(args.archive)
    except KeyboardInterrupt:
        raise Interrupted(f"compact: interrupted; {args.archive} is as it was") from None
    except OSError as exc:
        raise ZnippyError(f"cannot write: {os_problem(exc)}; the archive is as it was",
                          path=args.archive) from None
    if not r.rewritten:
        line = f"{r.path}: no dead bytes, left as it was ({counted(r.files, 'file')})"
    else:
        line = (f"{r.path}: {human(r.dead_bytes_dropped)} dead dropped, "
                f"{counted(r.files, 'file')}, {human(r.old_size)} -> {human(r.new_size)} "
                f"in {r.seconds:.2f}s")
    _emit(r, args, line)
    return 0


# -- store --------------------------------------------------------------------------------------
def _open_store(args: argparse.Namespace, *, writable: bool) -> Any:
    from ..store import open_store

    return open_store(args.sidecar, args.warehouse, args.namespace, catalog=_catalog(args),
                      level=getattr(args, "level", None),
                      block_size=getattr(args, "block_size", None), writable=writable,
                      pack=getattr(args, "pack", None),
                      index_compression=getattr(args, "index_compression", None))


def cmd_store_add(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.source):
        raise missing_or(args.source, "source is not a directory", "source")
    store = _open_store(args, writable=True)
    try:
        r = store.add(args.source, repo=args.repo, pkg_type=args.pkg_type, workers=args.workers,
                      dedup=args.dedup)
    except KeyboardInterrupt:
        raise Interrupted(f"store add: interrupted; nothing was committed, {args.sidecar} "
                          "was cut back to its committed end") from None
    except OSError as exc:
        raise ZnippyError(f"cannot write: {os_problem(exc)}; nothing was committed",
                          path=args.sidecar) from None
    finally:
        store.close()
    _emit(r, args, f"{args.sidecar}: +{counted(r.files_added, 'file')}, "
                   f"{r.files_unchanged} unchanged, "
                   f"{counted(r.rows_replaced, 'row')} replaced, "
                   f"{counted(len(r.tables), 'table commit')}, sidecar at {human(r.sidecar_end)} "
                   f"in {r.seconds:.2f}s")
    return 0


def cmd_store_compact(args: argparse.Namespace) -> int:
    store = _open_store(args, writable=True)
    try:
        r = store.compact()
    finally:
        store.close()
    _emit(r, args, f"{args.warehouse}: {counted(len(r.tables), 'table')} rewritten, data files "
                   f"{r.data_files_before} -> {r.data_files_after}, "
                   f"{counted(r.snapshots_expired, 'snapshot')} expired, "
                   f"{counted(r.files_removed, 'file')} removed in {r.seconds:.2f}s")
    return 0


def cmd_store_ls(args: argparse.Namespace) -> int:
    from ..views.files import files_of_group

    store = _open_store(args, writable=False)
    try:
        groups = store.group_rows()
    finally:
        store.close()
    rows = []
    for key, table in groups.items():
        if args.repo is not None and key.repo != args.repo:
            continue
        files = files_of_group(table, key, columns=("relative_path", "size"))
        rows += [(p, key.repo, key.pkg_type, size) for p, size in
                 zip(files.column("relative_path").to_pylist(), files.column("size").to_pylist())]
    rows.sort(key=lambda r: r[0].encode("utf-8"))
    if args.json:
        json.dump([{"path": p, "repo": r, "pkg_type": t, "size": n} for p, r, t, n in rows],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for p, _r, _t, n in rows:
            print(f"{n:>12}  {p}" if args.long else p)
    return 0


def cmd_store_seal(args: argparse.Namespace) -> int:
    from ..interop.hot import journal_segments

    if journal_segments(args.sidecar):  # a Rust hot archive: <name>.hot.NNNNN beside it
        return _seal_rust_hot(args)
    if args.warehouse and args.output:
        from ..interop.icebergrs import is_rust_warehouse

        if is_rust_warehouse(args.warehouse):  # a skade warehouse: the Rust iceberg backend
            return _seal_rust_iceberg(args)
    missing = [o for o, v in (("--warehouse", args.warehouse), ("--namespace", args.namespace),
                              ("-o/--output", args.output)) if not v]
    if missing:
        raise ZnippyError(f"store seal needs {', '.join(missing)} (no <name>.hot.NNNNN "
                          "journal beside it: not a Rust hot archive)", path=args.sidecar)
    from ..store import seal

    try:
        r = seal(args.sidecar, args.warehouse, args.namespace, args.output,
                 catalog=_catalog(args), **_writer_kwargs(args, only_if_asked=False))
    except KeyboardInterrupt:
        raise Interrupted(f"store seal: interrupted; nothing was written under {args.output}") \
            from None
    except OSError as exc:
        raise ZnippyError(f"cannot write: {os_problem(exc)}; nothing was written under this "
                          "name", path=args.output) from None
    _emit(r, args, f"{r.path}: {counted(r.rows_sealed, 'row')}, "
                   f"{human(r.blob_bytes_reused)} of blobs "
                   f"reused, {human(r.orphan_bytes_skipped)} orphan bytes skipped, "
                   f"{human(r.bytes_written)} written in {r.seconds:.2f}s")
    return 0


def _seal_rust_hot(args: argparse.Namespace) -> int:
    """``store seal --sidecar NAME`` of a Rust hot archive: sealed in place into the bytes the
    Rust ``HotArchive::seal`` writes (``write/rustseal.py``), as the Rust seal does."""
    from ..interop.hot import journal_segments
    from ..write.rustseal import seal_rust_hot

    path = args.sidecar
    given = [o for o, v in (("--warehouse", args.warehouse), ("--namespace", args.namespace),
                            ("--catalog-uri", args.catalog_uri),
                            ("--catalog-prop", args.catalog_prop), ("--meta", args.meta),
                            ("--meta-file", args.meta_file), ("--sign-key", args.sign_key))
             if v]
    if args.output and os.path.abspath(args.output) != os.path.abspath(path):
        given.append("-o/--output")
    if given:
        raise ZnippyError(f"a Rust hot archive is sealed in place as the Rust seal seals it: "
                          f"{', '.join(given)} cannot be used with it", path=path)
    segments = len(journal_segments(path))
    try:
        size = seal_rust_hot(path)
    except KeyboardInterrupt:
        raise Interrupted(f"store seal: interrupted; {path} and its journal still read as "
                          "before: seal again") from None
    report = RustSealReport(path, size, segments)
    _emit(report, args, f"{path}: sealed the Rust hot archive in place ({human(size)}, "
                        f"{counted(segments, 'journal segment')} removed)")
    return 0


def _seal_rust_iceberg(args: argparse.Namespace) -> int:
    """``store seal --sidecar NAME --warehouse W [--namespace N] -o OUT`` of a Rust
    Iceberg-backed archive (W holds a skade ``catalog.redb``): the bytes ``znippy seal``
    writes (``write/rusticeberg.py``)."""
    from ..write.rusticeberg import seal_rust_iceberg

    given = [o for o, v in (("--catalog-uri", args.catalog_uri),
                            ("--catalog-prop", args.catalog_prop), ("--meta", args.meta),
                            ("--meta-file", args.meta_file), ("--sign-key", args.sign_key))
             if v]
    if given:
        raise ZnippyError(f"a Rust Iceberg-backed archive is sealed as znippy seal seals it: "
                          f"{', '.join(given)} cannot be used with it", path=args.warehouse)
    try:
        size = seal_rust_iceberg(args.sidecar, args.warehouse, args.output, args.namespace)
    except KeyboardInterrupt:
        raise Interrupted(f"store seal: interrupted; {args.output} is incomplete") from None
    _emit(RustSealReport(args.output, size, 0), args,
          f"{args.output}: sealed the Rust Iceberg-backed archive {args.sidecar} "
          f"({human(size)})")
    return 0


@dataclasses.dataclass(frozen=True)
class RustSealReport:
    path: str
    archive_bytes: int
    journal_segments_removed: int


def _store_common(p: argparse.ArgumentParser, *, required: bool = True) -> None:
    p.add_argument("--sidecar", required=True, help="the blob file (pure blobs)")
    p.add_argument("--warehouse", required=required, help="the Iceberg warehouse directory")
    p.add_argument("--namespace", required=required,
                   help="the Iceberg namespace of this store")
    p.add_argument("--catalog-uri", metavar="URI",
                   help="a pyiceberg catalog uri (default: sqlite catalog.db inside the "
                        "warehouse; http(s):// means a REST catalog)")
    p.add_argument("--catalog-prop", action="append", metavar="KEY=VALUE",
                   help="any further pyiceberg catalog property (repeatable)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("append", help="append files to an archive (replacing same paths)")
    p.add_argument("archive", metavar="ARCHIVE", help="the archive to append to (a local path)")
    p.add_argument("source", metavar="SRC", help="a directory to add")
    p.add_argument("--repo", default="", help="repo of the new files")
    p.add_argument("--pkg-type", type=create_pkg_type_arg, default=0, metavar="TYPE",
                   help=PkgTypeHelp("package type of the new files ({types}|raw|N|auto)"))
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="compression threads (default: CPU count)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--drop-signatures", action="store_true",
                   help="append to a signed archive by dropping its signatures (or re-sign "
                        "with --sign-key/--sign-cert); refused otherwise")
    p.add_argument("--move", action="store_true",
                   help="let a file already in the archive move to the group (repo, type) "
                        "of this append; refused otherwise")
    p.add_argument("--no-posix", action="store_true",
                   help="do not record modes, mtimes, symbolic links and directories")
    p.add_argument("--skip-unsafe", action="store_true",
                   help="skip (and list) files whose names the format refuses; exit 1")
    add_unreadable_option(p)
    add_dedup_option(p)
    add_layout_options(p)
    _add_provenance_options(p)
    p.set_defaults(func=cmd_append, local_only=True)

    p = subparsers.add_parser(
        "compact", help="rewrite an archive without the dead bytes appends left",
        description="Copy every live blob verbatim into a new archive (byte-identical to a "
                    "one-shot write of the live files) and rename it over ARCHIVE.")
    p.add_argument("archive", metavar="ARCHIVE", help="the archive to compact (a local path)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_compact, local_only=True)

    store = subparsers.add_parser("store", help="the dynamic store: sidecar blobs + Iceberg index")
    sub = store.add_subparsers(dest="store_command", metavar="ACTION")
    store.set_defaults(func=lambda args: (store.print_help(sys.stderr), 2)[1])

    add = sub.add_parser("add", help="add a directory (paths re-added replace older rows)")
    _store_common(add)
    add.add_argument("source", metavar="SRC", help="a directory to add")
    add.add_argument("--repo", default="", help="repo of the new files")
    add.add_argument("--pkg-type", type=create_pkg_type_arg, default=0, metavar="TYPE",
                     help=PkgTypeHelp("package type of the new files ({types}|raw|N|auto)"))
    add.add_argument("--workers", type=positive_int, metavar="N",
                     help="compression threads (default: CPU count)")
    add.add_argument("--level", type=positive_int, metavar="L",
                     help="OpenZL level (fixed when the store is created; default 3)")
    add.add_argument("--block-size", type=size_arg, metavar="BYTES",
                     help="chunk size (fixed when the store is created; default 10M)")
    add_dedup_option(add)
    add_layout_options(add)  # fixed when the store is created, like --level
    add.set_defaults(func=cmd_store_add)

    compact = sub.add_parser("compact", help="rewrite each index table as one data file "
                                             "and drop the expired ones")
    _store_common(compact)
    compact.set_defaults(func=cmd_store_compact)

    ls = sub.add_parser("ls", help="list the live files of a store")
    _store_common(ls)
    ls.add_argument("--repo", help="only files of this repo")
    ls.add_argument("-l", "--long", action="store_true", help="show sizes")
    ls.set_defaults(func=cmd_store_ls)

    seal = sub.add_parser(
        "seal", help="freeze the store into a static archive (or seal a Rust hot archive)",
        description="Freeze the store into a static archive. A --sidecar with Rust "
                    "<name>.hot.NNNNN journal segments beside it is a Rust hot archive: it is "
                    "sealed in place into the bytes the Rust seal writes (no other option).")
    _store_common(seal, required=False)
    seal.add_argument("-o", "--output", metavar="OUT",
                      help="the archive to write (required for a store)")
    _add_provenance_options(seal)
    seal.set_defaults(func=cmd_store_seal)
