"""The one-shot writer: atomic on failure, strict about duplicates and section names."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from conftest import listing, text_bytes

from znippy_sql import (
    ArchiveWriter,
    DuplicatePathError,
    Entry,
    FormatError,
    ReservedSection,
    ZnippyError,
    open_archive,
    write_archive,
)


class Boom(Exception):
    pass


def test_exception_inside_with_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    with pytest.raises(Boom):
        with ArchiveWriter(out, block_size=4096, workers=1) as w:
            w.add("a.txt", data=text_bytes(50_000, 1))
            assert listing(tmp_path) != []  # the staging file exists while writing
            raise Boom()
    assert listing(tmp_path) == []


def test_failure_keeps_an_existing_archive(tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry("old.txt", data=b"old")], workers=1)
    before = out.read_bytes()
    with pytest.raises(DuplicatePathError):
        write_archive(out, [Entry("n.txt", data=b"1"), Entry("n.txt", data=b"2")], workers=1)
    assert out.read_bytes() == before
    assert listing(tmp_path) == ["a.znippy"]


def test_failure_with_a_started_pool_leaves_nothing(tmp_path: Path) -> None:
    """Enough input for the process pool to start, then a missing source file."""
    big = tmp_path / "big.txt"
    big.write_bytes(text_bytes(9 << 20, 2))
    out = tmp_path / "out" / "a.znippy"
    out.parent.mkdir()
    with pytest.raises(ZnippyError):
        write_archive(out, [Entry("big.txt", file=big),
                            Entry("gone.txt", file=tmp_path / "missing")],
                      block_size=1 << 20, workers=2)
    assert listing(out.parent) == []


def test_duplicate_paths_name_both_sources(tmp_path: Path) -> None:
    src = tmp_path / "f.txt"
    src.write_bytes(b"from file")
    with pytest.raises(DuplicatePathError) as info:
        write_archive(tmp_path / "a.znippy",
                      [Entry("same.txt", data=b"one"), Entry("same.txt", file=src)], workers=1)
    msg = str(info.value)
    assert "same.txt" in msg and "<data same.txt>" in msg and str(src) in msg
    # two files: each named whole, whether or not its name ends with the archive path
    other = tmp_path / "sub" / "same.txt"
    other.parent.mkdir()
    other.write_bytes(b"another")
    for first, second in ((other, src), (src, other)):
        with pytest.raises(DuplicatePathError) as info:
            write_archive(tmp_path / "c.znippy", [Entry("same.txt", file=first),
                                                  Entry("same.txt", file=second)], workers=1)
        assert f"from {first} and {second}" in str(info.value)
    tmp_path.joinpath("sub/same.txt").unlink()
    tmp_path.joinpath("sub").rmdir()
    # a duplicate across groups is still a duplicate: relative_path is archive-unique
    with pytest.raises(DuplicatePathError):
        write_archive(tmp_path / "b.znippy", [Entry("p", data=b"1", repo="r1"),
                                              Entry("p", data=b"2", repo="r2")], workers=1)
    assert listing(tmp_path) == ["f.txt"]


@pytest.mark.parametrize("name", ["meta", "__lookup__", "__trie__", "_x_", "__", "___",
                                  "__x", "x__"])
def test_non_reserved_or_owned_section_names_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(FormatError, match="reserved"):
        ArchiveWriter(tmp_path / "a.znippy", reserved_sections=[ReservedSection(name, b"x")])
    with pytest.raises(FormatError, match="reserved"):
        write_archive(tmp_path / "a.znippy", [Entry("a", data=b"a")],
                      reserved_sections=[ReservedSection(name, b"x")])
    assert listing(tmp_path) == []


def test_section_given_twice_or_wrong_kind_refused(tmp_path: Path) -> None:
    twice = [ReservedSection("__x__", b"1"), ReservedSection("__x__", b"2")]
    with pytest.raises(FormatError, match="twice"):
        ArchiveWriter(tmp_path / "a.znippy", reserved_sections=twice)
    with pytest.raises(FormatError, match="Arrow"):
        ArchiveWriter(tmp_path / "a.znippy",
                      reserved_sections=[ReservedSection("__meta__", b"not a table")])


def test_reserved_sections_round_trip(tmp_path: Path) -> None:
    meta = pa.table({"relative_path": pa.array(["a.txt", None], pa.utf8()),
                     "key": ["k1", "k2"], "value": ["v1", "v2"]})
    graph = pa.table({"oid": pa.array([b"\1" * 20], pa.binary(20)),
                      "generation": pa.array([1], pa.uint32())})
    sections = [
        ReservedSection("__sign_archive__", b"\x30\x03der"),  # raw
        ReservedSection("__meta__", meta),                      # Arrow
        ReservedSection("__gunnar_graph__", graph),              # Arrow
        ReservedSection("__custom_raw__", b"opaque"),           # unknown, raw
        ReservedSection("__custom_arrow__", meta),              # unknown, Arrow
    ]
    out = tmp_path / "a.znippy"
    write_archive(out, [Entry("a.txt", data=b"a")], reserved_sections=sections, workers=1)
    with open_archive(out) as a:
        assert a.sections == ["__lookup__", "__trie__", "__gunnar_graph__", "__custom_arrow__",
                              "__custom_raw__", "__meta__", "__sign_archive__"]
        assert bytes(a.section("__sign_archive__")) == b"\x30\x03der"
        assert a.section("__meta__").equals(meta)
        assert a.section("__gunnar_graph__").equals(graph)
        assert bytes(a.section("__custom_raw__")) == b"opaque"
        assert a.section("__custom_arrow__").equals(meta)
        assert a.has_section("__meta__") and not a.has_section("__sign_artifacts__")
        rows = {r.key.module_name: r for r in a.manifest_rows}
        assert rows["__meta__"].row_count == 2 and rows["__sign_archive__"].row_count == 0
        assert a.verify().ok and a.read("a.txt") == b"a"
        assert a.groups == [a.groups[0]] and a.groups[0].pkg_type == 0


def test_empty_archive(tmp_path: Path) -> None:
    out = tmp_path / "e.znippy"
    report = write_archive(out, [], workers=1)
    assert report.files == 0
    with open_archive(out) as a:
        assert a.groups == [] and a.lookup.num_rows == 0 and a.blob_end == 0
        assert a.find("x") is None and a.select() == [] and a.verify().ok
        assert a.extract(tmp_path / "d").files == 0


def test_add_outside_with_block(tmp_path: Path) -> None:
    w = ArchiveWriter(tmp_path / "a.znippy")
    with pytest.raises(RuntimeError):
        w.add("a", data=b"a")
    assert listing(tmp_path) == []
    with w:
        w.add("a", data=b"a")
    with pytest.raises(RuntimeError, match="outside its 'with' block"):
        w.add("b", data=b"b")  # after the tail is written, too (the writer let go of its rows)
    assert listing(tmp_path) == ["a.znippy"]
