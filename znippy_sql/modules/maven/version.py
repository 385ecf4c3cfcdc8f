"""Maven's version order (``ComparableVersion`` of Maven 3.8) and version ranges.

A version is split into items at ``.``, ``-`` and every change between digits and letters; a
``-`` (or a change between digits and letters) opens a nested list. Numbers compare as
numbers, qualifiers in the order ``alpha < beta < milestone < rc = cr < snapshot < "" = ga =
final = release < sp``, unknown qualifiers after those, alphabetically. ``a1``/``b1``/``m1``
mean ``alpha-1``/``beta-1``/``milestone-1``. Trailing zeros and release qualifiers are
dropped, so ``1.0.0 = 1 = 1-ga``. Examples: ``1.0-alpha-1 < 1.0-beta < 1.0-rc1 < 1.0 <
1.0-sp1``, ``1.9 < 1.10``.

A range is Maven's ``[1.0,2.0)``, ``(,1.5]``, ``[1.2]`` and unions of them ``(,1.0],[1.2,)``;
a plain version is a soft requirement (the version itself).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Union

_ALIASES = {"ga": "", "final": "", "release": "", "cr": "rc"}
_QUALIFIERS = ("alpha", "beta", "milestone", "rc", "snapshot", "", "sp")
_RELEASE = str(_QUALIFIERS.index(""))

Item = Union[int, str, "list[Item]"]


def _qualifier_rank(q: str) -> str:
    """What a qualifier compares as: its index, or ``7-<q>`` for an unknown one (strings)."""
    return str(_QUALIFIERS.index(q)) if q in _QUALIFIERS else f"{len(_QUALIFIERS)}-{q}"


def _string_item(value: str, followed_by_digit: bool) -> str:
    if followed_by_digit and len(value) == 1:
        value = {"a": "alpha", "b": "beta", "m": "milestone"}.get(value, value)
    return _ALIASES.get(value, value)


def _is_null(item: Item) -> bool:
    if isinstance(item, int):
        return item == 0
    if isinstance(item, str):
        return _qualifier_rank(item) == _RELEASE
    return not item


def _normalize(items: list[Item]) -> None:
    """Drop trailing null items (0, release qualifiers, empty lists) before a non-list item."""
    for i in range(len(items) - 1, -1, -1):
        if _is_null(items[i]):
            del items[i]
        elif not isinstance(items[i], list):
            break


def parse(version: str) -> list[Item]:
    """The item list of ``version`` (``ComparableVersion.parseVersion``)."""
    text = version.lower()
    top: list[Item] = []
    current = top
    stack = [top]
    is_digit = False
    start = 0

    def item(digit: bool, buf: str) -> Item:
        return int(buf) if digit else _string_item(buf, False)

    def open_list() -> None:
        nonlocal current
        new: list[Item] = []
        current.append(new)
        current = new
        stack.append(new)

    for i, c in enumerate(text):
        if c == ".":
            current.append(0 if i == start else item(is_digit, text[start:i]))
            start = i + 1
        elif c == "-":
            current.append(0 if i == start else item(is_digit, text[start:i]))
            start = i + 1
            open_list()
        elif c.isdigit():
            if not is_digit and i > start:
                # 1.0.0.X1 < 1.0.0-X2: treat .X as -X for any string qualifier X
                if current:
                    open_list()
                current.append(_string_item(text[start:i], True))
                start = i
                open_list()
            is_digit = True
        else:
            if is_digit and i > start:
                current.append(int(text[start:i]))
                start = i
                open_list()
            is_digit = False
    if len(text) > start:
        if not is_digit and current:
            open_list()
        current.append(item(is_digit, text[start:]))
    while stack:
        _normalize(stack.pop())
    return top


def _cmp_item(a: Item | None, b: Item | None) -> int:
    """``a.compareTo(b)`` of ComparableVersion's items; ``None`` is the absent item."""
    if a is None:
        return 0 if b is None else -_cmp_item(b, None)
    if isinstance(a, int):
        if b is None:
            return 0 if a == 0 else 1
        if isinstance(b, int):
            return (a > b) - (a < b)
        return 1  # 1.1 > 1-sp, 1.1 > 1-1
    if isinstance(a, str):
        if b is None:
            x, y = _qualifier_rank(a), _RELEASE
            return (x > y) - (x < y)
        if isinstance(b, str):
            x, y = _qualifier_rank(a), _qualifier_rank(b)
            return (x > y) - (x < y)
        return -1  # 1.any < 1.1, 1-sp < 1-1
    if b is None:
        return 0 if not a else _cmp_item(a[0], None)
    if isinstance(b, (int, str)):
        return -1 if isinstance(b, int) else 1
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else None
        right = b[i] if i < len(b) else None
        r = -_cmp_item(right, left) if left is None else _cmp_item(left, right)
        if r:
            return r
    return 0


@functools.lru_cache(maxsize=65536)
def _parsed(version: str) -> Any:
    return parse(version)


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as Maven orders the two versions."""
    return _cmp_item(_parsed(a), _parsed(b))


#: ``sorted(versions, key=sort_key)`` sorts in Maven's order
sort_key = functools.cmp_to_key(compare)


def sort_versions(versions: Any) -> list[str]:
    """Distinct versions in Maven's order; equal ones (``1.0`` and ``1``) by their text."""
    return sorted(set(versions), key=lambda v: (sort_key(v), v))


def canonical(version: str) -> str:
    """``ComparableVersion.getCanonical()``: ``1.0-alpha-1`` → ``1-alpha-1``."""
    def text(items: list[Item]) -> str:
        out = ""
        for i, it in enumerate(items):
            if i:
                out += "-" if isinstance(it, list) else "."
            out += text(it) if isinstance(it, list) else str(it)
        return out
    return text(_parsed(version))


# -- ranges ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    lower: str | None
    lower_closed: bool
    upper: str | None
    upper_closed: bool

    def contains(self, version: str) -> bool:
        if self.lower is not None:
            c = compare(version, self.lower)
            if c < 0 or (c == 0 and not self.lower_closed):
                return False
        if self.upper is not None:
            c = compare(version, self.upper)
            if c > 0 or (c == 0 and not self.upper_closed):
                return False
        return True


_RANGE = re.compile(r"\s*([\[(])([^\[\]()]*)([\])])\s*(?:,|$)")


def is_range(spec: str) -> bool:
    return spec.strip()[:1] in ("[", "(")


def parse_range(spec: str) -> tuple[Bound, ...]:
    """The bounds of a range ``[1.0,2.0),[3.0,)``; ``ValueError`` if it is not one."""
    bounds = []
    pos, text = 0, spec.strip()
    while pos < len(text):
        m = _RANGE.match(text, pos)
        if m is None:
            raise ValueError(f"not a version range: {spec!r}")
        open_, body, close = m.groups()
        low, comma, high = body.partition(",")
        low, high = low.strip(), high.strip()
        if not comma:  # [1.0]: exactly that version
            if open_ != "[" or close != "]" or not low:
                raise ValueError(f"not a version range: {spec!r}")
            bounds.append(Bound(low, True, low, True))
        else:
            bounds.append(Bound(low or None, open_ == "[", high or None, close == "]"))
        pos = m.end()
    if not bounds:
        raise ValueError(f"not a version range: {spec!r}")
    return tuple(bounds)


def in_range(version: str, bounds: tuple[Bound, ...]) -> bool:
    return any(b.contains(version) for b in bounds)
