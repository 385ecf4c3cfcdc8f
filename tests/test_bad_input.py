"""Bad input (FORMAT §7): truncated, corrupted and malformed archives raise the right
ZnippyError subclass quickly; nothing else escapes, and nothing is ever silently wrong."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import RawArchive, random_bytes, text_bytes
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from znippy_sql import (
    ChecksumError,
    CodecError,
    Entry,
    FormatError,
    NotFoundError,
    PathNotFoundError,
    ZnippyError,
    open_archive,
    write_archive,
)

FILES = {
    "a/text.txt": text_bytes(9000, 1),      # 3 compressed chunks
    "a/raw.bin": random_bytes(5000, 2),     # 2 raw chunks
    "b/x.jar": text_bytes(1500, 3),         # skip list: raw
    "b/empty": b"",
    "c/small.txt": text_bytes(300, 4),
}


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("good") / "a.znippy"
    entries = [Entry(p, data=d, repo="r1" if p < "b" else "r2") for p, d in FILES.items()]
    write_archive(out, entries, block_size=4096, workers=1, fsync=False)
    return out.read_bytes()


def _manifest_rows(data: bytes) -> list[dict[str, Any]]:
    off = struct.unpack("<Q", data[-8:])[0]
    return pa.ipc.open_stream(pa.py_buffer(data[off:-16])).read_all().to_pylist()


def exercise(path: Path, tmp: Path) -> str:
    """Open, read every file, verify, extract. Only ZnippyError may escape any of them.

    Returns "error" when something refused the input or verify reported a problem, else "ok"
    after checking every read returned the original bytes: a corruption is either reported
    by verify or harmless. (A point read trusts the lookup; a lookup row whose path was
    changed can hide a file's last chunk from it, which only verify can see.)"""
    try:
        archive = open_archive(path)
    except ZnippyError:
        return "error"
    refused = False
    wrong = []
    with archive:
        for p, want in FILES.items():
            try:
                got = archive.read(p)
            except ZnippyError:
                refused = True
                continue
            if got != want:
                wrong.append(p)
        try:
            report = archive.verify()
            refused |= not report.ok
            assert report.ok or report.problems
            assert not wrong or not report.ok, f"{wrong} read back wrong, verify saw nothing"
        except ZnippyError:
            refused = True
        try:
            ext = archive.extract(tmp / "x")
            refused |= not ext.ok
        except ZnippyError:
            refused = True
    return "error" if refused else "ok"


def _write(tmp: Path, data: bytes | bytearray, name: str = "bad.znippy") -> Path:
    p = tmp / name
    p.write_bytes(bytes(data))
    return p


def test_good_archive_passes(good: bytes, tmp_path: Path) -> None:
    assert exercise(_write(tmp_path, good), tmp_path) == "ok"


def test_truncation_at_many_offsets(good: bytes, tmp_path: Path) -> None:
    cuts = sorted(set(range(0, len(good), max(1, len(good) // 150))) | set(
        range(len(good) - 40, len(good))))
    for cut in cuts:
        with pytest.raises(FormatError):
            open_archive(_write(tmp_path, good[:cut]))


def test_truncation_with_footer_kept(good: bytes, tmp_path: Path) -> None:
    """Cut out the middle but keep the footer: every range is checked against the file."""
    for cut in range(0, len(good) - 16, max(1, len(good) // 120)):
        assert exercise(_write(tmp_path, good[:cut] + good[-16:]), tmp_path) == "error"


@pytest.mark.parametrize("magic", [b"ZNPYMIDY", b"\0" * 8, b"ZNPYIDX\0", b"PK\x03\x04abcd"])
def test_wrong_magic(good: bytes, tmp_path: Path, magic: bytes) -> None:
    data = good[:-16] + magic + good[-8:]
    with pytest.raises(FormatError, match="footer"):
        open_archive(_write(tmp_path, data))


@pytest.mark.parametrize("content", [b"", b"short", b"ZNPYMIDX", b"x" * 100])
def test_not_an_archive(tmp_path: Path, content: bytes) -> None:
    with pytest.raises(FormatError):
        open_archive(_write(tmp_path, content))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(PathNotFoundError, match="archive not found"):  # issue 35 item 7
        open_archive(tmp_path / "nope.znippy")
    with pytest.raises(FormatError):
        open_archive(tmp_path)


@pytest.mark.parametrize("offset", [0, 1, 63, 2**63, 2**64 - 1, -1])
def test_footer_offset_past_end_or_misaligned(good: bytes, tmp_path: Path, offset: int) -> None:
    off = offset % 2**64 if offset >= 0 else len(good) - 16 + 64
    data = good[:-8] + struct.pack("<Q", off)
    with pytest.raises(FormatError):
        open_archive(_write(tmp_path, data))


def test_every_footer_byte_flipped(good: bytes, tmp_path: Path) -> None:
    for i in range(len(good) - 16, len(good)):
        bad = bytearray(good)
        bad[i] ^= 0x01
        with pytest.raises(FormatError):
            open_archive(_write(tmp_path, bad))


def _region(data: bytes, module_name: str | None) -> tuple[int, int]:
    if module_name is None:  # the manifest
        off = struct.unpack("<Q", data[-8:])[0]
        return off, len(data) - 16
    row = next(r for r in _manifest_rows(data) if r["module_name"] == module_name
               and (r["pkg_type"] >= 0) == (module_name == ""))
    return row["index_offset"], row["index_offset"] + row["index_len"]


@pytest.mark.parametrize("region", [None, "", "__lookup__", "__trie__"],
                         ids=["manifest", "subindex", "lookup", "trie"])
def test_flipped_bytes_in_index_structures(good: bytes, tmp_path: Path, region: str | None
                                           ) -> None:
    start, end = _region(good, region)
    step = max(1, (end - start) // 120)
    outcomes = []
    for i in range(start, end, step):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(good)
            bad[i] ^= mask
            outcomes.append(exercise(_write(tmp_path, bad), tmp_path))
    assert "error" in outcomes  # many flips are detected; none escapes or reads wrong


def test_offsets_past_the_end_in_manifest(tmp_path: Path) -> None:
    def past(rows: list[dict[str, Any]]) -> None:
        rows[0]["index_offset"] = 2**63
    path = RawArchive([("a", b"aaa")]).write(tmp_path / "a.znippy", manifest_edit=past)
    with pytest.raises(FormatError, match="manifest"):
        open_archive(path)

    def long(rows: list[dict[str, Any]]) -> None:
        rows[1]["index_len"] = 2**64 - 1
    path = RawArchive([("a", b"aaa")]).write(tmp_path / "b.znippy", manifest_edit=long)
    with pytest.raises(FormatError):
        open_archive(path)


def test_overlapping_sections_in_manifest(tmp_path: Path) -> None:
    def overlap(rows: list[dict[str, Any]]) -> None:
        rows[2]["index_offset"] = rows[1]["index_offset"]
    path = RawArchive([("a", b"aaa")]).write(tmp_path / "a.znippy", manifest_edit=overlap)
    with pytest.raises(FormatError, match="overlap"):
        open_archive(path)


def test_overlapping_extents_reported(tmp_path: Path) -> None:
    same = b"shared content " * 10
    arc = RawArchive([("a.txt", same), ("b.txt", same), ("c.txt", b"c" * 50)])
    arc.rows[1]["blob_offset"] = 10  # inside a.txt's blob; content no longer matches
    arc.rows[2]["blob_offset"] = 0   # same start as a.txt
    path = arc.write(tmp_path / "a.znippy")
    with open_archive(path) as a:
        report = a.verify()
        overlaps = [p for p in report.problems if "overlaps" in p]
        assert len(overlaps) == 2, report.problems
        with pytest.raises(ChecksumError):
            a.read("c.txt")
        assert a.read("a.txt") == same


def test_extent_past_blob_region(tmp_path: Path) -> None:
    arc = RawArchive([("a.txt", b"a" * 100), ("b.txt", b"b" * 100)])
    arc.rows[1]["blob_offset"] = 200  # runs into the tail (at 256)
    arc.rows[0]["blob_offset"] = 2**64 - 50  # overflows
    path = arc.write(tmp_path / "a.znippy")
    with open_archive(path) as a:
        for p in ("a.txt", "b.txt"):
            with pytest.raises(FormatError, match="tail"):
                a.read(p)
        report = a.verify()
        assert sum("runs past the blob region" in p for p in report.problems) == 2
        with pytest.raises(FormatError):
            a.blob_end


def _retype(name: str, column: str, typ: pa.DataType):
    def edit(which: str, t: pa.Table) -> pa.Table:
        if which != name:
            return t
        i = t.schema.get_field_index(column)
        return t.set_column(i, pa.field(column, typ, nullable=False), t.column(i).cast(typ))
    return edit


@pytest.mark.parametrize("which,column,typ", [
    ("manifest", "index_offset", pa.int64()),
    ("manifest", "pkg_type", pa.int16()),
    ("manifest", "repo", pa.large_utf8()),
    ("__lookup__", "chunk_seq", pa.uint64()),
    ("__lookup__", "checksum", pa.binary()),
    ("__lookup__", "relative_path", pa.binary()),
    ("sub", "blob_size", pa.int64()),
    ("sub", "compressed", pa.uint8()),
])
def test_wrong_column_types(tmp_path: Path, which: str, column: str, typ: pa.DataType) -> None:
    path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy",
                                                   table_edit=_retype(which, column, typ))
    with pytest.raises(FormatError, match="columns"):
        a = open_archive(path)
        a.read("a.txt")
        a.index()
    if which != "manifest":
        with open_archive(path) as a:
            assert not a.verify().ok


def test_nulls_in_non_nullable_columns(tmp_path: Path) -> None:
    def nulls(which: str, t: pa.Table) -> pa.Table:
        if which != "__lookup__":
            return t
        i = t.schema.get_field_index("blob_offset")
        return t.set_column(i, t.schema.field(i), pa.array([None], pa.uint64()))
    path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy", table_edit=nulls)
    with open_archive(path) as a, pytest.raises(FormatError, match="nulls"):
        a.read("a.txt")


def test_compressed_ipc_body_bounded_then_read(tmp_path: Path) -> None:
    """A compressed Arrow body (FORMAT §1) is bounded before pyarrow allocates it, then read."""
    arc = RawArchive([("a.txt", b"hello")])
    path = arc.write(tmp_path / "a.znippy")
    data = path.read_bytes()
    start, end = _region(data, "__lookup__")
    lookup = pa.ipc.open_stream(pa.py_buffer(data[start:end])).read_all()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, lookup.schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(lookup)
    packed = sink.getvalue().to_pybytes()
    assert len(packed) <= end - start + 64 or True
    # splice: put the compressed stream where the lookup was, fix its manifest length
    head = data[:start] + packed
    head += bytes(-len(head) % 64)
    rows = _manifest_rows(data)
    shift = len(head) - _region(data, "__trie__")[0]
    trie_start, trie_end = _region(data, "__trie__")
    body = head + data[trie_start:trie_end]
    for r in rows:
        if r["module_name"] == "__lookup__":
            r["index_len"] = len(packed)
        elif r["module_name"] == "__trie__":
            r["index_offset"] += shift
    body += bytes(-len(body) % 64)
    from conftest import MANIFEST, ipc_stream
    moff = len(body)
    body += ipc_stream(pa.Table.from_pylist(rows, schema=MANIFEST))
    body += b"ZNPYMIDX" + struct.pack("<Q", moff)
    with open_archive(_write(tmp_path, body, "c.znippy")) as a:
        assert a.lookup.equals(lookup)
        assert a.read("a.txt") == b"hello"


def test_row_count_mismatch(tmp_path: Path) -> None:
    def lie(rows: list[dict[str, Any]]) -> None:
        rows[0]["row_count"] = 7
        rows[1]["row_count"] = 9
    path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy", manifest_edit=lie)
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="manifest says"):
            a.index()
        with pytest.raises(FormatError, match="manifest says"):
            a.read("a.txt")
        report = a.verify()
        assert len([p for p in report.problems if "manifest says" in p]) == 2


def test_trie_garbage(tmp_path: Path) -> None:
    for junk in (b"", b"\0" * 64, random_bytes(200, 1)):
        path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy", trie_bytes=junk)
        with open_archive(path) as a:
            with pytest.raises(FormatError):
                a.read("a.txt")
            assert not a.verify().ok


def test_trie_every_byte_flipped(tmp_path: Path) -> None:
    """The fst crate panics on some corrupt maps; those become FormatError too."""
    arc = RawArchive([(f"f{i}", bytes([i])) for i in range(8)])
    data = arc.write(tmp_path / "a.znippy").read_bytes()
    start, end = _region(data, "__trie__")
    for i in range(start, end):
        for mask in (0x01, 0xFF):
            bad = bytearray(data)
            bad[i] ^= mask
            path = _write(tmp_path, bad)
            with open_archive(path) as a:
                for name in ("f0", "f7", "zz"):
                    try:
                        info = a.find(name)
                    except FormatError:
                        continue
                    if info is not None:
                        assert a.read(name) == bytes([int(name[1:])])
                a.verify()


@pytest.mark.parametrize("trie", [[(b"a.txt", 5)], [(b"a.txt", 1)], [(b"a.txt", 2**63)]])
def test_trie_points_at_nonsense(tmp_path: Path, trie: list[tuple[bytes, int]]) -> None:
    arc = RawArchive([("a.txt", b"hello"), ("b.txt", b"world")])
    path = arc.write(tmp_path / "a.znippy", trie=trie)
    with open_archive(path) as a:
        with pytest.raises(FormatError):
            a.read("a.txt")
        with pytest.raises(NotFoundError):
            a.read("b.txt")
        assert any("__trie__" in p for p in a.verify().problems)


def test_lookup_not_sorted_is_refused(tmp_path: Path) -> None:
    """Point reads and extract rely on the lookup's order (a file's chunks are one run): an
    unsorted lookup is refused by every reader, and verify reports it."""
    arc = RawArchive([("a.txt", b"hello"), ("b.txt", b"world")])
    path = arc.write(tmp_path / "a.znippy", lookup_rows=arc.rows[::-1],
                     trie=[(b"a.txt", 1), (b"b.txt", 0)])
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="__lookup__ is not sorted"):
            a.read("a.txt")
        assert any("not sorted" in p for p in a.verify().problems)
        with pytest.raises(FormatError, match="not sorted"):
            a.extract(tmp_path / "out")
        assert not (tmp_path / "out").exists()


def test_chunk_layout_lies(tmp_path: Path) -> None:
    arc = RawArchive([("a.txt", b"hello"), ("b.txt", b"world")])
    arc.rows[1].update(relative_path="a.txt", chunk_seq=1, fdata_offset=3)  # should be 5
    path = arc.write(tmp_path / "a.znippy")
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="expected chunk 1 at 5"):
            a.read("a.txt")
        with pytest.raises(FormatError):
            a.open("a.txt")
        assert any("expected chunk 1 at 5" in p for p in a.verify().problems)


def test_verify_reports_every_bad_blob(good: bytes, tmp_path: Path) -> None:
    data = bytearray(good)
    with open_archive(_write(tmp_path, good, "g.znippy")) as a:
        rows = a.lookup.to_pylist()
    raw = [r for r in rows if not r["compressed"] and r["blob_size"]]
    comp = [r for r in rows if r["compressed"]]
    targets = [raw[0], raw[-1], comp[0], comp[-1]]
    for r in targets:
        data[r["blob_offset"] + r["blob_size"] // 2] ^= 0x55
    with open_archive(_write(tmp_path, data)) as a:
        report = a.verify()
        assert len(report.problems) == 4, report.problems
        assert report.chunks == len(rows)
        with pytest.raises(ChecksumError):
            a.read(raw[0]["relative_path"])
        with pytest.raises((CodecError, ChecksumError)):
            a.read(comp[0]["relative_path"])
        bad = {r["relative_path"] for r in targets}
        for p in set(FILES) - bad:
            assert a.read(p, verify=False) == FILES[p]
        ext = a.extract(tmp_path / "out")
        assert set(ext.failed) == {r["relative_path"] for r in targets}
        assert sorted(ext.written) == sorted(set(FILES) - set(ext.failed))
        for p in ext.failed:
            assert not (tmp_path / "out" / p).exists()


def test_declared_huge_chunk_is_not_allocated(tmp_path: Path, good: bytes) -> None:
    """A compressed row claiming 2**40 bytes is refused before anything is sized by it."""
    def huge(which: str, t: pa.Table) -> pa.Table:
        if which not in ("sub", "__lookup__"):
            return t
        rows = t.to_pylist()
        rows[0].update(compressed=True, uncompressed_size=2**40)
        return pa.Table.from_pylist(rows, schema=t.schema)
    path = RawArchive([("a.txt", b"hello" * 20)]).write(tmp_path / "a.znippy", table_edit=huge)
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="chunk limit"):
            a.read("a.txt")
        with pytest.raises(FormatError):
            a.open("a.txt").read(10)


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
                      min_size=1, max_size=4),
       tail_only=st.booleans())
