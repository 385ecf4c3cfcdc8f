"""Hostile archives, built byte by byte (conftest.RawArchive: pyarrow + ducer, no znippy_sql
writer): extract refuses every escaping or malformed path with UnsafePathError before it
writes anything, and nothing appears outside ``dest``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import RawArchive, listing

from znippy_sql import Entry, UnsafePathError, open_archive, write_archive

PROBE = "/tmp/znippy-hostile-probe-x"

HOSTILE = [
    "../x",
    "../../x",
    "a/../../x",
    "a/./b",
    "./x",
    ".",
    "..",
    "",
    "/etc/znippy-hostile-probe",
    PROBE,
    "C:\\x",
    "C:x",
    "c:/x",
    "x\0y",
    "a\\..\\..\\x",
    "..\\x",
    "a//b",
    "a/",
    "line\nbreak",
    "tab\there",
    "del\x7f",
    "n" * 256,
    "a/" + "m" * 300 + "/x",
    "/".join(["d" * 200] * 25),  # > 4096 bytes in all
]


@pytest.fixture(autouse=True)
def _no_probe() -> None:
    for p in (PROBE, "/etc/znippy-hostile-probe"):
        assert not os.path.lexists(p)
    yield
    for p in (PROBE, "/etc/znippy-hostile-probe"):
        assert not os.path.lexists(p), f"extract wrote {p}"


@pytest.mark.parametrize("bad", HOSTILE, ids=[repr(h)[:40] for h in HOSTILE])
def test_extract_refuses_before_writing(tmp_path: Path, bad: str) -> None:
    work = tmp_path / "work"
    (work / "dest").mkdir(parents=True)
    files = [("aaa_first.txt", b"first"), (bad, b"evil"), ("zzz_last.txt", b"last")]
    path = RawArchive(files).write(tmp_path / "hostile.znippy")
    before_tmp, before_work = listing(tmp_path), listing(work)
    with open_archive(path) as a:
        with pytest.raises(UnsafePathError) as info:
            a.extract(work / "dest")
        assert str(path) in str(info.value)
        assert listing(tmp_path) == before_tmp  # nothing at all was written
        assert listing(work) == before_work
        with pytest.raises(UnsafePathError):
            a.extract(work / "dest", paths=[bad])
        assert listing(tmp_path) == before_tmp
        # a selection without the hostile entry extracts normally
        report = a.extract(work / "dest", glob="aaa_*")
        assert report.written == ["aaa_first.txt"]
        assert listing(work / "dest") == ["aaa_first.txt"]
        assert any("unsafe entry path" in p for p in a.verify().problems)


def test_writer_refuses_the_same_paths(tmp_path: Path) -> None:
    for bad in HOSTILE:
        with pytest.raises(UnsafePathError):
            write_archive(tmp_path / "w.znippy", [Entry(bad, data=b"x")], workers=1,
                          fsync=False)
        assert not (tmp_path / "w.znippy").exists()
    assert listing(tmp_path) == []


def test_existing_symlink_target_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret"
    secret.write_bytes(b"keep me")
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(secret, dest / "file.txt")
    path = RawArchive([("a.txt", b"fine"), ("file.txt", b"overwrite")]).write(
        tmp_path / "a.znippy")
    with open_archive(path) as a, pytest.raises(UnsafePathError, match="symlink"):
        a.extract(dest)
    assert secret.read_bytes() == b"keep me"
    assert listing(dest) == ["file.txt"] and (dest / "file.txt").is_symlink()


def test_symlinked_directory_in_dest_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "link")
    path = RawArchive([("link/x", b"escape"), ("ok", b"ok")]).write(tmp_path / "a.znippy")
    with open_archive(path) as a, pytest.raises(UnsafePathError, match="outside"):
        a.extract(dest)
    assert listing(outside) == []
    assert listing(dest) == ["link"]


def test_no_symlinks_created_and_plain_modes(tmp_path: Path) -> None:
    path = RawArchive([("a/b.txt", b"b"), ("c", b"c")]).write(tmp_path / "a.znippy")
    with open_archive(path) as a:
        report = a.extract(tmp_path / "d")
    assert report.ok
    for p in (tmp_path / "d").rglob("*"):
        assert not p.is_symlink()
        if p.is_file():
            assert p.stat().st_mode & 0o7111 == 0  # no exec, setuid, setgid, sticky bits


def test_file_and_directory_conflict_is_reported_not_raised(tmp_path: Path) -> None:
    """"a" and "a/b" cannot both exist on disk: one is written, the other reported."""
    path = RawArchive([("a", b"file"), ("a/b", b"under")]).write(tmp_path / "a.znippy")
    with open_archive(path) as a:
        report = a.extract(tmp_path / "d")
    assert len(report.written) == 1 and set(report.written) | set(report.failed) == {"a", "a/b"}
    if report.written == ["a"]:
        assert (tmp_path / "d" / "a").read_bytes() == b"file"
    else:
        assert (tmp_path / "d" / "a" / "b").read_bytes() == b"under"
    assert not [p for p in listing(tmp_path / "d") if "znippy-part" in p]
