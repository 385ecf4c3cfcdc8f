"""A writer SIGKILLed mid-write leaves no lasting staging file and no half archive (issue 35).

Each writer of a whole archive that is not the one-shot writer (``compact``, the store's
``seal``, ``git import`` and the git seal; the one-shot writer's own test is in
tests/test_hardening_write.py) is run in a child process that SIGKILLs itself when it gets
to the tail: its staging sibling then holds the blobs and no tail, exactly what a kill during
the write leaves. The final name must still hold the old archive, byte for byte; the next run
of the same writer must leave no staging file behind (the dead process's sibling removed) and
put the new complete archive under the name: byte for byte what the same writer writes to a
fresh name from the same input.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql import Entry, append_archive, open_archive, write_archive

#: the child: ``kill`` makes the writer SIGKILL itself where it would write the tail (after
#: the blob bytes went to its staging file); then the writer's statement from argv runs
_CHILD = """
import importlib, os, signal, sys

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[1] == "kill":
    for name in ("znippy_sql.write.compact", "znippy_sql.store.seal"):
        importlib.import_module(name).write_tail = die
    importlib.import_module("znippy_sql.corelib").git_seal_tail = die  # the git seal's tail
exec(sys.argv[2])
"""

_COMPACT = "from znippy_sql.write.compact import compact_archive; compact_archive({out!r})"
_STORE_SEAL = ("from znippy_sql.store import seal; "
               "seal({sidecar!r}, {warehouse!r}, 'k', {out!r})")
_GIT_IMPORT = ("from znippy_sql.git.importer import import_repository; "
               "import_repository({repo!r}, {out!r})")
_GIT_SEAL = ("from znippy_sql.git.push import Receiver\n"
             "with Receiver({blobs!r}) as rx: rx.seal({out!r})")


def _run(statement: str, *, kill: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", _CHILD, "kill" if kill else "run", statement],
                          capture_output=True, text=True, timeout=300)


def _kill_then_rerun(out: Path, statement: str, fields: dict[str, str], reference: Path,
                     ref_fields: dict[str, str]) -> None:
    """The writer killed mid-write, then run again; ``reference``: the same writer's output
    for a fresh name (``ref_fields``), the bytes the new archive must have."""
    folder = out.parent
    before = set(os.listdir(folder))
    old = out.read_bytes()
    got = _run(statement.format(out=str(out), **fields), kill=True)
    assert got.returncode == -signal.SIGKILL, got.stderr
    left = set(os.listdir(folder)) - before
    assert len(left) == 1, left  # its staging sibling, with the blob bytes in it
    assert os.path.getsize(folder / left.pop()) > 0
    assert out.read_bytes() == old  # the old archive, whole
    got = _run(statement.format(out=str(reference), **ref_fields), kill=False)
    assert got.returncode == 0, got.stderr
    got = _run(statement.format(out=str(out), **fields), kill=False)
    assert got.returncode == 0, got.stderr
    assert set(os.listdir(folder)) == before  # the dead writer's staging file is gone
    new = out.read_bytes()
    assert new == reference.read_bytes() and new != old
    with open_archive(out) as archive:
        assert archive.verify().ok


def test_compact(tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    write_archive(out, _entries({"f.txt": b"one\n" * 500, "g.txt": b"two\n" * 500}),
                  fsync=False)
    append_archive(out, _entries({"f.txt": b"uno\n" * 700}), fsync=False)  # dead bytes
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    shutil.copyfile(out, ref_dir / "a.znippy")
    # the reference compacts a copy of the same old archive
    _kill_then_rerun(out, _COMPACT, {}, ref_dir / "a.znippy", {})


def test_store_seal(tmp_path: Path) -> None:
    from znippy_sql.store import open_store, seal

    sidecar, warehouse = tmp_path / "blobs.znippy", tmp_path / "wh"
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"alpha\n" * 300)
    with open_store(sidecar, warehouse, "k") as store:
        store.add(src)
    out = tmp_path / "out" / "sealed.znippy"
    out.parent.mkdir()
    seal(sidecar, warehouse, "k", out)  # the old archive
    (src / "b.txt").write_bytes(b"beta\n" * 300)
    with open_store(sidecar, warehouse, "k") as store:
        store.add(src)
    fields = {"sidecar": str(sidecar), "warehouse": str(warehouse)}
    _kill_then_rerun(out, _STORE_SEAL, fields, tmp_path / "ref.znippy", fields)


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, check=True,
                          capture_output=True).stdout


def _repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("the git command is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    _commit(repo, "a.txt", b"alpha\n" * 200)
    return repo


def _commit(repo: Path, name: str, data: bytes) -> None:
    (repo / name).write_bytes(data)
    _git(repo, "add", name)
    _git(repo, "commit", "-q", "-m", name)


def test_git_import(tmp_path: Path) -> None:
    from znippy_sql.git.importer import import_repository

    repo = _repo(tmp_path)
    out = tmp_path / "out" / "git.znippy"
    out.parent.mkdir()
    import_repository(repo, out)  # the old archive
    _commit(repo, "b.txt", b"beta\n" * 200)
    fields = {"repo": str(repo)}
    _kill_then_rerun(out, _GIT_IMPORT, fields, tmp_path / "ref.znippy", fields)


def test_git_seal(tmp_path: Path) -> None:
    from znippy_sql.git.push import Receiver

    repo = _repo(tmp_path)
    blobs = tmp_path / "objects.pack"
    out = tmp_path / "out" / "git.znippy"
    out.parent.mkdir()
    with Receiver(blobs) as rx:
        rx.push(_git(repo, "pack-objects", "--revs", "--stdout", "-q", stdin=b"HEAD\n"))
        rx.seal(out)  # the old archive
    _commit(repo, "b.txt", b"beta\n" * 200)
    with Receiver(blobs) as rx:
        rx.push(_git(repo, "pack-objects", "--revs", "--stdout", "-q",
                     stdin=b"HEAD\n^HEAD~1\n"))
    fields = {"blobs": str(blobs)}
    _kill_then_rerun(out, _GIT_SEAL, fields, tmp_path / "ref.znippy", fields)


def _entries(files: dict[str, bytes]) -> list[Entry]:
    return [Entry(path, data=data) for path, data in files.items()]
