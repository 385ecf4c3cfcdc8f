"""Predicates an engine hands over, as a :class:`~znippy_sql.views.Where`.

Every engine speaks its own filter language (Daft expressions, Spark ``Filter`` objects, a
Ray/Python keyword); each adapter turns what it can into *conjuncts*: ``(column, "in",
values)`` for ``=``/``IN`` and ``(column, "prefix", values)`` for ``startswith``. Only the
columns a ``Where`` tests are kept (``repo``, ``pkg_type``, ``pkg_type_name``,
``module_name``, ``relative_path``); anything else is left to the engine, which filters the
rows again after the read (a pushed conjunct only prunes: it never decides a row alone).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..views import Where

Conjunct = tuple[str, str, tuple[Any, ...]]
#: the columns a Where can test (``pkg_type_name`` goes to ``pkg_type`` by name)
PUSHABLE = ("repo", "pkg_type", "pkg_type_name", "module_name", "relative_path")


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
