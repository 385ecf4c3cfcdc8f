"""A SQL query's simple ``WHERE`` predicates and named columns, as pyiceberg scan arguments.

DuckDB parses the query (``json_serialize_sql``: the parser's tree as JSON, nothing bound or
run). For each table of the catalog the query reads:

- columns: every column name the query mentions, or all of them when it has a ``*``, a
  ``COLUMNS(...)``, a whole-row reference or a renaming alias;
- row filter: per ``FROM`` item that reads the table, the ``WHERE`` conjuncts of that ``SELECT``
  comparing one of its columns with constants, OR-ed over every such item.

Every pushed predicate is false or NULL where the column is NULL, and DuckDB still evaluates the
whole query, so pushing only pre-filters: rows the query would keep are never dropped. Anything
not understood is simply not pushed (the scan reads more). See docs/catalog.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pyiceberg.expressions import (AlwaysTrue, And, BooleanExpression, EqualTo, GreaterThan,
                                   GreaterThanOrEqual, In, LessThan, LessThanOrEqual, NotEqualTo,
                                   NotIn, NotNull, Or, StartsWith)

# pyiceberg's predicates take (term, literal(s)) positionally at run time (their own __init__ and
# __new__); mypy sees only the pydantic-generated keyword-only __init__, hence these casts
# (is_in also serves catalog/extract.py).
_Compare = Callable[[str, Any], BooleanExpression]
is_in = cast("Callable[[str, Iterable[Any]], BooleanExpression]", In)
_not_in = cast("Callable[[str, Iterable[Any]], BooleanExpression]", NotIn)
_NotNull = cast("Callable[[str], BooleanExpression]", NotNull)
_StartsWith = cast(_Compare, StartsWith)
_COMPARE: dict[str, _Compare] = {  # the same casts as above, for every comparison
    k: cast(_Compare, v) for k, v in {
        "COMPARE_EQUAL": EqualTo, "COMPARE_NOTEQUAL": NotEqualTo,
        "COMPARE_LESSTHAN": LessThan, "COMPARE_GREATERTHAN": GreaterThan,
        "COMPARE_LESSTHANOREQUALTO": LessThanOrEqual,
        "COMPARE_GREATERTHANOREQUALTO": GreaterThanOrEqual}.items()}
_FLIP = {"COMPARE_LESSTHAN": "COMPARE_GREATERTHAN", "COMPARE_GREATERTHAN": "COMPARE_LESSTHAN",
         "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
         "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO"}
_NO = object()


@dataclass
class Use:
    """How a query reads one table: ``columns`` None = all; ``filter`` AlwaysTrue = no rows
    pruned."""

    columns: set[str] | None
    filter: BooleanExpression


@dataclass
class _Ref:
    node: dict[str, Any]
    table: str
    alias: str
    filter: BooleanExpression | None = None


def parse(con: Any, query: str) -> dict[str, Any] | None:
    """DuckDB's parse tree of ``query``, or None when it cannot be serialised."""
    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchall()[0][0])
    except Exception:  # noqa: BLE001 - no tree means no pushdown, never a failure
        return None
    return None if tree.get("error") else tree


Columns = Mapping[str, tuple[str, str]]  # lower-case name → (name, "str"|"int"|"bool"|"")


