"""Extract by query: the same files as extracting archive by archive, the same path safety."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.errors import CatalogError, UnsafePathError


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def fleet(tmp_path):
    d = tmp_path / "fleet"
    d.mkdir()
    paths = []
    for i in range(4):
        p = d / f"repo{i}.znippy"
        entries = [Entry(f"com/acme/lib/1.{j}/lib-1.{j}.jar", data=(b"%d.%d " % (i, j)) * 300,
                         pkg_type="maven", repo=f"repo{i % 2}") for j in range(3)]
        entries.append(Entry("docs/big.txt", data=os.urandom(200_000), repo=f"repo{i % 2}"))
        write_archive(p, entries, block_size=65536)
        paths.append(p)
    cat = open_catalog(tmp_path / "wh", create=True)
    cat.add(paths)
    return cat, paths


def test_extract_by_query_equals_archive_by_archive(tmp_path, fleet):
    cat, paths = fleet
    where = "maven_version = '1.1' OR relative_path = 'docs/big.txt'"
    hits = cat.sql(f"SELECT archive_uri, relative_path FROM files WHERE {where}")
    r = cat.extract(hits, tmp_path / "out")
    assert r.ok and r.archives == 4 and r.files == 8
    manual = tmp_path / "manual"
    for p in paths:
        with open_archive(p) as a:
            a.extract(manual / p.stem, paths=["com/acme/lib/1.1/lib-1.1.jar", "docs/big.txt"])
    assert tree(tmp_path / "out") == tree(manual)
    assert sorted(r.written) == sorted(tree(manual))


def test_results_of_duckdb_polars_and_arrow_are_accepted(tmp_path, fleet):
    cat, paths = fleet
    con = duckdb.connect()
    cat.sql("SELECT 1", con=con)
    rel = con.sql(f"SELECT '{paths[0]}' AS archive_uri, 'docs/big.txt' AS relative_path")
    assert cat.extract(rel, tmp_path / "a").files == 1
    frame = pl.DataFrame({"archive_uri": [str(paths[1])], "relative_path": ["docs/big.txt"]})
    assert cat.extract(frame, tmp_path / "b").files == 1
    with pytest.raises(CatalogError, match="relative_path"):
        cat.extract(pa.table({"archive_uri": [str(paths[0])]}), tmp_path / "c")


def test_flat_refuses_a_path_in_two_archives(tmp_path, fleet):
    cat, paths = fleet
    hits = cat.sql("SELECT archive_uri, relative_path FROM files WHERE relative_path = "
                   "'docs/big.txt'")
    with pytest.raises(CatalogError, match="both"):
        cat.extract(hits, tmp_path / "flat", flat=True)
    assert not (tmp_path / "flat").exists()  # refused before anything was written
    one = cat.sql(f"SELECT archive_uri, relative_path FROM files WHERE archive_uri = "
                  f"'{paths[2]}'")
    r = cat.extract(one, tmp_path / "flat", flat=True)
    assert r.files == 4 and (tmp_path / "flat" / "docs" / "big.txt").exists()


def test_two_archives_with_one_stem_are_refused(tmp_path, fleet):
    cat, paths = fleet
    other = tmp_path / "elsewhere"
    other.mkdir()
    twin = other / paths[0].name
    write_archive(twin, [Entry("docs/big.txt", data=b"twin")])
    cat.add([twin])
    hits = cat.sql("SELECT archive_uri, relative_path FROM files WHERE relative_path = "
                   "'docs/big.txt'")
    with pytest.raises(CatalogError, match="would both extract into repo0/"):
        cat.extract(hits, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unsafe_paths_are_refused_before_writing(tmp_path, fleet):
    cat, paths = fleet
    bad = pa.table({"archive_uri": [str(paths[0]), str(paths[1])],
                    "relative_path": ["docs/big.txt", "../escape.txt"]})
    with pytest.raises(UnsafePathError):
        cat.extract(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escape.txt").exists()


def test_a_file_changed_since_add_is_not_extracted(tmp_path, fleet):
    cat, paths = fleet
    write_archive(paths[0], [Entry("docs/big.txt", data=b"new content", repo="repo0")])
    hits = cat.sql("SELECT archive_uri, relative_path, digest FROM files "
                   "WHERE relative_path = 'docs/big.txt'")
    r = cat.extract(hits, tmp_path / "out")
    assert r.files == 3
    assert r.failed == {f"{paths[0]}:docs/big.txt": "changed in the archive since add"}
    assert not (tmp_path / "out" / "repo0").exists()
    paths[1].unlink()
    r = cat.extract(hits, tmp_path / "out2")
    assert r.files == 2 and f"{paths[1]}:docs/big.txt" in r.failed
