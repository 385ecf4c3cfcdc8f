"""Git subcommands: ``git import REPO_DIR -o OUT`` and ``git cat-file ARCHIVE OID``.

``cat-file`` prints like git's: ``-t`` the type, ``-s`` the size, ``-p`` the content (a tree as
``ls-tree`` lines), ``-e`` only the exit status (0 present, 1 absent). Exit codes as everywhere:
0 ok, 1 not found (``-e``), 2 usage or unreadable input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from .core import human


def cmd_import(args: argparse.Namespace) -> int:
    from ..git.importer import import_repository

    try:
        r = import_repository(args.repo_dir, args.output, mode=args.mode)
    except KeyboardInterrupt:
        print("znippy-sql: interrupted; nothing was written", file=sys.stderr)
        return 130
    if args.json:
        json.dump(dataclasses.asdict(r), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"{r.archive}: {r.objects} objects ({r.commits} commits, {r.refs} refs) in "
              f"{r.packs} pack{'s' if r.packs != 1 else ''} of {human(r.pack_bytes)}, "
              f"{human(r.archive_bytes)} in {r.seconds:.2f}s")
    return 0


def cmd_cat_file(args: argparse.Namespace) -> int:
    from ..errors import NotFoundError
    from ..git.objects import GitObjects
    from ..read.reader import open_archive

    with open_archive(args.archive) as archive:
        objects = GitObjects(archive)
        try:
            oid = objects.resolve(args.oid)
        except NotFoundError:
            if args.e:
                return 1
            raise
        if args.e:
            return 0
        out = sys.stdout.buffer
        if args.t:
            out.write(objects.type_of(oid).encode() + b"\n")
        elif args.s:
            out.write(b"%d\n" % objects.size_of(oid))
        else:
            out.write(objects.pretty(oid))
        out.flush()
    return 0


def register(subparsers: Any) -> None:
    git = subparsers.add_parser("git", help="git repositories as archives of their packs")
    sub = git.add_subparsers(dest="git_command", metavar="ACTION")
    git.set_defaults(func=lambda args: (git.print_help(sys.stderr), 2)[1])

    imp = sub.add_parser("import", help="push a repository's objects and seal an archive")
    imp.add_argument("repo_dir", help="a git repository (work tree or bare)")
    imp.add_argument("-o", "--output", required=True, help="the archive to write")
    imp.add_argument("--mode", choices=("packs", "one-pack"), default="packs",
                     help="the repository's own packs verbatim (+ its loose objects), or one "
                          "pack of every object (default: packs)")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    imp.set_defaults(func=cmd_import)

    cat = sub.add_parser("cat-file", help="one object of an archive, like git cat-file")
    cat.add_argument("archive")
    cat.add_argument("oid", help="object id: 40 hex digits or a unique prefix of 4 or more")
    how = cat.add_mutually_exclusive_group(required=True)
    how.add_argument("-t", action="store_true", help="print the object's type")
    how.add_argument("-s", action="store_true", help="print the object's size")
    how.add_argument("-p", action="store_true", help="print the object's content")
    how.add_argument("-e", action="store_true", help="exit 0 if the object exists, else 1")
    cat.set_defaults(func=cmd_cat_file)
