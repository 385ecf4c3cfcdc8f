"""The compiled core's one wrapper (docs/design.md, "The native core").

``znippy_sql._native`` is built from ``native/`` (Rust, PyO3, abi3) by maturin into the
package. Python imports it here only; every call goes through :func:`~znippy_sql.native.guard`,
so a panic in the core reaches a caller as the ``ZnippyError`` subclass the call site names.
The core raises its own failures as ``znippy_sql.errors`` classes (``native/src/errors.rs``),
which the guard passes through unchanged.
"""

from __future__ import annotations

import os

import znippy_sql._native as _native
from .errors import ChecksumError, CodecError, FormatError, PackError, ZnippyError
from .native import PASS, describe, guard

# Imported by the CLI's fast path (cli/fast.py): nothing here imports typing at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


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


# -- create
# The walk of a directory source (listed, lstat-ed; the files the routing rule packs whole
# read and BLAKE3-hashed ahead, on a native thread) and the routing rule itself
# (native/src/create/). ``Walker.next`` waits without the GIL and looks at signals every
# 50 ms, so Ctrl-C stops a create there.

def _native_error(exc: BaseException, what: str, path: str | None) -> BaseException:
    """What :func:`~znippy_sql.native.guard` raises for ``exc`` (a plain ``try``: the per-file
    calls below cost no context manager)."""
    if isinstance(exc, (ZnippyError, *PASS)):
        return exc
    return ZnippyError(f"{what}: {describe(exc)}", path=path)


def router(skip: Iterable[str], zip_family: Iterable[str], *, packing: bool, dedup: bool,
           pack_max: int, dir_max: int) -> Any:
    """The routing rule of a write (``native/src/create/route.rs``): the skip-listed and
    zip-family suffixes, packing and dedup on or off, the largest small-pack and
    directory-pack members."""
    with guard(ZnippyError, "the routing rule"):
        return _native.Router(sorted(skip), sorted(zip_family), packing, dedup, pack_max,
                              dir_max)


def route(rule: Any, path: str, size: int) -> int:
    """Where ``rule`` sends a file: 0 a directory pack, 1 zip-entry spans, 2 a small pack,
    3 chunks of its own."""
    try:
        return int(rule.route(path, size))
    except BaseException as exc:  # a PanicException is a BaseException
        raise _native_error(exc, "the routing rule", path) from None


def walker(root: str, *, posix: bool, skip_unreadable: bool, exclude: Iterable[str],
           prefixes: Iterable[str], rule: Any = None) -> Any:
    """A started walk of ``root`` (``native/src/create/walk.rs``); ``rule``: read ahead the
    files it sends to a small pack. Close it with :func:`walk_close`."""
    with guard(ZnippyError, "the walk", path=root):
        return _native.Walker(os.fsencode(root), posix, skip_unreadable,
                              [os.fsencode(x) for x in exclude],
                              [os.fsencode(x) for x in prefixes], rule)


def walk_next(walk: Any, root: str) -> tuple[Any, ...] | None:
    """The walk's next batch in columns: ``(rels, sizes, modes, mtimes, targets, datas,
    digests, routes, unplain, directories, fail)`` (``write/source.py`` ``Batch``; ``fail``:
    ``(rel, errno, why)`` of a directory that cannot be listed, or None); None at the
    end."""
    try:
        got = walk.next()
    except BaseException as exc:
        raise _native_error(exc, "the walk", root) from None
    result: tuple[Any, ...] | None = got
    return result


def walk_summary(walk: Any, root: str) -> tuple[list[tuple[str, str]], int, list[str]]:
    """``(unreadable [(path, why)], links left out, special files left out)`` of a walk that
    is over."""
    with guard(ZnippyError, "the walk", path=root):
        unreadable, links, special = walk.summary()
        return list(unreadable), int(links), list(special)


def walk_close(walk: Any, root: str) -> None:
    """Stops the walk's thread and waits for it."""
    with guard(ZnippyError, "the walk", path=root):
        walk.close()


