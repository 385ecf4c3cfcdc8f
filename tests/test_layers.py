"""The package's layers (docs/design.md): every import goes down or sideways, never up, and no
file imports itself back through others.

Read from the source with ``ast``, so every import counts: at the top of a file, inside a
function (a lazy import), under ``if TYPE_CHECKING:`` (type-only), and ``from .. import views``
(a package's ``__init__`` is a node of the graph like any file). ``from P import name`` is an
edge to the module ``P.name`` when there is one, else to ``P`` itself (its ``__init__`` for a
package). Views, UDFs and lazy package names registered by a ``"module:ATTRIBUTE"`` string are
not imports and are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "znippy_sql"
TOP = "znippy_sql"
#: the node of the package's own ``__init__.py``
ROOT = "__init__"
#: compiled modules (pyproject's maturin ``module-name``): no ``.py`` in a source checkout
EXTENSIONS = {("_native",)}

#: bottom to top; a module may import its own layer and any layer below it
LAYERS = [
    {"errors", "native", "forking", "corelib", "_native", "version"},
    {"format", "modules", "remote"},
    # views: the view catalog (its capabilities' views register by name); interop: the Rust
    # tool's 0.9/0.10 layouts, read beside ours
    {"read", "views", "interop"},
    {"provenance"},
    {"write"},
    {"git"},
    {"query", "queries", "udfs"},
    {"store"},
    {"catalog"},
    {"engines"},  # Daft, Spark, Ray adapters over the views and the catalog
    {"duckdb", "polars", "daft", "spark", "ray", "cli", "demo", ROOT},
]


def node_of(pkg: Path, path: Path) -> str:
    """``views/parts.py`` → ``views.parts``; ``views/__init__.py`` → ``views``; the package's
    own ``__init__.py`` → :data:`ROOT`."""
    parts = list(path.relative_to(pkg).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or ROOT


def _exists(pkg: Path, parts: list[str]) -> bool:
    """Whether ``parts`` name a module or a package of ``pkg``."""
    if not parts or tuple(parts) in EXTENSIONS:
        return True
    return pkg.joinpath(*parts).with_suffix(".py").is_file() or \
        pkg.joinpath(*parts, "__init__.py").is_file()


def imports_of(pkg: Path, path: Path, top: str = TOP) -> set[str]:
    """The nodes one file imports: every ``import`` and ``from ... import`` anywhere in it."""
    parts = list(path.relative_to(pkg).with_suffix("").parts)
    package = parts[:-1]  # the package a relative import starts from (an __init__'s own)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    raise AssertionError(f"{path}: import climbs above the package")
                base = package[: len(package) - (node.level - 1)]
                mod = base + (node.module.split(".") if node.module else [])
            elif node.module and (node.module == top or node.module.startswith(top + ".")):
                mod = node.module.split(".")[1:]
            else:
                continue
            for alias in node.names:
                sub = mod + [alias.name]
                found.add(".".join(sub if alias.name != "*" and _exists(pkg, sub) else mod)
                          or ROOT)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == top or alias.name.startswith(top + "."):
                    found.add(".".join(alias.name.split(".")[1:]) or ROOT)
    return found


def module_graph(pkg: Path = PKG, top: str = TOP) -> dict[str, set[str]]:
    """Every file of ``pkg`` → the nodes it imports (itself left out)."""
    graph = {node_of(pkg, p): imports_of(pkg, p, top) for p in sorted(pkg.rglob("*.py"))}
    return {mod: targets - {mod} for mod, targets in graph.items()}


def layer(node: str, layers: list[set[str]] = LAYERS) -> int:
    top = node.split(".")[0]
    for i, names in enumerate(layers):
        if top in names:
            return i
    raise AssertionError(f"{node}: its package {top!r} is in no layer of LAYERS")


def upward(graph: dict[str, set[str]], layers: list[set[str]] = LAYERS) -> list[str]:
    """The edges that climb a layer."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                  if layer(b, layers) > layer(a, layers))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, each sorted (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(graph: dict[str, set[str]], comp: list[str]) -> str:
    inside = set(comp)
    edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a] & inside)]
    return f"{len(comp)} modules: " + "; ".join(edges)


def test_no_import_climbs_a_layer() -> None:
    assert upward(module_graph()) == []


def test_no_import_cycles_between_files() -> None:
    graph = module_graph()
    assert [_describe(graph, c) for c in cycles(graph)] == []


def test_every_package_has_a_layer() -> None:
    for mod in module_graph():
        layer(mod)


# The checks themselves, on a small package written here: each kind of import is seen, and an
# upward import or a cycle fails.

def _package(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for name, text in files.items():
        path = pkg / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return pkg


_LOW_HIGH = [{"low", "errors"}, {"high", ROOT}]


def test_self_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "errors.py": "",
        "low/__init__.py": "from . import a\n",
        "low/a.py": ("from __future__ import annotations\n"
                     "from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from ..high.b import B\n"
                     "def f() -> None:\n    from .. import errors\n"
                     "def g() -> None:\n    import pkg.high.c\n"
                     "def h() -> None:\n    from .. import high\n"
                     "def i() -> None:\n    from pkg import name_of_root\n"),
        "high/__init__.py": "X = 1\n",
        "high/b.py": "from ..low import a\nfrom . import X\n",
        "high/c.py": "from pkg.low.a import f\n",
    })
    graph = module_graph(pkg, "pkg")
    assert graph["low"] == {"low.a"}
    assert graph["low.a"] == {"high.b", "errors", "high.c", "high", ROOT}
    assert graph["high.b"] == {"low.a", "high"}
    assert graph["high.c"] == {"low.a"}
    assert upward(graph, _LOW_HIGH) == ["low.a -> __init__", "low.a -> high",
                                        "low.a -> high.b", "low.a -> high.c"]
    assert cycles(graph) == [["high.b", "high.c", "low.a"]]


def test_self_a_cycle_through_a_package_init_fails(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "from .parts import P\nQ = 1\n",
        "low/parts.py": "from . import Q\nP = 2\n",  # the views ⇄ views.parts shape
    })
    graph = module_graph(pkg, "pkg")
    assert cycles(graph) == [["low", "low.parts"]]
    with pytest.raises(AssertionError):
        assert [_describe(graph, c) for c in cycles(graph)] == []


def test_self_a_sideways_cycle_fails_and_a_chain_passes(tmp_path: Path) -> None:
    files = {"__init__.py": "", "low/__init__.py": "",
             "low/a.py": "from .b import x\n", "low/b.py": "x = 1\n"}
    assert cycles(module_graph(_package(tmp_path / "ok", files), "pkg")) == []
    files["low/b.py"] = "def f() -> None:\n    from .a import x\n"
    assert cycles(module_graph(_package(tmp_path / "bad", files), "pkg")) == [["low.a", "low.b"]]


def test_self_an_unknown_package_has_no_layer(tmp_path: Path) -> None:
    pkg = _package(tmp_path, {"__init__.py": "", "odd.py": ""})
    with pytest.raises(AssertionError, match="odd"):
        [layer(m, _LOW_HIGH) for m in module_graph(pkg, "pkg")]


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
