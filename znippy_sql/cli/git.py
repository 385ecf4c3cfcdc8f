"""Git subcommands: ``git import REPO_DIR -o OUT``, ``git cat-file ARCHIVE NAME`` and
``git show-ref ARCHIVE``.

``cat-file`` takes a name as ``git rev-parse`` does (git/revparse.py) and prints like git's:
``-t`` the type, ``-s`` the size, ``-p`` the content (a tree as ``ls-tree`` lines), ``-e`` only
the exit status (0 present, 1 absent). Exit codes as everywhere:
0 ok, 1 not found (``-e``; ``show-ref``: no ref shown), 2 usage or unreadable input,
130 interrupted. ``show-ref`` prints what ``git show-ref`` prints (``--head``, ``-d``,
``--heads``, ``--tags``, ``-s``, patterns).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..format.units import human
from .common import ARCHIVE_HELP

if TYPE_CHECKING:
    from ..read.reader import Archive


class _NoPandas:
    """A meta path finder that refuses pandas."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not used by this command")


@contextlib.contextmanager
def _without_pandas() -> Iterator[None]:
    """pandas refused while ``git import`` runs. The command never hands pyarrow a pandas
    object nor asks for one, but pyarrow 25 imports pandas at the first array it builds (to
    ask whether its input is one) and at the first ``to_numpy`` (measured: 0.7 s of CPU, a
    third of a whole import of psf/requests); refused, it records "no pandas" and goes on."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


@contextlib.contextmanager
def _without_gc() -> Iterator[None]:
    """The cyclic garbage collector off while ``git import`` imports pyarrow and numpy and
    runs: their imports make tens of thousands of objects, none garbage, which the collector
    walked again and again (measured: ~5 % of the command's CPU); the import itself makes a
    few hundred Python objects, so memory is not at stake."""
    import gc

    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cmd_import(args: argparse.Namespace) -> int:
    try:
        with _without_gc(), _without_pandas():
            from ..git.importer import import_repository

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


@contextlib.contextmanager
def _git_archive(path: str) -> Iterator[Archive]:
    """The archive at ``path``, refused unless it holds git sections (every git command that
    reads an archive opens it here, so each says "no git sections" the same way)."""
    from ..git.objects import require_git
    from ..read.reader import open_archive

    with open_archive(path) as archive:
        require_git(archive)
        yield archive


def cmd_cat_file(args: argparse.Namespace) -> int:
    from ..errors import NotFoundError
    from ..git.objects import GitObjects
    from ..git.revparse import Names

    with _git_archive(args.archive) as archive:
        objects = GitObjects(archive)
        try:
            oid = Names(objects).resolve(args.oid)
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


def cmd_show_ref(args: argparse.Namespace) -> int:
    from ..git.objects import GitObjects
    from ..git.refs import load_refs, show_ref

    with _git_archive(args.archive) as archive:
        refs = load_refs(archive)
        objects = GitObjects(archive) if args.dereference and not refs.stored else None
        lines = show_ref(refs, objects, head=args.head, dereference=args.dereference,
                         heads=args.heads, tags=args.tags, hash_only=args.hash,
                         patterns=args.pattern)
    sys.stdout.write("".join(line + "\n" for line in lines))
    return 0 if lines else 1


def register(subparsers: Any) -> None:
    git = subparsers.add_parser("git", help="git repositories as archives of their packs")
    sub = git.add_subparsers(dest="git_command", metavar="ACTION")
    git.set_defaults(func=lambda args: (git.print_help(sys.stderr), 2)[1])

    imp = sub.add_parser("import", help="push a repository's objects and seal an archive")
    imp.add_argument("repo_dir", metavar="REPO", help="a git repository (work tree or bare)")
    imp.add_argument("-o", "--output", required=True, metavar="OUT", help="the archive to write")
    imp.add_argument("--mode", choices=("packs", "one-pack"), default="packs",
                     help="the repository's own packs verbatim (+ its loose objects), or one "
                          "pack of every object (default: packs)")
    imp.add_argument("--json", action="store_true", help="print the report as JSON")
    imp.set_defaults(func=cmd_import, local_only=True)

    cat = sub.add_parser("cat-file", help="one object of an archive, like git cat-file")
    cat.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    cat.add_argument("oid", metavar="NAME",
                     help="an object name as git rev-parse takes it: an id, a unique prefix of "
                          "4+ hex digits, a branch or tag name, HEAD")
    how = cat.add_mutually_exclusive_group(required=True)
    how.add_argument("-t", action="store_true", help="print the object's type")
    how.add_argument("-s", action="store_true", help="print the object's size")
    how.add_argument("-p", action="store_true", help="print the object's content")
    how.add_argument("-e", action="store_true", help="exit 0 if the object exists, else 1")
    cat.set_defaults(func=cmd_cat_file)

    show = sub.add_parser("show-ref", help="the archive's refs, like git show-ref")
    show.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    show.add_argument("--head", action="store_true", help="show HEAD too (first)")
    show.add_argument("-d", "--dereference", action="store_true",
                      help="after an annotated tag, the object it peels to (NAME^{})")
    show.add_argument("--heads", "--branches", action="store_true", help="only refs/heads/")
    show.add_argument("--tags", action="store_true", help="only refs/tags/")
    show.add_argument("-s", "--hash", action="store_true", help="only the object ids")
    show.add_argument("pattern", nargs="*", metavar="PATTERN",
                      help="only refs named PATTERN or ending in /PATTERN (options may follow)")
    show.set_defaults(func=cmd_show_ref)
