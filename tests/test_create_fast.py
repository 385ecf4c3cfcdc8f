"""The create path's speed work (issue 26): what it must not do, and that it changes no byte.

``znippy-sql create`` must not import pandas (pyarrow's ``pa.array(list)``/``pa.table`` and
``Array.to_numpy`` would, ~0.5-1 s a process): the index and ``__meta__`` are built from
buffers (``format/build.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import text_bytes


def _tree(root: Path, files: int = 60) -> None:
    for i in range(files):
        d = root / f"d{i % 4}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.txt").write_bytes(text_bytes(500 + 97 * i, seed=i))
    (root / "empty.txt").write_bytes(b"")


def test_cli_create_does_not_import_pandas(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tree(src)
    code = ("import sys\nfrom znippy_sql.cli import main\n"
            f"rc = main(['create', {str(src)!r}, '-o', {str(tmp_path / 'a.znippy')!r}, "
            "'--meta', 'k=v'])\n"
            "print(rc, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"


def test_cli_ls_info_extract_do_not_import_pandas(tmp_path: Path) -> None:
    """The commands a user runs on an archive right after ``create``: ``ls``, ``info`` (dedup
    figures: ``write/dedup.distinct_blob_bytes``) and ``extract``."""
    src = tmp_path / "src"
    _tree(src)
    archive = tmp_path / "a.znippy"
    from znippy_sql.cli import main
    assert main(["create", str(src), "-o", str(archive)]) == 0
    for argv in (["ls", str(archive)], ["info", str(archive)],
                 ["extract", str(archive), "-o", str(tmp_path / "out")]):
        code = ("import sys\nfrom znippy_sql.cli import main\n"
                f"rc = main({argv!r})\n"
                "print(rc, 'pandas' in sys.modules)\n")
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                             text=True).stdout
        assert out.strip().splitlines()[-1] == "0 False", argv


def _odd_tree(root: Path) -> None:
    """Small and big files, an empty one, a skip-listed name, repeated content, a symbolic
    link, an empty directory and a name that is not UTF-8."""
    _tree(root)
    (root / "big.txt").write_bytes(text_bytes(600_000, seed=99))
    (root / "d0" / "again.txt").write_bytes(text_bytes(500, seed=0))  # = d0/s0/f000.txt
    (root / "pic.png").write_bytes(bytes(range(256)) * 40)
    (root / "link").symlink_to("d0/again.txt")
    (root / "hollow").mkdir()
    os.makedirs(os.fsencode(root) + b"/raw\xff", exist_ok=True)
    with open(os.fsencode(root) + b"/raw\xff/x\xfe.txt", "wb") as fh:
        fh.write(text_bytes(3000, seed=5))


_WRITE = """
import sys
from znippy_sql.write import readahead
readahead.allow(sys.argv[3] == "on")
started = []
real_start = readahead.ReadAhead.start
readahead.ReadAhead.start = lambda self: started.append(real_start(self)) or started[-1]
from znippy_sql import write_archive
r = write_archive(sys.argv[2], sys.argv[1], posix=True, fsync=False, skip_unsafe=True,
                  workers=int(sys.argv[4]))
print(r.files, r.packs, started)
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_read_ahead_child_changes_no_byte(tmp_path: Path, workers: int) -> None:
    """The archive a forked read-ahead child helps write is the one the caller alone writes."""
    src = tmp_path / "src"
    _odd_tree(src)
    out = {}
    for how in ("on", "off"):
        out[how] = tmp_path / f"{how}.znippy"
        got = subprocess.run([sys.executable, "-c", _WRITE, str(src), str(out[how]), how,
                              str(workers)], check=True, capture_output=True, text=True)
        files, packs, started = got.stdout.split(maxsplit=2)
        assert packs != "0"
        assert started.strip() == ("[True]" if how == "on" else "[False]")
    assert out["on"].read_bytes() == out["off"].read_bytes()


