"""``git import`` in the compiled core (issue 33, item 4): Python work per object, the stored
bitmaps' bytes, a damaged pack, Ctrl-C."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _calls import python_calls

from znippy_sql import corelib
from znippy_sql.errors import PackError
from znippy_sql.git.importer import import_repository
from znippy_sql.git.roaring import BitMap

COMMITS = 4000


def _fast_import(path: Path, commits: int, files: int = 4) -> None:
    """A repository of ``commits`` commits, each changing ``files`` files in 20 folders (about
    10 objects a commit: blobs, the root tree, the changed folders' trees), written by ``git
    fast-import`` (its object ids do not depend on the machine)."""
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(path)], check=True)
    rnd = random.Random(7)
    out = []
    for i in range(commits):
        out.append(b"commit refs/heads/main\n")
        out.append(b"committer C <c@x> %d +0000\n" % (1_600_000_000 + 60 * i))
        out.append(b"data 2\nc\n")
        for _ in range(files):
            name = b"d%d/f%d.txt" % (rnd.randrange(20), rnd.randrange(50))
            body = b"%d %d\n" % (i, rnd.randrange(10**9)) * 8
            out.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name, len(body), body))
        out.append(b"\n")
        if i % 500 == 499:
            out.append(b"reset refs/tags/t%d\nfrom refs/heads/main\n\n" % i)
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=b"".join(out),
                   check=True)
    subprocess.run(["git", "-C", str(path), "repack", "-a", "-d", "-q"], check=True)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("native") / "big.git"
    _fast_import(path, COMMITS)
    return path


@pytest.fixture(scope="module")
def bigger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack the core parses in about 0.3 s on the 2-core machine (160,000 objects): long
    enough to interrupt on a machine several times faster."""
    path = tmp_path_factory.mktemp("native") / "bigger.git"
    _fast_import(path, 4 * COMMITS)
    return path


def _objects(repo: Path) -> int:
    got = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects",
                          "--batch-check=%(objectname)"], check=True, capture_output=True)
    return len(got.stdout.split())


def test_git_import_makes_at_most_005_python_calls_an_object(big: Path, tmp_path: Path
                                                               ) -> None:
    """Counted, not timed (issue 33): Python function calls (``sys.setprofile`` and
    ``threading.setprofile``, the import's own threads included) over ``import_repository``
    of a 40,000-object history, after one import of a small repository (so no module is
    imported inside the count)."""
    small = tmp_path / "small.git"
    _fast_import(small, 5)
    import_repository(small, tmp_path / "small.znippy")
    report, calls = python_calls(lambda: import_repository(big, tmp_path / "big.znippy"))
    n = _objects(big)
    assert report.objects == n > 35_000
    per_object = sum(calls.values()) / n
    assert per_object <= 0.05, (per_object, calls.most_common(10))


def test_stored_bitmaps_are_the_bytes_pyroaring_writes() -> None:
    """The core writes a stored bitmap as ``BitMap(values)`` after ``run_optimize()``
    serializes (Roaring's portable format): arrays, bitsets and runs, one chunk or many."""
    rnd = random.Random(3)
    cases: list[list[tuple[int, int]]] = [[], [(0, 1)], [(1, 4)], [(0, 4096)], [(0, 4097)],
                                          [(65530, 65545)], [(0, 200_000)]]
    for _ in range(60):
        runs, at = [], rnd.randrange(3)
        for _k in range(rnd.randrange(1, 40)):
            at += rnd.choice([1, 2, 3, 50, 5000, 70_000])
            width = rnd.choice([1, 1, 2, 3, 7, 300, 9000])
            runs.append((at, at + width))
            at += width
        cases.append(runs)
    for runs in cases:
        want = BitMap([v for a, b in runs for v in range(a, b)])
        want.run_optimize()
        assert corelib.git_serialize_runs(runs) == want.serialize(), runs[:5]


