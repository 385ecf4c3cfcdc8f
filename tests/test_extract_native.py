"""Extract's per-file work runs in the compiled core (issue 33, item 3; native/src/extract/).

Counted, not timed: the Python function calls ``Archive.extract`` makes over 10,000 files
(``sys.setprofile`` and ``threading.setprofile``); a damaged blob is a per-file failure worded
as the Python reader words it (no panic, nothing under the file's name); a target behind a
symlink refuses the whole extract before a byte is written.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from _calls import python_calls

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.errors import UnsafePathError


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """10,000 small files in 100 directories, packed as the writer packs a source tree."""
    root = tmp_path_factory.mktemp("many")
    entries = [Entry(f"d{i % 100:02d}/f{i:05d}.txt", data=(f"line {i}\n" * (1 + i % 50)).encode())
               for i in range(10_000)]
    arc = root / "many.znippy"
    write_archive(arc, entries, fsync=False)
    return arc, len(entries)


def test_extract_makes_at_most_05_python_calls_a_file(many: tuple[Path, int], tmp_path: Path
                                                      ) -> None:
    arc, n = many
    with open_archive(arc) as a:  # one extract first: no module is imported inside the count
        assert a.extract(tmp_path / "warm").ok
    with open_archive(arc) as a:
        report, calls = python_calls(lambda: a.extract(tmp_path / "out", workers=2))
    assert report.ok and report.files == n
    per_file = sum(calls.values()) / n
    assert per_file <= 0.5, (per_file, calls.most_common(10))
    assert (tmp_path / "out" / "d07" / "f00107.txt").read_bytes() == b"line 107\n" * 8


def _damaged(tmp_path: Path, pack: bool) -> tuple[Path, dict[str, bytes]]:
    files = {f"d/{i:02d}.txt": (f"{i} " * (2000 + 50 * i)).encode() for i in range(20)}
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry(p, data=d) for p, d in files.items()], workers=1, fsync=False,
                  pack=pack)
    with open_archive(arc) as a:
        row = next(r for r in a.lookup.to_pylist() if r["relative_path"] == "d/07.txt")
    data = bytearray(arc.read_bytes())
    data[row["blob_offset"] + row["blob_size"] - 30] ^= 0x40  # inside the zstd blocks
    arc.write_bytes(bytes(data))
    return arc, files


def test_a_damaged_blob_fails_its_file_only(tmp_path: Path) -> None:
    """One frame damaged: its file is reported (the problem names it and its chunk) and not
    created; every other file is written whole."""
    arc, files = _damaged(tmp_path, pack=False)
    with open_archive(arc) as a:
        report = a.extract(tmp_path / "x", workers=2)
    assert list(report.failed) == ["d/07.txt"]
    assert report.failed["d/07.txt"].startswith("'d/07.txt' chunk 0: ")
    assert not (tmp_path / "x" / "d" / "07.txt").exists()
    assert sorted(os.listdir(tmp_path / "x" / "d")) == sorted(
        p.split("/")[1] for p in files if p != "d/07.txt")


def test_a_damaged_pack_fails_its_files_with_a_checksum_or_codec_problem(tmp_path: Path
                                                                         ) -> None:
    """A damaged packed blob: each of its members is reported (a codec or BLAKE3 problem
    naming the file), none is created, nothing is left behind."""
    arc, files = _damaged(tmp_path, pack=True)
    with open_archive(arc) as a:
        report = a.extract(tmp_path / "x")
    assert report.failed and "d/07.txt" in report.failed
    for path, why in report.failed.items():
        assert why.startswith(f"{path!r} chunk 0: "), why
        assert not (tmp_path / "x" / path).exists()
    left = [p for p in (tmp_path / "x").rglob("*") if "znippy-part" in p.name]
    assert left == []
    assert report.files == len(files) - len(report.failed)


def test_a_symlinked_directory_refuses_the_extract_before_any_write(many: tuple[Path, int],
                                                                    tmp_path: Path) -> None:
    arc, _ = many
    dest, outside = tmp_path / "dest", tmp_path / "outside"
    dest.mkdir()
    outside.mkdir()
    (dest / "d50").symlink_to(outside)
    with open_archive(arc) as a, pytest.raises(UnsafePathError, match="through the symlink"):
        a.extract(dest)
    assert os.listdir(dest) == ["d50"] and os.listdir(outside) == []


def test_ctrl_c_stops_within_100_ms_with_nothing_partial(many: tuple[Path, int], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """SIGINT while the core writes: ``ExtractInterrupted`` within 100 ms of the signal, its
    report the files on disk, every one whole, no temporary left. (The archive is read as a
    source whose blobs Python gives, 2 ms a unit of 8 files, so the extract lasts seconds.)"""
    import signal
    import time

    import znippy_sql.read.extract as ex
    import znippy_sql.read.many as many_module
    import znippy_sql.read.tail as tail
    from znippy_sql.read.extract import ExtractInterrupted

    class Source(tail.MappedSource):
        pass

    fetch = many_module.fetch_blobs

    def slow(*args: Any) -> list[bytes]:
        time.sleep(0.002)
        return fetch(*args)

    monkeypatch.setattr(tail, "MappedSource", Source)
    monkeypatch.setattr(many_module, "fetch_blobs", slow)
    monkeypatch.setattr(ex, "UNIT_FILES", 8)
    arc, n = many
    sent: list[float] = []

    def interrupt() -> None:
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.4, interrupt)
    dest = tmp_path / "out"
    with open_archive(arc) as a, pytest.raises(ExtractInterrupted) as caught:
        timer.start()
        a.extract(dest, workers=2)
    stopped = time.perf_counter() - sent[0]
    timer.join()
    assert stopped < 0.1, stopped
    written = caught.value.report.written
    on_disk = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert 0 < len(written) < n and on_disk == sorted(written)
    for path in written[:: max(1, len(written) // 50)]:
        i = int(path.split("/f")[1][:5])
        assert (dest / path).read_bytes() == f"line {i}\n".encode() * (1 + i % 50)


CLI = ("import sys\n"
       "import znippy_sql.cli.fast as fast\n"
       "if sys.argv[1] == 'python':\n"
       "    fast._extract = lambda *args: None\n"
       "from znippy_sql.cli import main\n"
       "code = main(sys.argv[2:])\n"
       "print('pyarrow' in sys.modules, file=sys.stderr)\n"
       "sys.exit(code)\n")


def _cli(how: str, *argv: str | Path) -> tuple[int, str, str]:
    import re
    import subprocess

    done = subprocess.run([sys.executable, "-c", CLI, how, *map(str, argv)],
                          capture_output=True, text=True, timeout=300)
    out = re.sub(r" in \d+\.\d\d s", " in T s", done.stdout)
    return done.returncode, out, done.stderr


def test_cli_extract_of_a_plain_archive_skips_pyarrow_and_says_the_same(
        many: tuple[Path, int], tmp_path: Path) -> None:
    """``extract ARCHIVE -o DIR`` is planned by the core (``cli/fast.py``): no pyarrow, the
    same files, output and exit code as the Python extract; a damaged blob too."""
    arc, n = many
    fast = _cli("fast", "extract", arc, "-o", tmp_path / "a")
    slow = _cli("python", "extract", arc, "-o", tmp_path / "a")  # (files replaced)
    assert fast[0] == slow[0] == 0 and fast[1] == slow[1].replace(str(tmp_path / "a"),
                                                                  str(tmp_path / "a"))
    assert fast[2].split()[-1] == "False" and slow[2].split()[-1] == "True"
    assert len([p for p in (tmp_path / "a").rglob("*") if p.is_file()]) == n
    bad, _ = _damaged(tmp_path, pack=False)
    fast = _cli("fast", "extract", bad, "-o", tmp_path / "b")
    slow = _cli("python", "extract", bad, "-o", tmp_path / "c")
    assert fast[0] == slow[0] == 1
    assert fast[1].replace(str(tmp_path / "b"), "D") == slow[1].replace(str(tmp_path / "c"), "D")
    assert fast[2].splitlines()[:-1] == slow[2].splitlines()[:-1]
    assert "'d/07.txt' chunk 0: " in fast[2]
