"""Remote archives on a real S3 server (SeaweedFS, ``weed server -s3``, started here on
127.0.0.1): every read path gives what it gives locally; writes upload on a clean exit only;
S3's own errors (missing bucket, denied access) are told apart. A counting proxy in front of
the server (tests/remote_server.py) checks the request plan on S3 traffic too."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import obstore
import polars as pl
import pytest

from _query_expect import corpus
from remote_server import ACCESS_KEY, SECRET_KEY, RangeServer, Seaweed
from test_duckdb import META, _signer, git_sections
from znippy_sql import Entry, RemoteError, ReservedSection, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.polars import scan

BUCKET = "znippy-test"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tails an open keeps by default go under the test's own directory."""
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    server = Seaweed(tmp_path_factory.mktemp("weed"))
    yield server
    server.close()


def _options(endpoint: str, **more: str) -> dict[str, str]:
    return {"endpoint": endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "region": "us-east-1", **more}


@pytest.fixture(scope="module")
def s3(weed: Seaweed) -> dict[str, str]:
    return _options(weed.endpoint)


@pytest.fixture(scope="module")
def proxy(weed: Seaweed) -> Iterator[RangeServer]:
    srv = RangeServer(upstream=("127.0.0.1", weed.port))
    yield srv
    srv.close()


def _put(s3: dict[str, str], key: str, data: bytes) -> str:
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=s3["endpoint"], access_key_id=ACCESS_KEY,
                    secret_access_key=SECRET_KEY, region="us-east-1",
                    client_options={"allow_http": True})
    obstore.put(store, key, data)
    return f"s3://{BUCKET}/{key}"


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory, s3: dict[str, str]) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("s3") / "full.znippy"
    write_archive(out, corpus(), block_size=256, workers=1, fsync=False, signer=_signer(),
                  reserved_sections=[ReservedSection("__meta__", META), *git_sections()])
    return out, _put(s3, "dumps/full.znippy", out.read_bytes())


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


