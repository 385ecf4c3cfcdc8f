"""The compression pipeline: batches, the incompressibility probe, raw chunks, in-order
hand-back from the worker threads, and byte-identical output whatever the worker count.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import blake3
import pyarrow.compute as pc
import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import (ArchiveWriter, CodecError, DuplicatePathError, Entry, open_archive,
                        write_archive)
from znippy_sql.format import codec
from znippy_sql.write import pipeline
from znippy_sql.write.pipeline import Compressor, Job, run_batch

MiB = 1 << 20


def _decode(frame: bytes, size: int) -> bytes:
    return codec.decoder().decode(frame, size)


def test_run_batch_frames_and_raw_chunks(tmp_path: Path) -> None:
    big_random = random_bytes(2 * pipeline.PROBE_MIN, 1)
    text = text_bytes(300_000, 2)
    src = tmp_path / "src.bin"
    src.write_bytes(text + big_random)
    jobs = [
        Job(None, str(src), 0, len(text), False),  # text from a file: a frame
        Job(None, str(src), len(text), len(big_random), False),  # big random: probed, raw
        Job(random_bytes(5000, 3), None, 0, 5000, False),  # small random: raw
        Job(b"", None, 0, 0, False),  # empty: raw, zero bytes
        Job(text[:9000], None, 0, 9000, True),  # skip-listed: raw even though compressible
        Job(big_random, None, 0, len(big_random), False),  # big random in memory: raw
    ]
    res = run_batch(jobs, codec.DEFAULT_LEVEL)
    chunks = [text, big_random, random_bytes(5000, 3), b"", text[:9000], big_random]
    assert res.digests == b"".join(blake3.blake3(c).digest() for c in chunks)
    assert res.compressed == [True, False, False, False, False, False]
    assert res.stored[1:] == [len(big_random), 5000, 0, 9000, len(big_random)]
    assert res.stored[0] < len(text) // 2
    assert res.encoded == len(text) + 5000  # the big random chunks were only probed
    buf = res.buffer
    assert len(buf) == sum(res.stored)
    assert _decode(buf[: res.stored[0]], len(text)) == text
    rest = buf[res.stored[0] :]
    assert rest == b"".join(chunks[1:])


def test_probe_finds_compressible_data_behind_a_random_start() -> None:
    noise = random_bytes(pipeline.PROBE_MIN, 5)
    assert pipeline.incompressible(codec.DEFAULT_LEVEL, noise)
    half_text = noise[: pipeline.PROBE_MIN // 2] + text_bytes(pipeline.PROBE_MIN // 2, 6)
    assert not pipeline.incompressible(codec.DEFAULT_LEVEL, half_text)
    res = run_batch([Job(half_text, None, 0, len(half_text), False)], codec.DEFAULT_LEVEL)
    assert res.compressed == [True]
    assert _decode(res.buffer, len(half_text)) == half_text


def test_compressor_hands_thread_results_back_in_order() -> None:
    """Batches of small chunks (read and hashed by the caller, compressed in one call by a
    worker thread) and of big ones (read and probed by the worker) come back once each, in
    submission order, equal to what the caller would have computed itself."""
    batches = []
    for i in range(24):
        size = 600_000 if i % 2 else 40_000  # over / under SMALL_CHUNK
        data = text_bytes(size, 10 + i) if i % 3 else random_bytes(size, 10 + i)
        batches.append([Job(data, None, 0, len(data), False),
                        Job(data[:3000], None, 0, 3000, i % 4 == 0)])
    comp = Compressor(level=codec.DEFAULT_LEVEL, workers=2)
    got = []
    try:
        for i, batch in enumerate(batches):
            got += comp.submit(batch, i)
        got += comp.drain()
        assert comp._pool is not None  # the threads really ran
    finally:
        comp.close()
    assert [tag for tag, _ in got] == list(range(len(batches)))
    for (tag, res), batch in zip(got, batches):
        assert res == run_batch(batch, codec.DEFAULT_LEVEL)


def _entries(src: Path) -> list[Entry]:
    """Small files, multi-chunk files, big random files (probed and stored raw, from disk and
    from memory), skip-listed files, empty files."""
    out = [Entry(f"small/{i:04d}.txt", data=text_bytes(300 + (i * 53) % 6000, i))
           for i in range(600)]
    for i in range(3):
        p = src / f"log{i}.txt"
        p.write_bytes(text_bytes(int(2.5 * MiB) + i, 50 + i))
        out.append(Entry(f"logs/{i}.txt", file=p))
    noise = src / "noise.bin"
    noise.write_bytes(random_bytes(3 * MiB + 17, 60) + text_bytes(MiB, 61))
    out.append(Entry("bin/noise.bin", file=noise, repo="other"))
    out.append(Entry("bin/mem-noise.bin", data=random_bytes(MiB + 5, 62), repo="other"))
    jar = src / "lib.jar"
    jar.write_bytes(text_bytes(400_000, 63))
    out.append(Entry("lib/lib.jar", file=jar))
    out.append(Entry("empty/a", data=b""))
    out.append(Entry("empty/b", file=_touch(src / "empty")))
    return out


def _touch(p: Path) -> Path:
    p.write_bytes(b"")
    return p


def test_worker_count_does_not_change_a_byte(tmp_path: Path, monkeypatch: Any) -> None:
    src = tmp_path / "src"
    src.mkdir()
    entries = _entries(src)
    assert sum(e.size() for e in entries) > 8 * MiB
    threads: list[str] = []
    for name in ("run_batch", "compress_small"):
        real = getattr(pipeline, name)

        def spy(*args: Any, _real: Any = real) -> Any:
            threads.append(threading.current_thread().name)
            return _real(*args)

        monkeypatch.setattr(pipeline, name, spy)
    opts = dict(block_size=MiB, fsync=False)
    r1 = write_archive(tmp_path / "w1.znippy", entries, workers=1, **opts)
    assert threads and all(t == "MainThread" for t in threads)
    threads.clear()
    r2 = write_archive(tmp_path / "w2.znippy", entries, workers=2, **opts)
    assert threads and all(t.startswith("znippy-compress") for t in threads)
    assert (tmp_path / "w1.znippy").read_bytes() == (tmp_path / "w2.znippy").read_bytes()
    assert (r1.compressed_chunks, r1.raw_chunks) == (r2.compressed_chunks, r2.raw_chunks)
    with open_archive(tmp_path / "w2.znippy") as a:
        assert a.verify().ok
        lk = a.lookup
        for e in entries:
            expect = e.data if e.data is not None else Path(e.file).read_bytes()  # type: ignore
            assert a.read(e.relative_path) == expect
        # the random chunks are stored raw, the text after them is compressed, the last
        # 17-byte chunk is raw again (its frame would not be smaller)
        noise = lk.filter(pc.equal(lk.column("relative_path"), "bin/noise.bin"))
        assert noise.column("compressed").to_pylist() == [False, False, False, True, False]
        # a skip-listed name that holds text (not a zip): the probe says compress it
        jar = lk.filter(pc.equal(lk.column("relative_path"), "lib/lib.jar"))
        assert jar.column("compressed").to_pylist() == [True]
        # blobs are back to back in input order: each starts where the previous ended
        for key in a.groups:
            t = a.group_table(key)
            offs = t.column("blob_offset").to_pylist()
            assert offs == sorted(offs)
        order = sorted(set(zip(lk.column("blob_offset").to_pylist(),  # a pack: one blob
                               lk.column("blob_size").to_pylist())))
        assert all(o1 + s1 == o2 for (o1, s1), (o2, _) in zip(order, order[1:]))


def test_source_file_changing_under_the_writer_is_a_clear_error(tmp_path: Path) -> None:
    from znippy_sql import ArchiveWriter, ZnippyError

    for workers, damage in ((1, "truncate"), (2, "delete")):
        src = tmp_path / f"victim-{workers}.txt"
        src.write_bytes(text_bytes(50_000, 70))
        out = tmp_path / f"out-{workers}.znippy"
        try:
            # pack=False: a small file to pack is read when added, not when its batch runs
            with ArchiveWriter(out, workers=workers, fsync=False, pack=False) as w:
                w.add(Entry("victim.txt", file=src))  # sized now, read when its batch runs
                if damage == "truncate":
                    src.write_bytes(b"short")
                else:
                    src.unlink()
        except ZnippyError as exc:
            assert exc.path == str(src)
            assert "cannot read source file" in exc.problem
        else:
            raise AssertionError("the writer accepted a file that changed under it")
        assert not out.exists()


def test_incompressible_chunks_are_probed_not_compressed_by_the_threads() -> None:
    comp = Compressor(level=codec.DEFAULT_LEVEL, workers=2)
    got = []
    for i in range(12):  # 12 MiB of random chunks, probed and stored raw
        data = random_bytes(MiB, 80 + i)
        got += comp.submit([Job(data, None, 0, MiB, False)], i)
    got += comp.drain()
    comp.close()
    assert [t for t, _ in got] == list(range(12))
    assert all(res.compressed == [False] and res.encoded == 0 for _, res in got)


def test_window_is_bounded_in_bytes_and_batches() -> None:
    """However the batches finish, what waits in the window stays under the byte budget
    (WINDOW_BLOCKS × workers × block size) and the batch cap; results come back in order."""
    comp = Compressor(level=codec.DEFAULT_LEVEL, workers=2, block_size=MiB)
    budget = pipeline.WINDOW_BLOCKS * 2 * MiB
    big = text_bytes(MiB, 7)
    got = []
    for i in range(40):
        batch = ([Job(big, None, 0, MiB, False)] if i % 4 == 0 else
                 [Job(big[:1000 + i], None, 0, 1000 + i, False)])
        got += comp.submit(batch, i)
        assert comp._in_flight <= budget
        assert len(comp._window) <= pipeline.WINDOW_BATCHES * 2
    got += comp.drain()
    comp.close()
    assert [t for t, _ in got] == list(range(40))
    assert comp._in_flight == 0


def test_written_data_entries_are_not_kept(tmp_path: Path) -> None:
    """The bytes of a ``data=`` entry are let go once written, not kept to the end of the
    write (memory of a generator of in-memory entries stays bounded by the window; the
    duplicate check keeps a description, not the Entry)."""
    import sys

    datas = [text_bytes(200_000, i) for i in range(40)]
    with ArchiveWriter(tmp_path / "m.znippy", block_size=MiB, workers=2, fsync=False) as w:
        for i, data in enumerate(datas):
            w.add(f"d/{i:02d}.txt", data=data)
        with pytest.raises(DuplicatePathError, match=r"from <data d/03.txt> and <data d/03.txt>"):
            w.add("d/03.txt", data=b"again")
    assert w.report is not None and w.report.files == 40
    del data
    # held by the list alone, like bytes the writer never saw: neither the writer nor its
    # duplicate check holds an entry (the writer object is still alive here)
    controls = [text_bytes(10, i) for i in range(40)]
    assert [sys.getrefcount(d) for d in datas] == [sys.getrefcount(c) for c in controls]


def test_walked_files_share_one_origin_prefix(tmp_path: Path) -> None:
    """What the duplicate check keeps of a walked directory's files is one shared string
    (the directory) per tree, not a full path per file."""
    from znippy_sql.write.ingest import Ingest, WriteOptions
    from znippy_sql.write.source import walk_directory

    for i in range(30):
        (tmp_path / "src" / f"d{i % 3}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / f"d{i % 3}" / f"f{i}.txt").write_bytes(b"x" * i)
    fd = os.open(tmp_path / "out.bin", os.O_RDWR | os.O_CREAT)
    try:
        ingest = Ingest(fd, 0, WriteOptions(workers=1))
        for entry in walk_directory(tmp_path / "src"):
            ingest.add(entry)
        ingest.finish()
    finally:
        os.close(fd)
    assert len(ingest.seen) == 30 and len({id(v) for v in ingest.seen.values()}) == 1


def test_unguarded_script_still_writes_the_same_archive(tmp_path: Path) -> None:
    """A script that calls write_archive at top level (no ``__main__`` guard) works: the
    writer starts no processes that would re-import it — same bytes as one worker."""
    import subprocess
    import sys

    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"f{i}.txt").write_bytes(text_bytes(2 * MiB, 90 + i))
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        "from znippy_sql import write_archive\n"
        f"write_archive(sys.argv[1], {str(src)!r}, workers=int(sys.argv[2]), fsync=False)\n"
    )
    for workers in (1, 2):
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"u{workers}.znippy"),
                               str(workers)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "u1.znippy").read_bytes() == (tmp_path / "u2.znippy").read_bytes()


def test_decode_view_is_the_same_bytes_without_a_copy() -> None:
    data = text_bytes(3 * MiB, 99)
    frame = codec.Encoder(codec.DEFAULT_LEVEL).encode(data)
    dec = codec.Decoder()
    first = dec.decode_view(frame, len(data))
    other = dec.decode_view(codec.Encoder(1).encode(data[:1000]), 1000)  # reuses the context
    assert first.readonly and first.nbytes == len(data) and bytes(first) == data
    assert bytes(other) == data[:1000]
    assert dec.decode(frame, len(data)) == data
    with pytest.raises(CodecError, match="index says"):
        dec.decode_view(frame, len(data) - 1)


def test_short_script_with_workers_exits_cleanly(tmp_path: Path) -> None:
    """A script that writes with two workers and exits at once: its threads are done and
    nothing is printed to stderr."""
    import subprocess
    import sys

    script = tmp_path / "short.py"
    script.write_text(
        "import sys\n"
        "from znippy_sql import Entry, write_archive\n"
        "if __name__ == '__main__':\n"
        "    data = [Entry(f'f{i}.txt', data=(b'hello world %d\\n' % i) * 20000)\n"
        "            for i in range(40)]\n"
        "    r = write_archive(sys.argv[1], data, workers=2, fsync=False)\n"
        "    print(r.files)\n")
    for i in range(3):
        proc = subprocess.run([sys.executable, str(script), str(tmp_path / f"s{i}.znippy")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == "40", proc.stderr[-2000:]
        assert proc.stderr == ""
