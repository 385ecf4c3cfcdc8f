"""Archive.read_many / iter_files: every file's bytes, in blob order (or the given order),
checked, decoded in worker threads; remote ranges coalesced into few GETs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import random_bytes, text_bytes
from remote_server import RangeServer
from znippy_sql import ChecksumError, Entry, NotFoundError, open_archive, views, write_archive


def _entries() -> list[Entry]:
    out = [Entry(f"d{i % 5}/f{i:03d}.txt", data=text_bytes(300 + 11 * i, i), repo="ab"[i % 2])
           for i in range(400)]
    out += [Entry(f"raw/{i}.bin", data=random_bytes(2000, 50 + i)) for i in range(5)]
    out += [Entry("big/multi.log", data=text_bytes(700_000, 99)),
            Entry("dup/a.txt", data=b"same"), Entry("dup/b.txt", data=b"same"),
            Entry("empty.txt", data=b"")]
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("many") / "many.znippy"
    write_archive(out, _entries(), block_size=64 << 10, workers=2, fsync=False)
    return out


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))


def test_every_file_once_in_blob_order(archive: Path) -> None:
    want = {e.relative_path: e.data for e in _entries()}
    paths = sorted(want, reverse=True)
    with open_archive(archive) as a:
        got = list(a.read_many(paths, workers=2))
        firsts = [a.find(p).chunks[0].blob_offset for p, _ in got]  # type: ignore[union-attr]
        assert firsts == sorted(firsts)
        assert dict(got) == want and len(got) == len(paths)
        assert [p for p, _ in a.read_many(paths, ordered=True)] == paths
        assert list(a.read_many(["dup/a.txt", "dup/a.txt"])) == [("dup/a.txt", b"same")] * 2
        rows = views.batches(a, "files", ["relative_path"], views.Where(repo="a"))
        files = dict(a.iter_files(rows))
        assert files == {p: d for p, d in want.items() if p[0] == "d" and p[1].isdigit()
                         and int(p[-7:-4]) % 2 == 0}


def test_units_are_bounded(tmp_path: Path) -> None:
    """Units: up to 8 MiB of original bytes or 256 files, in the order they are read."""
    from znippy_sql import corelib
    from znippy_sql.read.many import (UNIT_BYTES, UNIT_FILES, decode_frame, local_path,
                                      lookup_buffers)

    arc = tmp_path / "u.znippy"
    entries = [Entry(f"a/{i:02d}", data=bytes([i]) * (3 << 20)) for i in range(10)]
    entries += [Entry(f"b/{i:03d}", data=b"x" * 100) for i in range(600)]
    write_archive(arc, entries, workers=2, fsync=False)
    with open_archive(arc) as a:
        paths = [e.relative_path for e in entries]
        reader = corelib.read_many(lookup_buffers(a), a.tail_offset, False, local_path(a), None,
                                   decode_frame, paths, lambda k: a.read(paths[k]), True, True,
                                   UNIT_BYTES, UNIT_FILES, 2, None, archive=a.path)
        units = reader.unit_files()
        assert all(n <= 256 for n in units) and sum(units) == 610
        assert units[:5] == [2, 2, 2, 2, 256]  # the last big one and 255 small ones
        assert [p for p, _ in a.read_many(paths, ordered=True)] == paths


def test_unknown_path_raises_before_anything_is_read(archive: Path) -> None:
    with open_archive(archive) as a:
        a.find("d0/f000.txt")  # the lookup and the trie: then count the blobs' bytes
        before = a.source.bytes_read
        with pytest.raises(NotFoundError, match="nope"):
            a.read_many(["d0/f000.txt", "nope"])
        assert a.source.bytes_read == before


def test_a_corrupt_blob_fails_its_checksum(archive: Path, tmp_path: Path) -> None:
    with open_archive(archive) as a:
        chunk = a.find("d1/f001.txt").chunks[0]  # type: ignore[union-attr]
    bad = tmp_path / "bad.znippy"
    data = bytearray(archive.read_bytes())
    data[chunk.blob_offset + chunk.blob_size // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    with open_archive(bad) as a, pytest.raises((ChecksumError, Exception)) as info:
        dict(a.read_many(["d0/f000.txt", "d1/f001.txt"]))
    assert "d1/f001.txt" in str(info.value)


@pytest.fixture(scope="module")
def server() -> Iterator[RangeServer]:
    srv = RangeServer()
    yield srv
    srv.close()


def test_remote_reads_coalesce_into_few_gets(server: RangeServer, archive: Path) -> None:
    server.put("many.znippy", archive.read_bytes())
    want = {e.relative_path: e.data for e in _entries()}
    with open_archive(f"{server.url}/many.znippy", cache=False) as a:
        a.lookup  # the tail first: then count the blob requests
        server.reset()
        got = dict(a.read_many(sorted(want), workers=2))
        gets = len(server.gets())
        assert not a.source._transient  # every unit's ranges were released
    assert got == want
    assert gets < len(want) / 50


def test_extract_reads_through_the_bulk_reader(server: RangeServer, tmp_path: Path) -> None:
    """``Archive.extract`` reads its units through the core (``read.many.fetch_blobs`` for a
    remote archive): remote blobs fetched in few coalesced GETs, every unit's ranges released,
    each packed blob read once, the files those of ``read_many``, byte for byte."""
    import ast
    import znippy_sql.read.extract as extract_module

    calls = {n.func.attr for n in ast.walk(ast.parse(Path(extract_module.__file__).read_text()))
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}
    assert not calls & {"one_chunk_views", "prefetch"}, "extract reads past the bulk reader"
    packed = tmp_path / "packed.znippy"
    unshared = [e for e in _entries() if not e.relative_path.startswith("dup/")]
    write_archive(packed, unshared, block_size=64 << 10, workers=2, fsync=False, pack=True)
    server.put("packed.znippy", packed.read_bytes())
    with open_archive(packed) as a:
        want = dict(a.read_many(a.select()))
        blobs = {(int(o), int(n)) for o, n in zip(a.lookup.column("blob_offset").to_pylist(),
                                                  a.lookup.column("blob_size").to_pylist())}
        a.source.bytes_read = 0
        assert a.extract(str(tmp_path / "local"), workers=1).ok
        assert a.source.bytes_read == sum(n for _, n in blobs)  # each blob, a pack too, once
    with open_archive(f"{server.url}/packed.znippy", cache=False) as r:
        r.lookup  # noqa: B018  (the tail first: then count the blob requests)
        server.reset()
        assert r.extract(str(tmp_path / "remote"), workers=2).ok
        assert len(server.gets()) < len(want) / 50 and not r.source._transient
    for root in ("local", "remote"):
        got = {str(p.relative_to(tmp_path / root)): p.read_bytes()
               for p in (tmp_path / root).rglob("*") if p.is_file()}
        assert got == want
