"""Core subcommands: ``create``, ``ls``, ``cat``, ``extract``, ``verify``, ``info``.

Exit codes (see ``znippy_sql.cli``): 0 ok; 1 problems found (verify findings, files that
failed to extract, a corrupt chunk met by ``cat``); 2 usage or unreadable input.

``create`` and ``verify`` take extra options from ``znippy_sql.cli.provenance`` when that
module is installed (``--meta``, ``--sign-key``, ``--trust``, ``--signatures-only``, ...).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib
import importlib.util
import json
import re
import sys
import time
from types import ModuleType
from typing import Any, TextIO

import pyarrow as pa

from ..format.codec import DEFAULT_LEVEL
from ..errors import ChecksumError, CodecError, ZnippyError
from .findings import print_findings
from ..format.schema import BASE_NAMES, DEFAULT_BLOCK_SIZE, pkg_type_name, resolve_pkg_type
from ..format.ipc import metadata_text
from ..write.compat import COMPAT_MODES

_SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


# -- argument types (public: other CLI areas reuse them) -------------------------------------
def pkg_type_arg(value: str) -> int:
    """``--pkg-type`` for reading: a registry name (``maven``) or a number 0..127."""
    try:
        return resolve_pkg_type(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def create_pkg_type_arg(value: str) -> int | str:
    """``--pkg-type`` for writing: as :func:`pkg_type_arg`, or ``auto`` (modules claim files)."""
    if value.strip().lower() == "auto":
        return "auto"
    return pkg_type_arg(value)


def size_arg(value: str) -> int:
    """A byte count: ``65536``, ``64K``, ``10M``, ``1G`` (powers of 1024; ``KiB`` also read)."""
    text = value.strip().lower().removesuffix("ib").removesuffix("b")
    unit = text[-1:] if text[-1:] in _SIZE_SUFFIXES else ""
    number = text[: len(text) - len(unit)]
    try:
        size = int(number) * _SIZE_SUFFIXES[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {value!r}") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return size


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value!r}")
    return number


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    """``--repo``, ``--pkg-type`` and ``--glob``: the selection every reading command shares."""
    parser.add_argument("--repo", help="only files of this repo")
    parser.add_argument("--pkg-type", type=pkg_type_arg, metavar="TYPE",
                        help=f"only files of this package type ({'|'.join(_TYPE_NAMES)}|N)")
    parser.add_argument("--glob", help="only paths matching this shell pattern ('*' spans '/')")


_TYPE_NAMES = ("maven", "cargo", "npm", "pypi", "raw")


# -- output helpers ---------------------------------------------------------------------------
def counted(n: int, noun: str) -> str:
    """``1 file``, ``2 files``: a count and its noun for a summary line."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"  # pragma: no cover


