"""``znippy-sql catalog init|add|rm|ls|sql|extract|verify WAREHOUSE ...``: many archives in
Iceberg tables (docs/catalog.md).

Every subcommand takes the warehouse first and the catalog options of ``store``
(``--catalog-uri``, ``--catalog-prop``) and ``--namespace``. Exit codes: 0 ok, 1 drift found
(``verify``), files not extracted (``extract``) or some archives not added (``add``: the
readable ones are added, each other one named), 2 usage or unreadable input (``add`` when no
archive could be read, ``rm`` of an archive the catalog does not hold).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from .common import add_output_options
from .core import counted, human, positive_int
from .findings import print_findings
from .lifecycle import _catalog
from .query import _print


def _open(args: argparse.Namespace, *, create: bool = False) -> Any:
    from ..catalog import open_catalog

    return open_catalog(args.warehouse, catalog=_catalog(args), namespace=args.namespace,
                        create=create)


def _json(obj: Any) -> None:
    json.dump(dataclasses.asdict(obj), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def cmd_init(args: argparse.Namespace) -> int:
    cat = _open(args, create=True)
    print(f"{cat.warehouse}: catalog {cat.name}, tables {cat.ident('archives')} and "
          f"{cat.ident('files')}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    r = _open(args, create=True).add(args.archives, batch_archives=args.batch,
                                     skip_unreadable=True)
    print_findings([f"{uri!r}: {why}" for uri, why in r.failed.items()], sys.stderr,
                   prefix="znippy-sql: catalog add: ", noun="archive", verbose=args.json)
    if args.json:
        _json(r)
    else:
        print(f"{counted(r.added, 'archive')} added, {r.replaced} replaced, {r.unchanged} "
              f"unchanged: {counted(r.rows, 'file')} in {counted(r.commits, 'commit')} "
              f"in {r.seconds:.2f} s"
              + (f"; {counted(len(r.failed), 'archive')} not added" if r.failed else ""))
    if not r.failed:
        return 0
    return 2 if r.added + r.replaced + r.unchanged == 0 else 1


def cmd_rm(args: argparse.Namespace) -> int:
    r = _open(args).remove(args.archives)
    for uri in r.unknown:
        print(f"znippy-sql: catalog rm: {uri}: not in the catalog", file=sys.stderr)
    if args.json:
        _json(r)
    else:
        print(f"{counted(r.removed, 'archive')} removed ({counted(r.rows, 'file')}) "
              f"in {r.seconds:.2f} s")
    return 2 if r.unknown else 0


def cmd_ls(args: argparse.Namespace) -> int:
    table = _open(args).archives(("archive_uri", "size", "files", "groups", "root_digest",
                                  "etag_or_mtime", "added_at"))
    _print(table, args.format, args.max_rows)
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    _print(_open(args).sql(args.query), args.format, args.max_rows)
    return 0


def cmd_extract(args: argparse.Namespace) -> int:
    cat = _open(args)
    hits = cat.sql("SELECT archive_uri, relative_path, digest FROM files "
                   f"WHERE (\n{args.where}\n)")
    r = cat.extract(hits, args.out, flat=args.flat, workers=args.workers)
    print_findings([f"{what!r}: {why}" for what, why in sorted(r.failed.items())], sys.stderr,
                   prefix="znippy-sql: catalog extract: ", verbose=args.verbose)
    print(f"{r.dest}: {counted(r.files, 'file')} from {counted(r.archives, 'archive')}, "
          f"{human(r.bytes_written)} extracted"
          + (f", {len(r.failed)} failed" if r.failed else "") + f" in {r.seconds:.2f} s")
    return 0 if r.ok else 1


def cmd_verify(args: argparse.Namespace) -> int:
    r = _open(args).verify()
    if args.json:
        _json(r)
    else:
        for d in r.drift:
            print(f"{d.archive_uri}: {d.kind}: {d.detail}")
        print(f"{counted(r.archives, 'archive')}, {counted(r.rows, 'file')}: "
              + ("no drift" if r.ok else counted(len(r.drift), "problem"))
              + f" in {r.seconds:.2f} s")
    return 0 if r.ok else 1


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("warehouse", metavar="WAREHOUSE",
                   help="warehouse directory (or location, with a shared catalog)")
    p.add_argument("--namespace", default="fleet", help="Iceberg namespace (default: fleet)")
    p.add_argument("--catalog-uri", metavar="URI",
                   help="a pyiceberg catalog uri (default: sqlite catalog.db inside the "
                        "warehouse; http(s):// means a REST catalog)")
    p.add_argument("--catalog-prop", action="append", metavar="KEY=VALUE",
                   help="any further pyiceberg catalog property (repeatable)")


def register(subparsers: Any) -> None:
    top = subparsers.add_parser(
        "catalog", help="a catalog of many archives in Iceberg tables",
        description="Index many archives in two Iceberg tables (archives, files), query them "
                    "with SQL and extract files straight from their archives.")
    sub = top.add_subparsers(dest="catalog_command", metavar="COMMAND")
    top.set_defaults(func=lambda a: (top.print_help(sys.stderr), 2)[1])

    p = sub.add_parser("init", help="create the warehouse, namespace and tables")
    _common(p)
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("add", help="add or refresh archives (only their tails are read)")
    _common(p)
    p.add_argument("archives", nargs="+", metavar="ARCHIVE", help="archive paths or URLs")
    p.add_argument("--batch", type=positive_int, default=100, metavar="N",
                   help="archives per commit (default 100)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("rm", help="remove archives' rows")
    _common(p)
    p.add_argument("archives", nargs="+", metavar="ARCHIVE", help="archive paths or URLs")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_rm)

    p = sub.add_parser("ls", help="list the archives in the catalog")
    _common(p)
    add_output_options(p)
    p.set_defaults(func=cmd_ls)

    p = sub.add_parser("sql", help="run a DuckDB query over the files and archives tables")
    _common(p)
    p.add_argument("query", metavar="QUERY",
                   help="DuckDB SQL over the tables files and archives (';' separates several)")
    add_output_options(p)
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("extract", help="extract the files a predicate selects")
    _common(p)
    p.add_argument("--where", required=True, metavar="PREDICATE",
                   help="SQL predicate over the files table")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="destination directory")
    p.add_argument("--flat", action="store_true",
                   help="DIR/<relative_path> (refuses a path held by two archives) instead "
                        "of DIR/<archive stem>/<relative_path>")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="threads per archive (default: CPU count)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="every failure on its own line (repeated ones are grouped otherwise)")
    p.set_defaults(func=cmd_extract)

    p = sub.add_parser("verify", help="re-read every archive's tail and report drift")
    _common(p)
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_verify)
