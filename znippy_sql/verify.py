"""Verify: structure and content, every finding reported (not just the first)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from .errors import ZnippyError
from .reader import Chunk
from .schema import BASE_NAMES, TRIE
from .tail import build_lookup

if TYPE_CHECKING:
    from .reader import Archive


@dataclass
class VerifyReport:
    path: str
    files: int = 0
    chunks: int = 0
    bytes_checked: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(archive: "Archive", *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    started = time.perf_counter()
    report = VerifyReport(path=archive.path)
    say = report.problems.append
    try:
        _structure(archive, say)
    except ZnippyError as exc:
        say(exc.problem)
        report.seconds = time.perf_counter() - started
        return report
    lk = archive.lookup
    cols = [lk.column(n).to_pylist() for n in BASE_NAMES]
    for i, (path, *vals) in enumerate(zip(*cols)):
        chunk = Chunk(*vals)
        try:
            data = archive.read_chunk(path, chunk, verify=True)
            report.bytes_checked += len(data)
        except ZnippyError as exc:
            say(exc.problem)
        report.chunks += 1
        if chunk.chunk_seq == 0:
            report.files += 1
        if progress is not None and i % 256 == 0:
            progress(report.chunks, report.bytes_checked)
    report.seconds = time.perf_counter() - started
    return report


def _structure(archive: "Archive", say: Callable[[str], None]) -> None:
    groups = {}
    for key in archive.groups:
        try:
            groups[key] = archive.group_table(key).select(list(BASE_NAMES))
        except ZnippyError as exc:
            say(exc.problem)
    lk = archive.lookup
    expected = build_lookup(groups)
    if not expected.equals(lk):
        say("__lookup__ is not the sorted union of the data rows")
    # extents: inside the blob region, and disjoint
    if lk.num_rows:
        order = pc.sort_indices(lk, [("blob_offset", "ascending"), ("blob_size", "ascending")])
        offs = lk.column("blob_offset").take(order).to_pylist()
        sizes = lk.column("blob_size").take(order).to_pylist()
        paths = lk.column("relative_path").take(order).to_pylist()
        prev_end, prev_path = 0, None
        for off, size, path in zip(offs, sizes, paths):
            if off + size > archive.tail_offset:
                say(f"{path!r}: blob [{off}, {off + size}) runs past the blob region "
                    f"(ends at {archive.tail_offset})")
            if size and off < prev_end:
                say(f"{path!r}: blob at {off} overlaps the blob of {prev_path!r}")
            if size:
                prev_end, prev_path = max(prev_end, off + size), path
        # per-file: chunk_seq 0..n-1 contiguous and covering the file
        seq = lk.column("chunk_seq").to_pylist()
        fdo = lk.column("fdata_offset").to_pylist()
        usz = lk.column("uncompressed_size").to_pylist()
        names = lk.column("relative_path").to_pylist()
        expect_seq, expect_off, prev = 0, 0, None
        for name, s, o, u in zip(names, seq, fdo, usz):
            if name != prev:
                expect_seq, expect_off, prev = 0, 0, name
            if s != expect_seq or o != expect_off:
                say(f"{name!r}: chunk {s} at {o}, expected chunk {expect_seq} at {expect_off}")
            expect_seq, expect_off = s + 1, o + u
    # trie: one key per distinct path → its chunk_seq 0 lookup row
    try:
        trie = archive.trie
        got = list(trie.items())
        first = pc.equal(lk.column("chunk_seq"), 0)
        rows = pa.array(range(lk.num_rows)).filter(first).to_pylist()
        paths0 = lk.column("relative_path").filter(first).to_pylist()
        want = [(p.encode("utf-8"), r) for p, r in zip(paths0, rows)]
        if got != want:
            say(f"{TRIE} does not map each path to its first lookup row")
    except ZnippyError as exc:
        say(exc.problem)