class Progress:
    """A one-line progress bar on a terminal; ``__call__(count, nbytes)`` is the writers' hook.

    Redraws at most ten times a second. With ``total`` a bar is drawn, else a running count.
    """

    def __init__(self, label: str, *, total: int | None = None, unit: str = "files",
                 stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self._last = 0.0
        self._state = (0, 0)

    def __call__(self, count: int, nbytes: int) -> None:
        self._state = (count, nbytes)
        now = time.perf_counter()
        if now - self._last >= 0.1:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        count, nbytes = self._state
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        if self.total:
            done = min(count / self.total, 1.0)
            bar = "#" * int(done * 24)
            head = f"[{bar:<24}] {count}/{self.total} {self.unit}"
        else:
            head = f"{count} {self.unit}"
        self.stream.write(f"\r{self.label} {head}  {human(nbytes)}  "
                          f"{human(nbytes / elapsed)}/s\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self._draw()
        self.stream.write("\n")
        self.stream.flush()


def progress_for(label: str, *, total: int | None = None, unit: str = "files") -> Progress | None:
    """A :class:`Progress` when stderr is a terminal, else ``None`` (no output at all)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return Progress(label, total=total, unit=unit) if isatty and isatty() else None


def _done(progress: Progress | None) -> None:
    if progress is not None:
        progress.close()


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _provenance() -> ModuleType | None:
    """The provenance CLI area (issue 5), when it is installed in this build."""
    name = "znippy_sql.cli.provenance"
    return importlib.import_module(name) if importlib.util.find_spec(name) else None


def _open(path: str) -> Any:
    from ..read.reader import open_archive

    return open_archive(path)


# -- create -----------------------------------------------------------------------------------
def cmd_create(args: argparse.Namespace) -> int:
    from ..write.writer import write_archive

    extra: dict[str, Any] = {}
    prov = _provenance()
    if args.compat is not None:  # data sub-indexes and a manifest only: no provenance either
        given = [opt for opt in _SECTION_OPTIONS if getattr(args, opt[2:].replace("-", "_"), None)]
        if given:
            raise ZnippyError(f"--compat {args.compat} writes no metadata or signatures (the "
                              f"Rust 0.8 reader reads every section as an index): "
                              f"{', '.join(given)} cannot be used with it")
    elif prov is not None:
        extra.update(prov.writer_kwargs(args))
    progress = progress_for("create")
    try:
        report = write_archive(
            args.out, args.src, repo=args.repo, pkg_type=args.pkg_type, level=args.level,
            block_size=args.block_size, workers=args.workers, progress=progress,
            compat=args.compat, **extra,
        )
    finally:
        _done(progress)
    print(f"{report.path}: {counted(report.files, 'file')} in {counted(report.groups, 'group')}, "
          f"{counted(report.chunks, 'chunk')} ({report.compressed_chunks} compressed, "
          f"{report.raw_chunks} raw), {human(report.bytes_in)} -> "
          f"{human(report.archive_bytes)} (ratio {report.ratio:.2f}) in {report.seconds:.2f} s")
    return 0


#: create's options that write reserved sections, refused with --compat
_SECTION_OPTIONS = ("--meta", "--meta-file", "--sign-key", "--sign-cert")


# -- ls ---------------------------------------------------------------------------------------
def file_table(archive: Any, *, repo: str | None = None, pkg_type: int | None = None,
               glob: str | None = None) -> pa.Table:
    """One row per file in path (UTF-8 byte) order: path, group, size, stored size, chunks,
    whether any chunk is compressed, then the package-type modules' columns (if any)."""
    import pyarrow.compute as pc  # ~25 ms of import that create and extract do not need

    idx = archive.index(pkg_type=pkg_type, repo=repo)
    grouped = idx.group_by(["relative_path", "repo", "pkg_type", "module_name"]).aggregate(
        [("uncompressed_size", "sum"), ("blob_size", "sum"), ("chunk_seq", "count"),
         ("compressed", "any")])
    names = {"relative_path": "relative_path", "repo": "repo", "pkg_type": "pkg_type",
             "module_name": "module_name", "uncompressed_size_sum": "size",
             "blob_size_sum": "stored_size", "chunk_seq_count": "chunks",
             "compressed_any": "compressed"}
    grouped = grouped.select(list(names)).rename_columns(list(names.values()))
    if glob is not None:
        rx = re.compile(fnmatch.translate(glob))
        keep = [rx.match(p) is not None for p in grouped.column("relative_path").to_pylist()]
        grouped = grouped.filter(pa.array(keep, pa.bool_()))
    extra = [n for n in idx.schema.names if n not in BASE_NAMES and n not in names]
    if extra:  # the modules' own columns, from each file's chunk_seq 0 row
        first = idx.filter(pc.equal(idx.column("chunk_seq"), 0))
        grouped = grouped.join(first.select(["relative_path", *extra]), "relative_path")
    order = pc.sort_indices(grouped, [("relative_path", "ascending")])  # utf8 sorts by bytes
    return grouped.take(order).combine_chunks()


_FILE_KEYS = ("relative_path", "repo", "pkg_type", "module_name", "size", "stored_size", "chunks",
              "compressed")


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A file record for JSON: core keys, ``pkg_type_name``, then its module's non-null columns."""
    out = {k: row[k] for k in _FILE_KEYS}
    out["pkg_type_name"] = pkg_type_name(row["pkg_type"])
    out.update((k, v) for k, v in row.items() if k not in out and v is not None)
    return out


def cmd_ls(args: argparse.Namespace) -> int:
    with _open(args.archive) as archive:
        files = file_table(archive, repo=args.repo, pkg_type=args.pkg_type, glob=args.glob)
        rows = files.to_pylist()
    if args.json:
        _print_json([_json_row(row) for row in rows])
        return 0
    out = sys.stdout
    for row in rows:
        if args.long:
            out.write(f"{row['size']:>12} {row['stored_size']:>12} "
                      f"{pkg_type_name(row['pkg_type']):<6} {row['repo'] or '-':<16} "
                      f"{row['relative_path']}\n")
        else:
            out.write(row["relative_path"] + "\n")
    return 0


# -- cat --------------------------------------------------------------------------------------
def cmd_cat(args: argparse.Namespace) -> int:
    out = getattr(sys.stdout, "buffer", sys.stdout)
    with _open(args.archive) as archive:
        sys.stdout.flush()
        try:
            for data in archive.iter_chunks(args.path):
                out.write(data)
        except (ChecksumError, CodecError) as exc:
            out.flush()
            print(f"znippy-sql: cat: {exc}", file=sys.stderr)
            return 1
        out.flush()
    return 0


# -- extract ----------------------------------------------------------------------------------
def cmd_extract(args: argparse.Namespace) -> int:
    with _open(args.archive) as archive:
        which = dict(repo=args.repo, pkg_type=args.pkg_type, glob=args.glob)
        progress = progress_for("extract")
        try:
            if progress is not None:  # a terminal: the bar wants the total first
                paths = archive.select(**which)
                progress.total = len(paths)
                report = archive.extract(args.out, paths=paths, progress=progress)
            else:
                report = archive.extract(args.out, **which)
        finally:
            _done(progress)
    for path, why in sorted(report.failed.items()):
        print(f"znippy-sql: extract: {path}: {why}", file=sys.stderr)
    print(f"{report.dest}: {counted(report.files, 'file')}, {human(report.bytes_written)} extracted"
          + (f", {len(report.failed)} failed" if report.failed else "")
          + f" in {report.seconds:.2f} s")
    return 0 if report.ok else 1


# -- verify -----------------------------------------------------------------------------------
#: what each verify mode proves (docs/signing.md, "What each mode of verify proves")
CHECKED_FULL = ("structure", "content", "meta", "signatures")
CHECKED_SIGNATURES_ONLY = ("structure", "meta", "signatures")


def cmd_verify(args: argparse.Namespace) -> int:
    prov = _provenance()
    signatures_only = bool(getattr(args, "signatures_only", False))
    with _open(args.archive) as archive:
        try:
            total: int | None = archive.lookup.num_rows
        except ZnippyError:
            total = None  # verify reports it as a finding
        progress = None if signatures_only else progress_for("verify", total=total,
                                                              unit="chunks")
        try:
            report = archive.verify(progress=progress, content=not signatures_only)
        finally:
            _done(progress)
        problems = list(report.problems)
        if prov is not None:
            problems.extend(prov.verify_extra(args, archive))
        files, chunks = report.files, report.chunks
        if signatures_only:  # nothing was decoded: count what the index holds
            try:
                files, chunks = len(archive.first_paths()), archive.lookup.num_rows
            except ZnippyError:
                pass
    checked = CHECKED_SIGNATURES_ONLY if signatures_only else CHECKED_FULL
    if args.json:
        _print_json({"path": report.path, "ok": not problems, "files": files,
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
    """Manifest, groups with their sizes, sections, totals and the writer's codec choices."""
    import pyarrow.compute as pc

    groups = []
    codec_meta: dict[str, str] = {}
    for key in archive.groups:
        table = archive.group_table(key)
        if not codec_meta and table.schema.metadata:
            codec_meta = metadata_text(table.schema)
        first = pc.equal(table.column("chunk_seq"), 0)
        compressed = pc.sum(table.column("compressed").cast(pa.int64())).as_py() or 0
        groups.append({
            "pkg_type": key.pkg_type, "pkg_type_name": pkg_type_name(key.pkg_type),
            "repo": key.repo, "module_name": key.module_name,
            "files": pc.sum(first.cast(pa.int64())).as_py() or 0,
            "chunks": table.num_rows, "compressed_chunks": compressed,
            "raw_chunks": table.num_rows - compressed,
            "bytes": pc.sum(table.column("uncompressed_size")).as_py() or 0,
            "stored_bytes": pc.sum(table.column("blob_size")).as_py() or 0,
        })
    manifest = [{"pkg_type": r.key.pkg_type, "repo": r.key.repo,
                 "module_name": r.key.module_name, "index_offset": r.index_offset,
                 "index_len": r.index_len, "row_count": r.row_count}
                for r in archive.manifest_rows]
    size = archive.source.size
    total = sum(g["bytes"] for g in groups)
    return {
        "path": archive.path,
        "archive_bytes": size,
        "files": sum(g["files"] for g in groups),
        "chunks": sum(g["chunks"] for g in groups),
        "bytes": total,
        "blob_bytes": archive.blob_end,
        "tail_offset": archive.tail_offset,
        "tail_bytes": size - archive.tail_offset,
        "ratio": round(total / size, 4) if size else 0.0,
        "codec": codec_meta,
        # no __lookup__/__trie__ (the Rust tool's layout): the reader builds them in memory
        "lookup": "in memory" if archive.lookup_in_memory else "section",
        "groups": groups,
        "sections": archive.sections,
        "manifest": manifest,
    }


def cmd_info(args: argparse.Namespace) -> int:
    with _open(args.archive) as archive:
        info = archive_info(archive)
    if args.json:
        _print_json(info)
        return 0
    codec = info["codec"]
    print(f"archive   {info['path']}  ({human(info['archive_bytes'])})")
    print(f"content   {counted(info['files'], 'file')}, {counted(info['chunks'], 'chunk')}, "
          f"{human(info['bytes'])}"
          f" -> blobs {human(info['blob_bytes'])}, tail {human(info['tail_bytes'])},"
          f" ratio {info['ratio']:.2f}")
    if codec and "znippy.codec" not in codec:  # another writer's keys (the Rust tool's)
        print("schema    " + " ".join(f"{k}={v}" for k, v in codec.items()))
    elif codec:
        print(f"codec     {codec.get('znippy.codec', '?')} graph="
              f"{codec.get('znippy.openzl.graph', '?')} level={codec.get('znippy.openzl.level', '?')}"
              f" format_version={codec.get('znippy.openzl.format_version', '?')}"
              f" block_size={codec.get('znippy.block_size', '?')}")
    print(f"sections  {', '.join(info['sections']) or '(none)'}"
          + ("; lookup built in memory (the Rust tool's layout)"
             if info["lookup"] == "in memory" else ""))
    print("groups")
    print(f"  {'type':<8}{'repo':<20}{'module':<10}{'files':>8}{'chunks':>8}"
          f"{'bytes':>14}{'stored':>14}")
    for g in info["groups"]:
        print(f"  {g['pkg_type_name']:<8}{g['repo'] or '-':<20}{g['module_name'] or '-':<10}"
              f"{g['files']:>8}{g['chunks']:>8}{g['bytes']:>14}{g['stored_bytes']:>14}")
    print("manifest")
    for m in info["manifest"]:
        name = m["module_name"] if m["pkg_type"] < 0 else (
            f"{pkg_type_name(m['pkg_type'])}/{m['repo'] or '-'}/{m['module_name'] or '-'}")
        print(f"  {name:<40}@{m['index_offset']:>12} len {m['index_len']:>10}"
              f" rows {m['row_count']:>8}")
    return 0


# -- registration -----------------------------------------------------------------------------
def register(subparsers: Any) -> None:
    prov = _provenance()

    p = subparsers.add_parser("create", help="write an archive from a directory")
    p.add_argument("src", metavar="SRC", help="directory to archive (walked in path order)")
    p.add_argument("-o", "--out", required=True, metavar="OUT", help="archive to write")
    p.add_argument("--repo", default="", help="repo of every file (default: '')")
    p.add_argument("--pkg-type", type=create_pkg_type_arg, default=0, metavar="TYPE",
                   help=f"package type: {'|'.join(_TYPE_NAMES)}|auto|N (default: raw)")
    p.add_argument("--level", type=int, default=DEFAULT_LEVEL, metavar="L",
                   help=f"OpenZL compression level (default: {DEFAULT_LEVEL})")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="compression threads (default: CPU count)")
    p.add_argument("--block-size", type=size_arg, default=DEFAULT_BLOCK_SIZE, metavar="BYTES",
                   help="chunk size, e.g. 10M (default: 10 MiB)")
    p.add_argument("--compat", choices=COMPAT_MODES, default=None,
                   help="write an archive the Rust znippy 0.8 reads: data sub-indexes and the "
                        "manifest only (no metadata, signatures, lookup or trie)")
    if prov is not None:
        prov.add_create_options(p)
    p.set_defaults(func=cmd_create)

    p = subparsers.add_parser("ls", help="list the files of an archive")
    p.add_argument("archive", metavar="ARCHIVE")
    add_filter_options(p)
    p.add_argument("-l", "--long", action="store_true",
                   help="size, stored size, type and repo before each path")
    p.add_argument("--json", action="store_true", help="a JSON array of file records")
    p.set_defaults(func=cmd_ls)

    p = subparsers.add_parser("cat", help="write one file's bytes to stdout")
    p.add_argument("archive", metavar="ARCHIVE")
    p.add_argument("path", metavar="PATH", help="relative_path inside the archive")
    p.set_defaults(func=cmd_cat)

    p = subparsers.add_parser("extract", help="extract files into a directory")
    p.add_argument("archive", metavar="ARCHIVE")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="destination directory")
    add_filter_options(p)
    p.set_defaults(func=cmd_extract)

    p = subparsers.add_parser(
        "verify", help="check structure, every blob and every checksum (and signatures)",
        description="Check the index structure, decode every blob and check its BLAKE3, "
                    "check __meta__, and check every signature of a signed archive (against "
                    "the --trust certificates when given). --signatures-only skips the blobs.")
    p.add_argument("archive", metavar="ARCHIVE")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every finding on its own line (repeated ones are grouped otherwise)")
    if prov is not None:
        prov.add_verify_options(p)
    p.set_defaults(func=cmd_verify)

    p = subparsers.add_parser("info", help="manifest, groups, sizes and ratio")
    p.add_argument("archive", metavar="ARCHIVE")
    p.add_argument("--json", action="store_true", help="the summary as JSON")
    p.set_defaults(func=cmd_info)


