"""The tail cache with a server that ignores ``If-None-Match`` on a range request (Python's
own ``http.server``, some CDNs): it answers 206 with the ETag the cache holds, and that is
the cached version all the same. A warm ``cat`` then costs what it costs at a server that
answers 304, fewer requests than a cold one; a changed ETag still brings the new tail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import text_bytes
from remote_server import RangeServer
from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.remote import source as rsource

FILE = "repo/pkg3/f3.txt"


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("etag") / "a.znippy"
    write_archive(out, [Entry(f"repo/pkg{i % 7}/f{i}.txt", data=text_bytes(300 + i, seed=i))
                        for i in range(400)], fsync=False, pack=False,
                  index_compression=False)
    return out


@pytest.fixture(params=[False, True], ids=["304", "ignores-if-none-match"])
def srv(request: pytest.FixtureRequest, archive: Path) -> Iterator[RangeServer]:
    server = RangeServer(ignore_if_none_match=request.param)
    server.put("a.znippy", archive.read_bytes())
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _small_tail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A first GET too small for the lookup and the trie: a cold cat costs three GETs."""
    monkeypatch.setattr(rsource, "TAIL_GUESS", 4096)
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tails"))


def _cat(srv: RangeServer, capfdbinary: pytest.CaptureFixture[bytes]) -> tuple[bytes, int]:
    srv.reset()
    assert main(["cat", f"{srv.url}/a.znippy", FILE]) == 0
    return capfdbinary.readouterr().out, len(srv.hits)


def test_a_warm_cat_uses_the_cache_whatever_the_server_does_with_if_none_match(
        srv: RangeServer, archive: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    want = open_archive(archive).read(FILE)
    cold, cold_requests = _cat(srv, capfdbinary)
    warm, warm_requests = _cat(srv, capfdbinary)
    assert cold == warm == want
    assert cold_requests == 3  # the tail, the lookup and trie, the blob
    assert warm_requests == 2  # the tail (304, or 206 with the same ETag), the blob
    first = srv.hits[0]
    assert first.status == (206 if srv.state.ignore_if_none_match else 304)


def test_a_changed_object_still_brings_its_new_tail(srv: RangeServer, tmp_path: Path) -> None:
    url = f"{srv.url}/a.znippy"
    open_archive(url).close()
    new = tmp_path / "new.znippy"
    write_archive(new, [Entry("only.txt", data=b"new content")], fsync=False)
    srv.put("a.znippy", new.read_bytes())
    srv.reset()
    with open_archive(url) as changed:
        assert [h.status for h in srv.hits] == [206]
        assert changed.select() == ["only.txt"]
        assert changed.read("only.txt") == b"new content"
