"""The engines over archives and a catalog warehouse on a real S3 server (SeaweedFS on
127.0.0.1), credentials given as storage options / catalog properties, never a file on disk:
Daft here (URL patterns listed from the bucket, content by ranged GETs, the catalog read by
Daft's Iceberg reader); Spark and Ray read the same server in their own modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import daft  # a dev extra: the suite runs Daft, never skips it for want of it
from daft import col  # noqa: E402

import znippy_sql.daft as zdaft  # noqa: E402
from _engines import (BUCKET, COLUMNS, duck, pydict_rows, storage,  # noqa: E402
                      upload)
from _fleet import write_fleet  # noqa: E402
from remote_server import ACCESS_KEY, SECRET_KEY, Seaweed  # noqa: E402
from znippy_sql import ZnippyError  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    server = Seaweed(tmp_path_factory.mktemp("weed"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def fleet(weed: Seaweed, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[list[str], list[str]]:
    local = write_fleet(str(tmp_path_factory.mktemp("fleet")))
    return local, upload(weed, local, "dumps")


def test_daft_reads_archives_by_url_pattern(weed: Seaweed, fleet: Any) -> None:
    local, urls = fleet
    df = zdaft.read_archives(f"s3://{BUCKET}/dumps/*.znippy", storage_options=storage(weed))
    got = df.select(*COLUMNS).to_pydict()
    got["archive"] = [local[urls.index(a)] for a in got["archive"]]  # same rows, other names
    assert pydict_rows(got, COLUMNS) == duck(local, f"SELECT {', '.join(COLUMNS)} FROM f_files")
    src = zdaft.read_archives(urls, storage_options=storage(weed), content=True).where(
        col("repo") == "src").select("archive", "relative_path", "content").to_pydict()
    assert len(src["archive"]) == 25 + 10
    for a, p, c in zip(src["archive"], src["relative_path"], src["content"]):
        assert c.startswith(f"{Path(a).stem} src line".encode()), (a, p)


def test_daft_catalog_warehouse_on_s3(weed: Seaweed, fleet: Any, tmp_path: Path) -> None:
    from daft.io import IOConfig, S3Config

    from znippy_sql.catalog import open_catalog

    local, urls = fleet
    props = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
             "s3.endpoint": weed.endpoint, "s3.access-key-id": ACCESS_KEY,
             "s3.secret-access-key": SECRET_KEY, "s3.region": "us-east-1",
             "s3.force-virtual-addressing": "false"}
    cat = open_catalog(f"s3://{BUCKET}/warehouse", catalog=props, create=True)
    cat.add(urls, open_options={"storage_options": storage(weed), "cache": False})
    io = IOConfig(s3=S3Config(endpoint_url=weed.endpoint, key_id=ACCESS_KEY,
                              access_key=SECRET_KEY, region_name="us-east-1",
                              force_virtual_addressing=False))
    # the credentials reach pyiceberg from Daft's IOConfig alone
    only_uri = {k: v for k, v in props.items() if not k.startswith("s3.")}
    df = zdaft.read_catalog(f"s3://{BUCKET}/warehouse", catalog=only_uri, io_config=io)
    hits = df.where(col("relative_path").endswith(".pom")).with_column(
        "content", zdaft.read_bytes(col("archive_uri"), col("relative_path"),
                                    storage_options=storage(weed)))
    got = hits.select("archive_uri", "relative_path", "content").to_pydict()
    want = duck(local, "SELECT archive, relative_path FROM f_files "
                       "WHERE ends_with(relative_path, '.pom')")
    got_local = {"archive": [local[urls.index(a)] for a in got["archive_uri"]],
                 "relative_path": got["relative_path"]}
    assert pydict_rows(got_local, ["archive", "relative_path"]) == want
    assert all(c.startswith(b"<project>") for c in got["content"])


def test_bad_credentials_are_our_error(weed: Seaweed, fleet: Any) -> None:
    _, urls = fleet
    wrong = {**storage(weed), "secret_access_key": "not-the-secret"}
    with pytest.raises(ZnippyError) as info:
        zdaft.read_archives(urls[:1], storage_options=wrong)
    assert urls[0] in str(info.value) and "not-the-secret" not in str(info.value)
    with pytest.raises(ZnippyError, match="no archive matches"):
        zdaft.read_archives(f"s3://{BUCKET}/nothing/*.znippy", storage_options=storage(weed))
