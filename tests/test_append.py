"""Append / resume: byte identity with a one-shot write, replacement, untouched blobs, crash safety."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import self_signed_signer, text_bytes

from znippy_sql import Entry, LockError, ZnippyError, open_archive, write_archive
from znippy_sql.format import rollback
from znippy_sql.write import append as ap
from znippy_sql.cli import main as cli_main

BLOCK = 4096  # small chunks so files span several rows


def text(n: int, seed: int) -> bytes:
    return text_bytes(n, seed)


def batch(prefix: str, count: int, seed: int) -> list[Entry]:
    rng = random.Random(seed)
    out = [Entry(f"{prefix}/f{i:03d}.txt", data=text(rng.randint(0, 3 * BLOCK), seed * 1000 + i))
           for i in range(count)]
    out.append(Entry(f"{prefix}/empty", data=b""))
    out.append(Entry(f"{prefix}/noise.bin", data=rng.randbytes(BLOCK + 17)))
    out.append(Entry(f"{prefix}/already.gz", data=text(500, seed)))
    return out


def typed(prefix: str) -> list[Entry]:
    """A second group (repo "r2") and a maven group with the module's columns."""
    return [
        Entry(f"{prefix}/other.txt", data=text(900, 7), repo="r2"),
        Entry(f"org/{prefix}/lib/1.0/lib-1.0.pom", data=b"<project><groupId>org</groupId>"
              b"<artifactId>lib</artifactId><version>1.0</version></project>", pkg_type="maven"),
    ]


def sha(path: Path, end: int | None = None) -> str:
    data = path.read_bytes()
    return hashlib.sha256(data if end is None else data[:end]).hexdigest()


def paths_of(path: Path) -> set[str]:
    with open_archive(path) as arc:
        return set(arc.lookup.column("relative_path").to_pylist())


def test_append_equals_one_shot(tmp_path: Path) -> None:
    a = batch("a", 12, 1) + typed("a")
    b = batch("b", 9, 2) + typed("b")
    one = tmp_path / "one.znippy"
    grown = tmp_path / "grown.znippy"
    write_archive(one, a + b, block_size=BLOCK, workers=1)
    write_archive(grown, a, block_size=BLOCK, workers=1)
    with open_archive(grown) as arc:
        blob_end = arc.blob_end
    before = sha(grown, blob_end)
    report = ap.append_archive(grown, b, workers=1)  # options come from the archive itself
    assert grown.read_bytes() == one.read_bytes()
    assert sha(grown, blob_end) == before  # live blob bytes untouched
    assert report.files_added == len(b) and report.rows_replaced == 0 and report.dead_bytes == 0
    assert report.old_blob_end == blob_end and report.blob_end > blob_end
    assert report.archive_bytes == grown.stat().st_size
    assert not os.path.exists(rollback.journal_path(grown))
    with open_archive(grown) as arc:
        assert arc.verify().ok
        assert arc.read("b/f003.txt") == b[3].data


def test_append_directory_equals_one_shot_of_both(tmp_path: Path) -> None:
    src_a, src_b = tmp_path / "A", tmp_path / "B"
    for root, entries in ((src_a, batch("x", 5, 3)), (src_b, batch("y", 5, 4))):
        for e in entries:
            p = root / e.relative_path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(e.data or b"")
    from znippy_sql.write.source import walk_directory

    one = tmp_path / "one.znippy"
    write_archive(one, [*walk_directory(src_a), *walk_directory(src_b)], block_size=BLOCK)
    grown = tmp_path / "grown.znippy"
    write_archive(grown, src_a, block_size=BLOCK)
    assert cli_main(["append", str(grown), str(src_b), "--no-posix"]) == 0
    assert grown.read_bytes() == one.read_bytes()


def test_replaced_path_drops_old_rows_and_reports_dead_bytes(tmp_path: Path) -> None:
    arc_path = tmp_path / "r.znippy"
    first = batch("a", 6, 5)
    write_archive(arc_path, first, block_size=BLOCK)
    with open_archive(arc_path) as arc:
        old = arc.find("a/f002.txt")
        old_blob_end = arc.blob_end
        old_rows = arc.lookup.num_rows
    assert old is not None and len(old.chunks) >= 1
    new_data = text(2 * BLOCK + 5, 99)
    report = ap.append_archive(arc_path, [Entry("a/f002.txt", data=new_data),
                                          Entry("a/fresh.txt", data=b"fresh")])
    assert report.files_replaced == 1
    assert report.rows_replaced == len(old.chunks)
    assert report.dead_bytes == old.stored_size
    assert report.dead_ranges == [(old.chunks[0].blob_offset, old.stored_size)]
    with open_archive(arc_path) as arc:
        assert arc.verify().ok
        assert arc.read("a/f002.txt") == new_data
        info = arc.find("a/f002.txt")
        assert info is not None and info.chunks[0].blob_offset >= old_blob_end
        paths = arc.lookup.column("relative_path").to_pylist()
        assert paths.count("a/f002.txt") == 3  # chunks of the new file only
        assert arc.lookup.num_rows == old_rows - len(old.chunks) + 3 + 1


