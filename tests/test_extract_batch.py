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