def test_random_flips_only_znippy_errors(good: bytes, tmp_path: Path,
                                         flips: list[tuple[float, int]], tail_only: bool) -> None:
    start = _region(good, "")[0] if tail_only else 0
    bad = bytearray(good)
    for where, mask in flips:
        bad[start + int(where * (len(good) - start))] ^= mask
    exercise(_write(tmp_path, bad), tmp_path)


def test_parallel_extract_removes_corrupt_split_files(good: bytes, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     split_files: list[str]) -> None:
    import znippy_sql.read.extract as ex

    monkeypatch.setattr(ex, "UNIT_BYTES", 4096)
    monkeypatch.setattr(ex, "THREAD_BYTES", 0)
    data = bytearray(good)
    with open_archive(_write(tmp_path, good, "g.znippy")) as a:
        rows = a.lookup.to_pylist()
    last = [r for r in rows if r["relative_path"] == "a/text.txt"][-1]  # 3rd chunk of 3
    data[last["blob_offset"] + 5] ^= 0x10
    dest = tmp_path / "out"
    (dest / "a").mkdir(parents=True)
    (dest / "a" / "raw.bin").write_bytes(b"old")
    with open_archive(_write(tmp_path, data)) as a:
        report = a.extract(dest, workers=3)  # two big files, three workers: both are split
    assert len(split_files) == 2
    assert list(report.failed) == ["a/text.txt"]
    assert not (dest / "a" / "text.txt").exists()
    assert (dest / "a" / "raw.bin").read_bytes() == FILES["a/raw.bin"]
    assert sorted(report.written) == sorted(set(FILES) - {"a/text.txt"})
    assert not [p for p in dest.rglob("*") if "znippy-part" in p.name]


