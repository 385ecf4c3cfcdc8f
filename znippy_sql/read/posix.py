"""POSIX facts on the way out: which archived files are symbolic links, and, for
``extract --preserve``, modes and mtimes; also recreating links that stay inside the
destination (``extract --symlinks``).

The facts are ``posix.*`` rows of ``__meta__`` (docs/posix.md; written by
:mod:`znippy_sql.write.posix`). An archive without them has no links, and its files keep the
extractor's defaults.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import FormatError
from ..format.build import column
from ..format.kernels import call_function, filter_by
from ..format.schema import META
from ..format.validate import meta_problem
from ..interop.fsmeta import fsmeta_facts
from ..interop.meta import as_text, is_typed

if TYPE_CHECKING:
    from pyarrow.compute import SetLookupOptions

    from .core import ArchiveCore as Archive

MODE, MTIME, SYMLINK = "posix.mode", "posix.mtime", "posix.symlink"
#: what --preserve may set: permissions and the sticky bit, never setuid or setgid
PRESERVED_BITS = 0o1777


@dataclass
class Facts:
    """The POSIX facts of an archive, by path."""

    modes: dict[str, int] = field(default_factory=dict)
    mtimes: dict[str, int] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)

    @property
    def directories(self) -> list[str]:
        return sorted((p for p, m in self.modes.items() if stat.S_ISDIR(m)),
                      key=lambda p: p.encode("utf-8"))


def _rows(archive: "Archive", keys: tuple[str, ...]) -> pa.Table | None:
    shape = fsmeta_facts(archive)  # the Rust tool's __znippy_fsmeta__ (interop/fsmeta.py)
    if not archive.understands(META):  # absent, or another writer's (reported by info)
        return shape if shape is None or MODE in keys else None
    table = archive.section(META)
    assert isinstance(table, pa.Table)  # META is an Arrow section: always a table
    if is_typed(table.schema):  # the Rust tool's typed __znippy_meta__ (interop/meta.py)
        table = as_text(table, archive.path)
    if shape is not None:
        table = pa.concat_tables([table, shape])
    problem = meta_problem(table)
    if problem is not None:  # damaged facts are not guessed at
        raise FormatError(f"{META} {problem}".replace(" :", ":"), path=archive.path)
    mask = call_function("is_in", [table.column("key")],
                         _set_lookup(column(keys, pa.utf8())))  # (pa.array imports pandas)
    return filter_by(table, mask)


def _set_lookup(values: pa.Array) -> SetLookupOptions:
    try:
        from pyarrow._compute import SetLookupOptions
    except ImportError:  # pragma: no cover
        from pyarrow.compute import SetLookupOptions
    return SetLookupOptions(values)


def links(archive: "Archive") -> dict[str, str]:
    """path → target of every file that is a symbolic link (cheap: one filtered column)."""
    rows = _rows(archive, (SYMLINK,))
    if rows is None:
        return {}
    return {p: v for p, v in zip(rows.column("relative_path").to_pylist(),
                                 rows.column("value").to_pylist()) if p is not None}


def facts(archive: "Archive") -> Facts:
    """Every path's mode, mtime and link target (what ``--preserve`` applies). A value that
    does not parse is left out (the file keeps the extractor's defaults)."""
    out = Facts()
    rows = _rows(archive, (MODE, MTIME, SYMLINK))
    if rows is None:
        return out
    for path, key, value in zip(rows.column("relative_path").to_pylist(),
                                rows.column("key").to_pylist(),
                                rows.column("value").to_pylist()):
        if path is None:
            continue
        try:
            if key == MODE:
                out.modes[path] = int(value, 8)
            elif key == MTIME:
                out.mtimes[path] = parse_mtime_ns(value)
            else:
                out.links[path] = value
        except ValueError:
            continue
    return out


# -- the text of the facts (written by znippy_sql.write.posix) --------------------------------
def mode_text(mode: int) -> str:
    """``st_mode`` in octal, type bits included, as git writes modes: ``100644``."""
    return f"{mode:o}"


def mtime_text(mtime_ns: int) -> str:
    """Seconds since the epoch as a decimal, to the nanosecond: ``1700000000.5``."""
    if mtime_ns < 0:
        return "-" + mtime_text(-mtime_ns)
    sec, ns = divmod(mtime_ns, 1_000_000_000)
    return f"{sec}.{ns:09d}".rstrip("0") if ns else str(sec)


def parse_mtime_ns(text: str) -> int:
    """``posix.mtime`` back to nanoseconds (ValueError when it is not one)."""
    sec, dot, frac = text.strip().partition(".")
    if not sec.lstrip("-").isdigit() or (dot and not frac.isdigit()) or len(frac) > 9:
        raise ValueError(f"not a posix.mtime: {text!r}")
    whole = int(sec) * 1_000_000_000
    part = int(frac.ljust(9, "0")) if frac else 0
    return whole - part if sec.startswith("-") else whole + part


# -- applying them ------------------------------------------------------------------------------
def preserve(target: str, mode: int | None, mtime_ns: int | None, *, is_link: bool = False
             ) -> None:
    """Set ``target``'s permission bits (never setuid/setgid) and mtime, as recorded."""
    if mode is not None and not is_link:
        os.chmod(target, mode & PRESERVED_BITS)
    if mtime_ns is not None:
        os.utime(target, ns=(mtime_ns, mtime_ns), follow_symlinks=False)


def inside(root_real: str, path: str) -> bool:
    """Whether ``path`` (resolved as the file system stands) is ``root_real`` or under it."""
    real = os.path.realpath(path)
    return real == root_real or real.startswith(os.path.join(root_real, ""))


def make_links(root: str, links: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """Create each ``target path → link text`` symlink under ``root``; keep only those that
    resolve inside it. Returns (made, refused: path → why).

    A link is refused when its text is absolute or, once every link is made, it resolves
    outside ``root`` (checked on the links as made, repeated until none is removed: one link
    may lead through another, and removing one can change where another goes). Made last,
    after every file, so no file is ever written through one.
    """
    root_real = os.path.realpath(root)
    made: list[str] = []
    refused: dict[str, str] = {}
    for target, text in links.items():
        if os.path.isabs(text) or not text:
            refused[target] = f"symlink to {text!r}: absolute targets are refused"
            continue
        full = os.path.join(root_real, target)
        if not inside(root_real, os.path.dirname(full)):
            refused[target] = "its directory resolves outside the destination"
            continue
        try:
            os.symlink(text, full)
        except FileExistsError:
            refused[target] = "a file is there already"
            continue
        except OSError as exc:
            refused[target] = f"cannot create: {exc.strerror or exc}"
            continue
        made.append(target)
    changed = True
    while changed:
        changed = False
        for target in list(made):
            full = os.path.join(root_real, target)
            if not inside(root_real, full):
                os.unlink(full)
                made.remove(target)
                refused[target] = (f"symlink to {links[target]!r} resolves outside the "
                                   "destination")
                changed = True
    return made, refused


def directories(archive: "Archive") -> list[str]:
    """The recorded directories (a ``posix.mode`` of type directory), in path order."""
    rows = _rows(archive, (MODE,))
    if rows is None:
        return []
    out = [p for p, v in zip(rows.column("relative_path").to_pylist(),
                             rows.column("value").to_pylist())
           if p is not None and v.startswith("4") and _is_dir(v)]
    return sorted(out, key=lambda p: p.encode("utf-8"))


def _is_dir(value: str) -> bool:
    try:
        return stat.S_ISDIR(int(value, 8))
    except ValueError:
        return False