def test_replacement_may_move_a_path_to_another_group(tmp_path: Path) -> None:
    arc_path = tmp_path / "m.znippy"
    write_archive(arc_path, [Entry("x.txt", data=b"one"), Entry("y.txt", data=b"two", repo="r")])
    before = arc_path.read_bytes()
    with pytest.raises(ZnippyError, match=r"'y.txt' from raw/r/- to raw/-/-.*give --move"):
        ap.append_archive(arc_path, [Entry("y.txt", data=b"three")])
    assert arc_path.read_bytes() == before  # refused: rolled back
    report = ap.append_archive(arc_path, [Entry("y.txt", data=b"three")], move=True)
    assert report.rows_replaced == 1 and report.files_moved == 1 and report.files_replaced == 0
    assert report.moves == [("y.txt", "raw/r/-", "raw/-/-")]
    with open_archive(arc_path) as arc:
        assert [tuple(k) for k in arc.groups] == [(0, "", "")]  # the emptied group is gone
        assert arc.read("y.txt") == b"three"


def test_duplicate_in_the_new_batch_is_refused_and_rolled_back(tmp_path: Path) -> None:
    arc_path = tmp_path / "d.znippy"
    write_archive(arc_path, batch("a", 3, 6), block_size=BLOCK)
    before = arc_path.read_bytes()
    with pytest.raises(ZnippyError, match="duplicate"):
        ap.append_archive(arc_path, [Entry("n.txt", data=text(3 * BLOCK, 1)),
                                     Entry("n.txt", data=b"again")])
    assert arc_path.read_bytes() == before
    assert not os.path.exists(rollback.journal_path(arc_path))


def test_exception_inside_the_block_rolls_back(tmp_path: Path) -> None:
    arc_path = tmp_path / "e.znippy"
    write_archive(arc_path, batch("a", 3, 7), block_size=BLOCK)
    before = arc_path.read_bytes()
    with pytest.raises(RuntimeError, match="boom"):
        with ap.open_for_append(arc_path) as app:
            app.add("big.txt", data=text(10 * BLOCK, 3))  # overwrites the old tail
            raise RuntimeError("boom")
    assert arc_path.read_bytes() == before


def test_second_appender_is_refused(tmp_path: Path) -> None:
    arc_path = tmp_path / "l.znippy"
    write_archive(arc_path, batch("a", 2, 8))
    with ap.open_for_append(arc_path) as app:
        app.add("one.txt", data=b"1")
        with pytest.raises(LockError, match="appending"):
            ap.append_archive(arc_path, [Entry("two.txt", data=b"2")])
        with pytest.raises(LockError):  # its journal is live, not hot: nobody rolls it back
            rollback.recover(arc_path)
    assert {"one.txt"} <= paths_of(arc_path)


def test_options_must_match_the_archive(tmp_path: Path) -> None:
    arc_path = tmp_path / "o.znippy"
    write_archive(arc_path, batch("a", 2, 9), block_size=BLOCK)
    with pytest.raises(ZnippyError, match="block_size=4096"):
        ap.append_archive(arc_path, [Entry("n.txt", data=b"n")], block_size=8192)
    ap.append_archive(arc_path, [Entry("n.txt", data=b"n")], block_size=BLOCK)


def test_empty_append_leaves_the_archive_alone(tmp_path: Path) -> None:
    arc_path = tmp_path / "z.znippy"
    write_archive(arc_path, batch("a", 2, 10))
    before = arc_path.read_bytes()
    report = ap.append_archive(arc_path, [])
    assert arc_path.read_bytes() == before and report.files_added == 0


def test_append_to_an_empty_archive(tmp_path: Path) -> None:
    one, grown = tmp_path / "one.znippy", tmp_path / "grown.znippy"
    b = batch("b", 3, 11)
    write_archive(one, b)
    write_archive(grown, [])
    ap.append_archive(grown, b)
    assert grown.read_bytes() == one.read_bytes()


def _journal_of(arc_path: Path) -> bytes:
    """The rollback journal an append of ``arc_path`` writes first (its old tail, bound to the
    file's device and inode)."""
    data = arc_path.read_bytes()
    with open_archive(arc_path) as arc:
        blob_end = arc.blob_end
    st = os.stat(arc_path)
    return rollback._encode_journal(len(data), blob_end, data[blob_end:], (st.st_dev, st.st_ino))


