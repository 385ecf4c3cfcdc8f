"""A module's own commands: ``znippy-sql <module> ARCHIVE <subcommand> ...`` (docs/modules.md).

A module that has commands gives them as ``module.commands``, a sequence of :class:`Command`.
The host (``znippy_sql/cli/modules.py``) knows none of their parameters: it makes one argparse
sub-parser per command, lets the command add its own arguments, adds ``--json`` and ``--repo``
to each, opens the archive and prints the :class:`Answer` the command returns.

A command sees the archive through :class:`ArchiveView` (what ``znippy_sql.read.Archive``
offers), so a module stays in the bottom layer and a test can hand it any archive.
:func:`module_rows` is the query every command starts from: the first-chunk rows of the
module's groups whose columns equal given values, filtered by Arrow kernels before anything
becomes Python.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa

from ..format.kernels import call_function, filter_by
from ..format.schema import GroupKey
from ..format.units import counted  # noqa: F401  (the modules' commands import it here)

#: a command's name: lower case words joined by dashes (``extract-closure``)
COMMAND_NAME = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")


class FileInfo(Protocol):
    """What a command reads of a file found in the archive (``read.FileInfo`` is one)."""

    @property
    def size(self) -> int: ...


class ExtractReport(Protocol):
    """What a command reads of an extract's report (``read.ExtractReport`` is one)."""

    @property
    def bytes_written(self) -> int: ...

    @property
    def failed(self) -> Mapping[str, str]: ...


class ArchiveView(Protocol):
    """What a command may ask of an open archive (``znippy_sql.read.Archive`` is one)."""

    path: str

    @property
    def groups(self) -> list[GroupKey]: ...

    def group_table(self, key: GroupKey) -> pa.Table: ...

    def find(self, path: str) -> FileInfo | None: ...

    def read(self, path: str) -> bytes: ...

    def extract(self, dest: str, *, paths: list[str] | None = None) -> ExtractReport: ...


@dataclass
class Answer:
    """What a command found: ``data`` for ``--json``, ``text`` (or raw bytes) for a terminal.

    ``status`` is the exit code: 0 found, 1 nothing matched or problems found (the closure has
    missing coordinates). ``message`` is one line for stderr when ``status`` is not 0.
    """

    data: Any
    text: str | bytes = ""
    status: int = 0
    message: str | None = None


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    return None


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, a one-line help, its arguments and what it does."""

    name: str
    help: str
    run: Callable[[ArchiveView, argparse.Namespace], Answer]
    arguments: Callable[[argparse.ArgumentParser], None] = field(default=_no_arguments)


def check_commands(module_name: str, commands: Any) -> tuple[Command, ...]:
    """``commands`` as a tuple, or ``ValueError`` saying what is wrong with them."""
    try:
        found = tuple(commands)
    except TypeError:
        raise ValueError(f"module {module_name!r}: commands must be a sequence of Command, "
                         f"not {type(commands).__name__}") from None
    names: set[str] = set()
    for c in found:
        if not isinstance(c, Command):
            raise ValueError(f"module {module_name!r}: {c!r} is not a Command")
        if not COMMAND_NAME.match(c.name) or c.name in names:
            raise ValueError(f"module {module_name!r}: command name {c.name!r} is not a "
                             "unique lower-case word (dashes between words)")
        names.add(c.name)
    return found


def commands_of(module: Any) -> tuple[Command, ...]:
    """A registered module's commands (none when it declares no ``commands``)."""
    return check_commands(module.name, getattr(module, "commands", ()) or ())


def module_rows(archive: ArchiveView, module: Any, columns: Sequence[str], *,
                where: Mapping[str, str] | None = None, repo: str | None = None
                ) -> list[dict[str, Any]]:
    """First-chunk rows (one a file) of ``module``'s groups whose columns equal ``where``.

    Each row has ``relative_path``, ``repo`` and the asked ``columns``; groups are taken in
    their sort order, rows in the group's order.
    """
    out: list[dict[str, Any]] = []
    for key in groups_of(archive, module, repo=repo):
        table = archive.group_table(key)
        names = set(table.schema.names)
        if any(c not in names for c in (*columns, *(where or {}))):
            continue  # a group written without this module's columns
        mask = call_function("equal", [table.column("chunk_seq"), pa.scalar(0, pa.uint32())])
        for col, value in (where or {}).items():
            mask = call_function("and_kleene", [mask, call_function(
                "equal", [table.column(col), pa.scalar(value, table.schema.field(col).type)])])
        picked = table.select(["relative_path", *columns])
        rows = filter_by(picked, mask).to_pylist()
        for row in rows:
            row["repo"] = key.repo
        out.extend(rows)
    return out


def groups_of(archive: ArchiveView, module: Any, *, repo: str | None = None
              ) -> list[GroupKey]:
    return [k for k in archive.groups if k.pkg_type == module.pkg_type
            and k.module_name == module.name and (repo is None or k.repo == repo)]


