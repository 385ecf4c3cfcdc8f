"""Round-trip matrix: every scenario written once, then read back four ways.

Scenarios cover the chunking edges (empty, exactly one block, one block plus one byte, many
chunks), unicode paths, skip-list and incompressible files (stored raw), thousands of small
files and several (pkg_type, repo) groups. Each is checked through ``read``, ``open`` (seek and
partial reads), ``extract`` and ``verify``, and against the index rows themselves.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import Archive, ArchiveWriter, Entry, ZnippyError, open_archive, write_archive
from znippy_sql.format.codec import is_skipped
from znippy_sql.format.schema import GroupKey

BLOCK = 4096


@dataclass(frozen=True)
class Case:
    entries: Callable[[], list[Entry]]
    block_size: int = BLOCK
    dedup: bool = True
    pack: bool = True


def _groups() -> list[Entry]:
    out = []
    for repo in ("central", "internal"):
        for pkg in (0, 5, 6):
            for i in range(5):
                out.append(Entry(f"{repo}/{pkg}/file{i}.txt", data=text_bytes(300 + i * 700, i),
                                 repo=repo, pkg_type=pkg))
    return out


def _skip_listed() -> list[Entry]:
    return [Entry("lib/app.jar", data=text_bytes(10_000, 8)),  # text, not a zip
            Entry("dist/pkg.whl", data=text_bytes(3000, 9)),
            Entry("img/logo.PNG", data=text_bytes(500, 10)),
            Entry("plain.txt", data=text_bytes(3000, 11))]


CASES: dict[str, Case] = {
    "empty": Case(lambda: [Entry("empty.txt", data=b"")]),
    "exact_block": Case(lambda: [Entry("exact.txt", data=text_bytes(BLOCK, 1))]),
    "block_plus_one": Case(lambda: [Entry("plus1.txt", data=text_bytes(BLOCK + 1, 2))]),
    "multi_chunk": Case(lambda: [
        Entry("big/text.log", data=text_bytes(13 * BLOCK + 123, 3)),
        Entry("big/mixed.bin", data=text_bytes(3 * BLOCK, 4) + random_bytes(2 * BLOCK + 7, 4)),
        Entry("small.txt", data=b"tiny"),
    ]),
    "unicode": Case(lambda: [
        Entry("données/été.txt", data=text_bytes(900, 5)),
        Entry("日本語/ファイル.md", data=text_bytes(5000, 6)),
        Entry("emoji/😀 space.txt", data=b"smile"),
        Entry("Zed/ǅ-ß.txt", data=b""),
        Entry("a/b/c/d/e/f/deep.txt", data=text_bytes(100, 7)),
    ]),
    "skip_list": Case(lambda: _skip_listed()),
    # without packing (with it, zip-family files join directory packs, compressed when smaller)
    "skip_list_no_dedup": Case(lambda: _skip_listed(), dedup=False, pack=False),
    "incompressible": Case(lambda: [
        Entry("random.bin", data=random_bytes(3 * BLOCK + 11, 12)),
        Entry("one_byte", data=b"\x00"),
    ]),
    "many_small": Case(lambda: [
        Entry(f"d{i % 37:02d}/f{i:05d}.txt", data=text_bytes(20 + i % 300, i))
        for i in range(3000)
    ], block_size=1 << 20),
    "groups": Case(_groups),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Archive, dict]]:
    cache: dict[str, tuple[Archive, dict]] = {}

    def get(name: str) -> tuple[Archive, dict]:
        if name not in cache:
            case = CASES[name]
            entries = case.entries()
            out = tmp_path_factory.mktemp(name) / "a.znippy"
            write_archive(out, entries, block_size=case.block_size, workers=1, dedup=case.dedup,
                          pack=case.pack)
            cache[name] = (open_archive(out), {e.relative_path: e for e in entries})
        return cache[name]

    yield get
    for archive, _ in cache.values():
        archive.close()


@pytest.mark.parametrize("name", CASES)
def test_read(built, name: str) -> None:
    archive, entries = built(name)
    for path, entry in entries.items():
        assert archive.read(path) == entry.data


@pytest.mark.parametrize("name", CASES)
def test_open_seek_read(built, name: str) -> None:
    archive, entries = built(name)
    for path, entry in list(entries.items())[:200]:
        data = entry.data
        with archive.open(path) as fh:
            assert fh.read() == data
            for pos in sorted({0, 1, len(data) // 2, BLOCK - 1, BLOCK, BLOCK + 1, len(data) - 1}):
                if 0 <= pos <= len(data):
                    fh.seek(pos)
                    assert fh.read(BLOCK + 3) == data[pos : pos + BLOCK + 3]
            if data:
                fh.seek(-1, io.SEEK_END)
                assert fh.read() == data[-1:]
            else:
                with pytest.raises(ValueError):
                    fh.seek(-1, io.SEEK_END)
            fh.seek(len(data) + 10)
            assert fh.read() == b""
            buffered = io.BufferedReader(fh, buffer_size=1000)
            buffered.seek(0)
            assert buffered.read() == data


@pytest.mark.parametrize("name", CASES)
def test_extract(built, name: str, tmp_path: Path) -> None:
    archive, entries = built(name)
    report = archive.extract(tmp_path / "out")
    assert report.ok and report.files == len(entries)
    assert report.bytes_written == sum(len(e.data) for e in entries.values())
    for path, entry in entries.items():
        target = tmp_path / "out" / path
        assert not target.is_symlink()
        assert target.read_bytes() == entry.data
        assert oct(target.stat().st_mode & 0o777) != "0o777"
    assert not [p for p in (tmp_path / "out").rglob("*") if "znippy-part" in p.name]


@pytest.mark.parametrize("name", CASES)
def test_verify(built, name: str) -> None:
    archive, entries = built(name)
    report = archive.verify()
    assert report.ok, report.problems
    assert report.files == len(entries)
    assert report.bytes_checked == sum(len(e.data) for e in entries.values())


@pytest.mark.parametrize("name", CASES)
def test_index_rows(built, name: str) -> None:
    """Chunk layout, raw storage decisions and alignment as FORMAT §1/§3 say."""
    archive, entries = built(name)
    block = CASES[name].block_size
    lk = archive.lookup.to_pylist()
    assert [r["relative_path"].encode() for r in lk] == sorted(
        r["relative_path"].encode() for r in lk)
    by_path: dict[str, list[dict]] = {}
    for r in lk:
        by_path.setdefault(r["relative_path"], []).append(r)
    assert set(by_path) == set(entries)
    # a packed blob (FORMAT §3) is smaller than the slices it holds together
    held: dict[int, int] = {}
    for r in lk:
        if r["compressed"] and r["uncompressed_size"]:
            held[r["blob_offset"]] = max(held.get(r["blob_offset"], 0),
                                         r.get("inner_offset", 0) + r["uncompressed_size"])
    for path, rows in by_path.items():
        size = len(entries[path].data)
        assert len(rows) == max(1, -(-size // block))
        assert [r["chunk_seq"] for r in rows] == list(range(len(rows)))
        assert [r["fdata_offset"] for r in rows] == [i * block for i in range(len(rows))]
        for r in rows:
            if (is_skipped(path) and not CASES[name].dedup) or r["uncompressed_size"] == 0:
                assert r["compressed"] is False
            if not r["compressed"]:
                assert r["blob_size"] == r["uncompressed_size"]
            else:
                assert r["blob_size"] < held[r["blob_offset"]]
    for row in archive.manifest_rows:
        assert row.index_offset % 64 == 0
    assert archive.manifest_offset % 64 == 0
    assert archive.tail_offset == -(-archive.blob_end // 64) * 64


def test_skip_list_and_incompressible_stored_raw(built) -> None:
    archive, _ = built("skip_list_no_dedup")
    raw = {r["relative_path"]: r["compressed"] for r in archive.lookup.to_pylist()}
    assert raw == {"lib/app.jar": False, "dist/pkg.whl": False, "img/logo.PNG": False,
                   "plain.txt": True}
    # with dedup a skip-listed name is probed: these hold text, so they are compressed
    archive, _ = built("skip_list")
    assert all(archive.lookup.column("compressed").to_pylist())
    archive, _ = built("incompressible")
    assert not any(archive.lookup.column("compressed").to_pylist())


def test_groups(built) -> None:
    archive, entries = built("groups")
    assert len(archive.groups) == 6
    assert {(k.pkg_type, k.repo) for k in archive.groups} == {
        (p, r) for r in ("central", "internal") for p in (0, 5, 6)}
    for repo in ("central", "internal"):
        for pkg in (0, 5, 6):
            idx = archive.index(pkg_type=pkg, repo=repo)
            assert sorted(idx.column("relative_path").to_pylist()) == [
                f"{repo}/{pkg}/file{i}.txt" for i in range(5)]
            assert set(idx.column("repo").to_pylist()) == {repo}
    assert len(archive.select(repo="internal")) == 15
    assert archive.select(pkg_type=5, glob="*/file1.txt") == ["central/5/file1.txt",
                                                               "internal/5/file1.txt"]


def test_extract_selection(built, tmp_path: Path) -> None:
    archive, entries = built("groups")
    report = archive.extract(tmp_path, repo="central", pkg_type=6)
    assert report.ok and sorted(report.written) == [f"central/6/file{i}.txt" for i in range(5)]
    assert sorted(p.name for p in (tmp_path / "central" / "6").iterdir()) == [
        f"file{i}.txt" for i in range(5)]
    assert not (tmp_path / "internal").exists()


def test_directory_source_and_writer_api(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = {"a.txt": text_bytes(5000, 1), "sub/b.bin": random_bytes(700, 2), "sub/c/empty": b""}
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    os.symlink(src / "a.txt", src / "link.txt")  # never followed, never archived
    report = write_archive(tmp_path / "d.znippy", src, repo="r", block_size=BLOCK, workers=1)
    assert report.files == 3 and report.bytes_in == sum(map(len, files.values()))
    with ArchiveWriter(tmp_path / "w.znippy", block_size=BLOCK, workers=1) as w:
        w.add("x.txt", data=b"xx")
        w.add("y.txt", file=src / "a.txt")
        w.add(Entry("z.txt", data=b"zz", repo="other"))
    assert w.report is not None and w.report.files == 3 and w.report.groups == 2
    with open_archive(tmp_path / "d.znippy") as a:
        assert sorted(a.select()) == sorted(files)
        assert all(a.read(p) == d for p, d in files.items())
        assert a.find("link.txt") is None
        assert a.groups == [GroupKey(0, "r", "")]
    with open_archive(tmp_path / "w.znippy") as a:
        assert a.read("y.txt") == files["a.txt"] and a.read("z.txt") == b"zz"


def test_read_touches_only_own_blobs(built) -> None:
    archive, entries = built("many_small")
    archive.find("d00/f00000.txt")  # load the lookup and trie first
    before = archive.source.bytes_read
    info = archive.find("d05/f00005.txt")
    assert info is not None
    assert archive.read("d05/f00005.txt") == entries["d05/f00005.txt"].data
    assert archive.source.bytes_read - before == info.stored_size


def test_extract_with_workers_and_split_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """Worker threads, large files cut into runs of chunks, existing files replaced."""
    import znippy_sql.read.extract as ex

    monkeypatch.setattr(ex, "UNIT_BYTES", 16 * 1024)
    monkeypatch.setattr(ex, "THREAD_BYTES", 0)
    files = {f"s/{i}.txt": text_bytes(1000 + i * 300, i) for i in range(40)}
    files["big/a.log"] = text_bytes(100_000, 1) + random_bytes(30_000, 2)
    files["big/b.bin"] = random_bytes(70_000, 3)
    files["e"] = b""
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], block_size=BLOCK, workers=1)
    dest = tmp_path / "d"
    (dest / "big").mkdir(parents=True)
    (dest / "big" / "a.log").write_bytes(b"old content")
    seen: list[tuple[int, int]] = []
    with open_archive(out) as a:  # two big files, three workers: both are cut into runs
        report = a.extract(dest, workers=3, progress=lambda f, b: seen.append((f, b)))
    assert report.split == 2
    assert report.ok and report.files == len(files)
    assert report.written == sorted(files, key=lambda p: p.encode())
    assert report.bytes_written == sum(map(len, files.values()))
    for p, d in files.items():
        assert (dest / p).read_bytes() == d
    assert seen[-1] == (len(files), report.bytes_written)
    assert not [p for p in dest.rglob("*") if "znippy-part" in p.name]


def test_extract_twice_replaces_files(built, tmp_path: Path) -> None:
    archive, entries = built("multi_chunk")
    for _ in range(2):
        report = archive.extract(tmp_path)
        assert report.ok and report.files == len(entries)
    for path, entry in entries.items():
        assert (tmp_path / path).read_bytes() == entry.data


def test_parallel_extract_from_script_without_main_guard(tmp_path: Path) -> None:
    """An unguarded script extracts with workers: they are threads, nothing re-imports it."""
    import subprocess
    import sys

    files = {f"f{i}.txt": text_bytes(20_000, i) for i in range(6)}
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], block_size=BLOCK,
                  workers=1)
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import znippy_sql.read.extract as ex\n"
        "from znippy_sql import open_archive\n"
        "ex.THREAD_BYTES, ex.UNIT_BYTES = 0, 8192\n"
        f"r = open_archive({str(out)!r}).extract({str(tmp_path / 'd')!r}, workers=2)\n"
        "print(r.files, sorted(r.failed))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == f"{len(files)} []"
    for p, d in files.items():
        assert (tmp_path / "d" / p).read_bytes() == d
    assert not [p for p in (tmp_path / "d").rglob("*") if "znippy-part" in p.name]


def test_concurrent_reads_from_threads(built) -> None:
    """One Archive shared by threads: each thread decodes with its own OpenZL context."""
    from concurrent.futures import ThreadPoolExecutor

    archive, entries = built("multi_chunk")
    many, more = built("many_small")
    jobs = [(archive, p, e.data) for p, e in entries.items()] * 20
    jobs += [(many, p, e.data) for p, e in list(more.items())[:500]]

    def check(job: tuple) -> bool:
        a, path, want = job
        return a.read(path) == want

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(check, jobs))


def test_path_fast_path_agrees_with_every_rule() -> None:
    """check_relative_path's fast path accepts exactly what the full rules accept."""
    from znippy_sql.errors import UnsafePathError
    from znippy_sql.format.paths import _check_slow, check_relative_path

    pieces = ["a", "b.txt", ".", "..", ".git", "", "/", "\\", "C:", "c:x", "x\x00", "\x7f", "é",
              " ", "a" * 120, "..a", "a..", "~"]
    candidates = {"a" * 256, "a/" * 130 + "b", "/a", "a/", "a//b", ":a", "a:/b"}
    for p in pieces:
        for q in pieces:
            candidates.update({p + q, f"{p}/{q}", f"{p}/{q}/{p}"})
    for path in candidates:
        try:
            slow: str | None = _check_slow(path, None)
        except UnsafePathError:
            slow = None
        try:
            fast: str | None = check_relative_path(path)
        except UnsafePathError:
            fast = None
        assert fast == slow, path


