"""The distributed engines over the archives the real Rust tool wrote (issue 34 §3): Daft,
Polars and Spark answer as DuckDB does over every committed golden of the real binaries and
the real library (tests/data/rust-*/, tests/data/README.md), one archive at a time and as one
fleet; Ray's runner is in test_engines_ray.py (solo). The files' bytes themselves are checked
against the corpus by test_interop_goldens.py; here every engine is compared with all of
DuckDB's answer, not a sample."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _engines import canon, duck, pydict_rows
from znippy_sql.query.polars import Section

DATA = Path(__file__).parent / "data"
#: the committed archives of the real binaries and library (sealed ones: a hot archive's
#: journal and an Iceberg sidecar are read by their own tests)
GOLDENS = sorted(str(p) for d in sorted(DATA.glob("rust-*")) for p in d.glob("*.znippy")
                 if "plugin-git" not in d.name and not p.name.startswith(("lib-hot.", "gen-hot")))
#: what every engine is compared on: the files view's common columns, and the chunks view
FILES = ("archive", "relative_path", "repo", "pkg_type", "size", "digest")
CHUNKS = ("archive", "relative_path", "chunk_seq", "uncompressed_size")
VIEWS: tuple[tuple[Section, tuple[str, ...]], ...] = (("files", FILES), ("chunks", CHUNKS))


def test_there_are_goldens_of_every_built_release() -> None:
    dirs = {Path(p).parent.name for p in GOLDENS}
    assert {"rust-0.10.1", "rust-0.9.9", "rust-0.9.5", "rust-0.9.2", "rust-0.9.0",
            "rust-common-0.10.6"} <= dirs, dirs


def _want(paths: list[str], view: str, columns: tuple[str, ...]) -> list[tuple[object, ...]]:
    rows = duck(paths, f"SELECT {', '.join(columns)} FROM f_{view}")
    assert rows, (paths, view)
    return rows


@pytest.mark.parametrize("path", GOLDENS, ids=lambda p: f"{Path(p).parent.name}/{Path(p).name}")
def test_daft_and_polars_equal_duckdb_on_each_golden(path: str) -> None:
    import polars as pl

    import znippy_sql.daft as zdaft
    from znippy_sql.polars import scan

    for view, columns in VIEWS:
        want = _want([path], view, columns)
        got = zdaft.read_archives([path], view=view).select(*columns).to_pydict()
        assert pydict_rows(got, columns) == want, (path, view)
        frame = scan([path], view).select(list(columns)).collect()
        assert canon(frame.iter_rows()) == want, (path, view)
        assert scan([path], view).select(pl.len()).collect().item() == len(want)


def test_one_fleet_of_every_golden_equals_duckdb() -> None:
    from daft import col

    import znippy_sql.daft as zdaft

    want = _want(GOLDENS, "files", FILES)
    assert len({r[0] for r in want}) == len(GOLDENS)
    got = zdaft.read_archives(GOLDENS).select(*FILES).to_pydict()
    assert pydict_rows(got, FILES) == want
    by_archive = zdaft.read_archives(GOLDENS).groupby("archive").agg(
        col("size").sum().alias("bytes"))
    assert pydict_rows(by_archive.to_pydict(), ["archive", "bytes"]) == duck(
        GOLDENS, "SELECT archive, sum(size) FROM f_files GROUP BY ALL")


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from _engines import java_or_skip

    java_or_skip()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import znippy_sql.spark

    s = (SparkSession.builder.master("local[1]").appName("znippy-rust-goldens")
         .config("spark.ui.enabled", "false").getOrCreate())
    znippy_sql.spark.register(s)
    yield s
    s.stop()


@pytest.mark.slow
def test_spark_equals_duckdb_over_every_golden(spark: object) -> None:
    for view, columns in VIEWS:
        df = spark.read.format("znippy").option("view", view).load(GOLDENS)  # type: ignore[attr-defined]
        got = canon(tuple(r[c] for c in columns) for r in df.select(*columns).collect())
        assert got == _want(GOLDENS, view, columns), view