def _drop(name: str):
    def edit(rows: list[dict[str, Any]]) -> None:
        rows[:] = [r for r in rows if r["module_name"] != name]
    return edit


def _set(i: int, **values: Any):
    def edit(rows: list[dict[str, Any]]) -> None:
        rows[i].update(values)
    return edit


def _dup(rows: list[dict[str, Any]]) -> None:
    rows.append(dict(rows[0]))


@pytest.mark.parametrize("edit,match", [
    (_drop("__lookup__"), "no __lookup__"),
    (_drop("__trie__"), "no __trie__"),
    (_set(0, module_name="__sneaky__"), "does not match its name"),
    (_set(2, pkg_type=3), "does not match its name"),
    (_dup, "twice|overlaps"),
], ids=["no-lookup", "no-trie", "reserved-data", "typed-section", "duplicate"])
def test_manifest_lies(tmp_path: Path, edit: Any, match: str) -> None:
    path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy", manifest_edit=edit)
    with pytest.raises(FormatError, match=match):
        open_archive(path)


def test_trailing_bytes_after_a_stream(tmp_path: Path) -> None:
    """A range must hold exactly one complete stream, ending with its end-of-stream marker."""
    def longer(rows: list[dict[str, Any]]) -> None:
        rows[1]["index_len"] += 4  # the lookup range now ends in padding
    path = RawArchive([("a.txt", b"hello")]).write(tmp_path / "a.znippy", manifest_edit=longer)
    with open_archive(path) as a, pytest.raises(FormatError, match="end-of-stream"):
        a.lookup


