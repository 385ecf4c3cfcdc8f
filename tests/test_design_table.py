"""docs/design.md's module table names every module of the package, and only modules that exist.

The table is the rows under "## Modules". A row's first cell names its modules by their path
under ``znippy_sql/`` (```format/schema.py```); a row whose first cell is a plain folder
(```remote/```, not a bold heading) names that folder's modules in its second cell, by their
path inside the folder (```url.py```) or under ``znippy_sql/`` (```modules/maven/pom.py```). A package's ``__init__.py`` is a
module to list when it defines something (a function, a class, a name other than ``__all__``);
one that only re-exports its modules' names is not.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "znippy_sql"
DESIGN = ROOT / "docs" / "design.md"

_TICKED = re.compile(r"`([^`]+)`")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def listed(text: str) -> set[str]:
    """The module paths (relative to ``znippy_sql/``) the table of ``text`` names."""
    rows = text.split("\n## Modules", 1)[1].split("\n## ", 1)[0].splitlines()
    found: set[str] = set()
    for line in rows:
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = _cells(line)
        if len(cells) < 2 or cells[0] == "module":
            continue
        first = _TICKED.findall(cells[0])
        if len(first) == 1 and first[0].endswith("/") and not cells[0].startswith("**"):
            folder = first[0]
            found.update(t if t.startswith(folder) else folder + t
                         for t in _TICKED.findall(cells[1]) if t.endswith(".py") and " " not in t)
        found.update(t for t in first if t.endswith(".py"))
    return found


def _defines(path: Path) -> bool:
    """Whether an ``__init__.py`` holds more than imports, a docstring and ``__all__``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id == "__all__"
                                                for t in node.targets):
            continue
        return True
    return False


def modules() -> set[str]:
    """Every module of the package a reader of the design should find in the table."""
    return {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")
            if p.name != "__init__.py" or _defines(p)}


def test_the_table_lists_every_module() -> None:
    assert sorted(modules() - listed(DESIGN.read_text())) == []


def test_the_table_lists_no_module_that_is_gone() -> None:
    files = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py")}
    assert sorted(listed(DESIGN.read_text()) - files) == []


def test_the_reading_of_the_table() -> None:
    text = """
## Modules

| module | what it owns |
|---|---|
| `errors.py` | errors (`format/schema.py` is not listed here) |
| **`format/`** | **the format (`format/x.py` neither)** |
| `format/a.py`, `format/b.py` | two |
| `remote/` | objects: `url.py` (URLs), `remote/x/pom.py`, `y/z.py`; `docs/remote.md` |

## Contracts

| `later.py` | not in the table |
"""
    assert listed(text) == {"errors.py", "format/a.py", "format/b.py", "remote/url.py",
                            "remote/x/pom.py", "remote/y/z.py"}


_PATH = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.(?:py|sql|md|rs|toml))(?:::\w+)?`")


def stale_paths(root: Path = ROOT) -> list[str]:
    """The file paths (with a folder: ```write/tail.py```, ```tests/test_x.py```) that the
    docs and the README name and that do not exist, from the repository's root or from
    ``znippy_sql/``."""
    out = []
    for doc in sorted([*root.joinpath("docs").glob("*.md"), root / "README.md"]):
        text = doc.read_text()
        for m in _PATH.finditer(text):
            path = m.group(1)
            if not any((base / path).exists() for base in (root, root / "znippy_sql",
                                                           root / "native")):
                out.append(f"{doc.name}:{text.count(chr(10), 0, m.start()) + 1}: {path}")
    return out


def test_every_path_the_docs_name_exists() -> None:
    assert stale_paths() == []
