"""Python UDFs behind the package-type modules' macros (``queries/macros.sql``, docs/query.md).

``maven_sort_versions`` / ``pypi_sort_versions`` order a list of versions as Maven
(``ComparableVersion``) and PEP 440 do; ``maven_closure`` is ``znippy-sql maven ARCHIVE deps``
as rows. They call the modules' own functions, so SQL and the CLI give the same answers.
Installed per module by ``register`` for an archive that has a group of that module
(``query/duckdb.py`` ``CAPABILITIES``): ``MAVEN_UDFS``, ``PYPI_UDFS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from znippy_sql import modules
from znippy_sql.udfs.archive_udfs import archive_at, plain

CLOSURE_FIELDS = [
    ("coordinates", pa.utf8()), ("group_id", pa.utf8()), ("artifact_id", pa.utf8()),
    ("version", pa.utf8()), ("type", pa.utf8()), ("extension", pa.utf8()),
    ("classifier", pa.utf8()), ("scope", pa.utf8()), ("optional", pa.bool_()),
    ("depth", pa.int32()), ("via", pa.utf8()), ("pom", pa.utf8()), ("file", pa.utf8()),
    ("missing", pa.utf8()), ("reason", pa.utf8()),
]
CLOSURE_ROW = "STRUCT(" + ", ".join(
    f"{n} {'BOOLEAN' if t == pa.bool_() else 'INTEGER' if t == pa.int32() else 'VARCHAR'}"
    for n, t in CLOSURE_FIELDS) + ")"


def _sorting(order: Callable[[list[str]], list[str]]) -> Callable[[Any], pa.Array]:
    def udf(lists: Any) -> pa.Array:
        return pa.array([None if v is None else order([x for x in v if x is not None])
                         for v in plain(lists).to_pylist()], pa.list_(pa.utf8()))
    return udf


def _pep440(versions: list[str]) -> list[str]:
    from znippy_sql.modules.pypi_commands import version_key

    return sorted(set(versions), key=lambda v: (version_key(v), v))


def _maven_order(versions: list[str]) -> list[str]:
    from znippy_sql.modules.maven import version as maven_version

    return maven_version.sort_versions(versions)


def closure_rows(archive: Any, gav: str, scope: str | None) -> list[dict[str, Any]]:
    """The closure of ``gav`` as rows: one per artifact, then what is missing besides."""
    from znippy_sql.modules.maven.commands import closure, closure_data, coordinates

    module = modules.by_name("maven")
    g, a, v = coordinates(gav, least=3, most=3, usage="G:A:V")
    data = closure_data(closure(archive, module, (g, a, v), scope=scope))
    problems = {(m["coordinates"], m["depth"]): m for m in data["missing"]}
    rows = []
    for r in data["resolved"]:
        m = problems.pop((f"{r['group_id']}:{r['artifact_id']}:{r['version']}", r["depth"]),
                         None)
        rows.append({**{n: r.get(n) for n, _ in CLOSURE_FIELDS if n in r},
                     "missing": m["what"] if m else None, "reason": m["reason"] if m else None})
    for m in problems.values():
        rows.append({"coordinates": m["coordinates"], "depth": m["depth"], "via": m["via"],
                     "missing": m["what"], "reason": m["reason"]})
    return rows


def _closure_udf(archives: Any, gavs: Any, scopes: Any) -> pa.Array:
    out = []
    for a, g, s in zip(*(plain(x).to_pylist() for x in (archives, gavs, scopes))):
        out.append(None if a is None or g is None else closure_rows(archive_at(a), g, s))
    return pa.array(out, pa.list_(pa.struct(CLOSURE_FIELDS)))


#: (name, function, parameter types, return type, side effects) of each module's UDFs
MAVEN_UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("maven_sort_versions", _sorting(_maven_order), ["VARCHAR[]"],
     "VARCHAR[]", False),
    ("maven_closure", _closure_udf, ["VARCHAR", "VARCHAR", "VARCHAR"], f"{CLOSURE_ROW}[]",
     False),
)
PYPI_UDFS: tuple[tuple[str, Callable[..., pa.Array], list[str], str, bool], ...] = (
    ("pypi_sort_versions", _sorting(_pep440), ["VARCHAR[]"], "VARCHAR[]", False),
)
