"""Predicates an engine hands over, as a :class:`~znippy_sql.views.Where`.

Every engine speaks its own filter language (Daft expressions, Spark ``Filter`` objects, Ray
expressions); each adapter only spells its filter as a :data:`Node` tree, and
:func:`conjuncts_of` walks that tree into *conjuncts*: ``(column, "in", values)`` for
``=``/``IN`` (an ``OR`` of them on one column too) and ``(column, "prefix", values)`` for
``startswith``, through ``AND``. Only the
columns a ``Where`` tests are kept (``repo``, ``pkg_type``, ``pkg_type_name``,
``module_name``, ``relative_path``); anything else is left to the engine, which filters the
rows again after the read (a pushed conjunct only prunes: it never decides a row alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..views import Where

Conjunct = tuple[str, str, tuple[Any, ...]]
#: an engine's filter as the adapters spell it: ``("and" | "or", a, b)``, ``("eq", a, b)``,
#: ``("in", a, (value, ...))``, ``("prefix", a, b)``, ``("col", name)``, ``("lit", value)``;
#: None for anything else (nothing is pushed for it)
Node = tuple[Any, ...] | None
#: the columns a Where can test (``pkg_type_name`` goes to ``pkg_type`` by name)
PUSHABLE = ("repo", "pkg_type", "pkg_type_name", "module_name", "relative_path")


def conjuncts_of(node: Node) -> list[Conjunct]:
    """The AND-ed tests of ``node`` a :class:`Where` may use (any column; the rest: none)."""
    if not node:
        return []
    kind = node[0]
    if kind == "and":
        return [*conjuncts_of(node[1]), *conjuncts_of(node[2])]
    if kind == "or":  # an OR of equalities on one column is an IN (Daft's is_in is one)
        a, b = conjuncts_of(node[1]), conjuncts_of(node[2])
        if len(a) == len(b) == 1 and a[0][0] == b[0][0] and a[0][1] == b[0][1] == "in":
            return [(a[0][0], "in", tuple(dict.fromkeys(a[0][2] + b[0][2])))]
        return []
    if kind == "eq":
        left, right = node[1], node[2]
        if _is(left, "lit") and _is(right, "col"):
            left, right = right, left
        if _is(left, "col") and _is(right, "lit") and right[1] is not None:
            return [(left[1], "in", (right[1],))]
    elif kind == "in":
        column, values = node[1], tuple(node[2])
        if _is(column, "col") and values and all(v is not None for v in values):
            return [(column[1], "in", values)]
    elif kind == "prefix":
        column, prefix = node[1], node[2]
        if _is(column, "col") and _is(prefix, "lit") and isinstance(prefix[1], str):
            return [(column[1], "prefix", (prefix[1],))]
    return []


def _is(node: Node, kind: str) -> bool:
    return isinstance(node, tuple) and len(node) == 2 and node[0] == kind


def where_of(conjuncts: Iterable[Conjunct]) -> Where:
    """The :class:`Where` of AND-ed conjuncts (those it cannot express are dropped)."""
    out = Where()
    for column, op, values in conjuncts:
        values = tuple(values)
        if column in ("repo", "module_name") and op == "in" and _all(values, str):
            out = merge(out, Where(**{column: values}))
        elif column == "pkg_type" and op == "in" and _all(values, int):
            out = merge(out, Where(pkg_type=values))
        elif column == "pkg_type_name" and op == "in" and _all(values, str):
            try:
                out = merge(out, Where(pkg_type=values))
            except (ValueError, KeyError, LookupError):
                continue  # a name no module knows: the engine's own filter finds no row
            except Exception:  # noqa: BLE001  (ZnippyError for an unknown type: not ours)
                continue
        elif column == "relative_path" and op == "in" and _all(values, str):
            out = merge(out, Where(path=values))
        elif column == "relative_path" and op == "prefix" and _all(values, str):
            out = merge(out, Where(path_prefix=values))
    return out


def _all(values: tuple[Any, ...], kind: type) -> bool:
    return all(isinstance(v, kind) and not isinstance(v, bool) for v in values)


def merge(a: Where | None, b: Where | None) -> Where:
    """Both ``a`` and ``b`` (a row passes both): per field the intersection."""
    if a is None or a.is_empty():
        return b or Where()
    if b is None or b.is_empty():
        return a
    fields: dict[str, Any] = {}
    for name in ("repo", "pkg_type", "module_name", "path"):
        x, y = getattr(a, name), getattr(b, name)
        fields[name] = x if y is None else y if x is None else tuple(v for v in x if v in y)
    x, y = a.path_prefix, b.path_prefix
    if x is None or y is None:
        fields["path_prefix"] = x if y is None else y
    else:  # the longer of two nested prefixes; none when they diverge
        fields["path_prefix"] = tuple(dict.fromkeys(
            [p for p in x if any(p.startswith(q) for q in y)]
            + [q for q in y if any(q.startswith(p) for p in x)]))
    return Where(**fields)


def where_kwargs(where: Where | None = None, **fields: Any) -> Where:
    """A :class:`Where` from the keyword form ``repo=..., pkg_type=..., path_prefix=...``
    the adapters take, merged with ``where``."""
    given = {k: v for k, v in fields.items() if v is not None}
    return merge(where, Where(**given)) if given else (where or Where())
