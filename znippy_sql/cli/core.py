"""Core subcommands: ``create``, ``ls``, ``cat``, ``extract``, ``verify``, ``info``.

Exit codes (see ``znippy_sql.cli``): 0 ok; 1 problems found (verify findings, files that
failed to extract, a corrupt chunk met by ``cat``); 2 usage or unreadable input.

``create`` and ``verify`` take extra options from ``znippy_sql.cli.provenance`` (``--meta``,
``--sign-key``, ``--trust``, ``--signatures-only``, ...).
``create`` lives in :mod:`.create`, ``extract`` in :mod:`.extract`; the argument types and
output helpers in :mod:`.common` (re-exported here for the other areas).
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from typing import Any

import pyarrow as pa

from ..errors import ChecksumError, CodecError, ZnippyError
from ..format.codec import DEFAULT_LEVEL
from ..format.ipc import metadata_text
from ..format.schema import BASE_NAMES, DEFAULT_BLOCK_SIZE, GIT_OID
from ..modules.pkgtypes import pkg_type_name
from ..interop.vsource import laid_anew
from ..read.foreign import own_writer, writer
from .common import (ARCHIVE_HELP, Progress, add_filter_options, counted, create_pkg_type_arg,
                     done, human, open_archive_arg, pkg_type_arg, positive_int, print_json,
                     progress_for, size_arg)
from .create import register as register_create
from .extract import add_selection
from .extract import register as register_extract
from .findings import print_findings
from .infotext import summary, write_text

__all__ = ["Progress", "add_filter_options", "counted", "create_pkg_type_arg", "human",
           "pkg_type_arg", "positive_int", "progress_for", "size_arg"]

# -- ls ---------------------------------------------------------------------------------------
def file_table(archive: Any, *, repo: str | None = None, pkg_type: int | None = None,
               glob: str | list[str] | None = None) -> pa.Table:
    """One row per file in path (UTF-8 byte) order: path, group, size, stored size, chunks,
    whether any chunk is compressed, then the package-type modules' columns (if any): the
    ``files`` view (``znippy_sql.views``) without its digest."""
    from ..format.kernels import SortOptions, call_function, take
    from ..views import Where, batches
    from ..views import schema as view_schema

    names = [n for n in view_schema(archive, "files").names
             if n not in ("digest", "pkg_type_name")]
    files = batches(archive, "files", names, Where(repo=repo, pkg_type=pkg_type)).read_all()
    globs = [glob] if isinstance(glob, str) else list(glob or ())
    if globs:
        rxs = [re.compile(fnmatch.translate(g)) for g in globs]
        keep = [any(rx.match(p) for rx in rxs)
                for p in files.column("relative_path").to_pylist()]
        files = files.filter(pa.array(keep, pa.bool_()))
    order = call_function("sort_indices", [files],  # utf8 sorts by bytes
                          SortOptions([("relative_path", "ascending")]))
    return take(files, order).combine_chunks()


_FILE_KEYS = ("relative_path", "repo", "pkg_type", "module_name", "size", "stored_size",
              "blob_size", "chunks", "compressed")


def _json_row(row: dict[str, Any], facts: Any = None) -> dict[str, Any]:
    """A file record for JSON: core keys, ``pkg_type_name``, then its module's non-null
    columns, then its POSIX facts (``mode`` in octal, ``mtime`` in seconds, ``symlink``)."""
    out = {k: row[k] for k in _FILE_KEYS}
    out["pkg_type_name"] = pkg_type_name(row["pkg_type"])
    out.update((k, v) for k, v in row.items() if k not in out and v is not None)
    if facts is not None:
        path = row["relative_path"]
        if path in facts.modes:
            out["mode"] = f"{facts.modes[path]:o}"
        if path in facts.mtimes:
            out["mtime"] = facts.mtimes[path] / 1e9
        if path in facts.links:
            out["symlink"] = facts.links[path]
    return out


def cmd_ls(args: argparse.Namespace) -> int:
    from ..read.posix import facts as posix_facts
    from .select import PathFilter

    with open_archive_arg(args.archive) as archive:
        files = file_table(archive, repo=args.repo, pkg_type=args.pkg_type, glob=args.glob)
        rows = files.to_pylist()
        facts = posix_facts(archive) if (args.long or args.json) else None
        from ..format.schema import GIT_OID  # a git archive's packs: read-only, as git's

        unset = 0o100444 if archive.has_section(GIT_OID) else None
        paths_filter = PathFilter(members=args.paths, excludes=args.exclude)
        if paths_filter:
            keep = set(paths_filter.apply([r["relative_path"] for r in rows],
                                          archive=archive.path))
            rows = [r for r in rows if r["relative_path"] in keep]
    if args.json:
        print_json([_json_row(row, facts) for row in rows])
        return 0
    out = sys.stdout
    if not args.long:
        out.writelines(row["relative_path"] + "\n" for row in rows)
        return 0
    for row in rows:
        path = row["relative_path"]
        mode = facts.modes.get(path, unset) if facts else None
        mtime = facts.mtimes.get(path) if facts else None
        link = facts.links.get(path) if facts else None
        out.write(f"{_mode(mode)} {row['repo'] or '-':<12} {row['size']:>12} {_when(mtime)} "
                  f"{path}{f' -> {link}' if link is not None else ''}\n")
    size = sum(r["size"] for r in rows)
    stored = sum(r["stored_size"] for r in rows)
    out.write(f"total: {counted(len(rows), 'file')}, {size} bytes ({human(size)}), stored "
              f"{human(stored)}\n")
    return 0


def _mode(mode: int | None) -> str:
    """``-rw-r--r--`` (``stat.filemode``); ``-?????????`` when no mode was recorded."""
    import stat

    return stat.filemode(mode) if mode is not None else "-?????????"


def _when(mtime_ns: int | None) -> str:
    """``2024-01-02 12:34`` in local time, as tar -tv shows it."""
    import time

    if mtime_ns is None:
        return "----------------"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime_ns / 1e9))


# -- verify -----------------------------------------------------------------------------------
#: what each verify mode proves (docs/signing.md, "What each mode of verify proves")
CHECKED_FULL = ("structure", "content", "meta", "signatures")
CHECKED_SIGNATURES_ONLY = ("structure", "meta", "signatures")


def cmd_verify(args: argparse.Namespace) -> int:
    from . import provenance as prov

    signatures_only = bool(getattr(args, "signatures_only", False))
    with open_archive_arg(args.archive) as archive:
        try:
            total: int | None = archive.lookup.num_rows
        except ZnippyError:
            total = None  # verify reports it as a finding
        progress = None if signatures_only else progress_for("verify", total=total,
                                                              unit="chunks")
        try:
            report = archive.verify(progress=progress, content=not signatures_only)
        finally:
            done(progress)
        problems = list(report.problems)
        problems.extend(prov.verify_extra(args, archive))
        files, chunks = report.files, report.chunks
        if signatures_only:  # nothing was decoded: count what the index holds
            try:
                files, chunks = len(archive.first_paths()), archive.lookup.num_rows
            except ZnippyError:
                pass
    checked = CHECKED_SIGNATURES_ONLY if signatures_only else CHECKED_FULL
    if args.json:
        print_json({"path": report.path, "ok": not problems, "files": files,
                     "chunks": chunks, "bytes_checked": report.bytes_checked,
                     "checked": list(checked),
                     "not_checked": [c for c in CHECKED_FULL if c not in checked],
                     "seconds": round(report.seconds, 6), "problems": problems,
                     "notes": report.notes})
        return 0 if not problems else 1
    for note in report.notes:
        print(f"NOTE: {note}")
    print_findings(problems, sys.stdout, prefix="PROBLEM: ",
                   verbose=bool(getattr(args, "verbose", False)))
    state = "OK" if not problems else counted(len(problems), "problem")
    if signatures_only:
        print(f"{report.path}: {state} (signatures only): {counted(files, 'file')}, "
              f"{counted(chunks, 'chunk')} in the index; blob content NOT checked (no blob "
              f"decoded; verify without --signatures-only does) in {report.seconds:.2f} s")
    else:
        print(f"{report.path}: {state}: {counted(files, 'file')}, "
              f"{counted(chunks, 'chunk')}, "
              f"{human(report.bytes_checked)} checked in {report.seconds:.2f} s")
    return 0 if not problems else 1


# -- info -------------------------------------------------------------------------------------
def archive_info(archive: Any) -> dict[str, Any]:
    """Manifest, groups with their sizes, sections, totals and the writer's codec choices
    (:func:`.infotext.summary` of the facts the Python reader reads)."""
    from ..format.kernels import call_function
    from ..views import batches
    from ..write.dedup import distinct_blob_bytes

    codec_meta: dict[str, str] = {}
    for key in archive.groups:
        schema = archive.group_table(key).schema
        if schema.metadata:
            codec_meta = metadata_text(schema)
            break
    groups = [(g["pkg_type"], g["pkg_type_name"], g["repo"], g["module_name"], g["files"],
               g["row_count"], g["compressed_chunks"], g["size"], g["stored_size"])
              for g in batches(archive, "groups").read_all().to_pylist()]
    manifest = [(r.key.pkg_type, r.key.repo, r.key.module_name, r.index_offset, r.index_len,
                 r.row_count) for r in archive.manifest_rows]
    # stored_bytes of a group: its files' shares of the blobs (docs/format.md, "Stored
    # sizes"): the groups' sum is the distinct blob bytes
    referenced = sum(call_function("sum", [archive.group_table(k).column("blob_size")]).as_py()
                     or 0 for k in archive.groups)
    return {**summary(
        path=archive.path, size=archive.source.size, tail_offset=archive.tail_offset,
        blob_end=archive.blob_end, groups=groups, manifest=manifest, codec=codec_meta,
        referenced=referenced,
        distinct=distinct_blob_bytes(archive.group_table(k) for k in archive.groups),
        packs=pack_info(archive), git_packs=archive.has_section(GIT_OID),
        lookup_in_memory=archive.lookup_in_memory, not_understood=archive.not_understood(),
        writer=None if own_writer(archive) else writer(archive),
        read_as=laid_anew(archive.source), sections=archive.sections),
        **_git_info(archive)}


def _git_info(archive: Any) -> dict[str, Any]:
    """``{"git": ...}`` for an archive of git packs: counts, and whether its history is whole
    (a partial clone's archive names blobs it does not hold)."""
    from ..format.schema import GIT_GRAPH, GIT_OID

    if not (archive.has_section(GIT_OID) and archive.has_section(GIT_GRAPH)):
        return {}
    from ..interop.gitoid import MAGIC

    if bytes(archive.section(GIT_OID)[:8]) == MAGIC:  # the Rust loose-object tier (interop/)
        return {"git": {"objects": int.from_bytes(bytes(archive.section(GIT_OID)[16:24]),
                                                  "little"),
                        "commits": archive.section(GIT_GRAPH).num_rows}}
    from ..git.objects import GitObjects

    objects = GitObjects(archive)
    absent = objects.absent_objects
    return {"git": {"objects": objects.index.count,
                    "commits": archive.section(GIT_GRAPH).num_rows,
                    "absent_objects": absent, "complete_history": absent == 0}}


def pack_info(archive: Any) -> tuple[int, int, int, int, int]:
    """Packed blobs of an archive: a compressed blob holding a slice at a non-zero
    ``inner_offset``; how many, their files, their stored bytes, the bytes of their slices,
    and the ``blob_size`` of their files' rows summed."""
    import numpy as np

    c = archive.lookup_columns
    if not c.packed or c.n == 0:
        return 0, 0, 0, 0, 0
    offsets = np.unique(c.blob_offset[c.compressed & (c.inner_offset > 0)])
    member = np.isin(c.blob_offset, offsets) & c.compressed
    ends = c.inner_offset[member] + c.uncompressed_size[member]
    order = np.lexsort((ends, c.blob_offset[member]))
    last = np.r_[np.diff(c.blob_offset[member][order]) != 0, True]
    stored = dict(zip(c.blob_offset[member].tolist(), c.blob_size[member].tolist()))
    return (int(len(offsets)), int(member.sum()), int(sum(stored.values())),
            int(ends[order][last].sum()), int(c.blob_size[member].sum()))


def cmd_info(args: argparse.Namespace) -> int:
    with open_archive_arg(args.archive) as archive:
        info = archive_info(archive)
    if args.json:
        print_json(info)
    else:
        write_text(info)
    return 0


# -- registration -----------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    from . import provenance as prov

    register_create(subparsers)

    p = subparsers.add_parser("ls", help="list the files of an archive")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    add_selection(p)
    p.add_argument("-l", "--long", action="store_true",
                   help="mode, repo, size and mtime before each path (as tar -tv), and a "
                        "total line")
    p.add_argument("--json", action="store_true", help="a JSON array of file records")
    p.set_defaults(func=cmd_ls)

    register_extract(subparsers)

    p = subparsers.add_parser(
        "verify", help="check structure, every blob and every checksum (and signatures)",
        description="Check the index structure, decode every blob and check its BLAKE3, "
                    "check __meta__, and check every signature of a signed archive (against "
                    "the --trust certificates when given). --signatures-only skips the blobs.")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every finding on its own line (repeated ones are grouped otherwise)")
    prov.add_verify_options(p)
    p.set_defaults(func=cmd_verify)

    p = subparsers.add_parser("info", help="manifest, groups, sizes and ratio")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.set_defaults(func=cmd_info)