# The dedup index's table (``native/src/create/dedup.rs``), subclassed by ``write/dedup.py``
# ``DedupIndex``: its methods are called per chunk, so they are the class's own (no wrapper
# call); they check every slot and length they are given and raise ValueError/RuntimeError
# (internal mistakes), never panic.
if TYPE_CHECKING:
    from collections.abc import Sequence

    class DedupTable:
        """What ``write/dedup.py`` says of each method."""

        limit: int
        hits: int
        saved: int

        def __len__(self) -> int: ...
        def known(self, digest: bytes, length: int) -> bool: ...
        def pack_member(self, digest: bytes, length: int, pack_slots: Sequence[int]
                        ) -> tuple[int, int]: ...
        def close(self, slots: Sequence[int]) -> None: ...
        def settle(self, slot: int, offset: int, size: int, compressed: bool,
                   inner: int) -> None: ...
        def entry(self, slot: int) -> tuple[int, int, bool, int]: ...
        def seed_rows(self, digests: bytes, sizes: Sequence[int], offsets: Sequence[int],
                      stored: Sequence[int], flags: Sequence[bool], inner: Sequence[int]
                      ) -> None: ...
        def place_runs(self, lengths: Sequence[int], digests: bytes,
                       compressed: Sequence[bool], stored: Sequence[int], cursor: int
                       ) -> tuple[list[int], list[int], list[bool], list[tuple[int, int]],
                                  int, list[int]]: ...
else:
    DedupTable = _native.DedupTable


# When a write closes its open packs (``native/src/create/turn.rs``): ``Turns().step(path)``
# says 0 (nothing), 1 (another directory key: the directory packs) or 2 (another top-level
# tree: every pack), one call a file with no wrapper (it raises nothing: any ``str`` will do).
if TYPE_CHECKING:
    class Turns:
        """The first component and directory key of the last file seen."""

        def step(self, path: str) -> int: ...
else:
    Turns = _native.Turns


# Pack assembly (``native/src/create/pack.rs``): ``write/pack.py`` ``Packer`` holds one and
# calls ``add`` a member with no wrapper; its errors are ValueErrors of a digest not 32 bytes.
if TYPE_CHECKING:
    class Packs:
        """The open packs of one write."""

        def __init__(self, target: int, dir_max: int) -> None: ...
        def add(self, group: int, directory: bool, data: bytes, digest: bytes | None,
                dedup: DedupTable | None) -> tuple[int, int]: ...
        def close(self, which: int, dedup: DedupTable | None) -> int: ...
        def take(self) -> list[tuple[int, bool, list[bytes], list[int], bytes, list[int],
                                     list[int], list[int]]]: ...
else:
    Packs = _native.Packs


def dir_key(path: str) -> str:
    """The directory key of a path: without its last two components ("" when it has fewer
    than three), as ``Turns`` takes it."""
    with guard(ZnippyError, "the directory key", path=path):
        return str(_native.Turns.dir_key(path))


def trie_build(data: bytes, offsets: bytes, rows: bytes, *, path: str | None = None) -> bytes:
    """A write's ``__trie__`` (``native/src/create/tail.rs``): see ``format/trie.py``."""
    with guard(FormatError, "building __trie__ failed", path=path):
        return bytes(_native.trie_build(data, offsets, rows))


def frames(chunks: list[Any], level: int, *, hash_log: int | None = None,
           chain_log: int | None = None, window_log: int | None = None) -> list[bytes | None]:
    """The OpenZL frame of each chunk in ``format/zlframe.py``'s zstd shape
    (``native/src/create/frame.rs``: the same bytes), or None where it would not be smaller;
    compressed without the GIL. ``hash_log``/``chain_log``: a packed blob's tables;
    ``window_log``: a directory pack's long window with long-distance matching."""
    try:
        got: list[bytes | None] = _native.frames(chunks, level, hash_log, chain_log,
                                                 window_log)
        return got
    except BaseException as exc:
        raise _native_error(exc, "zstd", None) from None


# -- one archive's tail and files
# (on the CLI's fast path, cli/fast.py)
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
#: (``read/extract.py``, ``native/src/extract/``)
UNIT_BYTES = 8 << 20
UNIT_FILES = 256