def with_sizes(archive: ArchiveView, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each file's ``size`` (all its chunks, found through the trie)."""
    out = []
    for row in rows:
        info = archive.find(row["relative_path"])
        out.append({**row, "size": None if info is None else info.size})
    return out


def files_text(rows: Sequence[dict[str, Any]]) -> str:
    """One line a file: its size, right-aligned, then its path."""
    width = max((len(str(r.get("size", ""))) for r in rows), default=1)
    return "".join(f"{r.get('size', '')!s:>{width}}  {r['relative_path']}\n" for r in rows)


# -- lookup and versions for modules keyed by (name, version) -------------------------------
@dataclass(frozen=True)
class NameVersion:
    """How a name-version module (cargo, npm, pypi) spells and orders its packages."""

    module: Any
    name_column: str
    version_column: str
    #: the sort key of a version (a total order: ties broken by the text)
    version_key: Callable[[str], Any]
    #: the text between name and version in ``lookup NAME<sep>VERSION``
    separator: str
    normalize: Callable[[str], str] = field(default=lambda name: name)
    extra_columns: tuple[str, ...] = ()
    #: when versions are equal although spelt differently (PEP 440: ``1.0 == 1.0.0``)
    version_equal: Callable[[str, str], bool] | None = None

    def split(self, spec: str) -> tuple[str, str | None]:
        """``NAME`` or ``NAME<sep>VERSION`` (a leading ``@`` is part of an npm scope)."""
        head, sep, version = spec[1:].partition(self.separator) if spec.startswith("@") \
            else spec.partition(self.separator)
        name = ("@" + head if spec.startswith("@") else head).strip()
        if not name or (sep and not version.strip()):
            raise argparse.ArgumentTypeError(
                f"{spec!r}: expected NAME or NAME{self.separator}VERSION")
        return self.normalize(name), (version.strip() or None) if sep else None

    def rows(self, archive: ArchiveView, name: str, version: str | None, *,
             repo: str | None) -> list[dict[str, Any]]:
        where = {self.name_column: name}
        if version is not None and self.version_equal is None:
            where[self.version_column] = version
        cols = [self.name_column, self.version_column, *self.extra_columns]
        rows = module_rows(archive, self.module, cols, where=where, repo=repo)
        if version is not None and self.version_equal is not None:
            same = self.version_equal
            rows = [r for r in rows if r[self.version_column] is not None
                    and same(r[self.version_column], version)]
        return rows

    def sorted_versions(self, versions: Iterable[str]) -> list[str]:
        return sorted(set(versions), key=lambda v: (self.version_key(v), v))

    def commands(self) -> tuple[Command, Command]:
        sep = self.separator

        def lookup_args(p: argparse.ArgumentParser) -> None:
            p.add_argument("spec", metavar=f"NAME[{sep}VERSION]", type=self.split)

        def versions_args(p: argparse.ArgumentParser) -> None:
            p.add_argument("name", metavar="NAME", type=self.normalize)

        return (Command("lookup", f"the files of NAME (or NAME{sep}VERSION), with sizes",
                        self.lookup, lookup_args),
                Command("versions", "the versions of NAME in the archive, oldest first",
                        self.versions, versions_args))

    def lookup(self, archive: ArchiveView, args: argparse.Namespace) -> Answer:
        name, version = args.spec
        rows = with_sizes(archive, self.rows(archive, name, version, repo=args.repo))
        order = {v: i for i, v in enumerate(self.sorted_versions(
            r[self.version_column] for r in rows if r[self.version_column] is not None))}
        rows.sort(key=lambda r: (order.get(r[self.version_column], -1), r["relative_path"]))
        files = [{"relative_path": r["relative_path"], "repo": r["repo"], "size": r["size"],
                  "name": r[self.name_column], "version": r[self.version_column],
                  **{c: r[c] for c in self.extra_columns}} for r in rows]
        shown = name + (f"{self.separator}{version}" if version else "")
        if not files:
            return Answer({"files": []}, status=1,
                          message=f"no {self.module.name} files for {shown}")
        return Answer({"files": files}, files_text(files))

    def versions(self, archive: ArchiveView, args: argparse.Namespace) -> Answer:
        rows = self.rows(archive, args.name, None, repo=args.repo)
        found = self.sorted_versions(r[self.version_column] for r in rows
                                     if r[self.version_column] is not None)
        counts: dict[str, int] = {}
        for r in rows:
            counts[r[self.version_column]] = counts.get(r[self.version_column], 0) + 1
        data = [{"version": v, "files": counts[v]} for v in found]
        if not found:
            return Answer({"name": args.name, "versions": []}, status=1,
                          message=f"no {self.module.name} package {args.name!r} in the archive")
        return Answer({"name": args.name, "versions": data}, "".join(v + "\n" for v in found))
