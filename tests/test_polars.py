"""Polars scans: projection, predicate, n_rows, group pruning (proved by bytes read)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from _query_expect import RawView, by_path, contents, corpus
from test_duckdb import META, git_sections
from znippy_sql import ReservedSection, ZnippyError, open_archive, write_archive
from znippy_sql.polars import read_files, scan


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("p") / "full.znippy"
    write_archive(out, corpus(), block_size=256, workers=1, fsync=False,
                  reserved_sections=[ReservedSection("__meta__", META), *git_sections()])
    return out


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every file one chunk: the files table is a projection of the sub-indexes."""
    out = tmp_path_factory.mktemp("p") / "single.znippy"
    write_archive(out, corpus(), workers=1, fsync=False)
    return out


def test_files_scan_matches_pyarrow(full: Path, single: Path) -> None:
    for path in (full, single):
        got = scan(path).collect().to_dicts()
        assert by_path(got) == RawView(path).files()


def test_chunks_and_sections(full: Path) -> None:
    raw = RawView(full)
    exp = raw.chunks()
    for r in exp:
        for c in raw.module_columns():
            r.setdefault(c, None)
    assert by_path(scan(full, "chunks").collect().to_dicts()) == by_path(exp)
    assert scan(full, "manifest").collect().to_dicts() == raw.manifest.to_pylist()
    assert scan(full, "lookup").collect().to_dicts() == raw.section("__lookup__").to_pylist()
    assert scan(full, "meta").filter(pl.col("key") == "license").collect().to_dicts() == [
        r for r in META.to_pylist() if r["key"] == "license"]
    commits = scan(full, "git_commits").collect().to_dicts()
    assert commits == raw.section("__gunnar_graph__").to_pylist()
    objs = scan(full, "git_objects").sort("ordinal").collect()
    assert objs.get_column("type_name").to_list() == ["commit", "tree", "blob"]
    assert len(scan(full, "git_reach").collect()) == 1


def test_absent_section_is_an_error(single: Path) -> None:
    for section in ("meta", "signatures", "git_objects", "git_commits", "git_reach"):
        with pytest.raises(ZnippyError, match="no .* section"):
            scan(single, section)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown section"):
        scan(single, "nope")  # type: ignore[arg-type]


def test_projection_predicate_n_rows(full: Path) -> None:
    files = RawView(full).files()
    lf = scan(full).filter(pl.col("size") > 500).select("relative_path", "chunks")
    got = lf.collect()
    assert got.columns == ["relative_path", "chunks"]
    assert sorted(got.rows()) == sorted((f["relative_path"], f["chunks"]) for f in files
                                        if f["size"] > 500)
    assert scan(full).head(3).collect().height == 3
    assert scan(full).select(pl.len()).collect().item() == len(files)
    assert scan(full).filter(pl.col("repo") == "local").select(pl.len()).collect().item() == len(
        [f for f in files if f["repo"] == "local"])
    assert scan(full, "chunks").head(5).collect().height == 5
    # a predicate mixing a group column with others, and on a module column
    mixed = scan(full).filter((pl.col("repo") == "central") & (pl.col("chunks") > 1)).collect()
    assert sorted(mixed.get_column("relative_path").to_list()) == sorted(
        f["relative_path"] for f in files if f["repo"] == "central" and f["chunks"] > 1)
    mv = scan(full).filter(pl.col("maven_artifact_id") == "app").collect()
    assert mv.get_column("relative_path").to_list() == ["org/acme/app/2.1/app-2.1-sources.jar"]
    # or-predicates cannot prune but must still filter
    either = scan(full).filter((pl.col("repo") == "local") | (pl.col("size") == 0)).collect()
    assert sorted(either.get_column("relative_path").to_list()) == sorted(
        f["relative_path"] for f in files if f["repo"] == "local" or f["size"] == 0)


@pytest.mark.parametrize("section", ["files", "chunks"])
def test_group_pruning_reads_only_matching_subindexes(full: Path, section: Any) -> None:
    raw = RawView(full)
    data = [r for r in raw.rows if r["pkg_type"] != -1]
    for pred, keep in [
        (pl.col("repo") == "local", lambda r: r["repo"] == "local"),
        (pl.col("pkg_type") == 1, lambda r: r["pkg_type"] == 1),
        (pl.col("pkg_type_name") == "pypi", lambda r: r["pkg_type"] == 4),
        ((pl.col("repo") == "central") & (pl.col("pkg_type") == 0),
         lambda r: r["repo"] == "central" and r["pkg_type"] == 0),
    ]:
        archive = open_archive(full)
        # stored_size shares blobs out over the whole archive (views/shares.py): it reads
        # every sub-index, so it is left out here and checked below
        lf = scan(archive, section).filter(pred).select(pl.exclude("stored_size"))
        before = archive.source.bytes_read
        out = lf.collect()
        read = archive.source.bytes_read - before
        expected = sum(r["index_len"] for r in data if keep(r))
        assert read == expected, (pred, read, expected)
        assert out.height > 0
        archive.close()
    # no group predicate: every sub-index is read once
    archive = open_archive(full)
    lf = scan(archive, section)
    before = archive.source.bytes_read
    lf.collect()
    assert archive.source.bytes_read - before == sum(r["index_len"] for r in data)
    archive.close()
    if section == "files":  # a stored_size of one group: every sub-index, once
        archive = open_archive(full)
        lf = scan(archive, section).filter(pl.col("repo") == "local")
        before = archive.source.bytes_read
        lf.collect()
        assert archive.source.bytes_read - before == sum(r["index_len"] for r in data)
        archive.close()


def test_read_files(full: Path) -> None:
    data = contents()
    df = read_files(full, ["notes/a.txt", "docs/empty.txt"])
    assert df.to_dicts() == [{"relative_path": "notes/a.txt", "content": data["notes/a.txt"]},
                             {"relative_path": "docs/empty.txt", "content": b""}]
    lf = scan(full).filter(pl.col("repo") == "local").select("relative_path", "size")
    got = read_files(full, lf)
    assert got.columns == ["relative_path", "size", "content"]
    assert {r["relative_path"]: r["content"] for r in got.to_dicts()} == {
        p: data[p] for p in got.get_column("relative_path").to_list()}
    assert all(len(r["content"]) == r["size"] for r in got.to_dicts())
    with pytest.raises(ZnippyError, match="no file"):
        read_files(full, ["no/such"])


def test_missing_archive(tmp_path: Path) -> None:
    with pytest.raises(ZnippyError, match="nothere"):
        scan(tmp_path / "nothere.znippy")
