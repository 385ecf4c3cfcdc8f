"""The push path's reliability: the journal as a log, durable ordering under injected faults
and SIGKILL, the writer lock, threads sharing a writer, bad packs refused with nothing acked."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import blake3
import pytest

from test_git import Repo, numbers
from znippy_sql import LockError, ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.errors import PackError
from znippy_sql.git import (Faults, FastWriter, InjectedCrash, SafeWriter, read_journal,
                            retire_packs, seal_generation_zero)
from znippy_sql.git.journal import TOMBSTONE, encode_row, encode_schema
from znippy_sql.git.pack import entry_header
from znippy_sql.git.push import Receiver

from znippy_sql.git.uring import UringWriter, _liburing, probe

try:
    _liburing()
    WHY_NO_URING = ""
except ZnippyError as exc:  # liburing absent, or built for another CPU (it dies with SIGILL)
    WHY_NO_URING = str(exc)
needs_uring = pytest.mark.skipif(bool(WHY_NO_URING), reason=f"UringWriter: {WHY_NO_URING}")
DURABLE = [SafeWriter, pytest.param(UringWriter, marks=needs_uring, id="UringWriter")]


def test_a_crashing_native_probe_is_an_error_not_a_dead_process(tmp_path: Path) -> None:
    """A liburing built for another CPU kills its process with SIGILL: the writer must say so."""
    why = probe("import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    assert why is not None and "SIGILL" in why
    assert probe("import sys; sys.exit('no ring here')") == \
        "liburing failed in a probe process: no ring here"
    assert probe("pass") is None


def content(offset: int, size: int) -> bytes:
    """The bytes the tests append at ``offset``: any row can be checked from the row alone."""
    return hashlib.shake_128(offset.to_bytes(8, "little")).digest(size)


# -- the journal ---------------------------------------------------------------------------------
def test_journal_is_one_schema_then_one_message_per_row(tmp_path: Path) -> None:
    blobs = tmp_path / "objects.pack"
    with SafeWriter(blobs) as w:
        extents = [w.append(content(w.cursor, n)) for n in (10, 0, 300)]
    with SafeWriter(blobs) as w:  # a reopen appends: no second schema, nothing truncated
        extents.append(w.append(b"x" * 7))
    data = (tmp_path / "objects.pack.journal").read_bytes()
    assert data == encode_schema() + b"".join(encode_row(o, s) for o, s in extents)
    assert read_journal(str(blobs) + ".journal") == extents
    import pyarrow as pa  # any Arrow reader reads it as a stream (given an end marker)

    table = pa.ipc.open_stream(data + b"\xff\xff\xff\xff\0\0\0\0").read_all()
    assert list(zip(*(c.to_pylist() for c in table.columns))) == extents
    retire_packs(str(blobs) + ".journal", [extents[0][0]])
    assert read_journal(str(blobs) + ".journal")[-1] == (extents[0][0], TOMBSTONE)
    with pytest.raises(ZnippyError, match="no acked pack starts at offset 999"):
        retire_packs(str(blobs) + ".journal", [999])


def test_a_first_append_in_a_fresh_process_is_quick(tmp_path: Path) -> None:
    """The journal row is built from buffers: a list given to pa.array imports pandas (~1 s)
    on a push's first append, in every fresh receiving process."""
    code = ("import sys; from znippy_sql.git import SafeWriter; w = SafeWriter(sys.argv[1]); "
            "w.append(b'x'); w.close(); print('pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    assert read_journal(str(tmp_path / "b") + ".journal") == [(0, 1)]


def test_journal_truncated_at_every_byte_of_its_last_three_rows(tmp_path: Path) -> None:
    blobs = tmp_path / "objects.pack"
    with SafeWriter(blobs) as w:
        extents = [w.append(content(w.cursor, 100 + i)) for i in range(6)]
    journal = tmp_path / "objects.pack.journal"
    data = journal.read_bytes()
    ends = [len(encode_schema()) + sum(len(encode_row(o, s)) for o, s in extents[:k])
            for k in range(len(extents) + 1)]
    assert ends[-1] == len(data)
    cut_file = tmp_path / "cut.journal"
    for cut in range(ends[3], len(data) + 1):
        cut_file.write_bytes(data[:cut])
        whole = max(k for k, e in enumerate(ends) if e <= cut)
        assert read_journal(cut_file) == extents[:whole], cut
    # a writer reopened over a torn tail cuts only the torn message; later rows stay readable
    journal.write_bytes(data[:ends[4] + 5])
    with SafeWriter(blobs) as w:
        more = w.append(b"after the tear")
    assert read_journal(journal) == extents[:4] + [more]
    # a torn schema: no rows, and the next writer starts the log again
    journal.write_bytes(data[:9])
    assert read_journal(journal) == []
    with SafeWriter(blobs) as w:
        last = w.append(b"z")
    assert read_journal(journal) == [last]


@needs_uring
def test_uring_writer_writes_what_safe_writer_writes(tmp_path: Path) -> None:
    """Same blob bytes, same journal bytes; a torn tail is cut on reopen, as SafeWriter does."""
    out = {}
    for cls in (SafeWriter, UringWriter):
        blobs = tmp_path / cls.__name__
        with cls(blobs) as w:
            extents = [w.append(content(w.cursor, 90 + i)) for i in range(4)]
        with cls(blobs) as w:
            extents.append(w.append(b"reopened"))
        journal = Path(str(blobs) + ".journal")
        assert read_journal(journal) == extents
        out[cls] = (blobs.read_bytes(), journal.read_bytes())
        journal.write_bytes(journal.read_bytes()[:-3])  # a torn last row
        with cls(blobs) as w:
            after = w.append(b"after the tear")
        assert read_journal(journal) == extents[:-1] + [after]
    assert out[SafeWriter] == out[UringWriter]
    assert UringWriter.name == "UringWriter" and "full" in UringWriter.durability


def test_a_journal_of_another_schema_is_refused(tmp_path: Path) -> None:
    import pyarrow as pa

    other = pa.schema([pa.field("x", pa.int32())]).serialize().to_pybytes()
    (tmp_path / "b.journal").write_bytes(other)
    with pytest.raises(ZnippyError, match="not a push journal"):
        read_journal(tmp_path / "b.journal")
    with pytest.raises(ZnippyError, match="not a push journal"):
        SafeWriter(tmp_path / "b")


# -- durable ordering, driven through the real append ------------------------------------------
def test_append_order_and_the_faults_that_break_it(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    names: dict[int, str] = {}
    real = {n: getattr(os, n) for n in ("pwrite", "write", "fsync")}

    def spy(name: str):  # records which file each real call touched, then makes it
        def call(fd: int, *args: object) -> object:
            calls.append((name, names.get(fd, "?")))
            return real[name](fd, *args)
        return call

    for name in real:
        monkeypatch.setattr(os, name, spy(name))

    def order(faults: Faults) -> list[tuple[str, str]]:
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        w = SafeWriter(d / "objects.pack", faults=faults)
        names[w._fd], names[w._jfd] = "blobs", "journal"
        calls.clear()
        try:
            w.append(b"pack bytes")
        finally:
            w.close()
        return list(calls)

    assert order(Faults()) == [("pwrite", "blobs"), ("fsync", "blobs"), ("write", "journal"),
                               ("fsync", "journal")]
    assert order(Faults(skip_blob_fsync=True)) == [("pwrite", "blobs"), ("write", "journal"),
                                                   ("fsync", "journal")]
    assert order(Faults(skip_journal_flush=True)) == [("pwrite", "blobs"), ("fsync", "blobs"),
                                                      ("fsync", "journal")]
    with pytest.raises(InjectedCrash):
        order(Faults(die_between_fsyncs=True))
    assert calls == [("pwrite", "blobs"), ("fsync", "blobs")]


def test_a_crash_between_the_fsyncs_leaves_orphan_bytes_not_a_row(tmp_path: Path) -> None:
    blobs = tmp_path / "objects.pack"
    with SafeWriter(blobs) as w:
        kept = w.append(content(0, 50))
    with SafeWriter(blobs, faults=Faults(die_between_fsyncs=True)) as w:
        with pytest.raises(InjectedCrash):
            w.append(content(50, 70))
    assert blobs.stat().st_size == 120  # the bytes are there ...
    assert read_journal(str(blobs) + ".journal") == [kept]  # ... and nothing points at them
    report = seal_generation_zero(blobs, str(blobs) + ".journal", tmp_path / "a.znippy",
                                  git=False)
    assert (report.packs_sealed, report.blob_bytes) == (1, 120)
    with open_archive(tmp_path / "a.znippy") as a:
        assert a.read("objects.pack.0") == content(0, 50)


def test_the_journal_flush_is_load_bearing(tmp_path: Path) -> None:
    """Without the flush, the fsync syncs nothing: a SIGKILL after the ack loses the row."""
    child = ("import os, signal, sys\n"
             "from znippy_sql.git.writers import Faults, SafeWriter\n"
             "w = SafeWriter(sys.argv[1], faults=Faults(skip_journal_flush=sys.argv[2] == '1'))\n"
             "w.append(b'acked')\n"
             "print('ACK', flush=True)\n"
             "os.kill(os.getpid(), signal.SIGKILL)\n")
    for skip, kept in (("0", True), ("1", False)):
        blobs = tmp_path / f"b{skip}"
        done = subprocess.run([sys.executable, "-c", child, str(blobs), skip],
                              capture_output=True, text=True)
        assert done.returncode == -signal.SIGKILL and done.stdout == "ACK\n"
        assert read_journal(str(blobs) + ".journal") == ([(0, 5)] if kept else [])


# -- SIGKILL at random moments -----------------------------------------------------------------
ZYGOTE = textwrap.dedent(r'''
    import hashlib, os, random, signal, sys, time
    from znippy_sql.errors import LockError
    from znippy_sql.git.writers import SafeWriter
    if sys.argv[3] == "UringWriter":
        from znippy_sql.git.uring import UringWriter as SafeWriter

    blobs, kills = sys.argv[1], int(sys.argv[2])
    rnd = random.Random(13)
    for k in range(kills):
        r, w = os.pipe()
        delay = rnd.uniform(0.0, 0.01)
        pid = os.fork()
        if pid == 0:
            os.close(r)
            start, refused = time.monotonic(), 0
            while True:
                try:
                    writer = SafeWriter(blobs)
                    break
                except LockError:
                    refused += 1
                    if time.monotonic() - start > 2:
                        os.write(w, b"LOCKED\n")
                        os._exit(3)
                    time.sleep(0.001)
            if refused:
                os.write(w, b"WAITED %d\n" % int((time.monotonic() - start) * 1e6))
            os.write(w, b"OPEN\n")
            seq = random.Random(k)
            while True:
                size = seq.randint(1, 32768)
                at = writer.cursor
                off, n = writer.append(hashlib.shake_128(at.to_bytes(8, "little")).digest(size))
                os.write(w, b"ACK %d %d\n" % (off, n))
        os.close(w)
        out = b""
        if k % 5:  # four kills in five come after the open and 0-3 acks, at a random moment
            want = 1 + rnd.randint(0, 3)  # of the appends that follow
            while out.count(b"\n") < want and (chunk := os.read(r, 64)):
                out += chunk
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        while chunk := os.read(r, 65536):
            out += chunk
        os.close(r)
        sys.stdout.write(out.decode())
        sys.stdout.write("KILLED\n")
        sys.stdout.flush()
''')


@pytest.mark.parametrize("cls", DURABLE)
def test_sigkill_at_random_moments_loses_no_acked_pack(tmp_path: Path, cls: type) -> None:
    script = tmp_path / "zygote.py"
    script.write_text(ZYGOTE)
    blobs = tmp_path / "objects.pack"
    out = subprocess.run([sys.executable, str(script), str(blobs), "220", cls.__name__],
                         capture_output=True, text=True, timeout=600, check=True
                         ).stdout.splitlines()
    assert out.count("KILLED") == 220
    # some kills land while the child opens (the schema write, a torn tail's cut): fine; a
    # child refused the lock is not
    assert "LOCKED" not in out and out.count("OPEN") >= 176
    waits = [int(ln.split()[1]) for ln in out if ln.startswith("WAITED")]
    if cls is SafeWriter:
        assert waits == []  # the dead writer's lock came back at once
    else:
        # the kernel keeps a dead writer's files (and so its flock) until its in-flight
        # io_uring requests finish: refused meanwhile, which is right (a late journal write
        # of the dead writer must not race the next one's), and never for long
        assert all(w < 2_000_000 for w in waits)
    acked = [tuple(map(int, ln.split()[1:])) for ln in out if ln.startswith("ACK")]
    rows = read_journal(str(blobs) + ".journal")
    assert not set(acked) - set(rows)  # 0 acked packs lost
    assert len(acked) >= 176
    with open(blobs, "rb") as fh:
        for off, size in rows:  # every row points at the bytes it claims
            fh.seek(off)
            assert fh.read(size) == content(off, size), (off, size)
    starts = sorted(rows)
    assert all(a[0] + a[1] <= b[0] for a, b in zip(starts, starts[1:]))  # disjoint
    with cls(blobs) as w:  # and this process takes the lock at once too
        w.append(b"after")


# -- the writer lock, threads ------------------------------------------------------------------
def test_a_second_process_is_refused_at_once(tmp_path: Path) -> None:
    blobs = tmp_path / "objects.pack"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from znippy_sql.git import FastWriter; "
         "w = FastWriter(sys.argv[1]); print('READY', flush=True); sys.stdin.read()", str(blobs)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        for cls in (SafeWriter, FastWriter, *([] if WHY_NO_URING else [UringWriter])):
            start = time.monotonic()
            with pytest.raises(LockError, match="another writer holds") as err:
                cls(blobs)
            assert time.monotonic() - start < 1 and str(blobs) in str(err.value)
        assert not (tmp_path / "objects.pack.journal").exists()  # refused before touching it
    finally:
        holder.kill()
        holder.communicate()
    with SafeWriter(blobs) as w:  # the kernel dropped the dead holder's lock
        assert w.append(b"mine") == (0, 4)
    assert main(["git", "import", str(tmp_path), "-o", str(tmp_path / "x.znippy")]) == 2


@pytest.mark.parametrize("cls", [FastWriter, *DURABLE])
def test_threads_sharing_one_writer_get_disjoint_extents(tmp_path: Path, cls: type) -> None:
    blobs = tmp_path / "objects.pack"
    got: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    with cls(blobs) as w:
        def run(t: int) -> None:
            for i in range(400 if cls is FastWriter else 60):
                data = bytes([t]) * (1 + (i * 7919 + t) % 5000)
                off, n = w.append(data)
                with lock:
                    got.append((off, n, data))

        threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    spans = sorted((o, n) for o, n, _ in got)
    assert spans[0][0] == 0 and all(a[0] + a[1] == b[0] for a, b in zip(spans, spans[1:]))
    raw = blobs.read_bytes()
    assert len(raw) == sum(n for _, n in spans)
    assert all(raw[o:o + n] == d for o, n, d in got)
    if cls is not FastWriter:
        assert sorted(read_journal(str(blobs) + ".journal")) == spans


# -- bad packs ---------------------------------------------------------------------------------
def good_pack(tmp_path: Path) -> tuple[Repo, bytes, bytes]:
    r = Repo(tmp_path / "src")
    for i in range(3):
        r.write("f.txt", numbers(200 + i))
        r.commit(f"c{i}")
    full = r.raw("pack-objects", "--revs", "--stdout", "-q", input=b"HEAD~1\n")
    thin = r.raw("pack-objects", "--revs", "--thin", "--stdout", "-q",
                 input=b"HEAD\n^HEAD~1\n")
    return r, full, thin


def resign(data: bytes) -> bytes:
    return data[:-20] + hashlib.sha1(data[:-20]).digest()


def test_bad_packs_are_refused_naming_pack_and_object(tmp_path: Path) -> None:
    _r, full, thin = good_pack(tmp_path)
    view = memoryview(full)
    _kind, _size, body = entry_header(view, 12, len(full))
    broken_zlib = bytearray(full)
    broken_zlib[body + 4] ^= 0xFF
    bad = {
        "truncated": (full[: len(full) // 2], r"object \d+ at offset \d+: .*truncated"),
        "wrong magic": (b"KCAP" + full[4:], "wrong magic"),
        "bad zlib": (resign(bytes(broken_zlib)), r"object 0 at offset 12: (bad zlib|inflates)"),
        "missing base": (thin, r"object \d+ at offset \d+: its delta base [0-9a-f]{40} is in "
                               "neither this pack nor an earlier one"),
        "damaged trailer": (full[:-1] + bytes([full[-1] ^ 1]), "trailing SHA-1"),
        "short": (b"PACK", "too short"),
    }
    blobs = tmp_path / "objects.pack"
    with Receiver(blobs) as rx:
        for why, (data, pattern) in bad.items():
            with pytest.raises(PackError, match=pattern) as err:
                rx.push(data, name=f"{why}.pack")
            assert f"pack {why}.pack" in str(err.value)
        assert blobs.stat().st_size == 0 and read_journal(str(blobs) + ".journal") == []
        rx.push(full)          # a good pack is still taken
        rx.push(thin)          # and now the thin one finds its bases
    assert len(read_journal(str(blobs) + ".journal")) == 2


def test_import_of_a_repository_with_a_damaged_pack(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    r, _full, _thin = good_pack(tmp_path)
    r.git("repack", "-a", "-d", "-q")
    (pack,) = (r.path / ".git" / "objects" / "pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    _kind, _size, body = entry_header(memoryview(data), 12, len(data))
    data[body + 3] ^= 0x55
    pack.chmod(0o644)
    pack.write_bytes(resign(bytes(data)))
    out = tmp_path / "out.znippy"
    assert main(["git", "import", str(r.path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(pack) in err and "object 0 at offset 12" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["src"]  # no archive, no staging left behind


def test_seal_counts_retired_and_late_packs(tmp_path: Path) -> None:
    blobs = tmp_path / "objects.pack"
    with SafeWriter(blobs) as w:
        a = w.append(content(0, 100))
        b = w.append(content(100, 200))
    journal = str(blobs) + ".journal"
    retire_packs(journal, [a[0]])
    with open(journal, "ab") as fh:  # a row acked after the copy (past the copied length)
        fh.write(encode_row(300, 50))
    report = seal_generation_zero(blobs, journal, tmp_path / "s.znippy", git=False)
    assert (report.packs_sealed, report.packs_retired, report.packs_after_copy) == (1, 1, 1)
    with open_archive(tmp_path / "s.znippy") as a:
        rows = a.lookup.to_pylist()
        assert [(r["relative_path"], r["blob_offset"], r["compressed"]) for r in rows] == [
            ("objects.pack.1", 100, False)]
        assert rows[0]["checksum"] == blake3.blake3(content(100, 200)).digest()
        assert a.read("objects.pack.1") == content(100, 200)
        assert a.verify().ok
    assert b == (100, 200)
    assert [p.name for p in tmp_path.iterdir() if ".seal-" in p.name] == []
