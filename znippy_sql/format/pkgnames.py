"""FORMAT §3's built-in pkg_type numbers and names and its default block size, apart from
``schema`` so that a reader without pyarrow (the CLI's fast ``info``: ``cli/infotext.py``)
names them too, and ``create`` starts its walk before pyarrow is imported (``write/early.py``)."""

from __future__ import annotations

#: FORMAT §3: files are cut into chunks of this many bytes unless told otherwise
DEFAULT_BLOCK_SIZE = 10 * 1024 * 1024

#: FORMAT §3's pkg_type numbers: the built-in defaults, which keep their names. Any other name
#: or number resolves through the module registry (``znippy_sql.modules.pkgtypes``: a module's
#: name is its pkg_type's name), loaded only then (a plain archive loads no module).
PKG_TYPES: dict[str, int] = {
    "raw": 0,
    "untyped": 0,
    "maven": 1,
    "maven2": 1,
    "cargo": 2,
    "npm": 3,
    "pypi": 4,
    "docker": 5,
    "helm": 6,
    "raw-named": 7,
}
PKG_TYPE_NAMES: dict[int, str] = {
    0: "raw",
    1: "maven",
    2: "cargo",
    3: "npm",
    4: "pypi",
    5: "docker",
    6: "helm",
    7: "raw-named",
}