_ITER = """
import os, sys, pickle
from znippy_sql.format import b3
from znippy_sql.write import readahead
from znippy_sql.write.readahead import ReadAhead
from znippy_sql.write.source import Walk
assert not readahead.usable()  # a library process does not fork unless it asks
readahead.allow()
if sys.argv[2] == "small":  # a ring smaller than the files read: it wraps, the reader waits
    readahead._RING = 1 << 17
wants = lambda path, size: size < 100_000
ahead = ReadAhead(Walk(sys.argv[1], posix=True), wants)
assert ahead.start()
got = []
for e in ahead:
    taken = ahead.take(os.fspath(e.file)) if e.file is not None else None
    if taken is not None:
        data, digest = taken
        assert bytes(data) == open(e.file, "rb").read()
        assert digest == b3.blake3(bytes(data)).digest()
    got.append((e.relative_path, e.data, e.file, e.known_size, e.mode, e.mtime_ns, e.link,
                taken is not None))
ahead.close()
walk = Walk(sys.argv[1], posix=True)
want = [(e.relative_path, e.data, e.file, e.known_size, e.mode, e.mtime_ns, e.link,
         bool(e.file is not None and e.known_size and e.known_size < 100_000)) for e in walk]
assert got == want, (got, want)
assert (ahead.walk.directories, ahead.walk.links_left_out) == (walk.directories,
                                                               walk.links_left_out)
try:
    os.waitpid(-1, os.WNOHANG)
    print("child left")
except ChildProcessError:
    print("reaped")
"""


@pytest.mark.parametrize("ring", ["default", "small"])
def test_read_ahead_yields_the_walk_and_the_bytes(tmp_path: Path, ring: str) -> None:
    src = tmp_path / "src"
    _odd_tree(src)
    if ring == "small":
        for i in range(40):
            (src / f"more{i:02d}.txt").write_bytes(text_bytes(20_000 + i, seed=200 + i))
    got = subprocess.run([sys.executable, "-c", _ITER, str(src), ring], check=True,
                         capture_output=True, text=True)
    assert got.stdout.strip() == "reaped"


def test_read_ahead_child_is_reaped_when_the_writer_fails(tmp_path: Path) -> None:
    """A name the format refuses stops the write mid-walk: one error line, the child gone."""
    src = tmp_path / "src"
    _tree(src)
    (src / "d1" / "bad\nname.txt").write_bytes(b"x" * 100)
    code = ("import os, sys\nfrom znippy_sql.cli import main\n"
            f"rc = main(['create', {str(src)!r}, '-o', {str(tmp_path / 'a.znippy')!r}])\n"
            "try:\n    os.waitpid(-1, os.WNOHANG); print(rc, 'child left')\n"
            "except ChildProcessError:\n    print(rc, 'reaped')\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.stdout.strip() == "2 reaped"
    assert "newline" in got.stderr or "name" in got.stderr
    assert not (tmp_path / "a.znippy").exists()


def test_read_ahead_leaves_a_file_that_changed_size_to_the_writer(tmp_path: Path) -> None:
    from znippy_sql.write import readahead

    f = tmp_path / "f.txt"
    f.write_bytes(b"abc")
    spare = bytearray(1)
    place = bytearray(3)
    assert readahead._read_into(str(f), memoryview(place), spare) and place == b"abc"
    for size in (2, 4):  # grew or shrank since the walk: the writer reads it
        assert not readahead._read_into(str(f), memoryview(bytearray(size)), spare)
    assert not readahead._read_into(str(tmp_path / "gone"), memoryview(place), spare)


def test_read_ahead_child_failure_is_our_error(tmp_path: Path) -> None:
    """A walker child that fails tells the caller through its pipe: a ``ZnippyError`` naming
    the directory and the child's exception, and both children are reaped."""
    src = tmp_path / "src"
    _tree(src, files=8)
    code = f"""
import os
from znippy_sql.errors import ZnippyError
from znippy_sql.write import readahead
from znippy_sql.write.source import Walk
readahead.allow(True)
def wants(path, size):
    raise RuntimeError("no wants today")
ahead = readahead.ReadAhead(Walk({str(src)!r}), wants)
assert ahead.start()
pids = list(ahead.pids)
try:
    list(ahead)
except ZnippyError as exc:
    print(type(exc).__name__, exc)
finally:
    ahead.close()
for pid in pids:
    try:
        os.waitpid(pid, os.WNOHANG)
        print("not reaped", pid)
    except ChildProcessError:
        pass
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout.strip()
    assert out.startswith("ZnippyError") and "RuntimeError: no wants today" in out, out
    assert str(src) in out and "not reaped" not in out
