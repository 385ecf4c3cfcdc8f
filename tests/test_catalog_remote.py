"""Archives served over HTTP (the remote reader and its test server, ``tests/remote_server.py``):
added by URL with their ETag, queried, extracted by byte range, verified, replaced on a new ETag.

Runs where the remote reader (``znippy_sql.remote``) is installed; skipped elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import remote_server

from znippy_sql import Entry, write_archive  # noqa: E402
from znippy_sql.catalog import open_catalog  # noqa: E402


@pytest.fixture
def server() -> Iterator[object]:
    srv = remote_server.RangeServer()
    yield srv
    srv.close()


def test_archives_by_url(tmp_path: Path, server) -> None:
    local = tmp_path / "r.znippy"
    write_archive(local, [Entry(f"docs/{i}.txt", data=b"doc %d " % i * 50, repo="docs")
                          for i in range(5)])
    url = server.put("fleet/r.znippy", local.read_bytes())
    cat = open_catalog(tmp_path / "wh", create=True)
    opts = {"cache": False}
    assert cat.add([url], open_options=opts).added == 1
    assert cat.add([url], open_options=opts).unchanged == 1  # same ETag: nothing written
    (rec,) = cat.archives(("archive_uri", "etag_or_mtime", "files")).to_pylist()
    assert rec["archive_uri"] == url and rec["etag_or_mtime"].startswith("etag:")
    assert rec["files"] == 5
    hits = cat.sql("SELECT archive_uri, relative_path FROM files WHERE relative_path >= 'docs/3'")
    r = cat.extract(hits, tmp_path / "out")
    assert r.ok and r.files == 2
    assert (tmp_path / "out" / "r" / "docs" / "4.txt").read_bytes() == b"doc 4 " * 50
    assert cat.verify().ok

    write_archive(local, [Entry("docs/new.txt", data=b"n", repo="docs")])
    server.put("fleet/r.znippy", local.read_bytes())
    assert {d.kind for d in cat.verify().drift} == {"changed", "root", "rows"}
    r = cat.add([url], open_options=opts)
    assert (r.replaced, r.rows) == (1, 1)
    assert cat.verify().ok
