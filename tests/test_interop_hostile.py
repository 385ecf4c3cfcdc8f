"""Damaged and hostile Rust 0.9+/0.10 layouts (tests/rust10_layout.py): each read fails with a
``ZnippyError`` naming the archive, or reads what a Rust reader would, never wrong bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pyarrow as pa
import pytest

import interop_corpus as corpus
import rust10_layout as g
from znippy_sql import ChecksumError, FormatError, ZnippyError, open_archive
from znippy_sql.interop.delta import apply_delta

FILES = {"a.txt": corpus.text(4000, "a"), "b.txt": corpus.text(4000, "a")[:3000] + b"tail" * 9}


def test_apply_delta_reads_git_deltas() -> None:
    base = corpus.text(5000, "base")
    target = base[:4000] + b"new" * 100
    assert apply_delta(base, g.git_delta(base, target)) == target
    assert apply_delta(b"", g.git_delta(b"", b"abc")) == b"abc"
    # a copy that names no size byte copies 0x10000 bytes
    big = bytes(range(256)) * 300
    assert apply_delta(big, _sizes(len(big), 0x10000) + b"\x80") == big[:0x10000]


def _sizes(base: int, result: int) -> bytes:
    out = b""
    for n in (base, result):
        while True:
            b = n & 0x7F
            n >>= 7
            out += bytes([b | (0x80 if n else 0)])
            if not n:
                break
    return out


@pytest.mark.parametrize("delta, problem", [
    (b"", "truncated"),
    (_sizes(10, 5), "expects a base of 10 bytes"),
    (_sizes(4000, 5) + b"\x00", "0x00 instruction"),
    (_sizes(4000, 5) + b"\x05ab", "runs past the stream"),
    (b"", "copies"),  # (made below: a copy past the base's end)
    (_sizes(4000, 5) + b"\x03abc", "produced 3 bytes, declared 5"),
    (_sizes(4000, 2) + b"\x03abc", "more than the declared 2"),
])
def test_apply_delta_refuses_bad_deltas(delta: bytes, problem: str) -> None:
    base = corpus.text(4000, "a")
    if problem == "copies":
        delta = _sizes(4000, 32) + bytes([0x80 | 0x03 | 0x10]) + struct.pack("<H", 3990) + b"\x20"
    with pytest.raises(FormatError, match=problem):
        apply_delta(base, delta)


def _delta_archive(tmp_path: Path, deltas: dict[str, str], files: dict[str, bytes] | None = None
                   ) -> Path:
    return g.write(tmp_path / "d.znippy", g.Spec(files=files or FILES, deltas=deltas))


def test_a_delta_chain_and_a_cycle(tmp_path: Path) -> None:
    files = {"a.txt": FILES["a.txt"], "b.txt": FILES["b.txt"], "c.txt": FILES["b.txt"] + b"!"}
    path = _delta_archive(tmp_path, {"b.txt": "a.txt", "c.txt": "b.txt"}, files)
    with open_archive(path) as a:
        assert a.read("c.txt") == files["c.txt"] and a.read("b.txt") == files["b.txt"]
    # b against c and c against b: neither base is ever stored whole
    table_path = _rewrite_delta_map(path, [("b.txt", 0, "c.txt"), ("c.txt", 0, "b.txt")])
    with open_archive(table_path) as a:
        with pytest.raises(ZnippyError, match="d.znippy|cycle") as err:
            a.read("b.txt")
        assert str(table_path) in str(err.value)
        assert a.read("a.txt") == files["a.txt"]


def _rewrite_delta_map(path: Path, rows: list[tuple[str, int, str]]) -> Path:
    """The archive at ``path`` with its ``__znippy_delta__`` replaced by ``rows`` (a new
    stream appended before the manifest is rewritten: the ranges stay in the tail)."""
    import rust_layout as rl

    data = path.read_bytes()
    at = struct.unpack("<Q", data[-8:])[0]
    manifest = pa.ipc.open_stream(data[at:-16]).read_all().to_pydict()
    i = manifest["module_name"].index("__znippy_delta__")
    new = g.stream(g.DELTA_SCHEMA, {"relative_path": [r[0] for r in rows],
                                     "chunk_seq": [r[1] for r in rows],
                                     "base_path": [r[2] for r in rows]})
    body = bytearray(data[:at])
    manifest["index_offset"][i] = len(body)
    manifest["index_len"][i] = len(new)
    manifest["row_count"][i] = len(rows)
    body += new
    where = len(body)
    body += g.stream(rl.MANIFEST, manifest) + rl.MAGIC + struct.pack("<Q", where)
    out = path.with_name("d.znippy")
    out.write_bytes(bytes(body))
    return out


def test_a_delta_map_naming_no_chunk(tmp_path: Path) -> None:
    path = _delta_archive(tmp_path, {"b.txt": "a.txt"})
    bad = _rewrite_delta_map(path, [("b.txt", 0, "a.txt"), ("nope.txt", 0, "a.txt")])
    with pytest.raises(FormatError, match="nope.txt") as err:
        open_archive(bad)
    assert str(bad) in str(err.value)


def test_a_delta_against_the_wrong_base(tmp_path: Path) -> None:
    """The result's BLAKE3 is always checked: a map naming another base fails, whatever
    verify_checksums says."""
    files = {**FILES, "z.txt": corpus.text(4000, "z")}
    path = _delta_archive(tmp_path, {"b.txt": "a.txt"}, files)
    bad = _rewrite_delta_map(path, [("b.txt", 0, "z.txt")])
    with open_archive(bad, verify_checksums=False) as a:
        with pytest.raises((ChecksumError, FormatError)) as err:
            a.read("b.txt")
        assert str(bad) in str(err.value)
        assert a.read("a.txt") == files["a.txt"]


def test_a_torn_journal_reads_its_whole_batches(tmp_path: Path) -> None:
    path = g.write_hot(tmp_path / "h.znippy", [{"a.txt": FILES["a.txt"]},
                                               {"b.txt": FILES["b.txt"]}])
    journal = Path(str(path) + ".hot.00000")
    whole = journal.read_bytes()
    journal.write_bytes(whole[:-40])  # the end-of-stream marker and part of the last batch
    with open_archive(path) as a:
        assert a.select() == ["a.txt"] and a.read("a.txt") == FILES["a.txt"]
    journal.write_bytes(whole[:5])  # not even a schema: no index, so not readable
    with pytest.raises(ZnippyError) as err:
        open_archive(path)
    assert "unsealed" in str(err.value) and str(path) in str(err.value)


def test_segments_in_number_order_and_the_last_row_wins(tmp_path: Path) -> None:
    path = g.write_hot(tmp_path / "h.znippy", [{"a.txt": b"one"}])
    first = Path(str(path) + ".hot.00000").read_bytes()
    blob = path.read_bytes()
    g.write_hot(tmp_path / "h2.znippy", [{"a.txt": b"one"}, {"a.txt": b"two", "b.txt": b"b"}])
    # segment 1 holds the second append, at the blob offsets the second file has
    path.write_bytes((tmp_path / "h2.znippy").read_bytes())
    assert path.read_bytes()[: len(blob)] == blob
    table = pa.ipc.open_stream(Path(str(tmp_path / "h2.znippy") + ".hot.00000").read_bytes()
                               ).read_all()
    Path(str(path) + ".hot.00000").write_bytes(first)
    Path(str(path) + ".hot.00001").write_bytes(g.stream(g.DATA_SCHEMA, table.slice(1)
                                                         .to_pydict()))
    with open_archive(path) as a:
        assert a.select() == ["a.txt", "b.txt"]
        assert a.read("a.txt") == b"two"
    # a segment whose rows lack the index columns is damage
    Path(str(path) + ".hot.00002").write_bytes(g.stream(pa.schema([("x", pa.int8())]),
                                                         {"x": [1]}))
    with pytest.raises(FormatError, match="index columns"):
        open_archive(path)