def test_trie_checksum_catches_every_flip(tmp_path: Path) -> None:
    """fst v3 ends with a masked CRC32C: any flipped byte past the version field is refused
    before the fst code sees it."""
    arc = RawArchive([(f"f{i}", bytes([i])) for i in range(8)])
    data = arc.write(tmp_path / "a.znippy").read_bytes()
    start, end = _region(data, "__trie__")
    for i in range(start + 8, end):
        bad = bytearray(data)
        bad[i] ^= 0x04
        with open_archive(_write(tmp_path, bad)) as a, pytest.raises(FormatError,
                                                                    match="__trie__"):
            a.find("f0")


_FIELDS = ["chunk_seq", "fdata_offset", "compressed", "uncompressed_size", "blob_offset",
           "blob_size", "relative_path"]
_VALUES = st.sampled_from([0, 1, 2, 3, 5, 63, 64, 4096, 2**31, 2**32 - 1, 2**63, 2**64 - 1])
_PATHS = st.sampled_from(["a", "b", "a/b", "../x", "", "zz", "a\\b", "é"])


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(["sub", "lookup", "both"]),
                                st.integers(0, 3), st.sampled_from(_FIELDS), _VALUES, _PATHS),
                      min_size=1, max_size=3),
       trie_shift=st.sampled_from([None, 1, -1, 7, 2**40]))
