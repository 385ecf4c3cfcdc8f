"""Remote archives over HTTP: the request plan, the tail cache, faults and errors, counted at
a real server of our own (tests/remote_server.py) on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from conftest import random_bytes, text_bytes
from remote_server import RangeServer
from znippy_sql import Entry, RemoteError, open_archive, write_archive
from znippy_sql.format.rangeio import MappedSource
from znippy_sql.format.schema import GroupKey
from znippy_sql.remote import source as rsource
from znippy_sql.remote.url import parse

REPOS = ("central", "local", "mirror", "snapshots")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tails an open keeps by default go under the test's own directory."""
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))


def _entries() -> list[Entry]:
    """Four repos of 300 files each, a few multi-chunk files, some incompressible."""
    out = []
    for r, repo in enumerate(REPOS):
        for i in range(300):
            data = (random_bytes(900 + i, seed=r * 1000 + i) if i % 3 == 0
                    else text_bytes(400 + 7 * i, seed=r * 1000 + i))
            out.append(Entry(f"{repo}/pkg{i % 17}/f{i}.txt", data=data, repo=repo))
        out.append(Entry(f"{repo}/big.bin", data=text_bytes(300_000, seed=r), repo=repo))
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("remote") / "repos.znippy"
    # the layout before packing and index compression: the GET and byte counts below are
    # per file and per plain stream head (a compressed index puts the streams' heads ~15 KB
    # apart, so the coalescer fetches them in one GET: 2 GETs and 66,880 B at register
    # instead of 6 GETs and 24,576 B)
    write_archive(out, _entries(), block_size=64 << 10, workers=2, fsync=False, pack=False,
                  index_compression=False)
    return out


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("remote") / "small.znippy"
    write_archive(out, [Entry(f"d/f{i}.txt", data=text_bytes(200 + i, seed=i)) for i in range(20)],
                  fsync=False, pack=False)
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[RangeServer]:
    srv = RangeServer()
    yield srv
    srv.close()


@pytest.fixture()
def srv(server: RangeServer, archive: Path, small: Path) -> RangeServer:
    server.put("repos.znippy", archive.read_bytes())
    server.put("small.znippy", small.read_bytes())
    server.reset()
    return server


def _url(srv: RangeServer, name: str = "repos.znippy") -> str:
    return f"{srv.url}/{name}"


def _ranges(srv: RangeServer) -> list[tuple[int, int]]:
    """The ``[start, end)`` of every counted GET (suffix ranges as negative starts)."""
    out = []
    for h in srv.gets():
        a, b = (h.range or "bytes=0-").removeprefix("bytes=").split("-")
        out.append((-int(b), 0) if a == "" else (int(a), int(b) + 1 if b else -1))
    return out


# -- the request plan -----------------------------------------------------------------------
def test_open_small_archive_is_one_suffix_get(srv: RangeServer, small: Path) -> None:
    with open_archive(_url(srv, "small.znippy"), cache=False) as arc:
        assert [h.range for h in srv.hits] == [f"bytes=-{rsource.TAIL_GUESS}"]
        assert srv.bytes_sent() == small.stat().st_size  # all of it: smaller than the guess
        srv.reset()
        assert arc.read("d/f3.txt") == text_bytes(203, seed=3)
        assert arc.select() == open_archive(small).select()
        assert srv.hits == []  # everything came with the tail


