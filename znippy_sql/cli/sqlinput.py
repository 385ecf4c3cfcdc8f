"""Where ``znippy-sql sql`` takes its SQL from: the last argument, ``-f FILE`` (``-f -`` is
stdin), a last argument ``-`` (stdin), piped stdin when no SQL is given, or, when stdin is a
terminal and no SQL is given, a prompt (statements end with ``;``, Ctrl-D leaves).

The last argument is SQL unless it names an existing file or is a glob that matches one (then
every argument is an archive and the SQL comes from elsewhere).
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from ..errors import ZnippyError

PROMPT, MORE = "znippy-sql> ", "       ...> "


def split_args(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """(archives, the SQL); None: read statements at a prompt."""
    positional = list(args.archives)
    sql_file = getattr(args, "file", None)
    if sql_file is not None:
        return positional, _read(sql_file)
    if positional and positional[-1] == "-":
        return positional[:-1], _read("-")
    if positional and not _names_archives(positional[-1]):
        return positional[:-1], positional[-1]
    stdin = sys.stdin
    if stdin is not None and stdin.isatty():
        return positional, None
    text = stdin.read() if stdin is not None else ""
    if not text.strip():
        raise ZnippyError("no query: give it as the last argument, with -f FILE, or on stdin")
    return positional, text


def _names_archives(text: str) -> bool:
    """An existing file, or a glob (``dumps/*.znippy``) that matches one: an archive argument."""
    if os.path.exists(text):
        return True
    return any(c in text for c in "*?[") and bool(glob.glob(text))


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        with open(name, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ZnippyError(f"cannot read the query: {exc.strerror or exc}", path=name) from None
    except UnicodeDecodeError:
        raise ZnippyError("the query file is not UTF-8 text", path=name) from None


def statements(stdin: TextIO, out: TextIO) -> Iterator[str]:
    """Statements typed at the prompt, each ending with ``;``; ends at EOF."""
    try:
        import readline  # noqa: F401  (line editing and history for input())
    except ImportError:  # pragma: no cover
        pass
    lines: list[str] = []
    while True:
        try:
            if stdin is sys.stdin:
                line = input(MORE if lines else PROMPT)
            else:  # pragma: no cover  (tests drive the real stdin through a pty)
                out.write(MORE if lines else PROMPT)
                out.flush()
                line = stdin.readline()
                if not line:
                    raise EOFError
        except EOFError:
            out.write("\n")
            if lines and "".join(lines).strip():
                yield "\n".join(lines)
            return
        except KeyboardInterrupt:  # Ctrl-C drops the statement being typed
            out.write("^C\n")
            lines = []
            continue
        lines.append(line)
        if line.rstrip().endswith(";"):
            text = "\n".join(lines)
            lines = []
            if text.strip(" \n;"):
                yield text


def prompt(run_one: Callable[[str], int], *, stdin: TextIO | None = None,
           out: TextIO | None = None) -> int:
    """Run each statement typed; errors are printed and the prompt goes on. Exit code 0."""
    out = out if out is not None else sys.stdout
    for text in statements(stdin if stdin is not None else sys.stdin, out):
        run_one(text)
    return 0
