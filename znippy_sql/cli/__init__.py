"""``znippy-sql``: one parser, subcommands contributed by the modules in ``COMMAND_MODULES``.

Each module defines ``register(subparsers) -> None`` and sets ``func`` on its subparsers via
``set_defaults(func=...)``; ``func(args) -> int`` is the exit code. Exit codes: 0 ok,
1 problems found, 2 usage or unreadable input (any ``ZnippyError``, and any ``OSError`` a
command did not word itself), 130 Ctrl-C. No traceback reaches the user: one line each.
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False  # argparse and typing are imported when needed: cli/fast.py's cat
if TYPE_CHECKING:      # starts without them
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

# This process is the CLI's own. Nothing in znippy uses BLAS, and numpy's OpenBLAS starts one
# thread per core that spins for ~0.1 s after import (measured: ~0.15 s of CPU per process),
# which on a small machine is taken from the work; one thread means none are started.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from ..errors import OptionError, ZnippyError

#: core: create ls cat extract verify info | query: sql | lifecycle: append store
#: provenance: options on create/verify | catalog: catalog init|add|rm|ls|sql|...
#: git: git import, git cat-file | modules: modules, <module> ARCHIVE <command>
COMMAND_MODULES = ("core", "query", "lifecycle", "provenance", "catalog", "git", "modules")
#: commands that one module registers alone: parsing one imports only that module (``git
#: import`` then starts without the core commands' imports, docs/design.md; ``create`` starts
#: its walk before pyarrow is imported, write/early.py)
OWN_MODULE = {"git": "git", "create": "create"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command`` not a core command, also that module's commands."""
    from .. import __version__
    from .parser import Parser

    parser = Parser(
        prog="znippy-sql", description="Query, write, extract and verify znippy archives.",
        epilog="A package-type module brings its own commands: znippy-sql MODULE ARCHIVE "
               "COMMAND ... (see znippy-sql modules)."
    )
    parser.add_argument("--version", action="version", version=f"znippy-sql {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (OWN_MODULE[command],) if command in OWN_MODULE else COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    if command and command not in sub.choices:
        importlib.import_module(f"{__name__}.modules").register_module(sub, command)
    for each in sub.choices.values():  # a command that may name remote archives
        if not each.get_default("local_only"):
            _remote_options(each)
        for nested in _nested(each):  # (catalog add, maven ARCHIVE pom, ...): anywhere
            if not nested.get_default("local_only"):
                _remote_options(nested, suffix="_nested")
    return parser


def _nested(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    import argparse

    out = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                out += [child, *_nested(child)]
    return out


def _remote_options(p: argparse.ArgumentParser, suffix: str = "") -> None:
    """``--storage-option`` and ``--no-cache`` (not on a command whose defaults say
    ``local_only``: it reads no remote archive); a nested sub-command's land under their own
    names (its namespace would replace its parent's) and are merged by ``_configure_remote``."""
    import argparse

    g = p.add_argument_group("remote archives (s3://, gs://, az://, http(s)://)")
    # a nested sub-command's defaults are SUPPRESSed: its namespace must not reset its parent's
    no_options: Any = argparse.SUPPRESS if suffix else []
    no_flag: Any = argparse.SUPPRESS if suffix else False
    g.add_argument("--storage-option", action="append", metavar="KEY=VALUE",
                   dest="storage_options" + suffix, default=no_options,
                   help="endpoint, region, credentials, max_retries, timeout, ... (repeatable; "
                        "docs/remote.md)")
    g.add_argument("--no-cache", action="store_true", dest="no_cache" + suffix,
                   default=no_flag,
                   help="do not keep or use the cached tails of remote archives")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["cat"], ["ls"], ["verify"], ["info"], ["extract"]):  # the core's (cli/fast.py)
        from .fast import run

        code = run(argv)
        if code is not None:
            return code
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    from .common import Interrupted

    try:
        restore = _configure_remote(args)
        try:
            return int(args.func(args) or 0)
        finally:
            restore()
    except ZnippyError as exc:
        print(f"znippy-sql: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Interrupted as exc:
        print(f"znippy-sql: {exc}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("znippy-sql: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"znippy-sql: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except BaseException as exc:  # the last net: a native panic or error no guard caught
        from ..native import describe, is_native

        if not is_native(exc):
            raise
        print(f"znippy-sql: error: {args.command}: {describe(exc)}", file=sys.stderr)
        return 2


def _configure_remote(args: argparse.Namespace) -> Callable[[], None]:
    """The command's ``--storage-option`` and ``--no-cache`` for every remote open it makes;
    returns what puts the previous defaults back (``main`` called in a process that goes on)."""
    given = [*getattr(args, "storage_options", []), *getattr(args, "storage_options_nested", [])]
    no_cache = getattr(args, "no_cache", False) or getattr(args, "no_cache_nested", False)
    if not given and not no_cache:
        return lambda: None  # the defaults stand; a local archive needs none of the remote code
    from ..remote import configure
    from ..remote.url import parse_option

    options: dict[str, str] = {}
    try:
        for text in given:
            key, value = parse_option(text)
            if key in options:
                raise ValueError(f"--storage-option {key} is given twice")
            options[key] = value
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    return configure(storage_options=options, cache=not no_cache)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
