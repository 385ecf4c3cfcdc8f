"""A file of many small chunks (a cut jar, or a small block size) is decoded in batches
(``Archive.chunk_views``): the same bytes as chunk by chunk, and a damaged chunk in the middle
of a batch is still found and named, never written as good data."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import ChecksumError, CodecError, Entry, open_archive, write_archive

BLOCK = 4096  # 4 KiB chunks: far below the size at which chunks are read one by one


def _archive(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    files = {
        "text.log": text_bytes(300 * BLOCK + 123, 1),  # compressed chunks
        "noise.bin": random_bytes(200 * BLOCK + 7, 2),  # raw chunks (they do not shrink)
        "mixed.dat": text_bytes(40 * BLOCK, 3) + random_bytes(40 * BLOCK, 4),
    }
    path = tmp_path / "many.znippy"
    write_archive(path, [Entry(p, data=d) for p, d in files.items()], block_size=BLOCK,
                  dedup=False, fsync=False)
    return path, files


def test_batched_views_equal_chunk_by_chunk(tmp_path: Path) -> None:
    path, files = _archive(tmp_path)
    with open_archive(path) as a:
        for name, data in files.items():
            chunks = a.find(name).chunks
            assert len(chunks) > 50
            batch = a.chunk_views(name, chunks)
            one = [a.chunk_view(name, c) for c in chunks]
            assert [bytes(v) for v in batch] == [bytes(v) for v in one]
            assert b"".join(bytes(v) for v in batch) == data
        report = a.extract(str(tmp_path / "out"))
    assert report.ok
    for name, data in files.items():
        assert (tmp_path / "out" / name).read_bytes() == data


@pytest.mark.parametrize("name", ["text.log", "noise.bin"])
def test_a_damaged_chunk_inside_a_batch_is_named(tmp_path: Path, name: str) -> None:
    path, files = _archive(tmp_path)
    with open_archive(path) as a:
        victim = a.find(name).chunks[17]  # inside the first batch, not its first chunk
    raw = bytearray(path.read_bytes())
    # a byte in the middle of the blob: a frame's payload or a raw chunk's data
    raw[victim.blob_offset + victim.blob_size // 2] ^= 0x40
    path.write_bytes(bytes(raw))
    with open_archive(path) as a:
        chunks = a.find(name).chunks
        with pytest.raises((ChecksumError, CodecError)) as info:
            a.chunk_views(name, chunks)
        assert f"{name!r} chunk 17" in str(info.value) and str(path) in str(info.value)
        report = a.extract(str(tmp_path / "out"))
    assert name in report.failed and "chunk 17" in report.failed[name]
    assert not (tmp_path / "out" / name).exists()  # nothing half-written under its name
    others = [n for n in files if n != name]
    for other in others:
        assert (tmp_path / "out" / other).read_bytes() == files[other]


@pytest.mark.parametrize("pack", [True, False])
def test_file_views_are_the_chunks_checked(tmp_path: Path, pack: bool) -> None:
    """``fileviews.file_views`` (extract's path for a file of many chunks) gives each chunk's
    bytes as ``chunk_views`` does, packed blobs sliced, and None (the caller then reads
    chunk by chunk, which names the problem) for a damaged chunk or rows it is not given
    exactly."""
    from znippy_sql.read.fileviews import file_views

    files = {"a.log": text_bytes(90 * BLOCK + 5, 7), "b.bin": random_bytes(30 * BLOCK, 8),
             "c.txt": text_bytes(700, 9), "d.mix": text_bytes(20 * BLOCK, 10)
             + random_bytes(20 * BLOCK, 11)}
    small = {f"s/{i:02d}.txt": text_bytes(300 + i, 20 + i) for i in range(30)}  # packed
    path = tmp_path / "fv.znippy"
    write_archive(path, [Entry(p, data=d) for p, d in {**files, **small}.items()],
                  block_size=BLOCK, dedup=False, fsync=False, pack=pack)
    with open_archive(path) as a:
        assert a.packed == pack
        for name, data in files.items():
            info = a.find(name)
            end = info.lookup_row + len(info.chunks)
            views = file_views(a, name, info.lookup_row, end, verify=True)
            assert views is not None
            assert [bytes(v) for v in views] == [bytes(v) for v in a.chunk_views(name,
                                                                                 info.chunks)]
            assert b"".join(views) == data
            if len(info.chunks) > 1:  # not the file's rows exactly: refused
                assert file_views(a, name, info.lookup_row, end - 1, verify=True) is None
                assert file_views(a, name, info.lookup_row + 1, end, verify=True) is None
            assert file_views(a, "other", info.lookup_row, end, verify=True) is None
        victim = a.find("a.log").chunks[40]
    raw = bytearray(path.read_bytes())
    raw[victim.blob_offset + victim.blob_size // 2] ^= 0x40
    path.write_bytes(bytes(raw))
    with open_archive(path) as a:
        info = a.find("a.log")
        assert file_views(a, "a.log", info.lookup_row, info.lookup_row + len(info.chunks),
                          verify=True) is None
        report = a.extract(str(tmp_path / "out"))
    assert "a.log" in report.failed and "chunk 40" in report.failed["a.log"]
    assert (tmp_path / "out" / "b.bin").read_bytes() == files["b.bin"]
