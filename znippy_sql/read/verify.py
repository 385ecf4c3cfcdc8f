"""Verify: structure and content, every finding reported (not just the first).

Structure: every sub-index and section against the BLAKE3 the manifest records, raw sections
with ``row_count = 0``, ``__meta__`` readable, every sub-index readable and in the closed set
of schemas, each path once, the lookup equal to the sorted union
of the data rows, every extent inside the blob region and disjoint from the others, each file's
chunks numbered 0..n-1 and covering the file, every path a safe relative path, and the trie
mapping each path to its first lookup row (checked by point lookups, which always terminate,
never by walking a possibly cyclic fst). Content: every blob decoded, every BLAKE3 checked.
When the lookup itself cannot be read, the content check runs over the sub-index rows instead.
An archive without ``__lookup__`` and ``__trie__`` (the Rust tool's layout) is checked the same
way over the lookup built from its sub-indexes; their absence is a note, not a problem. So are
another writer's reserved sections this reader does not understand (each a note, "not
understood (schema …)": skipped) and a writer newer than this reader knows (a note naming it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..errors import FormatError, UnsafePathError, ZnippyError
from ..format.paths import check_relative_path
from .foreign import newer_writer_note
from .columns import Chunk
from .tail import group_what
from ..interop.vsource import laid_anew
from ..format.schema import (BASE_NAMES, INNER, LOOKUP, META, RAW_SECTIONS, RESERVED_PKG_TYPE,
                             TRIE, GroupKey)
from ..format.lookup import build_lookup
from ..format.validate import duplicate_paths

if TYPE_CHECKING:
    from .core import ArchiveCore as Archive

Say = Callable[[str], None]


@dataclass
class VerifyReport:
    path: str
    files: int = 0
    chunks: int = 0
    bytes_checked: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    #: facts worth telling that are not problems (an archive of the Rust tool's layout)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(archive: "Archive", *, progress: Callable[[int, int], None] | None = None,
           content: bool = True, meta: Callable[[], object] | None = None) -> VerifyReport:
    """Check the structure and, unless ``content=False``, decode and hash every blob.
    ``meta`` reads the ``__meta__`` facts (``Archive.meta``): a present ``__meta__`` must
    read."""
    started = time.perf_counter()
    report = VerifyReport(path=archive.path)
    say = report.problems.append
    foreign = archive.not_understood()
    for name, status in foreign.items():  # another writer's sections: skipped, not damage
        report.notes.append(f"{name}: {status}; skipped, files are read through the data "
                            "sub-indexes")
    if archive.lookup_in_memory:
        what = (f"no {LOOKUP} or {TRIE} section (the Rust tool's layout)"
                if not (archive.has_section(LOOKUP) or archive.has_section(TRIE))
                else f"no {LOOKUP} and {TRIE} this reader understands")
        report.notes.append(f"{what}: the lookup was built in memory from the data "
                            "sub-indexes")
    newer = newer_writer_note(archive)
    if newer is not None:
        report.notes.append(newer)
    laid = laid_anew(archive.source)  # a Rust hot archive, or one with delta chunks
    if laid is not None:
        report.notes.append(f"this is {laid}")
    rows = _structure(archive, say, meta)
    if rows is not None and content:
        _content(archive, rows, report, progress)
        if INNER in rows.schema.names:
            _packs(archive, rows, report)
    report.problems = list(dict.fromkeys(report.problems))  # one finding, one line
    report.seconds = time.perf_counter() - started
    return report


def _content(archive: "Archive", rows: pa.Table, report: VerifyReport,
             progress: Callable[[int, int], None] | None) -> None:
    names = [*BASE_NAMES, INNER] if INNER in rows.schema.names else list(BASE_NAMES)
    cols = [rows.column(n).to_pylist() for n in names]
    if len(names) > len(BASE_NAMES):  # packed: rows in blob order, so a pack decodes once
        order = sorted(range(rows.num_rows), key=lambda i: (cols[_OFFSET][i], cols[-1][i]))
        cols = [[col[i] for i in order] for col in cols]
    fetch = archive.source.fetches  # a remote source gets the blobs a batch at a time
    span: tuple[int, int] | None = None
    for i, (path, *vals) in enumerate(zip(*cols)):
        chunk = Chunk(*vals)
        if fetch and i % _BATCH == 0:
            span = _next_batch(archive, cols, i, span)
        try:
            data = archive.chunk_view(path, chunk, verify=True)
            report.bytes_checked += len(data)
        except ZnippyError as exc:
            report.problems.append(exc.problem)
        report.chunks += 1
        if chunk.chunk_seq == 0:
            report.files += 1
        if progress is not None and i % 256 == 0:
            progress(report.chunks, report.bytes_checked)
    if span is not None:
        archive.source.release(*span)
    if progress is not None:
        progress(report.chunks, report.bytes_checked)


_BATCH = 512
_OFFSET, _SIZE = BASE_NAMES.index("blob_offset"), BASE_NAMES.index("blob_size")


def _packs(archive: "Archive", lk: pa.Table, report: VerifyReport) -> None:
    """FORMAT §3: the slices of each packed blob lie inside it, do not overlap partially
    (identical content may share one), and cover it; bytes no live slice covers (a file an
    append replaced) are dead bytes, told in a note."""
    rows = sorted((o, k, u, c, p, q) for o, k, u, c, p, q, z in zip(
        lk.column("blob_offset").to_pylist(), lk.column(INNER).to_pylist(),
        lk.column("uncompressed_size").to_pylist(), lk.column("checksum").to_pylist(),
        lk.column("relative_path").to_pylist(), lk.column("chunk_seq").to_pylist(),
        lk.column("blob_size").to_pylist()) if z)
    sizes = dict(zip(lk.column("blob_offset").to_pylist(), lk.column("blob_size").to_pylist()))
    flags = dict(zip(lk.column("blob_offset").to_pylist(), lk.column("compressed").to_pylist()))
    dead = 0
    i = 0
    while i < len(rows):
        off = rows[i][0]
        j = i
        while j < len(rows) and rows[j][0] == off:
            j += 1
        members = rows[i:j]
        i = j
        if not flags.get(off) or (len(members) == 1 and members[0][1] == 0):
            continue
        try:
            total = archive.decoded_blob(off, sizes[off], "").nbytes
        except ZnippyError as exc:
            report.problems.append(exc.problem)
            continue
        end = 0
        last: tuple[Any, ...] | None = None
        for _, inner, size, digest, path, seq in members:
            where = f"{path!r} chunk {seq}: slice [{inner}, {inner + size}) of the blob at {off}"
            if inner + size > total:
                report.problems.append(f"{where} lies outside its {total} decoded bytes")
                continue
            if last is not None and inner < end:
                if (inner, size, digest) != last:
                    report.problems.append(f"{where} overlaps another slice partially")
                continue
            dead += max(0, inner - end)
            end, last = inner + size, (inner, size, digest)
        dead += max(0, total - end)
    if dead:
        report.notes.append(f"packed blobs hold {dead} bytes no file points at (files an "
                            "append replaced)")


def _next_batch(archive: "Archive", cols: list[list[Any]], i: int,
                done: tuple[int, int] | None) -> tuple[int, int] | None:
    """Release the last batch's blobs, prefetch the next ``_BATCH`` rows' (their span)."""
    if done is not None:
        archive.source.release(*done)
    offsets, sizes = cols[_OFFSET][i : i + _BATCH], cols[_SIZE][i : i + _BATCH]
    archive.source.prefetch(offsets, sizes)
    start = min(offsets)
    return start, max(o + n for o, n in zip(offsets, sizes)) - start


def _structure(archive: "Archive", say: Say, meta: Callable[[], object] | None = None
               ) -> pa.Table | None:
    """Report structural findings; return the rows whose content to check (None: none)."""
    _sections(archive, say, meta)
    groups: dict[GroupKey, pa.Table] = {}
    for key in archive.groups:
        try:
            table = archive.group_table(key)
            groups[key] = table.select([*BASE_NAMES, *([INNER] if INNER in table.schema.names
                                                       else [])])
        except ZnippyError as exc:
            say(exc.problem)
    for path in duplicate_paths(groups.items())[:20]:
        where = [group_what(k) for k, t in groups.items()
                 if path in set(t.column("relative_path").to_pylist())]
        say(f"{path!r} is in the archive more than once ({', '.join(where)})")
    expected = build_lookup(groups)
    if archive.lookup_in_memory:  # the lookup is this union: nothing to compare it with
        _extents(archive, expected, say)
        _chunks(expected, say)
        return expected
    try:
        lk = archive.lookup
    except ZnippyError as exc:
        say(exc.problem)
        _extents(archive, expected, say)
        _chunks(expected, say)
        return expected
    if not expected.equals(lk):
        say(f"{LOOKUP} is not the sorted union of the data rows{_difference(expected, lk)}")
    _extents(archive, lk, say)
    _chunks(lk, say)
    _trie(archive, lk, say)
    return lk


def refuse_damaged(archive: "Archive", groups: dict[GroupKey, pa.Table], *,
                   regrouped: bool = False) -> None:
    """Raise unless what an append rebuilds from is sound: the lookup (sorted, each file's
    chunks in order), the trie (its checksum) and every path in one group only (``groups``:
    the sub-indexes, read already); and no reserved section of another writer that this
    reader does not understand (a rewritten tail would drop or replace it without a word).
    ``regrouped``: a Rust append's repeated sub-indexes read as one group are no refusal
    (``write/append.py`` keeps the archive's own tail for its journal)."""
    laid = laid_anew(archive.source)
    if laid is not None and not (regrouped and getattr(archive.source, "why", "") == "appended"):
        raise FormatError(f"this is {laid}: an append would write a tail of this reader's "
                          "layout over it; append with the tool that wrote the archive",
                          path=archive.path)
    foreign = archive.not_understood()
    if foreign:
        listed = "; ".join(f"{name}: {status}" for name, status in foreign.items())
        raise FormatError(f"holds sections this reader does not understand ({listed}): an "
                          "append would drop or replace them; append with the tool that wrote "
                          "the archive", path=archive.path)
    archive.lookup  # noqa: B018  (its checks run on first use)
    if archive.has_section(TRIE):
        archive.trie  # noqa: B018
    dup = duplicate_paths(groups.items())
    if dup:
        raise FormatError(f"{dup[0]!r} is in more than one sub-index"
                          + (f" (and {len(dup) - 1} more paths)" if len(dup) > 1 else ""),
                          path=archive.path)


def _sections(archive: "Archive", say: Say, meta: Callable[[], object] | None = None
              ) -> None:
    """Every row's recorded BLAKE3, raw sections' row counts, and __meta__ readable."""
    for row in archive.manifest_rows:
        key = row.key
        what = key.module_name if key.pkg_type == RESERVED_PKG_TYPE else group_what(key)
        try:
            problem = archive.digest_problem(key, what)
        except ZnippyError as exc:
            problem = exc.problem
        if problem is not None:
            say(problem)
        if key.module_name in RAW_SECTIONS and key.pkg_type == RESERVED_PKG_TYPE \
                and row.row_count != 0:
            say(f"{key.module_name}: a raw section with row_count {row.row_count} (must be 0)")
    if meta is not None and archive.has_section(META):
        try:
            meta()
        except ZnippyError as exc:
            say(exc.problem)


def _difference(expected: pa.Table, lk: pa.Table) -> str:
    """Which rows differ, briefly."""
    if expected.num_rows != lk.num_rows:
        return f" ({lk.num_rows} rows, the data has {expected.num_rows})"
    want, got = expected.to_pylist(), lk.to_pylist()
    bad = [f"row {i} ({g['relative_path']!r} chunk {g['chunk_seq']})"
           for i, (w, g) in enumerate(zip(want, got)) if w != g]
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    return f": {', '.join(bad[:5])}{more} differ" if bad else ""


def _extents(archive: "Archive", lk: pa.Table, say: Say) -> None:
    """Every blob inside the blob region; two extents either the same blob of the same
    content (a shared blob: same offset, size, codec flag, length and checksum) or disjoint."""
    spans = sorted(zip(lk.column("blob_offset").to_pylist(), lk.column("blob_size").to_pylist(),
                       lk.column("relative_path").to_pylist(), lk.column("chunk_seq").to_pylist(),
                       lk.column("compressed").to_pylist(),
                       lk.column("uncompressed_size").to_pylist(),
                       lk.column("checksum").to_pylist()))
    packed = INNER in lk.schema.names
    prev: tuple[Any, ...] = (-1, -1, "", -1)  # the extent that reaches furthest so far
    prev_end = 0
    for off, size, path, seq, *content in spans:
        if off + size > archive.tail_offset:
            say(f"{path!r} chunk {seq}: blob [{off}, {off + size}) runs past the blob region "
                f"(ends at {archive.tail_offset})")
        if size and (off, size) == prev[:2]:
            if packed and content[0] and content[0] == prev[4]:
                continue  # slices of one packed blob: checked by _packs
            if tuple(content) != prev[4:]:
                say(f"{path!r} chunk {seq}: shares the blob at {off} of {prev[2]!r} chunk "
                    f"{prev[3]} but not its content (codec flag, size or checksum differ)")
            continue
        if size and off < prev_end:
            say(f"{path!r} chunk {seq}: blob at {off} overlaps the blob of {prev[2]!r}")
        if size and off + size > prev_end:
            prev_end, prev = off + size, (off, size, path, seq, *content)


def _chunks(lk: pa.Table, say: Say) -> None:
    """Per file: chunk_seq 0..n-1, contiguous, covering the file; every path safe."""
    names = lk.column("relative_path").to_pylist()
    seq = lk.column("chunk_seq").to_pylist()
    fdo = lk.column("fdata_offset").to_pylist()
    usz = lk.column("uncompressed_size").to_pylist()
    expect_seq, expect_off, prev = 0, 0, None
    for name, s, o, u in zip(names, seq, fdo, usz):
        if name != prev:
            expect_seq, expect_off, prev = 0, 0, name
            try:
                check_relative_path(name)
            except UnsafePathError as exc:
                say(exc.problem)
        if s != expect_seq or o != expect_off:
            say(f"{name!r}: chunk {s} at {o}, expected chunk {expect_seq} at {expect_off}")
        expect_seq, expect_off = s + 1, o + u


def _trie(archive: "Archive", lk: pa.Table, say: Say) -> None:
    """One key per distinct path, mapped to that path's chunk_seq 0 row."""
    try:
        trie = archive.trie
        names = lk.column("relative_path").to_pylist()
        seq = lk.column("chunk_seq").to_pylist()
        wrong = 0
        for row, (name, s) in enumerate(zip(names, seq)):
            if s != 0:
                continue
            key = name.encode("utf-8")
            got = trie.get(key)
            if got != row:
                wrong += 1
                if wrong <= 20:
                    say(f"{TRIE} maps {name!r} to {got}, its first lookup row is {row}")
        if wrong > 20:
            say(f"{TRIE}: {wrong - 20} more paths mapped wrongly")
        distinct = len(set(names))
        size = len(trie)
        if size != distinct:
            say(f"{TRIE} holds {size} keys, the lookup has {distinct} paths")
    except ZnippyError as exc:
        say(exc.problem)