def test_random_row_lies_only_znippy_errors(tmp_path: Path, edits: list[Any],
                                            trie_shift: int | None) -> None:
    """Well-formed Arrow, lying rows: open/read/open()/verify/extract raise only ZnippyError,
    and whatever verify passes reads back the original bytes."""
    files = [("a", b"alpha" * 30), ("a/b", b""), ("b", random_bytes(200, 1)), ("zz", b"z")]
    arc = RawArchive(files)
    lookup = [dict(r) for r in sorted(arc.rows, key=lambda r: r["relative_path"].encode())]
    for where, i, name, value, path in edits:
        targets = ([arc.rows[i]] if where != "lookup" else []) + (
            [lookup[i]] if where != "sub" else [])
        for row in targets:
            if name == "relative_path":
                row[name] = path
            elif name == "compressed":
                row[name] = bool(value % 2)
            elif name == "chunk_seq":
                row[name] = value % 2**32
            else:
                row[name] = value
    trie = None
    if trie_shift is not None:
        trie = [(p.encode(), (i + trie_shift) % 2**64)
                for i, p in enumerate(sorted({r["relative_path"] for r in lookup}))]
    try:
        path = arc.write(tmp_path / "lie.znippy", lookup_rows=lookup, trie=trie)
    except (pa.ArrowException, ValueError, OverflowError):
        return  # the builder itself cannot express this lie (e.g. an unsorted trie)
    want = dict(files)
    try:
        archive = open_archive(path)
    except ZnippyError:
        return
    with archive:
        wrong = []
        for p in want:
            try:
                if archive.read(p) != want[p]:
                    wrong.append(p)
                with archive.open(p) as fh:
                    fh.seek(3)
                    fh.read(7)
            except ZnippyError:
                pass
        report = archive.verify()
        assert not wrong or not report.ok, f"{wrong} read back wrong, verify saw nothing"
        try:
            archive.extract(tmp_path / "out")
        except ZnippyError:
            pass