def test_plain_paths_marks_only_paths_the_rules_accept_unchanged() -> None:
    """paths.plain_paths (extract's check of many lookup paths at once) marks a path only if
    check_relative_path would take its fast path; packed back to back like Arrow's utf8 data,
    so a pattern across two neighbours (``a/`` then ``.b``, ``x/`` then ``/y``) marks nothing."""
    import random

    import numpy as np

    from znippy_sql.errors import UnsafePathError
    from znippy_sql.format.paths import _check_slow, plain_paths

    pieces = ["a", "b.txt", ".", "..", ".git", "", "/", "\\", "C:", "c:x", "x\x00", "\x7f", "é",
              " ", "a" * 120, "..a", "a..", "~", "\n"]
    candidates = {"a" * 255, "a" * 256, "a/" * 130 + "b", "/a", "a/", "a//b", ":a", "a:/b", "x",
                  "ab"}
    for p in pieces:
        for q in pieces:
            candidates.update({p + q, f"{p}/{q}", f"{p}/{q}/{p}"})
    paths = sorted(candidates)
    random.Random(7).shuffle(paths)
    raw = [p.encode("utf-8") for p in paths]
    ends = np.cumsum([len(r) for r in raw])
    starts = ends - [len(r) for r in raw]
    marks = plain_paths(np.frombuffer(b"".join(raw), dtype=np.uint8), starts, ends)
    for path, plain in zip(paths, marks.tolist()):
        fast = (len(path) <= 255 and path.isascii() and path.isprintable() and "\\" not in path
                and path != "" and path[0] not in "/." and path[-1] != "/" and "//" not in path
                and "/." not in path and path[1:2] != ":")
        assert plain == fast, path
        if plain:  # and then the full rules accept it as it is
            assert _check_slow(path, None) == path
    assert sum(marks.tolist()) > 50
    with pytest.raises(UnsafePathError):
        _check_slow("a//b", None)
    from znippy_sql.format import paths as paths_module  # the same in blocks of 7 paths

    block, paths_module._PLAIN_BLOCK = paths_module._PLAIN_BLOCK, 7
    try:
        small = plain_paths(np.frombuffer(b"".join(raw), dtype=np.uint8), starts, ends)
    finally:
        paths_module._PLAIN_BLOCK = block
    assert small.tolist() == marks.tolist()


