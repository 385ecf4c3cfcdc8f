"""Every command under the failures a user meets: no traceback, the documented exit code, one
line of message, nothing under the final name (issue 16, items 6 and 7).

Real failures, made for real: a full disk is a small tmpfs mounted for the test, a read-only
destination a read-only bind mount (both need root; without it, a full disk is the
``RLIMIT_FSIZE`` of the child process, which fails a write with EFBIG, and the rows that need
a read-only mount or a full disk for many small files are skipped). Ctrl-C is a real SIGINT
the child sends itself at its N-th write to a file (``RUNNER``).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from znippy_sql import open_archive, write_archive
from znippy_sql.format import rollback

#: the CLI with a SIGINT at the N-th write to a file ($ZNIPPY_TEST_SIGINT_AT), else as it is
RUNNER = r"""
import os, signal, sys
n = int(os.environ.get("ZNIPPY_TEST_SIGINT_AT", "0"))
if n:
    count = [0]
    def wrap(real):
        def call(fd, *args, **kw):
            if fd > 2:
                count[0] += 1
                if count[0] == n:
                    os.kill(os.getpid(), signal.SIGINT)
            return real(fd, *args, **kw)
        return call
    os.write, os.pwrite = wrap(os.write), wrap(os.pwrite)
if n and sys.argv[1] == "extract":  # the core writes the files (native/src/extract/): the
    # archive is read as a source that is not a plain local file, so each unit of 2 files asks
    # Python for its blobs (5 ms each); Ctrl-C comes at the n-th unit
    import time
    import znippy_sql.read.extract as _x, znippy_sql.read.many as _m, znippy_sql.read.tail as _t
    class _Source(_t.MappedSource):
        pass
    _t.MappedSource, _x.UNIT_FILES, _fetch, units = _Source, 2, _m.fetch_blobs, [0]
    def _counted(*args):
        units[0] += 1
        if units[0] == n:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.005)
        return _fetch(*args)
    _m.fetch_blobs = _counted
    import znippy_sql.cli.fast as _f  # the Python extract, not the CLI's native fast path
    _f._extract = lambda *args: None
from znippy_sql.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _mount(*args: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@dataclass
class Disks:
    root: Path
    full: Path          # a file system with ~256 KiB free
    full_kind: str      # "tmpfs" or "rlimit"
    ro: Path | None     # a read-only view of ``ro_src`` (None: no mount possible)
    ro_src: Path

    def child_limits(self) -> Callable[[], None] | None:
        if self.full_kind != "rlimit":
            return None

        def limit() -> None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
        return limit


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[Disks]:
    full = tmp_path / "full"
    full.mkdir()
    ro_src = tmp_path / "ro_src"
    ro_src.mkdir()
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted: list[Path] = []
    kind = "tmpfs" if _mount("-t", "tmpfs", "-o", "size=256k", "tmpfs", str(full)) else "rlimit"
    if kind == "tmpfs":
        mounted.append(full)
    have_ro = _mount("--bind", "-o", "ro", str(ro_src), str(ro))
    if have_ro:
        mounted.append(ro)
    try:
        yield Disks(tmp_path, full, kind, ro if have_ro else None, ro_src)
    finally:
        for m in reversed(mounted):
            subprocess.run(["umount", "-l", str(m)], capture_output=True)


def _source(root: Path, n: int = 40, size: int = 20_000) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"d{i % 4}").mkdir(exist_ok=True)
        (root / f"d{i % 4}" / f"f{i:03}.bin").write_bytes(os.urandom(size))
    return root


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def run(disks: Disks, argv: list[str], *, sigint_at: int = 0, limited: bool = False
        ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, ZNIPPY_TEST_SIGINT_AT=str(sigint_at))
    return subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True,
                          text=True, env=env, timeout=120, cwd=disks.root,
                          preexec_fn=disks.child_limits() if limited else None)


