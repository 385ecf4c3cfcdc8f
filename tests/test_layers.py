"""The package's layers (docs/design.md): every import goes down or sideways, never up.

Read from the source with ``ast`` (imports inside functions count too), so a lazy import that
climbs from the read path into the writer fails here, not in a reviewer's head.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "znippy_sql"

#: bottom to top; a module may import its own layer and any layer below it
LAYERS = [
    {"errors", "native", "forking", "corelib", "_native"},
    {"format", "modules", "remote"},
    {"read", "views", "interop"},  # views: the view catalog (its capabilities' views register by name)
    {"provenance"},
    {"write"},
    {"git"},
    {"query", "queries", "udfs"},
    {"store"},
    {"catalog"},
    {"engines"},  # Daft, Spark, Ray adapters over the views and the catalog
    {"duckdb", "polars", "daft", "spark", "ray", "cli", "demo", "__init__"},
]
#: the Archive facade's methods that import their implementation where they are called
FACADE = {("read.reader", "provenance.meta"), ("read.reader", "read.extract"),
          ("read.reader", "read.verify"), ("read.reader", "read.fileobj")}


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of import nodes under ``if TYPE_CHECKING:`` (annotations, not imports at run time)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _layer(top: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if top in names)


def _imports(path: Path) -> set[str]:
    rel = path.relative_to(PKG).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("znippy_sql"):
                mod = node.module.split(".")[1:]
            else:
                continue
            if not node.module:  # "from . import x": x is a module, or a name of the package
                for a in node.names:
                    sub = mod + [a.name]
                    is_module = (PKG.joinpath(*sub).with_suffix(".py").exists()
                                 or PKG.joinpath(*sub).is_dir())
                    found.add(".".join(sub if is_module else mod))
            else:
                found.add(".".join(mod))
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names
                         if a.name.startswith("znippy_sql."))
    return {f for f in found if f}


def _module(path: Path) -> str:
    return ".".join(path.relative_to(PKG).with_suffix("").parts)


def test_no_import_climbs_a_layer() -> None:
    upward = []
    for path in sorted(PKG.rglob("*.py")):
        me = _module(path)
        for target in _imports(path):
            if target in ("", "__init__"):  # the package itself: its lazy names
                continue
            if _layer(target.split(".")[0]) > _layer(me.split(".")[0]) and \
                    (me, target) not in FACADE:
                upward.append(f"{me} -> {target}")
    assert upward == []


def test_no_import_cycles_between_modules() -> None:
    graph = {}
    for path in PKG.rglob("*.py"):
        graph[_module(path)] = {t for t in _imports(path)}
    names = set(graph)
    for mod in graph:
        graph[mod] = {t for t in graph[mod] if t in names and t != mod and (mod, t) not in FACADE}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            cur = todo.pop()
            for nxt in graph.get(cur, ()):
                if nxt == goal:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    # module pairs that import each other, directly or through others (packages' __init__ aside)
    cycles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a]
                    if not a.endswith("__init__") and not b.endswith("__init__")
                    and reaches(b, a))
    assert cycles == []


def test_no_private_name_crosses_a_package() -> None:
    """``from ..other import _name`` is private use across packages: make the name public."""
    crossing = []
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = parts[:-1][: len(parts) - 1 - (node.level - 1)]
                mod = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("znippy_sql"):
                mod = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and \
                        (mod[:1] or [""])[0] != (parts[0] if len(parts) > 1 else ""):
                    crossing.append(f"{'.'.join(parts)} imports {'.'.join(mod)}.{alias.name}")
    assert crossing == []
