"""A chunk that really decodes to hundreds of MiB is streamed in bounded pieces where its bytes
go to a file or a socket (issue 23 §7): extract, cat, ``-o -`` and ArchiveFile reads; the
in-memory reads keep the per-chunk cap."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.errors import ChecksumError
from znippy_sql.format import codec

BIG = 512 << 20


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~20 KB archive whose one chunk decodes to 512 MiB (zeros)."""
    root = tmp_path_factory.mktemp("huge")
    src = root / "src"
    src.mkdir()
    with open(src / "zeros.bin", "wb") as fh:
        fh.truncate(BIG)
    out = root / "huge.znippy"
    write_archive(out, src, block_size=BIG, workers=1, fsync=False, dedup=False)
    assert out.stat().st_size < 64 << 10
    return out


#: a fresh small process runs the command and reports its children's peak RSS (ru_maxrss
#: survives fork and exec: measured from a big parent, the parent's size would show)
LAUNCH = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(code)
"""
CLI = "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))"


def _rss_mib(*argv: str, stdout=subprocess.DEVNULL) -> int:
    done = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-c", CLI, *argv],
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return int(done.stderr.split()[-1])


@pytest.mark.slow
def test_extract_and_cat_of_a_512_mib_chunk_stay_bounded(huge: Path, tmp_path: Path) -> None:
    base = _rss_mib("info", str(huge))
    grown = {
        "extract": _rss_mib("extract", str(huge), "-o", str(tmp_path / "o")) - base,
        "cat": _rss_mib("cat", str(huge), "zeros.bin") - base,
        "extract -o -": _rss_mib("extract", str(huge), "-o", "-") - base,
    }
    out = tmp_path / "o" / "zeros.bin"
    assert out.stat().st_size == BIG
    with open(out, "rb") as fh:
        while block := fh.read(64 << 20):
            assert block.count(0) == len(block)
    # bounded by a piece (8 MiB) and the zstd window, far below the chunk's 512 MiB
    assert all(mib < 128 for mib in grown.values()), grown


def test_archive_file_reads_a_streamed_chunk(huge: Path) -> None:
    with open_archive(huge) as a, a.open("zeros.bin") as fh:
        fh.seek(BIG - 10)
        assert fh.read(100) == bytes(10)
        fh.seek(300 << 20)
        assert fh.read(5) == bytes(5)  # a seek back restarts the stream


def test_pieces_equal_the_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = os.urandom(3 << 20) + bytes(3 << 20) + os.urandom(1 << 20)
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry("f.bin", data=data)], block_size=2 << 20, workers=1, fsync=False)
    monkeypatch.setattr(codec, "STREAM_BYTES", 1 << 20)
    monkeypatch.setattr(codec, "PIECE_BYTES", 300_000)
    with open_archive(arc) as a:
        info = a.find("f.bin")
        streamed = [c for c in info.chunks if c.compressed and c.uncompressed_size > 1 << 20]
        assert streamed  # the zero run compresses
        pieces = [bytes(p) for c in info.chunks for p in a.chunk_pieces("f.bin", c)]
        assert max(len(p) for p in pieces) <= max(300_000, 2 << 20)
        assert b"".join(pieces) == data
        report = a.extract(tmp_path / "o", workers=1)
        assert report.ok and (tmp_path / "o" / "f.bin").read_bytes() == data
        with a.open("f.bin") as fh:
            assert fh.read() == data
        bad = dataclasses.replace(streamed[0], checksum=bytes(32))
        with pytest.raises(ChecksumError):
            for _ in a.chunk_pieces("f.bin", bad):
                pass
        with pytest.raises(ChecksumError):  # checked before the first piece comes
            a.checked_pieces("f.bin", bad)