def check_targets(dest: str, root: str, names: bytes, offsets: bytes
                  ) -> tuple[tuple[int, str] | None, bytes, list[str]]:
    """Extract's targets under ``root`` checked (``native/src/extract/``): the first
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
    """Files written by the core (``native/src/extract/``, ``read/extract.py``): each
    file's outcome (i64: bytes written, -1 failed, -2 not attempted), the problems, the
    first fatal one, the bytes read, whether Ctrl-C stopped it and how many big files were
    written in runs by several workers."""
    with guard(FormatError, "extracting natively", path=archive):
        got: tuple[bytes, list[tuple[int, str]], tuple[int, str] | None, int, bool, int] = \
            _native.extract_files(cols, tail, packed, local, fetch, decode, root, rows, names,
                                  offsets, modes, mtimes, replace, workers, unit_bytes,
                                  unit_files, progress)
    return got


def read_many(cols: list[bytes], tail: int, packed: bool, local: str | None,
              fetch: "Callable[[bytes, bytes], list[Any]] | None",
              decode: "Callable[[bytes, int], Any]", paths: list[str],
              fail: "Callable[[int], bytes]", check: bool, ordered: bool, unit_bytes: int,
              unit_files: int, workers: int, done: "Callable[[int], None] | None", *,
              archive: str) -> Any:
    """``read_many``'s reader (``native/src/extract/memory.rs``, ``read/many.py``): an
    iterator of ``(path, bytes)`` whose ``__next__`` is the core's; ``suspects()`` the
    paths it did not find, ``set_row(k, row)`` a row Python found, ``unit_files()`` the
    plan. ``fail(k)`` answers a file the core could not read; ``done(bytes read)`` at the
    end."""
    with guard(FormatError, "reading files natively", path=archive):
        return _native.ReadMany(cols, tail, packed, local, fetch, decode, paths, fail, check,
                                ordered, unit_bytes, unit_files, workers, done)


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

        def ids_of_type(self, kind: int) -> bytes:
            """The ids (joined, 20 bytes each) of the entries of type ``kind``."""

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


def git_seal_tail(path: str, fd: int, blob_end: int,
                  live: Sequence[tuple[int, int, int, bytes]],
                  packs: Sequence[PackIndex] | None, prefer: bytes, walk_bound: int,
                  sections: Sequence[tuple[str, bytes, int]]) -> tuple[int, int, int]:
    """The tail of a sealed git archive written into ``fd`` after ``blob_end``, the file cut
    there and flushed (``native/src/git/seal.rs``): ``live`` = ``(ordinal, offset, size,
    BLAKE3)`` of each pack, ``packs`` their indexes (None: no git sections), ``sections`` =
    ``(name, stream or raw bytes, rows)`` in tail order. ``(file size, objects, commits)``."""
    with guard(FormatError, "the tail cannot be written", path=path):
        size, objects, commits = _native.git_seal_tail(
            path, fd, blob_end, list(live), None if packs is None else list(packs), prefer,
            walk_bound, list(sections))
        return int(size), int(objects), int(commits)


def git_refs_stream(names: Sequence[str], targets: Sequence[bytes | None],
                    peeled: Sequence[bytes | None], symbolic: Sequence[str | None]) -> bytes:
    """The ``__gunnar_refs__`` Arrow IPC stream of these rows, in this order."""
    with guard(FormatError, "the refs cannot be written"):
        return bytes(_native.git_refs_stream(list(names), list(targets), list(peeled),
                                             list(symbolic)))


def meta_stream(paths: Sequence[str | None], keys: Sequence[str], values: Sequence[str]
                ) -> bytes:
    """The ``__meta__`` Arrow IPC stream of these ``(relative_path, key, value)`` rows."""
    with guard(FormatError, "__meta__ cannot be written"):
        return bytes(_native.meta_stream(list(paths), list(keys), list(values)))


def git_tree_entries(content: bytes) -> list[tuple[bool, bytes]]:
    """A tree's ``(is subtree, child id)`` entries as the import reads them."""
    with guard(FormatError, "a tree cannot be parsed"):
        return [(bool(s), bytes(i)) for s, i in _native.git_tree_entries(content)]


def git_serialize_runs(runs: Sequence[tuple[int, int]]) -> bytes:
    """The stored-bitmap bytes (Roaring portable) of ``[start, end)`` runs of positions."""
    with guard(FormatError, "a bitmap cannot be written"):
        return bytes(_native.git_serialize_runs(list(runs)))