def analyse(con: Any, query: str, tables: Mapping[str, Columns], *,
            tree: Any = _NO) -> dict[str, Use]:
    """For each of ``tables`` (name → its columns) the query reads: its columns and row
    filter. A query DuckDB cannot serialise reads every table whole. ``tree``: the query's
    :func:`parse` when the caller has it."""
    if tree is _NO:
        tree = parse(con, query)
    if tree is None:
        return {name: Use(None, AlwaysTrue()) for name in tables}
    refs = [_Ref(n, n["table_name"].lower(), (n.get("alias") or n["table_name"]).lower())
            for n in _nodes(tree) if n.get("type") == "BASE_TABLE"
            and n.get("table_name", "").lower() in tables and not n.get("catalog_name")
            and n.get("schema_name", "") in ("", "main")]
    if not refs:
        return {}
    by_id = {id(r.node): r for r in refs}
    for node in _nodes(tree):
        if node.get("type") == "SELECT_NODE" and node.get("where_clause") is not None \
                and node.get("sample") is None:
            items = list(_from_items(node.get("from_table")))
            here = [by_id[id(i)] for i in items if id(i) in by_id]
            for ref in here:
                if ref.node.get("sample") or ref.node.get("at_clause") \
                        or ref.node.get("column_name_alias"):
                    continue
                alone = len(items) == 1
                cols = tables[ref.table]
                ref.filter = _expr(node["where_clause"], ref, cols, alone)
    names, single, whole = _columns(tree)
    out: dict[str, Use] = {}
    for name, cols in tables.items():
        mine = [r for r in refs if r.table == name]
        if not mine:
            continue
        filters = [r.filter for r in mine if r.filter is not None]
        if len(filters) < len(mine):
            flt: BooleanExpression = AlwaysTrue()
        else:
            flt = filters[0]
            for f in filters[1:]:
                flt = Or(flt, f)
        aliases = {r.alias for r in mine} | {name}
        star = whole or bool(aliases & single) or any(r.node.get("column_name_alias")
                                                     for r in mine)
        out[name] = Use(None if star else {cols[n][0] for n in names if n in cols}, flt)
    return out


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every JSON object of the tree, depth first."""
    stack = [tree]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            yield cur
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)


def _from_items(node: Any) -> Iterator[dict[str, Any]]:
    """The tables a ``FROM`` joins (through joins, not into subqueries)."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "JOIN":
        if node.get("ref_type") in ("NATURAL", "POSITIONAL", "ASOF"):
            yield {"type": "UNPUSHABLE"}  # two items: nothing unqualified is pushed
        yield from _from_items(node.get("left"))
        yield from _from_items(node.get("right"))
    else:
        yield node


def _columns(tree: Any) -> tuple[set[str], set[str], bool]:
    """Every name a column reference mentions (lower case), the one-part ones among them
    (a table alias there is a whole-row reference), and whether a ``*`` reads whole rows."""
    names: set[str] = set()
    single: set[str] = set()
    whole = False
    for node in _nodes(tree):
        cls = node.get("class")
        if cls == "STAR":
            whole = True
        elif cls == "COLUMN_REF":
            parts = [str(n).lower() for n in node.get("column_names", ())]
            names.update(parts)
            if len(parts) == 1:
                single.update(parts)
        elif node.get("type") == "JOIN":
            names.update(str(n).lower() for n in node.get("using_columns") or ())
            if node.get("ref_type") == "NATURAL":
                whole = True
    return names, single, whole


