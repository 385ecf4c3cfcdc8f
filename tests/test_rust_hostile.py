"""Damaged Rust-layout archives (no lookup, no trie, unaligned streams): truncations, bit
flips and lying lengths give a ZnippyError or a verify finding, never another exception, a
hang, or wrong bytes that verify does not see."""

from __future__ import annotations

import contextlib
import signal
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import rust_layout as rl
from rust_cases import noise, text
from znippy_sql import CodecError, FormatError, ZnippyError, open_archive
from znippy_sql.cli.core import archive_info, file_table
from znippy_sql.duckdb import register
from znippy_sql.format import codec
from znippy_sql.polars import scan

FILES = {
    "docs/readme.txt": text(2500, "readme"),
    "org/acme/lib.jar": noise(600, "jar"),
    "empty.txt": b"",
    "noise.bin": noise(900, "noise"),
    "big.bin": text(rl.cli_slice_size(1000) * 2 + 99, "big"),  # 3 chunks
}
CORES = 1000  # 900 workers: slices of 233,016 bytes


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, rl.Written]:
    w = rl.write_cli(tmp_path_factory.mktemp("h") / "good.znippy", FILES, cores=CORES, seed=2)
    return w.path.read_bytes(), w


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """A hang becomes a failure."""
    def alarm(*_: Any) -> None:
        raise TimeoutError(f"no answer in {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def attempt(fn: Callable[[], Any]) -> bool:
    """True when ``fn`` refused the input with a ZnippyError (the only exception allowed)."""
    try:
        fn()
    except ZnippyError:
        return True
    return False


def exercise(path: Path, tmp: Path) -> str:
    """Every read path; "error" when one refused or verify found something, else "ok" after
    checking each file read back as written."""
    with deadline(60):
        try:
            archive = open_archive(path)
        except ZnippyError:
            return "error"
        refused = False
        wrong = []
        with archive:
            for p, want in FILES.items():
                try:
                    if archive.read(p) != want:
                        wrong.append(p)
                except ZnippyError:
                    refused = True
            try:
                report = archive.verify()
                refused |= not report.ok
                assert not wrong or not report.ok, f"{wrong} read back wrong, verify saw nothing"
            except ZnippyError:
                refused = True
            for fn in (lambda: file_table(archive), lambda: archive_info(archive),
                       lambda: archive.extract(tmp / "x", workers=2)):
                refused |= attempt(fn)
        refused |= attempt(lambda: register(duckdb.connect(), path, "d"))
        refused |= attempt(lambda: scan(path).collect())
        refused |= attempt(lambda: scan(path, "lookup").collect())
    return "error" if refused else "ok"


def put(tmp: Path, data: bytes | bytearray, name: str = "bad.znippy") -> Path:
    p = tmp / name
    p.write_bytes(bytes(data))
    return p


def test_the_good_one_is_good(good: tuple[bytes, rl.Written], tmp_path: Path) -> None:
    data, w = good
    assert w.blob_end % 8 and exercise(put(tmp_path, data), tmp_path) == "ok"


@pytest.mark.slow
def test_every_truncation_of_the_tail(good: tuple[bytes, rl.Written], tmp_path: Path) -> None:
    data, w = good
    for n in [*range(0, 64), *range(w.blob_end - 3, len(data), 7)]:
        assert exercise(put(tmp_path, data[:n]), tmp_path) == "error", n


@pytest.mark.slow
def test_flips_in_the_tail(good: tuple[bytes, rl.Written], tmp_path: Path) -> None:
    """Every 12th byte of the sub-index, the manifest and the footer, masks in turn: a flip is
    refused, found by verify, or harmless (every file still reads back right)."""
    data, w = good
    outcomes = set()
    for n, i in enumerate(range(w.blob_end, len(data), 12)):
        bad = bytearray(data)
        bad[i] ^= (0x01, 0x80, 0xFF)[n % 3]
        outcomes.add(exercise(put(tmp_path, bad), tmp_path))
    assert "error" in outcomes


def test_flips_in_blobs(good: tuple[bytes, rl.Written], tmp_path: Path) -> None:
    """A flipped blob byte: the frame's own checksum or the chunk's BLAKE3 catches it."""
    data, w = good
    for i in range(0, w.blob_end, max(1, w.blob_end // 30)):
        bad = bytearray(data)
        bad[i] ^= 0x10
        assert exercise(put(tmp_path, bad), tmp_path) == "error", i


def _rewrite(data: bytes, w: rl.Written, edit: Callable[[list[dict[str, Any]]], None],
             manifest_edit: Callable[[list[dict[str, Any]]], None] | None = None) -> bytes:
    """The archive with its sub-index rows edited (written back, Rust-style, right after the
    blobs) and, optionally, its manifest rows."""
    (key, at, length, _), = w.sub_indexes
    reader = pa.ipc.open_stream(data[at:at + length])
    rows = reader.read_all().to_pylist()
    edit(rows)
    table = pa.Table.from_pylist(rows, schema=reader.schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, reader.schema) as writer:
        writer.write_table(table)
    sub = sink.getvalue().to_pybytes()
    manifest = [{"pkg_type": key[0], "repo": key[1], "module_name": key[2],
                 "index_offset": w.blob_end, "index_len": len(sub), "row_count": len(rows)}]
    if manifest_edit is not None:
        manifest_edit(manifest)
    msink = pa.BufferOutputStream()
    with pa.ipc.new_stream(msink, rl.MANIFEST) as writer:
        writer.write_table(pa.Table.from_pylist(manifest, schema=rl.MANIFEST))
    tail = sub + msink.getvalue().to_pybytes()
    moff = w.blob_end + len(sub)
    return data[:w.blob_end] + tail + rl.MAGIC + struct.pack("<Q", moff)


def _row(path: str, seq: int = 0, **values: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if r["relative_path"] == path and r["chunk_seq"] == seq:
                r.update(values)
    return edit


def _dup(path: str) -> Callable[[list[dict[str, Any]]], None]:
    def edit(rows: list[dict[str, Any]]) -> None:
        rows.extend(dict(r) for r in list(rows) if r["relative_path"] == path)
    return edit


@pytest.mark.parametrize("edit", [
    _row("big.bin", 1, blob_size=2**63),
    _row("big.bin", 1, blob_offset=2**64 - 1),
    _row("docs/readme.txt", uncompressed_size=2**40),
    _row("docs/readme.txt", uncompressed_size=1),
    _row("noise.bin", compressed=False),
    _row("org/acme/lib.jar", compressed=True),
    _row("org/acme/lib.jar", blob_size=599),
    _row("big.bin", 2, fdata_offset=5),
    _row("big.bin", 2, chunk_seq=7),
    _row("big.bin", 1, chunk_seq=0),
    _row("empty.txt", relative_path="../escape"),
    _row("empty.txt", relative_path="/abs"),
    _dup("docs/readme.txt"),
    _dup("big.bin"),
], ids=["huge-blob", "offset-overflow", "huge-size", "size-lies", "frame-as-raw", "raw-as-frame",
        "short-raw", "gap", "seq-jump", "seq-twice", "dotdot", "absolute", "dup-file",
        "dup-chunks"])
def test_lying_rows(good: tuple[bytes, rl.Written], tmp_path: Path,
                    edit: Callable[[list[dict[str, Any]]], None]) -> None:
    data, w = good
    assert exercise(put(tmp_path, _rewrite(data, w, edit)), tmp_path) == "error"


@pytest.mark.parametrize("edit", [
    lambda m: m[0].update(index_len=m[0]["index_len"] + 8),
    lambda m: m[0].update(index_len=m[0]["index_len"] - 8),
    lambda m: m[0].update(index_offset=m[0]["index_offset"] + 1),
    lambda m: m[0].update(index_offset=2**63),
    lambda m: m[0].update(row_count=m[0]["row_count"] + 1),
    lambda m: m.append(dict(m[0])),
    lambda m: m.append(dict(m[0], repo="other")),
    lambda m: m.append(dict(m[0], pkg_type=-1, module_name="__lookup__")),
], ids=["long", "short", "shifted", "far", "rows", "twice", "overlap", "lookup-only"])
def test_lying_manifest(good: tuple[bytes, rl.Written], tmp_path: Path,
                        edit: Callable[[list[dict[str, Any]]], None]) -> None:
    data, w = good
    bad = _rewrite(data, w, lambda rows: None, edit)
    assert exercise(put(tmp_path, bad), tmp_path) == "error"


def test_a_sub_index_where_it_is_not(tmp_path: Path) -> None:
    """A manifest row pointing into the blob region at an odd offset opens (offsets need not
    be aligned) and is refused when read, by name."""
    w = rl.write_cli(tmp_path / "a.znippy", {"a.txt": text(3000, "a")}, cores=2)
    data = w.path.read_bytes()
    bad = _rewrite(data, w, lambda rows: None, lambda m: m[0].update(index_offset=9))
    with open_archive(put(tmp_path, bad)) as a, pytest.raises(FormatError, match="sub-index"):
        a.read("a.txt")


def test_a_frame_newer_than_openzl(tmp_path: Path) -> None:
    """A frame of a format version the installed openzl cannot decode: a CodecError that
    says which version it is and which the installed openzl decodes, not "corrupt"."""
    newer = codec.MAX_READ_VERSION + 1
    w = rl.write_cli(tmp_path / "n.znippy", {"a.txt": text(3000, "a")}, cores=2)
    data = bytearray(w.path.read_bytes())
    (row,) = rl.read_multi_index(w.path)[1][0].to_pylist()
    data[row["blob_offset"]:row["blob_offset"] + 4] = (0xD7B1A5C0 + newer).to_bytes(4, "little")
    with open_archive(put(tmp_path, data)) as a:
        with pytest.raises(CodecError) as err:
            a.read("a.txt")
        report = a.verify()
    message = str(err.value)
    assert f"format version {newer}" in message and codec.OPENZL_VERSION in message
    assert f"{codec.MIN_READ_VERSION}..{codec.MAX_READ_VERSION}" in message
    assert "newer openzl" in message and "corrupt" not in message.lower()
    assert any(f"format version {newer}" in p for p in report.problems)
