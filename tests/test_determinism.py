"""Determinism (FORMAT §6): same input and options → byte-identical archive, whatever the
worker count. With two workers, batches run in two threads and may finish out of order."""

from __future__ import annotations

import hashlib
from pathlib import Path

from conftest import random_bytes, text_bytes

from znippy_sql import Entry, ReservedSection, open_archive, write_archive


def _entries(src: Path) -> list[Entry]:
    """~9 MiB: many small files, a few multi-chunk ones (on disk and in memory), raw ones."""
    out = []
    for i in range(400):
        out.append(Entry(f"small/{i:04d}.txt", data=text_bytes(500 + (i * 37) % 4000, i)))
    for i in range(4):
        p = src / f"big{i}.log"
        p.write_bytes(text_bytes(2 << 20, 100 + i))
        out.append(Entry(f"big/{i}.log", file=p, repo="r2"))
    out.append(Entry("noise.bin", data=random_bytes(300_000, 7), pkg_type=6))
    out.append(Entry("pkg.jar", data=text_bytes(100_000, 8)))
    return out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_writes_and_worker_counts_identical(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    entries = _entries(src)
    section = [ReservedSection("__x_test__", b"opaque bytes")]
    opts = dict(block_size=1 << 20, reserved_sections=section, fsync=False)
    write_archive(tmp_path / "w1a.znippy", entries, workers=1, **opts)
    write_archive(tmp_path / "w1b.znippy", entries, workers=1, **opts)
    write_archive(tmp_path / "w2.znippy", entries, workers=2, **opts)
    digests = {_digest(tmp_path / n) for n in ("w1a.znippy", "w1b.znippy", "w2.znippy")}
    assert len(digests) == 1
    with open_archive(tmp_path / "w2.znippy") as a:
        assert a.verify().ok
        assert a.read("big/2.log") == (src / "big2.log").read_bytes()
        assert bytes(a.section("__x_test__")) == b"opaque bytes"


def test_entry_order_within_group_is_the_canonical_order(tmp_path: Path) -> None:
    """Rows follow the order files were given; a different order is a different archive,
    but the same files read back the same."""
    entries = [Entry(f"f{i}", data=text_bytes(100, i)) for i in range(5)]
    write_archive(tmp_path / "a.znippy", entries, workers=1, fsync=False)
    write_archive(tmp_path / "b.znippy", entries[::-1], workers=1, fsync=False)
    with open_archive(tmp_path / "a.znippy") as a, open_archive(tmp_path / "b.znippy") as b:
        assert a.lookup.column("checksum").equals(b.lookup.column("checksum"))
        assert [a.read(e.relative_path) for e in entries] == [b.read(e.relative_path)
                                                              for e in entries]