def _expr(node: Any, ref: _Ref, cols: Columns, alone: bool
          ) -> BooleanExpression | None:
    """``node`` as a pyiceberg predicate on ``ref``'s columns, weakened where it must be
    (an AND keeps the conjuncts it can push); None when nothing can be pushed."""
    if not isinstance(node, dict):
        return None
    kind: str | None = node.get("type")
    if kind == "CONJUNCTION_AND":
        parts = [p for p in (_expr(c, ref, cols, alone) for c in node.get("children", ()))
                 if p is not None]
        if not parts:
            return None
        out = parts[0]
        for p in parts[1:]:
            out = And(out, p)
        return out
    if kind == "CONJUNCTION_OR":
        maybe = [_expr(c, ref, cols, alone) for c in node.get("children", ())]
        parts = [p for p in maybe if p is not None]
        if not parts or len(parts) < len(maybe):
            return None
        out = parts[0]
        for p in parts[1:]:
            out = Or(out, p)
        return out
    if kind in _COMPARE:
        col, lit = _column(node.get("left"), ref, cols, alone), _literal(node.get("right"))
        if col is None or lit is _NO:
            col, lit = _column(node.get("right"), ref, cols, alone), _literal(node.get("left"))
            kind = _FLIP.get(kind, kind)
        if col is None or not _fits(col, lit):
            return None
        return _COMPARE[kind](col[0], lit)
    if kind in ("COMPARE_IN", "COMPARE_NOT_IN") or (
            kind == "OPERATOR_NOT" and len(node.get("children", ())) == 1
            and node["children"][0].get("type") == "COMPARE_IN"):
        negate = kind != "COMPARE_IN"
        inner = node["children"][0] if kind == "OPERATOR_NOT" else node
        first, *rest = inner.get("children") or [None]
        col = _column(first, ref, cols, alone)
        values = [_literal(v) for v in rest]
        if col is None or not values or not all(_fits(col, v) for v in values):
            return None
        return _not_in(col[0], values) if negate else is_in(col[0], values)
    if kind == "OPERATOR_IS_NOT_NULL":
        col = _column((node.get("children") or [None])[0], ref, cols, alone)
        return _NotNull(col[0]) if col is not None else None
    if node.get("class") == "FUNCTION" and node.get("function_name") in ("~~", "like") \
            and len(node.get("arguments") or node.get("children") or ()) == 2:
        args = [a.get("expression", a) for a in (node.get("arguments") or node["children"])]
        col, pattern = _column(args[0], ref, cols, alone), _literal(args[1])
        if col is None or not _fits(col, pattern) or not pattern.endswith("%"):
            return None
        prefix = pattern[:-1]
        if "%" in prefix or "_" in prefix or "\\" in prefix:
            return None
        return _StartsWith(col[0], prefix)
    return None


def _fits(col: tuple[str, str], value: Any) -> bool:
    """A constant compared as DuckDB compares it: only of the column's own kind."""
    kind = col[1]
    if isinstance(value, bool):
        return kind == "bool"
    if isinstance(value, int):
        return kind == "int" and -(1 << 63) <= value < (1 << 63)
    return isinstance(value, str) and kind == "str"


def _column(node: Any, ref: _Ref, cols: Columns, alone: bool) -> tuple[str, str] | None:
    """The table column ``node`` names for ``ref`` (qualified by its alias, or unqualified
    when the ``FROM`` holds it alone), or None."""
    if not isinstance(node, dict) or node.get("class") != "COLUMN_REF":
        return None
    parts = [str(p).lower() for p in node.get("column_names", ())]
    if len(parts) == 1 and alone:
        return cols.get(parts[0])
    if len(parts) == 2 and parts[0] == ref.alias:
        return cols.get(parts[1])
    return None


def _literal(node: Any) -> Any:
    """A constant's value (str, int, bool), None for NULL, ``_NO`` for anything else.
    Decimals and typed casts are not pushed: their conversion could change a comparison."""
    if not isinstance(node, dict) or node.get("class") != "CONSTANT":
        return _NO
    lit = node.get("literal")
    if isinstance(lit, dict):  # DuckDB >= 1.4: {"kind", "text"}
        kind = lit.get("kind")
        text: Any = lit.get("text")  # a JSON scalar: its type is the kind's
        if kind == "STRING":
            return text
        if kind == "INTEGER":
            return int(text)
        if kind == "BOOLEAN":
            return str(text).lower() == "true"
        return None if kind == "NULL" else _NO
    value = node.get("value")  # older: {"type": {"id"}, "is_null", "value"}
    if not isinstance(value, dict):
        return _NO
    if value.get("is_null"):
        return None
    tid = (value.get("type") or {}).get("id", "")
    scalar: Any = value.get("value")  # a JSON scalar: its type is the type id's
    if tid == "VARCHAR":
        return scalar
    if tid in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
               "UINTEGER", "UBIGINT"):
        return int(scalar)
    if tid == "BOOLEAN":
        return bool(scalar)
    return _NO
