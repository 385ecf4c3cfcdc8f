"""``Archive.read_many``'s per-file work runs in the compiled core (issue 33, item 3;
native/src/extract/memory.rs).

Counted, not timed: the Python function calls ``read_many`` makes over 10,000 files
(``sys.setprofile`` and ``threading.setprofile``); a damaged blob raises the error the Python
reader raises for that file, after the units before it were yielded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _calls import python_calls
from conftest import random_bytes

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.errors import ZnippyError
from znippy_sql.read.many import read_many


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """10,000 small files in 100 directories, packed as the writer packs a source tree."""
    files = {f"d{i % 100:02d}/f{i:05d}.txt": (f"line {i}\n" * (1 + i % 50)).encode()
             for i in range(10_000)}
    arc = tmp_path_factory.mktemp("many") / "many.znippy"
    write_archive(arc, [Entry(p, data=d) for p, d in files.items()], fsync=False)
    return arc, files


def test_read_many_makes_at_most_05_python_calls_a_file(many: tuple[Path, dict[str, bytes]]
                                                        ) -> None:
    arc, files = many
    paths = sorted(files, reverse=True)
    with open_archive(arc) as a:  # once first: no module is imported inside the count
        assert dict(a.read_many(paths[:10])) == {p: files[p] for p in paths[:10]}
    with open_archive(arc) as a:
        got, calls = python_calls(lambda: list(a.read_many(paths, workers=2)))
    assert dict(got) == files and len(got) == len(paths)
    per_file = sum(calls.values()) / len(paths)
    assert per_file <= 0.5, (per_file, calls.most_common(10))


def test_a_damaged_blob_raises_what_the_python_reader_raises(tmp_path: Path) -> None:
    files = {f"d/{i:02d}.txt": (f"{i} " * (2000 + 50 * i)).encode() for i in range(20)}
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry(p, data=d) for p, d in files.items()], workers=1, fsync=False,
                  pack=False)
    with open_archive(arc) as a:
        row = next(r for r in a.lookup.to_pylist() if r["relative_path"] == "d/17.txt")
    data = bytearray(arc.read_bytes())
    data[row["blob_offset"] + row["blob_size"] - 30] ^= 0x40  # inside the zstd blocks
    arc.write_bytes(bytes(data))
    with open_archive(arc) as a, pytest.raises(ZnippyError) as python:
        a.read("d/17.txt")
    got = []
    with open_archive(arc) as a, pytest.raises(ZnippyError) as native:
        for pair in read_many(a, sorted(files), ordered=True, unit_bytes=40_000):
            got.append(pair)
    assert type(native.value) is type(python.value) and str(native.value) == str(python.value)
    assert "d/17.txt" in str(native.value)
    assert 0 < len(got) < 17 and got == [(p, files[p]) for p, _ in got]


def test_verify_false_skips_the_blake3_and_close_stops_early(tmp_path: Path) -> None:
    """A raw blob with one byte flipped: ``verify=False`` yields it as stored (as the Python
    reader did), the default raises the checksum error; ``close()`` ends the iteration."""
    files = {f"r/{i}.bin": random_bytes(3000 + i, i) for i in range(5)}  # stored raw
    arc = tmp_path / "raw.znippy"
    write_archive(arc, [Entry(p, data=d) for p, d in files.items()], workers=1, fsync=False,
                  pack=False)
    with open_archive(arc) as a:
        rows = {r["relative_path"]: r for r in a.lookup.to_pylist()}
    row = rows["r/2.bin"]
    data = bytearray(arc.read_bytes())
    data[row["blob_offset"] + 5] ^= 0x01
    arc.write_bytes(bytes(data))
    assert not row["compressed"]
    with open_archive(arc) as a:
        got = dict(a.read_many(sorted(files), verify=False))
        assert got["r/2.bin"] != files["r/2.bin"] and len(got["r/2.bin"]) == len(files["r/2.bin"])
        assert {p: d for p, d in got.items() if p != "r/2.bin"} == {
            p: d for p, d in files.items() if p != "r/2.bin"}
        with pytest.raises(ZnippyError, match="r/2.bin"):
            dict(a.read_many(sorted(files)))
        it = a.read_many(sorted(files), ordered=True, verify=False)
        assert next(it) == ("r/0.bin", files["r/0.bin"])
        it.close()  # type: ignore[attr-defined]  # the core's iterator, as a generator's close
        assert list(it) == []


def test_a_remote_source_that_fails_raises_its_error(tmp_path: Path) -> None:
    """A remote archive's blobs come through the Python fetch (``read.many.fetch_blobs``): an
    error it raises ends the iteration with that error, after the units read before it."""
    from remote_server import RangeServer

    from znippy_sql.errors import RemoteError

    files = {f"d/{i:03d}.txt": (f"x{i} " * 3000).encode() for i in range(600)}
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry(p, data=d) for p, d in files.items()], fsync=False, pack=False)
    srv = RangeServer()
    try:
        srv.put("a.znippy", arc.read_bytes())
        with open_archive(f"{srv.url}/a.znippy", cache=False) as a:
            a.lookup_columns  # noqa: B018  (the tail first)
            calls = []
            prefetch = a.source.prefetch

            def failing(*args: Any) -> None:
                calls.append(1)
                if len(calls) > 1:
                    raise RemoteError("the store went away", path=a.path)
                prefetch(*args)

            a.source.prefetch = failing  # type: ignore[method-assign, assignment]
            got = []
            with pytest.raises(RemoteError, match="the store went away"):
                for pair in a.read_many(sorted(files), workers=1):
                    got.append(pair)
            assert len(got) == 256 and got == [(p, files[p]) for p, _ in got]
    finally:
        srv.close()