def check(done: subprocess.CompletedProcess[str], rc: int, *words: str) -> None:
    """The documented exit code, one line on stderr naming the cause, no traceback."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == rc, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one line: grouped, stopped at the first
    for word in words:
        assert word in lines[0], (word, lines[0])


def _no_staging(directory: Path) -> None:
    left = [p.name for p in directory.iterdir() if "znippy-staging" in p.name
            or p.name.endswith(".znippy-journal") or "znippy-part" in p.name]
    assert left == []


FULL_WORDS = {"tmpfs": "No space left on device", "rlimit": "File too large"}


# -- create -------------------------------------------------------------------------------------
def test_create_failures(disks: Disks) -> None:
    src = _source(disks.root / "src")
    out = disks.root / "missing" / "dir" / "x.znippy"
    check(run(disks, ["create", str(src), "-o", str(out)]), 2, "does not exist")
    assert not out.parent.exists()
    (disks.root / "adir").mkdir()
    check(run(disks, ["create", str(src), "-o", str(disks.root / "adir")]), 2,
          "is a directory")
    assert list((disks.root / "adir").iterdir()) == []
    done = run(disks, ["create", str(src), "-o", "x.znippy", "--level", "99"])
    assert done.returncode == 2 and "Traceback" not in done.stderr  # argparse: usage + one line
    assert done.stderr.splitlines()[-1].endswith(
        "argument --level: 99 is out of range: levels go from 1 to 22")
    assert not (disks.root / "x.znippy").exists()
    # a full disk: one line, nothing under the name, no staging file left
    full_out = disks.full / "x.znippy"
    check(run(disks, ["create", str(src), "-o", str(full_out), "--level", "1"], limited=True),
          2, FULL_WORDS[disks.full_kind], "nothing was written")
    assert not full_out.exists()
    _no_staging(disks.full)
    # Ctrl-C at the first blob write and at a later one
    for n in (1, 3):
        check(run(disks, ["create", str(src), "-o", "c.znippy", "--block-size", "8K"],
                  sigint_at=n), 130, "interrupted; nothing was written under c.znippy")
        assert not (disks.root / "c.znippy").exists()
        _no_staging(disks.root)


def test_create_onto_a_read_only_file_system(disks: Disks) -> None:
    if disks.ro is None:
        pytest.skip("a read-only bind mount needs root, which this run lacks: EROFS "
                    "cannot be produced otherwise")
    src = _source(disks.root / "src", n=3)
    check(run(disks, ["create", str(src), "-o", str(disks.ro / "x.znippy")]), 2,
          "Read-only file system")
    assert list(disks.ro_src.iterdir()) == []


# -- extract ------------------------------------------------------------------------------------
@pytest.fixture
def archive(disks: Disks) -> tuple[Path, dict[str, bytes]]:
    src = _source(disks.root / "src")
    out = disks.root / "a.znippy"
    write_archive(out, src)
    return out, _tree(src)


def _complete_only(dest: Path, files: dict[str, bytes]) -> int:
    """Every file under dest is whole and right; how many there are."""
    got = _tree(dest) if dest.exists() else {}
    for path, data in got.items():
        assert files[path] == data, f"{path} is not the archived file"
    return len(got)


def test_extract_failures(disks: Disks, archive) -> None:
    arc, files = archive
    (disks.root / "afile").write_bytes(b"x")
    check(run(disks, ["extract", str(arc), "-o", str(disks.root / "afile")]), 2,
          "afile", "cannot create the destination")
    check(run(disks, ["extract", str(arc), "missing/member", "-o", "out"]), 2,
          "'missing/member': Not found in archive")
    assert not (disks.root / "out").exists()
    for n in (2, 9):
        dest = disks.root / f"int{n}"
        done = run(disks, ["extract", str(arc), "-o", str(dest)], sigint_at=n)
        check(done, 130, "interrupted;", "files were extracted under", "no partly written")
        assert _complete_only(dest, files) < len(files)


def test_extract_onto_a_full_disk_stops_at_the_first_failure(disks: Disks, archive) -> None:
    if disks.full_kind != "tmpfs":
        pytest.skip("a full disk for many small files needs a tmpfs (root)")
    arc, files = archive
    dest = disks.full / "out"
    done = run(disks, ["extract", str(arc), "-o", str(dest)])
    check(done, 2, "stopped at the first 'cannot write: No space left on device'",
          "were extracted before it", "no partly written file is left")
    n = _complete_only(dest, files)
    assert 0 < n < len(files) and f"{n:,} files" in done.stderr
    _no_staging(dest / "d0")


def test_extract_onto_a_read_only_file_system(disks: Disks, archive) -> None:
    if disks.ro is None:
        pytest.skip("a read-only bind mount needs root, which this run lacks: EROFS "
                    "cannot be produced otherwise")
    arc, _ = archive
    (disks.ro_src / "out").mkdir()
    check(run(disks, ["extract", str(arc), "-o", str(disks.ro / "out")]), 2,
          "Read-only file system")
    assert list((disks.ro_src / "out").iterdir()) == []


# -- append, compact ----------------------------------------------------------------------------
def test_append_and_compact_failures(disks: Disks, archive) -> None:
    arc, _ = archive
    more = _source(disks.root / "more", n=20)
    before = arc.read_bytes()
    for n in (1, 4):
        check(run(disks, ["append", str(arc), str(more)], sigint_at=n), 130,
              "interrupted;", "rolled back")
        assert arc.read_bytes() == before
        assert not os.path.exists(rollback.journal_path(arc))
    # a full disk under the archive
    small = disks.full / "s.znippy"
    write_archive(small, _source(disks.root / "small", n=2, size=1000))
    small_before = small.read_bytes()
    check(run(disks, ["append", str(small), str(more)], limited=True), 2,
          FULL_WORDS[disks.full_kind], "rolled back")
    assert small.read_bytes() == small_before
    with open_archive(small) as a:
        assert a.verify().ok
    _no_staging(disks.full)
    if disks.ro is not None:
        shutil.copyfile(arc, disks.ro_src / "r.znippy")
        check(run(disks, ["append", str(disks.ro / "r.znippy"), str(more)]), 2,
              "Read-only file system")
        check(run(disks, ["compact", str(disks.ro / "r.znippy")]), 2, "Read-only file system")
        assert (disks.ro_src / "r.znippy").read_bytes() == before


# -- the store ----------------------------------------------------------------------------------
def test_store_failures(disks: Disks) -> None:
    src = _source(disks.root / "src", n=20)
    store = ["--sidecar", str(disks.full / "blobs.znippy"), "--warehouse",
             str(disks.root / "wh"), "--namespace", "s"]
    check(run(disks, ["store", "add", *store, str(disks.root / "nope")]), 2,
          "nope: source not found")
    check(run(disks, ["store", "add", *store, str(src)], limited=True), 2,
          FULL_WORDS[disks.full_kind])
    assert os.path.getsize(disks.full / "blobs.znippy") == 0  # cut back: nothing committed
    ok = ["--sidecar", str(disks.root / "b.znippy"), "--warehouse", str(disks.root / "wh2"),
          "--namespace", "s"]
    assert run(disks, ["store", "add", *ok, str(src)]).returncode == 0
    (disks.root / "adir").mkdir()
    check(run(disks, ["store", "seal", *ok, "-o", str(disks.root / "adir")]), 2,
          "is a directory")
    check(run(disks, ["store", "seal", *ok, "-o", str(disks.full / "sealed.znippy")],
              limited=True), 2, FULL_WORDS[disks.full_kind])
    assert not (disks.full / "sealed.znippy").exists()
    _no_staging(disks.full)


# -- readers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["ls", "gone.znippy"], ["info", "gone.znippy"],
                                  ["verify", "gone.znippy"], ["cat", "gone.znippy", "a"],
                                  ["extract", "gone.znippy", "-o", "x"],
                                  ["compact", "gone.znippy"],
                                  ["append", "gone.znippy", "."],
                                  ["sql", "gone.znippy", "SELECT 1"]])
def test_a_missing_archive(disks: Disks, argv: list[str]) -> None:
    check(run(disks, argv), 2, "gone.znippy")
    assert not (disks.root / "x").exists()
