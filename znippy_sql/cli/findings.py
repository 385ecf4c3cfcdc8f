"""Findings for a human: repeated ones grouped, so a flood becomes one line.

A finding is a string whose subject (a quoted path, as ``repr`` writes it, optionally followed
by `` chunk N``) comes first: ``'a/b.py': signer CN=x is not trusted``. Findings whose text
after the subject is the same are one group; a group of :data:`GROUP_FROM` or more prints as
``8,340 files: signer CN=x is not trusted (first: 'a/b.py', ...)``. ``--json`` and ``-v`` keep
the full list.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TextIO

#: findings sharing one text are printed as one line from this many on
GROUP_FROM = 3
#: subjects named in a grouped line
SHOWN = 3

_SUBJECT = re.compile(r"""^(?P<who>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?P<chunk> chunk \d+)?:\s""")


def split(finding: str) -> tuple[str | None, str]:
    """``(subject, the rest)``: the subject is the leading quoted path, or None."""
    m = _SUBJECT.match(finding)
    if m is None:
        return None, finding
    return m.group("who"), finding[m.end():]


def grouped(findings: Sequence[str], *, noun: str = "file") -> list[str]:
    """The lines to print: each finding as it is, or one line per large group (in the order
    the group's first finding came)."""
    groups: dict[str, list[tuple[str, str]]] = {}  # text → (subject, finding) of each
    order: list[tuple[str, str | None]] = []  # (text, the finding itself when ungrouped)
    for finding in findings:
        who, rest = split(finding)
        if who is None:
            order.append((finding, finding))
            continue
        members = groups.setdefault(rest, [])
        if not members:
            order.append((rest, None))
        members.append((who, finding))
    lines: list[str] = []
    for text, single in order:
        if single is not None:
            lines.append(single)
            continue
        members = groups[text]
        if len(members) < GROUP_FROM:
            lines.extend(finding for _, finding in members)
            continue
        first = ", ".join(who for who, _ in members[:SHOWN])
        lines.append(f"{len(members):,} {noun}s: {text} (first: {first}, ...)")
    return lines


def print_findings(findings: Iterable[str], out: TextIO, *, prefix: str = "",
                   verbose: bool = False, noun: str = "file") -> None:
    """Every finding on its own line with ``verbose``; grouped otherwise."""
    items = list(findings)
    lines = items if verbose else grouped(items, noun=noun)
    for line in lines:
        out.write(f"{prefix}{line}\n")
    if not verbose and len(lines) < len(items):
        out.write(f"({len(items):,} in all; every one with -v or --json)\n")
