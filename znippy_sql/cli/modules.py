"""``znippy-sql modules`` and ``znippy-sql <module> ARCHIVE <command> ...`` (docs/modules.md).

The host owns no module's parameters: each registered module's commands
(``znippy_sql.modules.commands.Command``) add their own arguments to their sub-parser; the
host adds ``--json`` and ``--repo`` to each, opens ARCHIVE, runs the command and prints its
``Answer``. Only the module named on the command line is looked up, so the other commands
never pay for loading the registry (its entry points).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import ZnippyError
from .common import ARCHIVE_HELP

if TYPE_CHECKING:
    from ..modules.commands import Command


class _Listed(TypedDict):
    """One module as ``znippy-sql modules`` lists it (``--json`` prints these)."""

    name: str
    pkg_type: int
    source: str
    columns: list[dict[str, str]]
    commands: list[dict[str, str]]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("modules", help="list the package-type modules, their columns "
                              "and commands")
    p.add_argument("--json", action="store_true", help="the list as JSON")
    p.set_defaults(func=cmd_modules, local_only=True)


def register_module(subparsers: Any, name: str) -> None:
    """Add ``znippy-sql NAME ...`` when a registered module is called ``name``."""
    from .. import modules
    from ..modules.commands import commands_of

    try:
        module = modules.by_name(name)
        commands = commands_of(module) if module is not None else ()
    except (ZnippyError, ValueError) as exc:
        problem = str(exc)
        p = subparsers.add_parser(name, add_help=False)
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=lambda args: _fail(problem))
        return
    if module is None or not commands:
        return
    p = subparsers.add_parser(
        name, help=f"commands of the {name} module",
        description=f"Commands of the {name} package-type module (pkg_type "
                    f"{module.pkg_type}) over an archive.")
    p.add_argument("archive", metavar="ARCHIVE", help=ARCHIVE_HELP)
    sub = p.add_subparsers(dest="module_command", metavar="COMMAND", required=True)
    for command in commands:
        c = sub.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(c)
        c.add_argument("--json", action="store_true", help="the answer as JSON")
        c.add_argument("--repo", help="only the groups of this repo")
        c.set_defaults(func=lambda args, command=command: run(command, args))


def _fail(problem: str) -> int:
    print(f"znippy-sql: error: {problem}", file=sys.stderr)
    return 2


def run(command: Command, args: argparse.Namespace) -> int:
    from ..read.reader import open_archive

    with open_archive(args.archive) as archive:
        answer = command.run(archive, args)
    if args.json:
        json.dump(answer.data, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif isinstance(answer.text, bytes):
        sys.stdout.flush()
        sys.stdout.buffer.write(answer.text)
        sys.stdout.buffer.flush()
    else:
        sys.stdout.write(answer.text)
    if answer.message:
        sys.stdout.flush()
        print(f"znippy-sql {args.command} {command.name}: {answer.message}", file=sys.stderr)
    return answer.status


def cmd_modules(args: argparse.Namespace) -> int:
    from .. import modules
    from ..modules.commands import commands_of

    found: list[_Listed] = []
    for m in modules.all_modules():
        try:
            commands = [{"name": c.name, "help": c.help} for c in commands_of(m)]
        except ValueError as exc:
            raise ZnippyError(str(exc)) from None
        found.append({"name": m.name, "pkg_type": m.pkg_type, "source": type(m).__module__,
                      "columns": [{"name": f.name, "type": str(f.type)} for f in m.fields],
                      "commands": commands})
    if args.json:
        json.dump(found, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for listed in found:
        print(f"{listed['name']}  (pkg_type {listed['pkg_type']}, {listed['source']})")
        for col in listed["columns"]:
            print(f"    {col['name']:<24}{col['type']}")
        for c in listed["commands"]:
            print(f"    znippy-sql {listed['name']} ARCHIVE {c['name']:<16}{c['help']}")
    return 0
