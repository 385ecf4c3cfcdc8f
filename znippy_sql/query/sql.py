"""SQL text shipped in ``queries/*.sql`` (package ``znippy_sql.queries``), and SQL literals."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def load_sql(filename: str) -> str:
    return resources.files("znippy_sql.queries").joinpath(filename).read_text(encoding="utf-8")


def template(filename: str, **values: str) -> str:
    """A ``view_*.sql`` template with its ``{placeholders}`` filled; comment lines dropped."""
    text = "\n".join(ln for ln in load_sql(filename).splitlines()
                     if not ln.lstrip().startswith("--"))
    return text.format(**values).strip()


def literal(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def ident(value: str) -> str:
    """A quoted SQL identifier."""
    return '"' + value.replace('"', '""') + '"'
