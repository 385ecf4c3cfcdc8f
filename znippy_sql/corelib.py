"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

import znippy_sql._native as _native
from .errors import ChecksumError, CodecError, FormatError, PackError, ZnippyError
from .native import guard


def version() -> str:
    """The compiled core's version (its crate's)."""
    with guard(ZnippyError, "the native core"):
        return str(_native.version())


def file_digests(prefix: bytes, offsets: object, data: object, sums: object, starts: object,
                 seqs: object | None) -> bytes:
    """FORMAT §4's digest of each file, concatenated (``native/src/digests.rs``): paths as
    int64 offsets and bytes, 32 bytes of checksum a row, each file's first row (int64), the
    rows' ``chunk_seq`` (int64; None: their place in their file). Hashed without the GIL."""
    with guard(ChecksumError, "file digests"):
        return bytes(_native.file_digests_many(prefix, offsets, data, sums, starts, seqs))


def root_digest(tag: bytes, offsets: object, data: object, digests: object) -> bytes:
    """BLAKE3 over ``tag``, then every path (int64 offsets and bytes), NUL and digest."""
    with guard(ChecksumError, "root digest"):
        return bytes(_native.root_digest(tag, offsets, data, digests))


# -- one archive's tail and files
# (on the CLI's fast path, cli/fast.py: nothing here imports typing at run time)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

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


#: extract's units of work: about this many bytes, at most this many files
#: (``read/extract.py``, ``native/src/extract.rs``)
UNIT_BYTES = 8 << 20
UNIT_FILES = 256


def check_targets(dest: str, root: str, names: bytes, offsets: bytes
                  ) -> tuple[tuple[int, str] | None, bytes, list[str]]:
    """Extract's targets under ``root`` checked (``native/src/extract.rs``): the first
    symlink on the way or at a target ``(name, why)``, whether each exists (a byte each),
    and the existing directories they go into."""
    with guard(FormatError, "checking the extract targets", path=dest):
        got: tuple[tuple[int, str] | None, bytes, list[str]] = _native.check_targets(
            dest, root, names, offsets)
    return got


def extract_files(cols: list[bytes], tail: int, packed: bool, local: str | None,
                  fetch: "Callable[[bytes, bytes], list[Any]] | None",
                  decode: "Callable[[bytes, int], Any]", root: str, rows: bytes, names: bytes,
                  offsets: bytes, modes: bytes | None, mtimes: bytes | None, replace: bool,
                  workers: int, unit_bytes: int, unit_files: int,
                  progress: "Callable[[int, int], Any] | None", *, archive: str
                  ) -> tuple[bytes, list[tuple[int, str]], tuple[int, str] | None, int, bool, int]:
    """Files written by the core (``native/src/extract.rs``, ``read/extract.py``): each
    file's outcome (i64: bytes written, -1 failed, -2 not attempted), the problems, the
    first fatal one, the bytes read, whether Ctrl-C stopped it and how many big files were
    written in runs by several workers."""
    with guard(FormatError, "extracting natively", path=archive):
        got: tuple[bytes, list[tuple[int, str]], tuple[int, str] | None, int, bool, int] = \
            _native.extract_files(cols, tail, packed, local, fetch, decode, root, rows, names,
                                  offsets, modes, mtimes, replace, workers, unit_bytes,
                                  unit_files, progress)
    return got


def extract_plan(archive: str) -> tuple[list[bytes], int, bool, bytes, bytes, bytes,
                                         list[str]] | None:
    """``extract ARCHIVE -o DIR`` planned by the core without pyarrow (``cli/fast.py``): the
    lookup's columns as :func:`extract_files` takes them, the tail offset, packed or not, each
    file's first row, the names and their offsets, the recorded directories; None for what
    the Python extract must answer (a link, a section or a path it words, a damaged tail)."""
    with guard(FormatError, "planning the extract natively", path=archive):
        plan: tuple[list[bytes], int, bool, bytes, bytes, bytes, list[str]] | None = \
            _native.extract_plan(archive)
    return plan


def remove_leftovers(directories: list[str]) -> int:
    """The temporaries (``.NAME.znippy-part-PID``) of extracts no longer running removed from
    these existing directories; how many."""
    with guard(ZnippyError, "removing the temporaries of killed extracts"):
        return int(_native.remove_leftovers(directories))


def info_facts(archive: str) -> "dict[str, Any] | None":
    """The facts ``info ARCHIVE`` prints (``native/src/info.rs``), or None when the Python
    path must answer (git sections, another writer's layout, what the core does not read)."""
    with guard(FormatError, "reading the archive natively", path=archive):
        facts: dict[str, Any] | None = _native.info_facts(archive)
    return facts


# -- git packs (native/src/git) ------------------------------------------------------------------
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    class PackIndex(Protocol):
        """One pack indexed by the core (``native/src/git/mod.rs``), its columns held there."""

        @property
        def external_bases(self) -> int:
            """REF deltas resolved against objects of earlier packs."""

        @property
        def idx_mismatch(self) -> str | None:
            """Why the ``.idx`` given was not used (the pack was parsed whole instead)."""

        def objects(self) -> tuple[bytes, bytes, bytes]:
            """``(ids, types, offsets)`` in entry order: 20-byte ids, u8, u64 LE."""

        def graph(self) -> tuple[bytes, ...]:
            """``commit_ids, tree_of, parent_counts, parent_ids, times, tree_ids, edge_tree,
            edge_sub, edge_ids`` (ids joined, integers little-endian)."""


def git_index_pack(pack: bytes | memoryview, idx: bytes | None, *, name: str,
                   external: Callable[[bytes], tuple[int, bytes] | None] | None = None
                   ) -> PackIndex:
    """A pack indexed from its checked ``.idx`` (``idx``), else parsed whole; ``external``
    gives a REF delta's base outside the pack. A damaged pack is a ``PackError``."""
    with guard(PackError, f"pack {name} cannot be indexed"):
        index: PackIndex = _native.git_index_pack(pack, idx, name, external)
        return index


def git_pack_from_columns(ids: bytes, types: bytes, offsets: bytes, commit_ids: bytes,
                          tree_of: bytes, parent_counts: bytes, parent_ids: bytes,
                          times: bytes, tree_ids: bytes, edge_tree: bytes, edge_sub: bytes,
                          edge_ids: bytes) -> PackIndex:
    """A :class:`PackIndex` given as its columns (a writer that knows its objects)."""
    with guard(FormatError, "pack index columns"):
        index: PackIndex = _native.PackIndex.from_columns(
            ids, types, offsets, commit_ids, tree_of, parent_counts, parent_ids, times,
            tree_ids, edge_tree, edge_sub, edge_ids)
        return index


def git_sections(packs: Sequence[tuple[PackIndex, int]], prefer: bytes, walk_bound: int
                 ) -> dict[str, Any]:
    """The git sections' columns (little-endian bytes) of ``(pack, lookup row)``s."""
    with guard(FormatError, "the git sections cannot be built"):
        return dict(_native.git_sections(list(packs), prefer, walk_bound))


def git_tree_entries(content: bytes) -> list[tuple[bool, bytes]]:
    """A tree's ``(is subtree, child id)`` entries as the import reads them."""
    with guard(FormatError, "a tree cannot be parsed"):
        return [(bool(s), bytes(i)) for s, i in _native.git_tree_entries(content)]


def git_serialize_runs(runs: Sequence[tuple[int, int]]) -> bytes:
    """The stored-bitmap bytes (Roaring portable) of ``[start, end)`` runs of positions."""
    with guard(FormatError, "a bitmap cannot be written"):
        return bytes(_native.git_serialize_runs(list(runs)))
