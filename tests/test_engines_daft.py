"""Daft over a small fleet: the same rows as DuckDB, pushdown pruning, content on demand,
read_bytes on the workers, the catalog, errors; the native runner (and Ray's, in
test_engines_ray.py)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

import daft  # a dev extra: the suite runs Daft, never skips it for want of it
from daft import col  # noqa: E402
from daft.functions import try_decode  # noqa: E402

import znippy_sql.daft as zdaft  # noqa: E402
from _engines import COLUMNS, canon, duck, pydict_rows  # noqa: E402
from _fleet import write_fleet  # noqa: E402
from znippy_sql import Entry, ZnippyError, write_archive  # noqa: E402
from znippy_sql.engines.daft import CatalogSource, ZnippySource, conjuncts  # noqa: E402
from znippy_sql.engines.predicates import where_of  # noqa: E402


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_fleet(str(tmp_path_factory.mktemp("fleet")))


def test_files_equal_duckdb(fleet: list[str]) -> None:
    glob = os.path.join(os.path.dirname(fleet[0]), "*.znippy")
    got = zdaft.read_archives(glob).select(*COLUMNS).to_pydict()
    assert pydict_rows(got, COLUMNS) == duck(fleet, f"SELECT {', '.join(COLUMNS)} FROM f_files")


def test_count_by_repo_and_other_views(fleet: list[str]) -> None:
    got = zdaft.read_archives(fleet).groupby("archive", "repo").agg(
        col("size").sum().alias("bytes"), col("relative_path").count().alias("n")).to_pydict()
    assert pydict_rows(got, ["archive", "repo", "bytes", "n"]) == duck(
        fleet, "SELECT archive, repo, sum(size), count(*) FROM f_files GROUP BY ALL")
    groups = zdaft.read_archives(fleet, view="groups").select(
        "archive", "repo", "row_count").to_pydict()
    assert pydict_rows(groups, ["archive", "repo", "row_count"]) == duck(
        fleet, "SELECT archive, repo, row_count FROM f_groups")
    chunks = zdaft.read_archives(fleet, view="chunks").count_rows()
    assert chunks == duck(fleet, "SELECT count(*) FROM f_chunks")[0][0]


def test_pushdown_prunes_archives_and_groups(fleet: list[str]) -> None:
    expr = (col("repo") == "docs") & col("relative_path").is_in(["docs/pkg0/mod0.txt"])
    where = where_of(conjuncts(expr))
    assert (where.repo, where.path) == (("docs",), ("docs/pkg0/mod0.txt",))
    source = ZnippySource(zdaft.read_archives.__globals__["Scan"](tuple(fleet)))
    parts = source._scan.plan(where)
    assert [p.archives for p in parts] == [(fleet[3],)]  # only "mixed" holds repo docs
    assert parts[0].items[0][1] is not None and len(parts[0].items[0][1]) == 1
    got = zdaft.read_archives(fleet).where(expr).select("archive", "relative_path")
    assert got.to_pydict() == {"archive": [fleet[3]], "relative_path": ["docs/pkg0/mod0.txt"]}
    assert conjuncts(col("size") > 3) == [] and conjuncts((col("repo") == "a") | (
        col("size") == 2)) == []
    # an OR of == on one column (how Daft hands over is_in) is an IN
    assert conjuncts((col("repo") == "a") | (col("repo") == "b") | (col("repo") == "a")) == [
        ("repo", "in", ("a", "b"))]


def test_content_only_when_asked_and_read_bytes(fleet: list[str]) -> None:
    df = zdaft.read_archives(fleet, content=True).where(col("repo") == "src")
    got = df.select("archive", "relative_path", "content").to_pydict()
    want = duck(fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'src'")
    assert pydict_rows(got, ["archive", "relative_path"]) == want
    for a, p, c in zip(got["archive"], got["relative_path"], got["content"]):
        stem = Path(a).stem
        j = int(p.rsplit("mod", 1)[1].split(".")[0])
        assert c.startswith(f"{stem} src line {j}\n".encode())
    # a grep: content read on the workers through the UDF, from the catalog's own columns
    hits = zdaft.read_archives(fleet).with_column(
        "content", zdaft.read_bytes(col("archive"), col("relative_path"))).where(
        try_decode(col("content"), "utf-8").contains("TODO: licence")).select(
        "archive", "relative_path")
    want = duck(fleet, "SELECT archive, relative_path FROM f_files WHERE repo IN ('src', "
                       "'docs') AND (regexp_extract(relative_path, 'mod(\\d+)', 1)::INT % 5) = 0")
    assert pydict_rows(hits.to_pydict(), ["archive", "relative_path"]) == want


def test_catalog_through_pyiceberg(fleet: list[str], tmp_path: Path) -> None:
    from znippy_sql.catalog import open_catalog

    open_catalog(tmp_path / "wh", create=True).add(fleet)
    df = zdaft.read_catalog(tmp_path / "wh").where(col("repo") == "central")
    got = df.select("archive_uri", "relative_path", "size").to_pydict()
    assert pydict_rows(got, ["archive_uri", "relative_path", "size"]) == duck(
        fleet, "SELECT archive, relative_path, size FROM f_files WHERE repo = 'central'")
    one = df.where(col("relative_path").endswith(".pom")).limit(1).with_column(
        "content", zdaft.read_bytes(col("archive_uri"), col("relative_path"))).to_pydict()
    assert one["content"][0].startswith(b"<project>")
    assert zdaft.read_catalog(tmp_path / "wh", "archives").count_rows() == len(fleet)


def test_errors_name_the_archive(fleet: list[str], tmp_path: Path) -> None:
    with pytest.raises(ZnippyError, match="no archive matches"):
        zdaft.read_archives(str(tmp_path / "none" / "*.znippy"))
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(b"not an archive at all" * 10)
    with pytest.raises(ZnippyError) as info:
        zdaft.read_archives([fleet[0], str(bad)])
    assert str(bad) in str(info.value)
    with pytest.raises(ValueError, match="unknown view"):
        zdaft.read_archives(fleet, view="nope")
    with pytest.raises(ValueError, match="content"):
        zdaft.read_archives(fleet, view="groups", content=True)
    # a file gone between planning and reading: the engine's error carries our message
    df = zdaft.read_archives(fleet[:1]).with_column(
        "content", zdaft.read_bytes(col("archive"), col("relative_path")))
    moved = Path(fleet[0]).with_suffix(".moved")
    os.rename(fleet[0], moved)
    try:
        with pytest.raises(Exception) as info:
            df.collect()
        assert fleet[0] in str(info.value)
    finally:
        os.rename(moved, fleet[0])
    assert canon([(1,)]) == [(1,)]


def test_catalog_path_filters_go_through_the_path_index(fleet: list[str],
                                                        tmp_path: Path) -> None:
    """A path filter (``==``, ``is_in``, ``startswith``) plans through ``paths`` as
    ``Catalog.sql`` does, and every answer is DuckDB's (the catalog's own SQL, index off)."""
    from znippy_sql.catalog import open_catalog
    from znippy_sql.engines.catalog import CatalogScan

    wh = tmp_path / "wh"
    cat = open_catalog(wh, create=True)
    cat.add(fleet)
    jar = "com/acme/central/art0/1.0/art0-1.0.jar"
    scan = CatalogScan(str(wh))
    every = sum(len(p.tasks) for p in scan.plan())
    pruned = scan.plan([("relative_path", "in", (jar,))])  # all columns: files, pruned
    assert all("/files/" in p.metadata_location for p in pruned)
    assert sum(len(p.tasks) for p in pruned) == 3 < every  # central-a, central-b, mixed
    read = scan.plan([("relative_path", "in", (jar,))], ["archive_uri", "size"])
    assert read and all("/paths/" in p.metadata_location for p in read)
    assert all("/files/" in p.metadata_location for p in scan.plan(
        [("relative_path", "in", (jar,))], ["archive_uri", "chunks"]))
    cases = [(col("relative_path") == jar, f"relative_path = '{jar}'"),
             (col("relative_path").is_in([jar, "src/pkg0/mod0.txt", "nope"]),
              f"relative_path IN ('{jar}', 'src/pkg0/mod0.txt', 'nope')"),
             (col("relative_path").startswith("src/pkg1/") & (col("repo") == "src"),
              "starts_with(relative_path, 'src/pkg1/') AND repo = 'src'"),
             (col("relative_path") == "nope", "relative_path = 'nope'")]
    cat.has_index = False
    for expr, sql in cases:
        for columns in (["archive_uri", "relative_path", "size", "digest"],
                        ["archive_uri", "relative_path", "chunks", "maven_artifact_id"]):
            got = zdaft.read_catalog(wh).where(expr).select(*columns).to_pydict()
            want = cat.sql(f"SELECT {', '.join(columns)} FROM files WHERE {sql}")
            assert pydict_rows(got, columns) == pydict_rows(want.to_pydict(), columns), sql
    # what Daft really hands the source: is_in as an OR of ==, no startswith at all (hence
    # path_prefix= up front)
    seen: list[list[tuple[object, ...]]] = []

    class Recording(CatalogSource):
        async def get_tasks(self, pushdowns):  # type: ignore[no-untyped-def]
            seen.append(conjuncts(pushdowns.filters) if pushdowns.filters is not None else [])
            async for task in super().get_tasks(pushdowns):
                yield task

    Recording(scan).read().where(col("relative_path").is_in([jar, "nope"])).select(
        "archive_uri").collect()
    assert seen[-1] == [("relative_path", "in", (jar, "nope"))]
    Recording(scan).read().where(col("relative_path").startswith("src/")).collect()
    assert seen[-1] == []
    columns = ["archive_uri", "relative_path", "size"]
    got = zdaft.read_catalog(wh, path_prefix=["src/pkg1/", "docs/"], repo="src").select(
        *columns).to_pydict()
    want = cat.sql("SELECT archive_uri, relative_path, size FROM files WHERE repo = 'src' AND "
                   "(relative_path LIKE 'src/pkg1/%' OR relative_path LIKE 'docs/%')")
    assert pydict_rows(got, columns) == pydict_rows(want.to_pydict(), columns) != []


def test_content_is_fetched_only_for_the_rows_a_filter_keeps(fleet: list[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """Daft pushes few filters into a source (not a negated ``endswith``); ``content`` is
    an expression over the rows read, so Daft's filter runs before it and only the files
    kept are fetched: the bytes sent are those of the DuckDB path's ``read_files`` of the
    same rows, not of every file (counted at an HTTP server honouring ranges)."""
    from remote_server import RangeServer
    from znippy_sql.engines import parts
    from znippy_sql.views.opened import forget

    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))
    rnd = random.Random(25)
    local = tmp_path / "big.znippy"  # past the 256 KiB the open's suffix GET holds
    write_archive(local, [Entry(f"b/x{j}.big" if j >= 60 else f"a/x{j}.small",
                                data=rnd.randbytes(8192 if j >= 60 else 2048))
                          for j in range(200)], fsync=False)  # the small ones together
    server = RangeServer()
    try:
        url = server.put("big.znippy", local.read_bytes())

        def blob_bytes(fn: object) -> int:
            forget()  # no archive kept open (and its blobs) from before
            zdaft.read_archives(url).count_rows()  # the tail fetched and cached: not counted
            server.reset()
            fn()  # type: ignore[operator]
            return sum(h.sent for h in server.gets() if not h.range.startswith("bytes=-"))

        small = sorted(p for p in zdaft.read_archives(url).to_pydict()["relative_path"]
                       if not p.endswith(".big"))
        df = zdaft.read_archives(url, content=True)
        kept = df.where(~col("relative_path").endswith(".big"))
        got = kept.select("relative_path", "content").to_pydict()
        assert sorted(got["relative_path"]) == small and all(
            len(c) == 2048 for c in got["content"])
        daft_bytes = blob_bytes(lambda: kept.select("relative_path", "content").collect())
        duck_bytes = blob_bytes(lambda: parts.read_files(url, small))
        every = blob_bytes(lambda: df.select("relative_path", "content").collect())
        assert 0 < daft_bytes <= duck_bytes * 1.1 and every > 3 * daft_bytes, (
            daft_bytes, duck_bytes, every)
    finally:
        server.close()


def test_reading_and_fetching_never_import_pandas(fleet: list[str]) -> None:
    """A worker reading archives and fetching bytes builds its columns from buffers: pyarrow's
    Python converters would import pandas (0.5-1 s on a worker's first task, the whole first
    grep's gap to DuckDB in bench/results-engines.md)."""
    import subprocess
    import sys

    code = ("import sys, daft\nfrom daft import col\nimport znippy_sql.daft as zd\n"
            "daft.set_runner_native(num_threads=2)\n"
            f"d = zd.read_archives({fleet!r}, content=True).where(\n"
            "    col('relative_path').endswith('.pom')).to_pydict()\n"
            "print(len(d['content']) > 0, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    assert out == "True False"
