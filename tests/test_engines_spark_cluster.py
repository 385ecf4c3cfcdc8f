"""Spark in ``local-cluster[2,1,1024]``: a master, two worker JVMs each running an executor
with its own Python workers, started from the pip package's jars (no Spark distribution).
The answers of ``znippy`` and ``znippy-catalog`` equal DuckDB's there too."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pyspark  # noqa: F401  (a dev extra: the suite runs Spark, never skips it)
from _engines import canon, duck, java_or_skip  # noqa: E402
from _fleet import write_fleet  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    java_or_skip()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import znippy_sql.spark

    s = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("znippy-cluster")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
         .getOrCreate())
    znippy_sql.spark.register(s)
    yield s
    s.stop()


def test_two_executors_same_rows(spark, tmp_path: Path) -> None:
    from znippy_sql.catalog import open_catalog

    fleet = write_fleet(str(tmp_path / "fleet"))
    sc = spark.sparkContext
    df = spark.read.format("znippy").option("target_bytes", "1").load(fleet)
    hosts = {e for e in df.rdd.mapPartitions(
        lambda _: [__import__("os").getpid()]).collect()}
    assert len(hosts) >= 2 and os.getpid() not in hosts  # Python workers of the executors
    got = canon((r["archive"], r["repo"], r["count"]) for r in
                df.groupBy("archive", "repo").count().collect())
    assert got == duck(fleet, "SELECT archive, repo, count(*) FROM f_files GROUP BY ALL")
    open_catalog(tmp_path / "wh", create=True).add(fleet)
    cat = spark.read.format("znippy-catalog").option("content", "true").load(
        str(tmp_path / "wh")).where("repo = 'docs'")
    rows = cat.select("archive_uri", "relative_path", "content").collect()
    assert canon((r[0], r[1]) for r in rows) == duck(
        fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'docs'")
    assert all(bytes(r[2]).startswith(b"mixed docs line") for r in rows)
    assert sc.master.startswith("local-cluster")