def test_directory_walk_carries_sizes(tmp_path: Path) -> None:
    from znippy_sql.write.source import walk_directory

    src = tmp_path / "src"
    files = {"b/z.txt": b"zz", "a.txt": b"a" * 70, "b/a/deep.bin": b"", "ä/ü.txt": b"u"}
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    entries = list(walk_directory(src))
    assert [e.relative_path for e in entries] == sorted(files, key=lambda p: p.encode())
    for e in entries:
        assert e.known_size == e.size() == len(files[e.relative_path])
        assert e.file == f"{src}/{e.relative_path}"


def test_parallel_extract_of_many_small_units(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Many small units in worker threads: every file lands once, in order, from its own
    lookup rows."""
    import znippy_sql.read.extract as ex

    monkeypatch.setattr(ex, "THREAD_BYTES", 0)
    monkeypatch.setattr(ex, "UNIT_FILES", 3)
    files = {f"d{i % 7}/sub{i % 3}/f{i}.txt": text_bytes(200 + 37 * i, i) for i in range(120)}
    files["top.bin"] = random_bytes(9000, 5)  # three chunks of one file, not split
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], block_size=BLOCK, workers=1)
    dest = tmp_path / "d"
    with open_archive(out) as a:
        report = a.extract(dest, workers=2)
        assert report.ok and report.written == sorted(files, key=lambda p: p.encode())
        for p, d in files.items():
            assert (dest / p).read_bytes() == d
        lookup = ex._files(a)
        where = {p: i for i, p in enumerate(lookup.paths)}
        row = lookup.firsts[where["top.bin"]]
        assert [c.chunk_seq for c in a.file_at("top.bin", row).chunks] == [0, 1, 2]
        with pytest.raises(ZnippyError):
            a.file_at("top.bin", row - 1)  # another file's row
        items = [(p, lookup.firsts[where[p]]) for p in sorted(files)]
        views = a.one_chunk_views([*items, ("top.bin", row - 1), ("nope", -1), ("x", 10**6)])
        assert views[len(items):] == [None, None, None]  # left to file_at, which raises
        for (p, _), view in zip(items, views):
            # a one-chunk file comes checked; longer ones are left to file_at
            assert (view is not None) == (len(a.find(p).chunks) == 1)  # type: ignore[union-attr]
            assert view is None or bytes(view) == files[p]
        assert sum(v is not None for v in views) > 50


@pytest.mark.parametrize("big_files, split", [(1, True), (2, False), (4, False)])
def test_big_files_are_split_only_when_too_few_for_the_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big_files: int, split: bool) -> None:
    """Two threads writing runs of one file wait for its inode lock: with at least as many big
    files as workers, each file is one unit; a lone big file is still cut for both workers."""
    import znippy_sql.read.extract as ex

    monkeypatch.setattr(ex, "THREAD_BYTES", 0)
    monkeypatch.setattr(ex, "UNIT_BYTES", 3 * BLOCK)
    files = {f"big{i}.txt": text_bytes(7 * BLOCK + i, i) for i in range(big_files)}
    files["small.txt"] = b"tiny"
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry(p, data=d) for p, d in files.items()], block_size=BLOCK, workers=1)
    with open_archive(out) as a:
        report = a.extract(tmp_path / "d", workers=2)
    assert report.ok and sorted(report.written) == sorted(files)
    for p, d in files.items():
        assert (tmp_path / "d" / p).read_bytes() == d
    assert report.split == (big_files if split else 0)


def test_directory_walk_is_in_whole_path_byte_order(tmp_path: Path) -> None:
    """Depth first with each directory sorted by name (``/`` appended to directories) is the
    byte order of the whole paths: "a.txt" and "a-b/c" come before "a/b". (The walk runs
    ahead of its caller on a native thread: a file made during it may or may not be seen.)"""
    from znippy_sql.write.source import walk_directory

    src = tmp_path / "src"
    names = ["a", "a.txt", "a0", "a b", "a-b/c", "b/a/x", "b/a.y", "b/a0", "ä/x", "z/1",
             "ab/c/d/e", "ab.c", "a~"]
    names.remove("a")  # "a" is a directory here (below); a file "a" cannot live beside it
    names.append("a/b")
    for rel in names:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(rel.encode())
    got = [e.relative_path for e in walk_directory(src)]
    assert got == sorted(names, key=lambda p: p.encode())


def test_released_pages_read_back_the_same(tmp_path: Path) -> None:
    from znippy_sql.format.rangeio import MappedSource

    data = random_bytes(300_000, 9)
    (tmp_path / "f").write_bytes(data)
    src = MappedSource(tmp_path / "f")
    view = src.read(1000, 250_000)
    assert bytes(view) == data[1000:251_000]
    keep = bytearray(random_bytes(1 << 20, 10))  # heap memory of this process
    copy = bytes(keep)
    for offset, length in ((1000, 250_000), (0, 300_000), (4095, 1), (7, 0), (4096, 8192),
                           (-(1 << 40), 1 << 41), (0, 1 << 62), (1 << 50, 1 << 20)):
        src.release(offset, length)  # out-of-range parts are ignored, never another mapping
    assert keep == copy
    assert bytes(view) == data[1000:251_000] and bytes(src.read(0, 300_000)) == data
    src.close()


def test_select_is_in_utf8_byte_order_from_lookup_or_sub_indexes(tmp_path: Path) -> None:
    """Without a filter select() reads the lookup, with one the sub-indexes; both give the
    paths in UTF-8 byte order (= code point order: no encode per path is needed)."""
    names = ["z", "é/a", "€", "\U0001d11e.txt", "a/b", "a.txt", "ÿ", "a"]
    write_archive(tmp_path / "u.znippy",
                  [Entry(n, data=n.encode(), repo="r" if i % 2 else "") for i, n in enumerate(names)],
                  workers=1)
    with open_archive(tmp_path / "u.znippy") as a:
        by_bytes = sorted(names, key=lambda p: p.encode("utf-8"))
        assert a.select() == by_bytes
        assert sorted(a.select(repo="r") + a.select(repo=""), key=str.encode) == by_bytes
        assert a.select(repo="r") == [n for n in by_bytes if names.index(n) % 2]
