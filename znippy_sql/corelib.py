"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

from . import _native
from .errors import CodecError, FormatError, ZnippyError
from .native import guard


def version() -> str:
    """The compiled core's version (its crate's)."""
    with guard(ZnippyError, "the native core"):
        return str(_native.version())


# -- one archive's tail and files
# (on the CLI's fast path, cli/fast.py: nothing here imports typing at run time)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class CatPlan(Protocol):
        """What :func:`cat_plan` found (``native/src/cat.rs``)."""

        def counts(self) -> list[int]: ...
        def chunk(self, i: int, j: int) -> bytes: ...


def cat_plan(archive: str, paths: list[str]) -> "CatPlan | None":
    """``cat ARCHIVE PATH...`` planned by the core: every path found, every chunk's frame
    shape known, before a byte is written; None when the Python reader must answer (a path
    not there, a layout or frame shape the core does not read)."""
    with guard(FormatError, "reading the archive natively", path=archive):
        plan: CatPlan | None = _native.cat_plan(archive, paths)
    return plan


def cat_chunk(plan: "CatPlan", path: int, chunk: int, archive: str) -> bytes:
    """Chunk ``chunk`` of the plan's path ``path``, decoded and checked (ChecksumError,
    CodecError, FormatError naming the archive)."""
    with guard(CodecError, "decoding a chunk natively", path=archive):
        return plan.chunk(path, chunk)


def ls_text(archive: str, members: list[str]) -> str | None:
    """What ``ls ARCHIVE [PATH...]`` prints, read by the core from the data sub-indexes; None
    when the Python reader must answer (a member not there, a layout or schema the core does
    not read)."""
    with guard(FormatError, "reading the archive natively", path=archive):
        text: str | None = _native.ls_text(archive, members)
    return text


def verify_clean(archive: str) -> tuple[int, int, int] | None:
    """``(files, chunks, bytes checked)`` when the core finds the archive sound by every check
    of ``read/verify.py``; None at the first finding, or for what the core does not read
    (the Python verify then answers and words every finding)."""
    with guard(FormatError, "verifying the archive natively", path=archive):
        counts: tuple[int, int, int] | None = _native.verify_clean(archive)
    return counts