def test_torn_journal_is_discarded_and_hot_journal_rolled_back(tmp_path: Path) -> None:
    arc_path = tmp_path / "j.znippy"
    write_archive(arc_path, batch("a", 3, 12), block_size=BLOCK)
    before = arc_path.read_bytes()
    with open_archive(arc_path) as arc:
        blob_end = arc.blob_end
    journal = _journal_of(arc_path)
    # torn: the archive was not touched, the journal goes away
    Path(rollback.journal_path(arc_path)).write_bytes(journal[:-5])
    assert rollback.recover(arc_path) is False
    assert not os.path.exists(rollback.journal_path(arc_path))
    # hot: the tail was overwritten and the file grew; recovery restores the old bytes
    def make_hot() -> None:
        Path(rollback.journal_path(arc_path)).write_bytes(journal)
        with open(arc_path, "r+b") as fh:
            fh.seek(blob_end)
            fh.write(os.urandom(len(before)))

    make_hot()  # a plain open_archive rolls it back
    with open_archive(arc_path) as arc:
        assert arc.verify().ok
    assert arc_path.read_bytes() == before
    make_hot()  # and so does the next append, before it starts
    report = ap.append_archive(arc_path, [Entry("after.txt", data=b"after")])
    assert report.recovered
    assert arc_path.read_bytes()[:blob_end] == before[:blob_end]
    assert paths_of(arc_path) == paths_of_bytes(tmp_path, before) | {"after.txt"}


def paths_of_bytes(tmp_path: Path, data: bytes) -> set[str]:
    p = tmp_path / "copy.znippy"
    p.write_bytes(data)
    return paths_of(p)


def test_git_sections_are_refused(tmp_path: Path) -> None:
    from znippy_sql import ReservedSection

    arc_path = tmp_path / "g.znippy"
    write_archive(arc_path, [Entry("a", data=b"a")],
                  reserved_sections=[ReservedSection("__gunnar_oid__", b"\0" * 8)])
    with pytest.raises(ZnippyError, match="git section"):
        ap.append_archive(arc_path, [Entry("b", data=b"b")])


# -- crash safety: SIGKILL at every mutating system call of an append ---------------------------
ZYGOTE = textwrap.dedent(r'''
    import os, shutil, signal, sys
    import znippy_sql.write.append as ap
    from znippy_sql.write.source import walk_directory

    base, workdir, src = sys.argv[1], sys.argv[2], sys.argv[3]
    entries = list(walk_directory(src))
    for n in range(1, 500):
        target = os.path.join(workdir, f"k{n:03d}.znippy")
        shutil.copyfile(base, target)
        pid = os.fork()
        if pid == 0:
            count = [0]
            def hook(real, tear):
                def call(*args):
                    count[0] += 1
                    if count[0] == n:
                        if tear and len(args[1]) > 1:  # a torn write: half the bytes land
                            half = memoryview(args[1])[: len(args[1]) // 2]
                            real(args[0], half, *args[2:])
                        os.kill(os.getpid(), signal.SIGKILL)
                    return real(*args)
                return call
            for name, tear in (("pwrite", True), ("write", True), ("ftruncate", False),
                               ("fsync", False), ("unlink", False), ("replace", False),
                               ("copy_file_range", False)):
                setattr(os, name, hook(getattr(os, name), tear))
            ap.append_archive(target, entries, workers=1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        if not killed and os.waitstatus_to_exitcode(status) != 0:
            print(n, "failed", flush=True)
            break
        print(n, "killed" if killed else "done", target, flush=True)
        if not killed:
            break
''')


def test_sigkill_at_every_step_leaves_old_or_new(tmp_path: Path) -> None:
    base = tmp_path / "base.znippy"
    write_archive(base, batch("a", 8, 13), block_size=BLOCK)
    src = tmp_path / "src"
    for e in [*batch("b", 3, 14), Entry("a/f001.txt", data=text(BLOCK + 3, 15))]:
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data or b"")
    expected_new = tmp_path / "new.znippy"
    expected_new.write_bytes(base.read_bytes())
    ap.append_archive(expected_new, src)
    old_bytes, new_bytes = base.read_bytes(), expected_new.read_bytes()
    assert old_bytes != new_bytes

    script = tmp_path / "zygote.py"
    script.write_text(ZYGOTE)
    work = tmp_path / "kills"
    work.mkdir()
    out = subprocess.run([sys.executable, str(script), str(base), str(work), str(src)],
                         capture_output=True, text=True, timeout=300, check=True)
    lines = [ln.split() for ln in out.stdout.splitlines()]
    assert lines and lines[-1][1] == "done", out.stdout + out.stderr
    killed = [Path(ln[2]) for ln in lines if ln[1] == "killed"]
    assert len(killed) >= 15  # journal, blobs, tail pieces, truncate, fsyncs, unlink
    outcomes = {"old": 0, "new": 0}
    for target in killed:
        # a plain open_archive rolls back a hot journal by itself
        with open_archive(target) as arc:
            assert arc.verify().ok
        assert not os.path.exists(rollback.journal_path(target))
        data = target.read_bytes()
        assert data in (old_bytes, new_bytes), f"{target.name} is neither old nor new"
        outcomes["old" if data == old_bytes else "new"] += 1
    # kills before and after the commit point (the journal's unlink)
    assert outcomes["old"] > 0 and outcomes["new"] > 0, outcomes
    assert Path(lines[-1][2]).read_bytes() == new_bytes


