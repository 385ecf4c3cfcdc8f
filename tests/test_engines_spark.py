"""Spark (``local[2]``: a JVM and Python workers) over a small fleet: formats ``znippy`` and
``znippy-catalog`` give DuckDB's rows, pushFilters prunes partitions, content on request,
errors keep our message. One SparkSession for the module (a JVM start is the cost here)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pyspark  # noqa: F401  (a dev extra: the suite runs Spark, never skips it)
from _engines import COLUMNS, canon, duck, java_or_skip  # noqa: E402
from _fleet import write_fleet  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    java_or_skip()
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers import this venv's package
    from pyspark.sql import SparkSession

    import znippy_sql.spark

    s = (SparkSession.builder.master("local[2]").appName("znippy-tests")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
    znippy_sql.spark.register(s)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_fleet(str(tmp_path_factory.mktemp("fleet")))


def rows(df: object, columns: tuple[str, ...] | list[str]) -> list[tuple[object, ...]]:
    return canon(tuple(r[c] for c in columns) for r in df.select(*columns).collect())


def test_files_and_groups_equal_duckdb(spark, fleet: list[str]) -> None:
    glob = os.path.join(os.path.dirname(fleet[0]), "*.znippy")
    df = spark.read.format("znippy").load(glob)
    assert rows(df, COLUMNS) == duck(fleet, f"SELECT {', '.join(COLUMNS)} FROM f_files")
    by_repo = df.groupBy("repo").count()
    assert rows(by_repo, ["repo", "count"]) == duck(
        fleet, "SELECT repo, count(*) FROM f_files GROUP BY ALL")
    groups = spark.read.format("znippy").option("view", "groups").load(fleet)
    assert rows(groups, ["archive", "repo", "row_count"]) == duck(
        fleet, "SELECT archive, repo, row_count FROM f_groups")


def test_push_filters_prune_partitions(spark, fleet: list[str]) -> None:
    reader = spark.read.format("znippy").option("target_bytes", "1")  # a part per archive
    everything = reader.load(fleet)
    assert everything.rdd.getNumPartitions() == 7  # one per data group: 1 + 2 + 1 + 3
    docs = everything.where("repo = 'docs' AND relative_path LIKE 'docs/pkg1/%' "
                            "AND NOT relative_path LIKE '%.jar'")  # Not: not pushed
    assert docs.rdd.getNumPartitions() == 1  # only the "mixed" archive's docs group
    assert rows(docs, ["archive", "relative_path"]) == duck(
        fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'docs' AND "
               "starts_with(relative_path, 'docs/pkg1/')")
    assert reader.load(fleet).where("repo IN ('nope')").count() == 0
    up_front = reader.option("repo", "src,docs").load(fleet)
    assert rows(up_front, ["archive", "relative_path"]) == duck(
        fleet, "SELECT archive, relative_path FROM f_files WHERE repo IN ('src', 'docs')")


def test_content_when_asked(spark, fleet: list[str]) -> None:
    df = (spark.read.format("znippy").option("content", "true").load(fleet)
          .where("repo = 'src' AND content LIKE '%TODO: licence%'"))
    assert rows(df, ["archive", "relative_path"]) == duck(
        fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'src' AND "
               "(regexp_extract(relative_path, 'mod(\\d+)', 1)::INT % 5) = 0")
    one = df.select("content").limit(1).collect()[0][0]
    assert b"TODO: licence" in bytes(one)


def test_catalog_format_without_a_jar(spark, fleet: list[str], tmp_path: Path) -> None:
    from znippy_sql.catalog import open_catalog

    open_catalog(tmp_path / "wh", create=True).add(fleet)
    df = spark.read.format("znippy-catalog").load(str(tmp_path / "wh"))
    central = df.where("repo = 'central'")
    assert central.rdd.getNumPartitions() == 1
    assert rows(central, ["archive_uri", "relative_path", "size"]) == duck(
        fleet, "SELECT archive, relative_path, size FROM f_files WHERE repo = 'central'")
    poms = (spark.read.format("znippy-catalog").option("content", "true")
            .load(str(tmp_path / "wh")).where("relative_path LIKE '%.pom'"))
    got = poms.select("content").collect()
    assert got and all(bytes(r[0]).startswith(b"<project>") for r in got)
    archives = spark.read.format("znippy-catalog").option("table", "archives").load(
        str(tmp_path / "wh"))
    assert archives.count() == len(fleet)


def test_catalog_path_filters_go_through_the_path_index(spark, fleet: list[str],
                                                        tmp_path: Path) -> None:
    """pushFilters' path filters plan through ``paths`` (files pruned to the archives it
    lists; ``paths`` read for a schema of its columns), with DuckDB's answers."""
    from pyspark.sql.datasource import EqualTo, StringStartsWith

    from znippy_sql.catalog import open_catalog
    from znippy_sql.engines.spark import ZnippyCatalogReader, catalog_scan_of

    wh = str(tmp_path / "wh")
    cat = open_catalog(wh, create=True)
    cat.add(fleet)
    jar = "com/acme/central/art0/1.0/art0-1.0.jar"
    scan = catalog_scan_of({"path": wh})
    full = spark.read.format("znippy-catalog").load(wh)
    reader = ZnippyCatalogReader(scan, full.schema)
    every = sum(len(p.value.tasks) for p in reader.partitions())
    reader.pushFilters([EqualTo(("relative_path",), jar)])
    parts = [p.value for p in reader.partitions()]
    assert all("/files/" in p.metadata_location for p in parts)
    assert sum(len(p.tasks) for p in parts) == 3 < every  # central-a, central-b, mixed
    narrow = ZnippyCatalogReader(scan, full.select("archive_uri", "size").schema)
    narrow.pushFilters([StringStartsWith(("relative_path",), "src/pkg1/")])
    assert all("/paths/" in p.value.metadata_location for p in narrow.partitions())
    cat.has_index = False
    columns = ["archive_uri", "relative_path", "size", "digest", "chunks"]
    for where in (f"relative_path = '{jar}'", "relative_path LIKE 'src/pkg1/%'",
                  f"relative_path IN ('{jar}', 'src/pkg0/mod0.txt', 'nope')"):
        want = cat.sql(f"SELECT {', '.join(columns)} FROM files WHERE {where}").to_pylist()
        got = [r.asDict(recursive=True) for r in full.where(where).select(*columns).collect()]
        assert canon(got) == canon(want), where
    narrow_df = spark.read.format("znippy-catalog").schema(
        "archive_uri string, relative_path string, size long").load(wh)
    got = narrow_df.where("relative_path LIKE 'src/pkg1/%'").collect()
    assert canon(r.asDict() for r in got) == canon(cat.sql(
        "SELECT archive_uri, relative_path, size FROM files "
        "WHERE relative_path LIKE 'src/pkg1/%'").to_pylist())