def test_open_reads_the_manifest_in_at_most_one_more_get(
        srv: RangeServer, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = open_archive(archive)
    manifest_len = archive.stat().st_size - local.manifest_offset
    monkeypatch.setattr(rsource, "TAIL_GUESS", manifest_len // 2)  # a footer, half a manifest
    with open_archive(_url(srv), cache=False) as arc:
        assert len(srv.gets()) == 2
        assert _ranges(srv)[1] == (local.manifest_offset, archive.stat().st_size - manifest_len // 2)
        assert arc.manifest.equals(local.manifest)
        assert arc.groups == local.groups


def test_cat_after_open_is_one_get_of_its_blob(srv: RangeServer, archive: Path) -> None:
    local = open_archive(archive)
    info = local.find("local/pkg3/f3.txt")
    assert info is not None and len(info.chunks) == 1
    with open_archive(_url(srv), cache=False) as arc:
        assert len(srv.gets()) == 1  # the tail (lookup and trie are in it)
        srv.reset()
        assert arc.read("local/pkg3/f3.txt") == local.read("local/pkg3/f3.txt")
        c = info.chunks[0]
        assert _ranges(srv) == [(c.blob_offset, c.blob_offset + c.blob_size)]
        assert srv.bytes_sent() == c.blob_size


def test_cat_of_a_big_tail_fetches_lookup_and_trie_in_one_get(
        srv: RangeServer, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rsource, "TAIL_GUESS", 4096)
    local = open_archive(archive)
    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        assert arc.read("mirror/pkg1/f1.txt") == local.read("mirror/pkg1/f1.txt")
        assert len(srv.gets()) == 2  # lookup + trie, then the blob
        srv.reset()
        assert arc.read("mirror/pkg2/f2.txt") == local.read("mirror/pkg2/f2.txt")
        assert len(srv.gets()) == 1


def _group_range(local: Any, repo: str) -> tuple[int, int]:
    rows = [r for r in local.manifest_rows if r.key.repo == repo]
    assert len(rows) == 1
    return rows[0].index_offset, rows[0].index_offset + rows[0].index_len


def test_ls_repo_reads_only_that_groups_sub_index(
        srv: RangeServer, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rsource, "TAIL_GUESS", 4096)
    local = open_archive(archive)
    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        got = arc.index(repo="mirror")
        assert got.equals(local.index(repo="mirror"))
        start, end = _group_range(local, "mirror")
        (a, b), = _ranges(srv)
        assert a <= start and end <= b and b - a - (end - start) < rsource.GAP  # coalesced


def test_polars_filter_on_repo_reads_only_that_group(
        srv: RangeServer, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql.polars import scan

    monkeypatch.setattr(rsource, "TAIL_GUESS", 4096)
    local = open_archive(archive)
    from znippy_sql.views.heads import HEAD

    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        # the groups' schema heads; stored_size (a share of blobs any group may point at,
        # views/shares.py) reads every sub-index, so this scan leaves it out
        lf = scan(arc).filter(pl.col("repo") == "snapshots").select(pl.exclude("stored_size"))
        assert len(srv.gets()) <= len(arc.groups)
        assert all(b - a <= HEAD + rsource.KEEP_GAP for a, b in _ranges(srv))
        srv.reset()
        got = lf.collect()
        want = scan(archive).filter(pl.col("repo") == "snapshots").select(
            pl.exclude("stored_size")).collect()
        assert got.sort("relative_path").equals(want.sort("relative_path"))
        start, end = _group_range(local, "snapshots")
        assert len(srv.gets()) == 1
        assert all(start <= a and b <= end for a, b in _ranges(srv))  # that group's range only
        assert srv.bytes_sent() <= end - start


def test_extract_of_a_repo_coalesces_its_blobs(srv: RangeServer, archive: Path,
                                               tmp_path: Path) -> None:
    local = open_archive(archive)
    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        report = arc.extract(tmp_path / "remote", repo="local")
        sent, gets = srv.bytes_sent(), len(srv.gets())
    want = local.extract(tmp_path / "local", repo="local")
    assert report.ok and report.written == want.written and report.files == 301
    for p in want.written:
        assert (tmp_path / "remote" / p).read_bytes() == (tmp_path / "local" / p).read_bytes()
    idx = local.index(repo="local")
    stored = sum(idx.column("blob_size").to_pylist())
    assert stored <= sent < stored + gets * rsource.GAP
    assert gets <= 8  # 301 files: units of 256 small files, a big one; not one GET a file


def test_extract_of_everything_is_bounded_and_verified(srv: RangeServer, archive: Path,
                                                        tmp_path: Path) -> None:
    local = open_archive(archive)
    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        report = arc.extract(tmp_path / "all", workers=2)
        assert report.ok and report.files == len(local.select())
        assert len(srv.gets()) < report.files / 50
        assert not arc.source._transient  # every unit's blobs went with it


def test_corrupt_blob_served_remotely_fails_its_checksum(
        srv: RangeServer, archive: Path, tmp_path: Path) -> None:
    local = open_archive(archive)
    info = local.find("central/pkg5/f5.txt")
    assert info is not None
    data = bytearray(archive.read_bytes())
    c = info.chunks[0]
    data[c.blob_offset + c.blob_size // 2] ^= 0xFF
    url = srv.put("hurt.znippy", bytes(data))
    with open_archive(url, cache=False) as arc:
        report = arc.extract(tmp_path / "x", glob="central/pkg5/*")
        assert "central/pkg5/f5.txt" in report.failed
        assert not (tmp_path / "x" / "central/pkg5/f5.txt").exists()
        assert not arc.verify().ok


# -- the tail cache -------------------------------------------------------------------------
def test_second_open_of_unchanged_archive_is_one_conditional_request(
        srv: RangeServer, archive: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    with open_archive(_url(srv), cache=cache) as first:
        files = first.select()
    srv.reset()
    with open_archive(_url(srv), cache=cache) as again:
        assert [(h.status, h.sent) for h in srv.hits] == [(304, 0)]
        assert again.select() == files
        assert again.read("central/pkg1/f1.txt") == open_archive(archive).read(
            "central/pkg1/f1.txt")
    # a changed object: the same one request brings the new tail
    new = tmp_path / "new.znippy"
    write_archive(new, [Entry("only.txt", data=b"new content")], fsync=False)
    srv.put("repos.znippy", new.read_bytes())
    srv.reset()
    with open_archive(_url(srv), cache=cache) as changed:
        assert [h.status for h in srv.hits] == [206]
        assert changed.select() == ["only.txt"]
        assert changed.read("only.txt") == b"new content"


def test_no_cache_writes_nothing(srv: RangeServer, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "c"))
    open_archive(_url(srv), cache=False).close()
    assert not (tmp_path / "c").exists()
    open_archive(_url(srv)).close()  # the default: the cache directory of the environment
    assert len(list((tmp_path / "c").iterdir())) == 1


def test_damaged_cache_entry_is_a_miss(srv: RangeServer, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    open_archive(_url(srv), cache=cache).close()
    (entry,) = cache.iterdir()
    entry.write_bytes(entry.read_bytes()[:-100])
    srv.reset()
    with open_archive(_url(srv), cache=cache) as arc:
        assert [h.status for h in srv.hits] == [206]  # unconditional: the entry was not used
        assert arc.groups


# -- faults ---------------------------------------------------------------------------------
def test_503s_are_retried_then_succeed(srv: RangeServer) -> None:
    srv.fault("status", times=2)
    with open_archive(_url(srv), cache=False) as arc:
        assert [h.status for h in srv.hits] == [503, 503, 206]
        assert arc.groups


def test_resets_are_retried(srv: RangeServer) -> None:
    with open_archive(_url(srv), cache=False) as arc:
        srv.reset()
        srv.fault("reset", times=2)
        assert arc.read("central/pkg1/f1.txt")
        assert [h.status for h in srv.hits] == [0, 0, 206]


def test_retries_are_bounded_and_configurable(srv: RangeServer) -> None:
    srv.fault("status", times=20)
    with pytest.raises(RemoteError) as err:
        open_archive(_url(srv), cache=False)
    assert len(srv.hits) == 4  # 1 + 3 retries (the default)
    assert err.value.path == _url(srv)
    assert "after 3 retries" in str(err.value) and "503" in str(err.value)
    srv.reset()
    srv.fault("status", times=20)
    with pytest.raises(RemoteError):
        open_archive(_url(srv), cache=False, storage_options={"max_retries": "1"})
    assert len(srv.hits) == 2


def test_short_reads_are_resumed_and_never_taken_as_data(srv: RangeServer,
                                                         archive: Path) -> None:
    want = open_archive(archive).read("local/pkg2/f2.txt")
    with open_archive(_url(srv), cache=False) as arc:
        srv.fault("short", times=1)
        assert arc.read("local/pkg2/f2.txt") == want  # the rest was asked for again
        srv.reset()
        srv.fault("short", times=20)
        with pytest.raises(RemoteError, match="repos.znippy"):
            arc.read("local/pkg4/f4.txt")


def test_a_server_ignoring_range_is_detected(srv: RangeServer) -> None:
    srv.fault("ignore_range", times=5)
    with pytest.raises(RemoteError, match="does not answer Range"):
        open_archive(_url(srv), cache=False)
    srv.reset()
    with open_archive(_url(srv), cache=False) as arc:
        srv.fault("ignore_range", times=5)
        with pytest.raises(RemoteError, match="does not answer Range"):
            arc.read("local/pkg4/f4.txt")


def test_an_object_that_changes_after_open_fails_clearly(srv: RangeServer, archive: Path,
                                                         tmp_path: Path) -> None:
    with open_archive(_url(srv), cache=False) as arc:
        data = bytearray(archive.read_bytes())
        data[10] ^= 1  # another version of the object (another ETag)
        srv.put("repos.znippy", bytes(data))
        with pytest.raises(RemoteError, match="changed while it was read"):
            arc.read("central/pkg1/f1.txt")
        with pytest.raises(RemoteError, match="changed while it was read"):
            arc.extract(tmp_path / "x", glob="central/pkg1/*")
        assert list((tmp_path / "x").rglob("*.txt")) == []


def test_timeout_is_set_and_named(srv: RangeServer) -> None:
    srv.fault("hang", times=5)
    with pytest.raises(RemoteError, match="timed out"):
        open_archive(_url(srv), cache=False,
                     storage_options={"timeout": "300ms", "max_retries": "0"})


def test_ctrl_c_is_not_held_by_a_stalled_request(srv: RangeServer) -> None:
    import signal
    import time

    srv.fault("hang", seconds=20)
    code = ("import sys; from znippy_sql import open_archive; print('go', flush=True); "
            f"open_archive({_url(srv)!r}, cache=False)")
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stdout.readline() == b"go\n"
        while not srv.hits:  # the request is out and stalled
            time.sleep(0.02)
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert time.monotonic() - started < 3
    assert b"KeyboardInterrupt" in err


# -- errors ---------------------------------------------------------------------------------
def test_missing_object_and_bad_urls(srv: RangeServer) -> None:
    with pytest.raises(RemoteError, match="no such object") as err:
        open_archive(f"{srv.url}/missing.znippy", cache=False)
    assert err.value.path == f"{srv.url}/missing.znippy"
    with pytest.raises(RemoteError, match="names no bucket"):
        open_archive("s3:///key.znippy")
    with pytest.raises(RemoteError, match="names no object"):
        open_archive("s3://bucket/")
    with pytest.raises(RemoteError, match="not a count"):
        open_archive(_url(srv), storage_options={"max_retries": "many"})
    with pytest.raises(RemoteError, match="not a duration"):
        open_archive(_url(srv), storage_options={"timeout": "soon"})
    with pytest.raises(RemoteError, match="unknown storage option"):
        open_archive("s3://bucket/a.znippy", storage_options={"no_such_option": "1"})


def test_connection_refused_is_a_remote_error() -> None:
    from remote_server import free_port

    url = f"http://127.0.0.1:{free_port()}/a.znippy"
    with pytest.raises(RemoteError, match="connection") as err:
        open_archive(url, cache=False, storage_options={"max_retries": "1",
                                                        "init_backoff": "10ms"})
    assert err.value.path == url


def test_not_an_archive(srv: RangeServer) -> None:
    url = srv.put("junk.bin", b"x" * 5000)
    with pytest.raises(Exception, match="ZNPYMIDX") as err:
        open_archive(url, cache=False)
    assert url in str(err.value)


def test_credentials_never_shown(srv: RangeServer) -> None:
    url = f"http://user:hunter2@127.0.0.1:{srv.port}/missing.znippy?sig=SECRET"
    assert "hunter2" not in parse(url).url and "SECRET" not in parse(url).url
    assert "SEKRIT" not in repr(parse("s3://b/k.znippy", {"secret_access_key": "SEKRIT"}))
    with pytest.raises(RemoteError) as err:
        open_archive(url, cache=False)
    assert "hunter2" not in str(err.value) and "SECRET" not in str(err.value)


# -- local URLs and the fsspec fallback -----------------------------------------------------
def test_file_url_keeps_the_memory_map(archive: Path) -> None:
    with open_archive(archive.as_uri()) as arc:
        assert isinstance(arc.source, MappedSource)
        assert arc.select() == open_archive(archive).select()


def test_fsspec_fallback_reads_the_same(archive: Path, tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/znippy-test/repos.znippy", archive.read_bytes())
    local = open_archive(archive)
    with open_archive("memory://znippy-test/repos.znippy", cache=False) as arc:
        assert type(arc.source.obj).__name__ == "FsspecObject"
        assert arc.select() == local.select()
        assert arc.read("local/big.bin") == local.read("local/big.bin")
        report = arc.extract(tmp_path / "x", repo="central")
        assert report.ok and report.files == 301
    fs.rm("/znippy-test/repos.znippy")


# -- the CLI --------------------------------------------------------------------------------
def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    exe = Path(sys.executable).parent / "znippy-sql"
    return subprocess.run([str(exe), *args], capture_output=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_cli_ls_cat_and_errors(srv: RangeServer, archive: Path, tmp_path: Path) -> None:
    env = {"ZNIPPY_SQL_CACHE": str(tmp_path / "cache")}
    local = _cli("ls", str(archive), "--repo", "mirror")
    remote = _cli("ls", _url(srv), "--repo", "mirror", env=env)
    assert remote.returncode == 0 and remote.stdout == local.stdout
    srv.reset()
    out = _cli("cat", _url(srv), "mirror/pkg1/f1.txt", env=env)
    assert out.returncode == 0
    assert out.stdout == open_archive(archive).read("mirror/pkg1/f1.txt")
    assert [h.status for h in srv.hits][0] == 304  # the tail came from the cache
    srv.reset()
    assert _cli("ls", _url(srv), "--no-cache", env=env).returncode == 0
    assert [h.status for h in srv.hits][0] == 206
    bad = _cli("cat", f"{srv.url}/missing.znippy", "x", "--storage-option", "max_retries=0",
               env=env)
    assert bad.returncode == 2
    assert bad.stderr.decode().count("\n") == 1 and "no such object" in bad.stderr.decode()
    usage = _cli("ls", _url(srv), "--storage-option", "novalue")
    assert usage.returncode == 2 and b"KEY=VALUE" in usage.stderr


# -- DuckDB ---------------------------------------------------------------------------------
def test_duckdb_register_reads_the_manifest_and_stream_heads_only(
        srv: RangeServer, archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    from znippy_sql.duckdb import register

    monkeypatch.setattr(rsource, "TAIL_GUESS", 4096)
    monkeypatch.setattr(rsource, "GAP", 0)  # (so the heads are not widened into the bodies)
    local = open_archive(archive)
    index_bytes = archive.stat().st_size - local.tail_offset
    con = duckdb.connect()
    register(con, _url(srv), "r")
    register(con, archive, "l")
    assert len(srv.gets()) <= 1 + 5  # open; the heads of the lookup and 4 groups (parallel)
    assert srv.bytes_sent() <= 6 * 4096 < index_bytes / 8
    srv.reset()
    q = "SELECT repo, count(*), sum(size) FROM {}_files GROUP BY repo ORDER BY repo"
    assert con.sql(q.format("r")).fetchall() == con.sql(q.format("l")).fetchall()
    first = len(srv.gets())
    assert 1 <= first <= 4 and srv.bytes_sent() < index_bytes  # the sub-indexes, once
    srv.reset()
    assert con.sql(q.format("r")).fetchall() == con.sql(q.format("l")).fetchall()
    assert srv.hits == []  # the second scan reads what the first one fetched
    lk = "SELECT count(*) FROM {}_lookup"
    assert con.sql(lk.format("r")).fetchall() == con.sql(lk.format("l")).fetchall()
    con.close()


def test_append_to_a_url_is_refused_clearly(srv: RangeServer, tmp_path: Path) -> None:
    from znippy_sql import append_archive

    with pytest.raises(RemoteError, match="local archives only") as err:
        append_archive(_url(srv), [Entry("new.txt", data=b"x")])
    assert err.value.path == _url(srv)
    assert srv.hits == []


def test_rust_layout_archive_reads_the_same_remotely(srv: RangeServer, tmp_path: Path) -> None:
    """No __lookup__ / __trie__ (the Rust tool's layout): the lookup is built from the
    sub-indexes, fetched by range like any other."""
    entries = [Entry(f"r{i % 3}/f{i}.txt", data=text_bytes(300 + i, seed=i), repo=f"r{i % 3}")
               for i in range(60)]
    out = tmp_path / "rust.znippy"
    write_archive(out, entries, compat="rust-0.8", fsync=False)
    url = srv.put("rust.znippy", out.read_bytes())
    local = open_archive(out)
    with open_archive(url, cache=False) as arc:
        assert arc.lookup_in_memory and arc.select() == local.select()
        assert all(arc.read(p) == local.read(p) for p in local.select())
        report = arc.extract(tmp_path / "x", repo="r1")
        assert report.ok and report.files == 20
        assert arc.verify().ok


# -- a large index: the request plan of docs/remote.md (issue 23 section 3) -----------------
@pytest.fixture(scope="module")
def big_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30,000 files in 40 repos with ~165-character random paths: a 7 MB lookup and a 4.7 MB
    trie (random paths share few prefixes), together more than one request piece (8 MiB)."""
    import random

    rnd = random.Random(5)
    out = tmp_path_factory.mktemp("remote") / "big-index.znippy"

    def seg() -> str:
        return "%048x" % rnd.getrandbits(192)

    write_archive(out, [Entry(f"org/{seg()}/{seg()}/{seg()}/a-{i:06d}.pom",
                              data=b"<project>%d</project>" % i, repo=f"r{i % 40}")
                        for i in range(30_000)], workers=2, fsync=False, pack=False,
                  index_compression=False)  # a lookup + trie over 10 MB, in one batch
    return out


@pytest.mark.slow
def test_cat_on_a_large_index_is_three_gets_cold_two_warm(
        server: RangeServer, big_index: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Cold: the suffix, the lookup and trie in one GET, the blob. The cache then holds all
    of it, so the second run is one conditional GET (304) and the blob."""
    from znippy_sql.cli import main

    local = open_archive(big_index)
    lk, tr = (local.manifest_row(GroupKey(-1, "", n)) for n in ("__lookup__", "__trie__"))
    assert lk.index_len + tr.index_len >= 10_000_000
    name = local.select(glob="*/a-017123.pom")[0]
    (chunk,) = local.find(name).chunks  # type: ignore[union-attr]
    server.put("big.znippy", big_index.read_bytes())
    size = big_index.stat().st_size
    url = f"{server.url}/big.znippy"
    cache = ["--storage-option", "max_retries=0"]
    for run in ("cold", "warm", "warm again"):
        server.reset()
        assert main(["cat", url, name, *cache]) == 0
        assert capsys.readouterr().out.encode() == b"<project>17123</project>"
        gets = [(h.status, h.range) for h in server.gets()]
        blob = (206, f"bytes={chunk.blob_offset}-{chunk.blob_offset + chunk.blob_size - 1}")
        if run == "cold":
            tail_start = size - rsource.TAIL_GUESS
            assert gets == [(206, f"bytes=-{rsource.TAIL_GUESS}"),
                            (206, f"bytes={lk.index_offset}-{tail_start - 1}"), blob], gets
            assert server.bytes_sent() == size - lk.index_offset + chunk.blob_size
        else:
            assert gets == [(304, f"bytes=-{rsource.TAIL_GUESS}"), blob], (run, gets)
            assert server.bytes_sent() == chunk.blob_size