def test_a_damaged_pack_is_a_pack_error_naming_it(big: Path, tmp_path: Path) -> None:
    """One byte changed in the middle of the pack: its SHA-1 differs from its trailer, so the
    core parses it whole and names the damaged object; nothing is left under the output."""
    bad = tmp_path / "bad.git"
    subprocess.run(["cp", "-r", str(big), str(bad)], check=True)
    (pack,) = (bad / "objects" / "pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0x55
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    out = tmp_path / "bad.znippy"
    with pytest.raises(PackError, match=rf"pack {pack}: (object \d+ at offset \d+|trailing)"):
        import_repository(bad, out)
    assert not out.exists() and os.listdir(tmp_path) == ["bad.git"]


def test_ctrl_c_stops_the_core_within_100_ms(bigger: Path, tmp_path: Path) -> None:
    """SIGINT while the core parses a pack whole (the GIL released): the core checks signals
    every 20 ms, so KeyboardInterrupt arrives soon after; an import interrupted the same way
    leaves nothing under the output's name."""
    (pack,) = (bigger / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes()
    start = time.perf_counter()
    corelib.git_index_pack(data, None, name=str(pack))
    whole = time.perf_counter() - start
    assert whole > 0.1                                 # long enough to interrupt
    sent: list[float] = []

    def interrupt() -> None:
        time.sleep(whole / 4)
        sent.append(time.perf_counter())
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    late = []
    for _round in range(3):
        sent.clear()
        threading.Thread(target=interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            corelib.git_index_pack(data, None, name=str(pack))
        late.append(time.perf_counter() - sent[0])
    assert min(late) < 0.1, late                       # a busy machine delays one round

    out = tmp_path / "x.znippy"
    threading.Thread(target=interrupt).start()
    with pytest.raises(KeyboardInterrupt):
        import_repository(bigger, out)
    time.sleep(0.2)                                    # the staging thread has finished
    assert not out.exists() and os.listdir(tmp_path) == []


def test_packs_are_copied_in_the_kernel_and_by_read_and_write_where_it_refuses(
        big: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The repository's pack goes into the staging file by ``copy_file_range`` (not through
    this process); a kernel that refuses (EXDEV: another file system) gets the same archive
    through reads and writes."""
    pack_bytes = sum(p.stat().st_size for p in (big / "objects" / "pack").glob("*.pack"))
    copied: list[int] = []
    real = os.copy_file_range

    def spy(src: int, dst: int, count: int, *rest: Any) -> int:
        n = real(src, dst, count, *rest)
        copied.append(n)
        return n

    monkeypatch.setattr(os, "copy_file_range", spy)
    import_repository(big, tmp_path / "kernel.znippy")
    assert sum(copied) == pack_bytes

    def refuse(*args: Any) -> int:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "copy_file_range", refuse)
    import_repository(big, tmp_path / "plain.znippy")
    assert (tmp_path / "plain.znippy").read_bytes() == (tmp_path / "kernel.znippy").read_bytes()


def test_git_import_imports_only_what_it_uses(big: Path, tmp_path: Path) -> None:
    """The CLI's ``git import`` parses its command alone (not the core commands' modules) and
    imports neither the codecs, the push path's writers, the remote stores, dulwich,
    OpenSSL's hashlib, pyarrow nor numpy: none of them is used (the core writes the tail's
    Arrow IPC streams, ``native/src/ipcw.rs``)."""
    code = ("import sys\nfrom znippy_sql.cli import main\n"
            f"code = main(['git', 'import', {str(big)!r}, '-o', {str(tmp_path / 'o.znippy')!r}])\n"
            "print(' '.join(sorted(sys.modules)))\nsys.exit(code)\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    modules = set(got.stdout.split("\n")[-2].split())
    unused = {"znippy_sql.cli.core", "znippy_sql.format.codec", "zstandard", "openzl",
              "znippy_sql.git.writers", "znippy_sql.remote", "znippy_sql.interop.delta",
              "dulwich", "hashlib", "pandas", "duckdb", "pyarrow", "numpy"}
    assert not unused & modules
    assert "znippy_sql.git.importer" in modules


def test_pyarrow_reads_every_stream_the_core_writes(big: Path, tmp_path: Path) -> None:
    """Every Arrow IPC stream of an imported archive's tail (the data sub-index, the lookup,
    the git graph, reach and refs, ``__meta__``, the manifest), read by pyarrow straight
    from its byte range and validated in full, has the schema the readers expect."""
    import pyarrow as pa

    from znippy_sql import open_archive
    from znippy_sql.format.schema import BASE_SCHEMA, MANIFEST_SCHEMA, META_SCHEMA
    from znippy_sql.git.refs import refs_schema

    out = tmp_path / "a.znippy"
    import_repository(big, out)
    raw = out.read_bytes()
    manifest_at = int.from_bytes(raw[-8:], "little")
    manifest = pa.ipc.open_stream(raw[manifest_at:-16]).read_all()
    manifest.validate(full=True)
    assert manifest.schema.remove_metadata().equals(MANIFEST_SCHEMA)
    oid = pa.binary(20)
    expected = {
        "": BASE_SCHEMA, "__lookup__": BASE_SCHEMA, "__meta__": META_SCHEMA,
        "__gunnar_refs__": refs_schema(),
        "__gunnar_reach__": pa.schema([pa.field("oid", oid, nullable=False),
                                       pa.field("bitmap", pa.binary(), nullable=False)]),
        "__gunnar_graph__": pa.schema([
            pa.field("oid", oid, nullable=False),
            pa.field("parents", pa.list_(pa.field("item", oid, nullable=False)),
                     nullable=False),
            pa.field("tree", oid, nullable=False),
            pa.field("generation", pa.uint32(), nullable=False),
            pa.field("commit_time", pa.int64(), nullable=False),
            pa.field("corrected_date", pa.int64(), nullable=False),
            pa.field("position", pa.uint32(), nullable=False),
            pa.field("block", pa.uint32(), nullable=False)])}
    rows = manifest.to_pylist()
    assert [r["module_name"] for r in rows] == list(expected)[:2] + [
        "__trie__", "__gunnar_oid__", "__gunnar_graph__", "__gunnar_reach__",
        "__gunnar_refs__", "__meta__"]
    with open_archive(out) as a:
        for r in rows:
            if r["module_name"] not in expected:
                continue
            start = r["index_offset"]
            assert start % 64 == 0
            table = pa.ipc.open_stream(raw[start:start + r["index_len"]]).read_all()
            table.validate(full=True)
            assert table.schema.remove_metadata().equals(expected[r["module_name"]])
            assert table.num_rows == r["row_count"]
            mine = (a.section(r["module_name"]) if r["module_name"]
                    else a.group_table(a.manifest_rows[0].key))
            assert table.equals(mine)
        graph = a.section("__gunnar_graph__")
        assert graph.schema.metadata == {b"znippy.git.absent_objects": b"0"}
        assert graph.num_rows == COMMITS
        assert a.verify().problems == []


def test_a_tail_that_cannot_be_written_is_an_error_naming_the_archive(tmp_path: Path) -> None:
    """The core's tail writer fails as a ``ZnippyError`` naming the archive, never a panic:
    a file opened read-only, and no file at all."""
    from znippy_sql.errors import ZnippyError

    target = tmp_path / "ro.znippy"
    target.write_bytes(b"")
    fd = os.open(target, os.O_RDONLY)
    try:
        for bad in (fd, -1):
            with pytest.raises(ZnippyError) as err:
                corelib.git_seal_tail(str(target), bad, 0, [], None, b"", 0, [])
            assert err.value.path == str(target)
    finally:
        os.close(fd)
    assert target.read_bytes() == b""