# -- every read path, local and remote ------------------------------------------------------
def test_api_read_paths_match_local(full: tuple[Path, str], s3: dict[str, str],
                                    tmp_path: Path) -> None:
    path, url = full
    local = open_archive(path)
    with open_archive(url, storage_options=s3, cache=False) as arc:
        assert arc.manifest.equals(local.manifest) and arc.groups == local.groups
        assert arc.sections == local.sections
        for kw in ({}, {"repo": "local"}, {"pkg_type": "maven"}, {"glob": "notes/*"}):
            assert arc.select(**kw) == local.select(**kw)
        assert arc.index().equals(local.index())
        assert arc.lookup.equals(local.lookup)
        for p in local.select():
            assert arc.read(p) == local.read(p)
            with arc.open(p) as fh, local.open(p) as want:
                fh.seek(3)
                assert fh.read() == want.read()[3:]
        assert arc.meta.equals(local.meta)
        for name in local.sections:
            a, b = arc.section(name), local.section(name)
            assert (a.equals(b) if hasattr(a, "equals") else bytes(a) == bytes(b))
        got, want = arc.verify(), local.verify()
        assert got.ok and (got.files, got.chunks, got.bytes_checked) == (
            want.files, want.chunks, want.bytes_checked)
        for i, kw in enumerate(({}, {"repo": "central"}, {"glob": "*.jar"},
                                {"pkg_type": "pypi"}, {"paths": ["notes/a.txt", "docs/empty.txt"]})):
            r = arc.extract(tmp_path / f"r{i}", **kw)
            w = local.extract(tmp_path / f"l{i}", **kw)
            assert r.ok and r.written == w.written
            assert _tree(tmp_path / f"r{i}") == _tree(tmp_path / f"l{i}")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_cli_read_paths_match_local(full: tuple[Path, str], s3: dict[str, str],
                                    capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path, url = full
    opts = [f"--storage-option={k}={v}" for k, v in s3.items()] + ["--no-cache"]
    for args in (["ls"], ["ls", "-l", "--repo", "local"], ["ls", "--json", "--glob", "*.jar"],
                 ["cat", "{}", "notes/a.txt"], ["info", "--json"], ["verify", "--json"]):
        cmd = args[0]
        rest = [a for a in args[1:] if a != "{}"]
        lc, lout = _run(capsys, cmd, str(path), *rest)
        rc, rout = _run(capsys, cmd, url, *rest, *opts)
        assert (rc, _timeless(rout.replace(url, str(path)))) == (lc, _timeless(lout)), args
    code, _ = _run(capsys, "extract", url, "-o", str(tmp_path / "r"), "--repo", "local", *opts)
    assert code == 0
    _run(capsys, "extract", str(path), "-o", str(tmp_path / "l"), "--repo", "local")
    assert _tree(tmp_path / "r") == _tree(tmp_path / "l")
    code, out = _run(capsys, "sql", url, "SELECT count(*) AS n FROM full_files", *opts)
    assert code == 0 and out == _run(capsys, "sql", str(path),
                                     "SELECT count(*) AS n FROM full_files")[1]


def _timeless(out: str) -> str:
    return re.sub(r'"seconds": [0-9.e-]+', '"seconds": 0', re.sub(r" in [0-9.]+ s", "", out))


def _rows(con: Any, sql: str) -> list[str]:
    return sorted(map(repr, con.sql(sql).fetchall()))


def test_duckdb_views_and_macros_match_local(full: tuple[Path, str], s3: dict[str, str],
                                             tmp_path: Path) -> None:
    from znippy_sql.remote import configure

    path, url = full
    configure(storage_options=s3, cache=False)  # the macros open the archive by its URL
    try:
        con = duckdb.connect()
        register(con, url, "r")
        register(con, path, "l")
        for view in ("files", "chunks", "lookup", "manifest", "groups", "meta", "signatures",
                     "git_objects", "git_commits", "git_reach"):
            assert _rows(con, f"SELECT * FROM r_{view}") == _rows(con, f"SELECT * FROM l_{view}")
        for args in ("", ", repo := 'local'", ", pkg_type := 'maven'", ", glob := 'notes/*'"):
            assert (_rows(con, f"SELECT * FROM znippy_ls('r'{args})")
                    == _rows(con, f"SELECT * FROM znippy_ls('l'{args})"))
        assert (_rows(con, "SELECT * FROM znippy_cat('r', 'notes/a.txt')")
                == _rows(con, "SELECT * FROM znippy_cat('l', 'notes/a.txt')"))
        got = con.sql(f"SELECT relative_path, bytes_written, checksum_ok FROM "
                      f"znippy_extract('r', '{tmp_path / 'r'}', repo := 'central')").fetchall()
        want = con.sql(f"SELECT relative_path, bytes_written, checksum_ok FROM "
                       f"znippy_extract('l', '{tmp_path / 'l'}', repo := 'central')").fetchall()
        assert got == want and _tree(tmp_path / "r") == _tree(tmp_path / "l")
        con.close()
    finally:
        configure(storage_options={}, cache=True)


def test_polars_scans_and_pruning_match_local(full: tuple[Path, str], s3: dict[str, str]) -> None:
    path, url = full
    arc = open_archive(url, storage_options=s3, cache=False)
    for section in ("files", "chunks", "manifest", "lookup", "meta", "git_commits",
                    "git_objects", "git_reach", "signatures"):
        got = scan(arc, section).collect()  # type: ignore[arg-type]
        want = scan(path, section).collect()  # type: ignore[arg-type]
        key = got.columns[0]
        assert got.sort(key).equals(want.sort(key)), section
    pred = (pl.col("repo") == "central") & (pl.col("size") > 100)
    assert (scan(arc).filter(pred).select("relative_path", "chunks").collect().sort("relative_path")
            .equals(scan(path).filter(pred).select("relative_path", "chunks").collect()
                    .sort("relative_path")))
    fresh = open_archive(url, storage_options=s3, cache=False)
    # stored_size is left out: a file's share reads every group (a blob may be shared)
    lf = scan(fresh).filter(pl.col("repo") == "local").drop("stored_size")
    before = fresh.source.bytes_read
    lf.collect()
    rows = [r for r in fresh.manifest_rows if r.key.repo == "local" and r.key.pkg_type >= 0]
    assert fresh.source.bytes_read - before == sum(r.index_len for r in rows)


# -- the request plan on S3 traffic ---------------------------------------------------------
def test_s3_open_and_cat_requests(full: tuple[Path, str], proxy: RangeServer,
                                  weed: Seaweed) -> None:
    path, url = full
    proxy.reset()
    with open_archive(url, storage_options=_options(proxy.url), cache=False) as arc:
        assert len(proxy.gets()) == 1 and proxy.gets()[0].range.startswith("bytes=-")
        proxy.reset()
        assert arc.read("notes/a.txt") == open_archive(path).read("notes/a.txt")
        assert len(proxy.gets()) <= 1  # a small archive: its blob may have come with the tail


def test_s3_etag_changed_in_a_reply_is_refused(full: tuple[Path, str],
                                               proxy: RangeServer, tmp_path: Path) -> None:
    big = tmp_path / "big.znippy"
    from conftest import random_bytes

    write_archive(big, [Entry(f"f{i}.bin", data=random_bytes(50_000, seed=i))
                        for i in range(40)], fsync=False)  # more than the first GET holds
    url = _put(_options(proxy.url), "dumps/big.znippy", big.read_bytes())
    with open_archive(url, storage_options=_options(proxy.url), cache=False) as arc:
        proxy.reset()
        proxy.fault("etag")  # a reply from another version: the client must not use it
        with pytest.raises(RemoteError, match="changed while it was read"):
            arc.read("f3.bin")


def test_s3_cache_second_open_is_one_conditional_request(
        full: tuple[Path, str], proxy: RangeServer, tmp_path: Path) -> None:
    _, url = full
    opts = _options(proxy.url)
    open_archive(url, storage_options=opts, cache=tmp_path).close()
    proxy.reset()
    with open_archive(url, storage_options=opts, cache=tmp_path) as arc:
        assert [h.status for h in proxy.hits] == [304]
        assert arc.select()


# -- S3's errors ----------------------------------------------------------------------------
def test_s3_missing_bucket_object_and_denied(s3: dict[str, str], full: tuple[Path, str]) -> None:
    with pytest.raises(RemoteError, match="no such bucket") as err:
        open_archive("s3://no-such-bucket-here/a.znippy", storage_options=s3, cache=False)
    assert err.value.path == "s3://no-such-bucket-here/a.znippy"
    with pytest.raises(RemoteError, match="no such object"):
        open_archive(f"s3://{BUCKET}/dumps/missing.znippy", storage_options=s3, cache=False)
    wrong = {**s3, "secret_access_key": "not-the-secret"}
    with pytest.raises(RemoteError, match="access denied") as err:
        open_archive(full[1], storage_options=wrong, cache=False)
    assert "not-the-secret" not in str(err.value)


def test_s3_credentials_from_the_environment(full: tuple[Path, str], weed: Seaweed,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", weed.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    with open_archive(full[1], cache=False) as arc:
        assert arc.select() == open_archive(full[0]).select()


# -- writes: staged, uploaded on a clean exit -----------------------------------------------
def test_create_uploads_on_clean_exit(s3: dict[str, str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    for i in range(30):
        (src / "a" / f"f{i}.txt").write_text(f"file {i}\n" * (i + 1))
    url = f"s3://{BUCKET}/made/cli.znippy"
    opts = [f"--storage-option={k}={v}" for k, v in s3.items()]
    code, out = _run(capsys, "create", str(src), "-o", url, "--repo", "r", *opts)
    assert code == 0 and url in out
    write_archive(tmp_path / "local.znippy", src, repo="r", fsync=False)
    with open_archive(url, storage_options=s3, cache=False) as arc:
        local = open_archive(tmp_path / "local.znippy")
        assert arc.select() == local.select()
        assert all(arc.read(p) == local.read(p) for p in local.select())


def test_large_write_is_a_multipart_upload(s3: dict[str, str], proxy: RangeServer,
                                           tmp_path: Path) -> None:
    from conftest import random_bytes

    entries = [Entry(f"r/{i}.bin", data=random_bytes(1 << 20, seed=i)) for i in range(20)]
    url = f"s3://{BUCKET}/made/large.znippy"
    proxy.reset()
    report = write_archive(url, entries, storage_options=_options(proxy.url), workers=2)
    assert report.path == url and report.archive_bytes > 16 << 20
    assert any("uploads" in h.path and h.method == "POST" for h in proxy.hits)  # multipart
    with open_archive(url, storage_options=s3, cache=False) as arc:
        assert arc.read("r/7.bin") == random_bytes(1 << 20, seed=7)


def test_failed_write_leaves_nothing_under_the_key(s3: dict[str, str], tmp_path: Path) -> None:
    def entries() -> Iterator[Entry]:
        yield Entry("a.txt", data=b"a")
        raise OSError("the source went away")

    url = f"s3://{BUCKET}/made/failed.znippy"
    with pytest.raises(OSError, match="went away"):
        write_archive(url, entries(), storage_options=s3)
    with pytest.raises(RemoteError, match="no such object"):
        open_archive(url, storage_options=s3, cache=False)
    dup = [Entry("a.txt", data=b"a"), Entry("a.txt", data=b"b")]
    with pytest.raises(Exception, match="a.txt"):
        write_archive(url, dup, storage_options=s3)
    with pytest.raises(RemoteError, match="no such object"):
        open_archive(url, storage_options=s3, cache=False)


def test_info_json_names_the_url(full: tuple[Path, str], s3: dict[str, str],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, url = full
    code, out = _run(capsys, "info", url, "--json", "--no-cache",
                     *[f"--storage-option={k}={v}" for k, v in s3.items()])
    assert code == 0 and url in json.dumps(json.loads(out))


def test_failed_upload_leaves_nothing_under_the_key(s3: dict[str, str], proxy: RangeServer,
                                                    tmp_path: Path) -> None:
    from conftest import random_bytes

    entries = [Entry(f"r/{i}.bin", data=random_bytes(1 << 20, seed=i)) for i in range(12)]
    url = f"s3://{BUCKET}/made/refused.znippy"
    staging = set(Path(tempfile.gettempdir()).glob("znippy-upload-*"))
    proxy.reset()
    proxy.fault("status", times=1000, method="PUT")  # every part refused, every retry too
    opts = _options(proxy.url, max_retries="1", init_backoff="10ms")
    with pytest.raises(RemoteError, match="uploading") as err:
        write_archive(url, entries, storage_options=opts, workers=2)
    assert err.value.path == url
    assert set(Path(tempfile.gettempdir()).glob("znippy-upload-*")) == staging  # removed
    proxy.reset()
    with pytest.raises(RemoteError, match="no such object"):
        open_archive(url, storage_options=s3, cache=False)



# -- every function that takes an archive takes a URL (issue 23 section 3) -----------------
def test_every_face_takes_a_url(full: tuple[Path, str], s3: dict[str, str], tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    """Polars ``scan``/``read_files`` by URL string (the stamp ``stat``-ed the URL), DuckDB
    ``register`` and the macros by URL, every CLI command, module commands, the catalog."""
    from znippy_sql.polars import read_files
    from znippy_sql.remote import configure

    path, url = full
    configure(storage_options=s3, cache=False)
    try:
        for section in ("files", "chunks", "manifest", "lookup"):
            got, want = scan(url, section).collect(), scan(path, section).collect()
            key = got.columns[0]
            assert got.sort(key).equals(want.sort(key)), section
        many = scan([url, str(path)]).collect()
        assert sorted(set(many["archive"])) == sorted([url, str(path)])
        got = read_files(url, ["notes/a.txt", "docs/empty.txt"])
        assert got["content"].to_list() == [open_archive(path).read("notes/a.txt"), b""]
        both = read_files(None, scan([url]).filter(pl.col("relative_path") == "notes/b.md"))
        assert both["content"].to_list() == [open_archive(path).read("notes/b.md")]
        con = duckdb.connect()
        register(con, url, "r")
        assert con.sql("SELECT count(*) FROM r_files").fetchall() == [(len(corpus()),)]
        # the macros take a registered name; registered by URL, they read the remote object
        assert (con.sql("SELECT content FROM znippy_cat('r', 'notes/a.txt')").fetchall()
                == [(open_archive(path).read("notes/a.txt"),)])
        assert len(con.sql("SELECT * FROM znippy_ls('r')").fetchall()) == len(corpus())
        con.close()
    finally:
        configure(storage_options={}, cache=True)
    opts = [f"--storage-option={k}={v}" for k, v in s3.items()]
    wh = str(tmp_path / "wh")
    for argv in (["maven", url, "lookup", "org.acme:lib:1.0"],
                 ["maven", url, "pom", "org.acme:lib:1.0", "--no-cache"],
                 ["maven", url, "versions", "org.acme:lib", "--json"],
                 ["pypi", url, "versions", "demo"],
                 ["catalog", "add", wh, url], ["catalog", "verify", wh],
                 ["catalog", "extract", wh, "--where", "repo = 'local'", "-o",
                  str(tmp_path / "cx")],
                 ["sql", url, "SELECT count(*) FROM x_files", "--as", f"x={url}"]):
        code, out = _run(capsys, *argv[:3], *opts, *argv[3:])  # the options anywhere
        assert code == 0, (argv, capsys.readouterr().err)
    code, out = _run(capsys, "maven", url, "pom", "org.acme:lib:1.0", *opts)
    assert out.encode() == open_archive(path).read("org/acme/lib/1.0/lib-1.0.pom")
    assert (tmp_path / "cx").exists() and any((tmp_path / "cx").rglob("a.txt"))


def test_the_secret_is_never_printed_or_stored(full: tuple[Path, str], s3: dict[str, str],
                                              tmp_path: Path,
                                              capfd: pytest.CaptureFixture[str]) -> None:
    """The secret key goes through every command (ok and failing runs, --json, -v, info,
    catalog tables); no output, no cache entry, no file of the warehouse holds it (issue 27)."""
    path, url = full
    opts = [f"--storage-option={k}={v}" for k, v in s3.items()]
    wh, out = str(tmp_path / "wh"), str(tmp_path / "out")
    runs = [["ls", url, "-l"], ["ls", url, "--json"], ["cat", url, "notes/a.txt"],
            ["extract", url, "-o", out, "-v"], ["verify", url, "--json", "-v"],
            ["info", url], ["info", url, "--json"], ["sql", url, "SELECT * FROM full_manifest"],
            ["maven", url, "lookup", "org.acme:lib:1.0", "--json"],
            ["catalog", "add", wh, url, "--json"], ["catalog", "ls", wh],
            ["catalog", "sql", wh, "SELECT * FROM archives"], ["catalog", "verify", wh, "--json"],
            ["catalog", "extract", wh, "--where", "true", "-o", str(tmp_path / "cx")],
            # failing ones: a missing object, a wrong path, a misspelt and a bad option
            ["ls", url.replace("full", "missing")], ["cat", url, "no/such/file"],
            ["ls", url, "--storage-option", "secret_acess_key=" + SECRET_KEY],
            ["ls", url, "--storage-option", "skip_signature=" + SECRET_KEY]]
    seen = []
    for argv in runs:
        code = main([*argv, *opts])
        got = capfd.readouterr()
        seen.append((argv[0], code))
        assert SECRET_KEY not in got.out + got.err, argv
        assert "Traceback" not in got.err and "Panic" not in got.err, argv
    assert [c for _, c in seen[:14]] == [0] * 14, seen
    assert all(c == 2 for _, c in seen[14:]), seen
    for root in (tmp_path,):  # the warehouse, the extracted trees, the tail cache
        for f in root.rglob("*"):
            if f.is_file():
                assert SECRET_KEY.encode() not in f.read_bytes(), f
