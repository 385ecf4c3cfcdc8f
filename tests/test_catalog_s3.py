"""A catalog whose warehouse is on object storage (SeaweedFS, ``weed server -s3``, started here
on 127.0.0.1) over archives on the same server: add, no-op, SQL, extract by byte range, verify,
and the same tables read back by a plain pyiceberg client that knows nothing of znippy_sql."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remote_server import ACCESS_KEY, SECRET_KEY, Seaweed
from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog

BUCKET = "fleet"


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    server = Seaweed(tmp_path_factory.mktemp("weed"))
    yield server
    server.close()


def _props(weed: Seaweed, db: Path) -> dict[str, str]:
    """pyiceberg catalog properties: SQL catalog in a local SQLite file, data files on S3."""
    return {"type": "sql", "uri": f"sqlite:///{db}", "s3.endpoint": weed.endpoint,
            "s3.access-key-id": ACCESS_KEY, "s3.secret-access-key": SECRET_KEY,
            "s3.region": "us-east-1", "s3.force-virtual-addressing": "false"}


def _put(weed: Seaweed, key: str, data: bytes) -> str:
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=weed.endpoint, access_key_id=ACCESS_KEY,
                    secret_access_key=SECRET_KEY, region="us-east-1",
                    client_options={"allow_http": True})
    obstore.put(store, key, data)
    return f"s3://{BUCKET}/{key}"


def test_warehouse_and_archives_on_s3(weed: Seaweed, tmp_path: Path) -> None:
    urls = []
    for i in range(3):
        local = tmp_path / f"day{i}.znippy"
        write_archive(local, [Entry(f"docs/{j}.txt", data=b"day %d doc %d " % (i, j) * 40,
                                    repo=f"r{i % 2}") for j in range(4)], fsync=False)
        urls.append(_put(weed, f"dumps/day{i}.znippy", local.read_bytes()))
    props = _props(weed, tmp_path / "catalog.db")
    storage = {"endpoint": weed.endpoint, "access_key_id": ACCESS_KEY,
               "secret_access_key": SECRET_KEY, "region": "us-east-1"}
    opts: dict[str, Any] = {"storage_options": storage, "cache": False}
    cat = open_catalog(f"s3://{BUCKET}/warehouse", catalog=props, create=True)
    assert cat.add(urls, open_options=opts).added == 3
    assert cat.add(urls, open_options=opts).unchanged == 3  # same ETags: nothing written

    rows = cat.sql("SELECT archive_uri, relative_path FROM files WHERE repo = 'r1' "
                   "ORDER BY ALL").to_pylist()
    assert [r["archive_uri"] for r in rows] == [urls[1]] * 4
    report = cat.extract(cat.sql("SELECT archive_uri, relative_path FROM files "
                                 "WHERE relative_path = 'docs/2.txt'"), tmp_path / "out",
                         open_options=opts)
    assert report.ok and report.files == 3
    assert (tmp_path / "out" / "day0" / "docs" / "2.txt").read_bytes() == b"day 0 doc 2 " * 40
    assert cat.verify(open_options=opts).ok

    # a plain pyiceberg client: the catalog name, the namespace and the same properties
    from pyiceberg.catalog import load_catalog

    plain = load_catalog("znippy", **props)
    files = plain.load_table(("fleet", "files")).scan(
        selected_fields=("archive_uri", "relative_path")).to_arrow()
    assert files.num_rows == 12
    assert sorted(set(files.column("archive_uri").to_pylist())) == sorted(urls)