def test_errors_keep_our_message(spark, fleet: list[str], tmp_path: Path) -> None:
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException, match="no archive matches this pattern"):
        spark.read.format("znippy").load(str(tmp_path / "none" / "*.znippy")).count()
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(b"not an archive" * 20)
    with pytest.raises(PySparkException) as info:
        spark.read.format("znippy").load([fleet[0], str(bad)]).count()
    assert str(bad) in str(info.value)


def test_archives_and_catalog_on_s3(spark, fleet: list[str], tmp_path: Path) -> None:
    """Archives and the warehouse on SeaweedFS; credentials only as options."""
    from remote_server import ACCESS_KEY, SECRET_KEY, Seaweed
    from _engines import BUCKET, storage, upload
    from znippy_sql.catalog import open_catalog

    weed = Seaweed(tmp_path / "weed")
    try:
        urls = upload(weed, fleet, "spark")
        reader = spark.read.format("znippy")
        for k, v in storage(weed).items():
            reader = reader.option(f"storage.{k}", v)
        df = reader.option("content", "true").load(f"s3://{BUCKET}/spark/*.znippy")
        got = rows(df.where("repo = 'docs'"), ["archive", "relative_path", "content"])
        assert [(fleet[urls.index(a)], p) for a, p, _ in got] == duck(
            fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'docs'")
        assert all(bytes(c).startswith(b"mixed docs line") for _, _, c in got)

        props = {"type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
                 "s3.endpoint": weed.endpoint, "s3.access-key-id": ACCESS_KEY,
                 "s3.secret-access-key": SECRET_KEY, "s3.region": "us-east-1",
                 "s3.force-virtual-addressing": "false"}
        cat = open_catalog(f"s3://{BUCKET}/spark-wh", catalog=props, create=True)
        cat.add(urls, open_options={"storage_options": storage(weed), "cache": False})
        creader = spark.read.format("znippy-catalog")
        for k, v in props.items():
            creader = creader.option(f"catalog.{k}", v)
        for k, v in storage(weed).items():
            creader = creader.option(f"storage.{k}", v)
        central = creader.option("content", "true").load(f"s3://{BUCKET}/spark-wh").where(
            "repo = 'central' AND relative_path LIKE '%.pom'")
        got = rows(central, ["archive_uri", "relative_path", "content"])
        assert [(fleet[urls.index(a)], p) for a, p, _ in got] == duck(
            fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'central' AND "
                   "ends_with(relative_path, '.pom')")
        assert all(bytes(c).startswith(b"<project>") for _, _, c in got)
    finally:
        weed.close()
