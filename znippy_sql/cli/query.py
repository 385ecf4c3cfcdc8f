"""``znippy-sql sql ARCHIVE... "SELECT ..."``: one query over archives registered in DuckDB.

Each archive's views are named after its file stem (``repo-a.znippy`` → ``repo_a_files``,
``repo_a_chunks``, ...); the macros (``znippy_ls``, ``znippy_cat``, ``znippy_extract``,
``znippy_meta``) are loaded. Output: a text table (default), CSV, JSON lines or an Arrow IPC
stream on stdout. Several statements (``"a; b"``) run in order and each one's result is
printed, as ``duckdb -c`` does (statements that make no rows, e.g. ``CREATE``, print nothing);
the first that fails stops the rest (exit 2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

import pyarrow as pa

from ..errors import ZnippyError
from .common import add_output_options, json_value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sql", help="run SQL over archives (DuckDB)",
        usage="%(prog)s [options] ARCHIVE... QUERY|-",
        description="Run DuckDB SQL with every ARCHIVE registered as <stem>_files, "
                    "<stem>_chunks, ... views: one statement, or several separated by ';', "
                    "each one's result printed (as duckdb -c does). An ARCHIVE may be a glob "
                    "(quote it): its archives, like archives given separately that share a "
                    "stem, are registered together, with an 'archive' column.")
    p.add_argument("archives", nargs="+", metavar="ARCHIVE",
                   help="archive files, URLs or globs, then the QUERY (the last argument; "
                        "'-' reads it from stdin; none: stdin, or a prompt on a terminal)")
    p.add_argument("-f", "--file", metavar="FILE",
                   help="read the query from FILE ('-': stdin); every argument is an archive")
    p.add_argument("--as", dest="named", action="append", default=[], metavar="NAME=PATH",
                   help="register PATH (a file or a glob) under NAME; may be repeated")
    add_output_options(p)
    p.set_defaults(func=run)


def plan_names(archives: list[str], named: list[str]) -> dict[str, list[str]]:
    """Registration name → archive paths (globs expanded; one path or several)."""
    from ..query.duckdb import default_name, expand_archives, sanitize_name, set_name

    out: dict[str, list[str]] = {}
    explicit: set[str] = set()
    for item in named:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ZnippyError(f"--as takes NAME=PATH, not {item!r}")
        name = sanitize_name(name)
        if name in out:
            raise ZnippyError(f"--as names {name!r} twice")
        out[name] = expand_archives(path)[0]
        explicit.add(name)
    for item in archives:
        paths, many = expand_archives(item)
        name = set_name(item, paths) if many else default_name(paths[0])
        if name in explicit:
            raise ZnippyError(f"{item} would be registered as {name!r}, a name --as gives "
                              "to other archives; name it with --as too", path=item)
        out.setdefault(name, []).extend(p for p in paths if p not in out.get(name, []))
    return out


def run(args: argparse.Namespace) -> int:
    import duckdb

    from ..query.duckdb import register as register_archive

    from .sqlinput import prompt, split_args

    archives, query = split_args(args)
    if not archives and not args.named:
        print("znippy-sql sql: give at least one ARCHIVE and a QUERY", file=sys.stderr)
        return 2
    names = plan_names(archives, args.named)
    con = duckdb.connect()
    try:
        for name, paths in names.items():
            register_archive(con, paths if len(paths) > 1 else paths[0], name)

        def run_one(text: str) -> int:
            try:
                parts = con.extract_statements(text)
            except duckdb.Error as exc:
                print(f"znippy-sql sql: {_engine_message(exc)}", file=sys.stderr)
                return 2
            for stmt in parts if len(parts) > 1 else [None]:
                try:
                    rel = con.sql(text if stmt is None else stmt.query)
                    table = rel.to_arrow_table() if rel is not None else pa.table({})
                except duckdb.Error as exc:
                    print(f"znippy-sql sql: {_engine_message(exc)}", file=sys.stderr)
                    return 2
                if stmt is None or stmt.type.name not in _NO_ROWS:
                    _print(table, args.format, args.max_rows)
                    sys.stdout.flush()
            return 0

        return prompt(run_one) if query is None else run_one(query)
    finally:
        con.close()


#: statement kinds whose result is not printed when several statements run (as duckdb -c)
_NO_ROWS = frozenset({"CREATE", "CREATE_FUNC", "DROP", "ALTER", "TRANSACTION", "SET",
                      "VARIABLE_SET", "ATTACH", "DETACH", "LOAD", "PREPARE", "DEALLOCATE",
                      "INSERT", "UPDATE", "DELETE", "COPY", "EXPORT", "UPDATE_EXTENSIONS"})


def _engine_message(exc: Exception) -> str:
    """DuckDB's message, or ours when DuckDB only passes on what a source of ours raised."""
    text = str(exc)
    found = re.search(r"(?:failed|UDF): (?:\w+Error): (.*)", text, flags=re.S)
    return found.group(1).strip() if found else text


def _print(table: pa.Table, fmt: str, max_rows: int) -> None:
    if fmt == "arrow":
        out = sys.stdout.buffer
        with pa.ipc.new_stream(out, table.schema) as writer:
            writer.write_table(table)
        out.flush()
        return
    if fmt == "csv":
        import pyarrow.csv as pcsv

        buf = pa.BufferOutputStream()
        pcsv.write_csv(_printable(table), buf)
        sys.stdout.write(buf.getvalue().to_pybytes().decode("utf-8"))
        return
    if fmt == "json":
        for row in _printable(table).to_pylist():
            sys.stdout.write(json.dumps(row, ensure_ascii=False, default=json_value) + "\n")
        return
    sys.stdout.write(render_table(_printable(table), max_rows=max_rows))


def _printable(table: pa.Table) -> pa.Table:
    """Binary columns as hex (digests, checksums, contents) so text formats can carry them."""
    cols = []
    for field, col in zip(table.schema, table.columns):
        if pa.types.is_binary(field.type) or pa.types.is_fixed_size_binary(field.type) \
                or pa.types.is_large_binary(field.type):
            col = pa.array([None if v is None else v.hex() for v in col.to_pylist()], pa.utf8())
            field = pa.field(field.name, pa.utf8())
        cols.append((field, col))
    return pa.table([c for _, c in cols], schema=pa.schema([f for f, _ in cols]))


def render_table(table: pa.Table, *, max_rows: int = 10_000) -> str:
    """A plain aligned text table with a header line and a row count."""
    names = table.column_names
    rows = [["" if v is None else str(v) for v in row.values()]
            for row in table.slice(0, max_rows).to_pylist()]
    widths = [max([len(n), *(len(r[i]) for r in rows)]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows]
    more = f" (showing {max_rows})" if table.num_rows > max_rows else ""
    lines.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''}{more})")
    return "\n".join(lines) + "\n"