def test_append_never_reads_old_blobs(tmp_path: Path) -> None:
    """Old blobs scrambled in place: the append still works, since it reads only the tail."""
    arc_path = tmp_path / "n.znippy"
    write_archive(arc_path, batch("a", 6, 16), block_size=BLOCK)
    with open_archive(arc_path) as arc:
        blob_end = arc.blob_end
    with open(arc_path, "r+b") as fh:
        fh.write(bytes(blob_end))  # zero every old blob
    scrambled = sha(arc_path, blob_end)
    report = ap.append_archive(arc_path, [Entry("new.txt", data=b"new")])
    assert report.files_added == 1 and sha(arc_path, blob_end) == scrambled
    with open_archive(arc_path) as arc:
        assert arc.read("new.txt") == b"new"
        assert not arc.verify().ok  # the old (zeroed) blobs are what the append left alone


def _signer() -> Any:
    return self_signed_signer("append test")


def test_sections_meta_kept_signatures_dropped_or_resigned(tmp_path: Path) -> None:
    from znippy_sql.provenance.sign import verify_signatures

    signer = _signer()
    arc_path = tmp_path / "s.znippy"
    write_archive(arc_path, batch("a", 3, 17), meta={"release": "1"}, signer=signer)
    with open_archive(arc_path) as arc:
        meta_before = arc.section("__meta__").to_pylist()
    before = arc_path.read_bytes()
    with pytest.raises(ZnippyError, match="archive is signed.*--drop-signatures"):
        ap.append_archive(arc_path, [Entry("b.txt", data=b"b")])
    assert arc_path.read_bytes() == before
    report = ap.append_archive(arc_path, [Entry("b.txt", data=b"b")], drop_signatures=True)
    assert report.dropped_sections == ["__sign_artifacts__", "__sign_archive__"]
    assert report.meta == "kept"
    with open_archive(arc_path) as arc:
        assert arc.sections == ["__lookup__", "__trie__", "__meta__"]
        assert arc.section("__meta__").to_pylist() == meta_before  # carried over verbatim
    report = ap.append_archive(arc_path, [Entry("c.txt", data=b"c")], signer=signer,
                               meta={"release": "2"})
    assert report.dropped_sections == []
    with open_archive(arc_path) as arc:
        assert arc.has_section("__sign_archive__")
        assert verify_signatures(arc, [signer.cert]) == []  # type: ignore[attr-defined]
        values = arc.section("__meta__").column("value").to_pylist()
        assert "2" in values and "1" not in values
    assert report.meta == "updated"


def test_not_an_archive_is_refused_untouched(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.znippy"
    bogus.write_bytes(b"not an archive at all, just some bytes" * 10)
    before = bogus.read_bytes()
    with pytest.raises(ZnippyError, match="ZNPYMIDX"):
        ap.append_archive(bogus, [Entry("x", data=b"x")])
    assert bogus.read_bytes() == before and not os.path.exists(rollback.journal_path(bogus))
    with pytest.raises(ZnippyError, match="missing.znippy: archive not found"):
        ap.append_archive(tmp_path / "missing.znippy", [Entry("x", data=b"x")])


def test_journal_of_a_replaced_file_is_stale(tmp_path: Path) -> None:
    """A journal left by a crashed append, then the archive rewritten under the same name:
    the journal belongs to the old file (another inode) and must not touch the new one."""
    arc_path = tmp_path / "x.znippy"
    write_archive(arc_path, batch("a", 3, 18), block_size=BLOCK)
    Path(rollback.journal_path(arc_path)).write_bytes(_journal_of(arc_path))
    write_archive(arc_path, batch("b", 5, 19), block_size=BLOCK)  # staging + rename: new inode
    fresh = arc_path.read_bytes()
    assert rollback.recover(arc_path) is False
    assert arc_path.read_bytes() == fresh and not os.path.exists(rollback.journal_path(arc_path))
