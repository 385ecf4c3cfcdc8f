"""One definition of each thing (issue 35, item 17), held by its behaviour: one URL rule, one
cache of open archives for every reader that is handed archives by name, one walk of an
engine's filters, one helper for where files start, one size formatting, package-type names
from the registry."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.catalog.rows import archive_uri
from znippy_sql.remote.url import is_url


def test_the_catalog_names_archives_by_the_one_url_rule(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    odd = "dir/not-a-scheme://x.znippy"  # a local path with "://" inside
    assert not is_url(odd)
    assert archive_uri(odd) == os.path.abspath(odd) != odd
    assert archive_uri("s3://bucket/a.znippy") == "s3://bucket/a.znippy"


def test_every_reader_by_name_shares_one_open_archive_and_sees_a_rewrite(
        tmp_path: Path) -> None:
    from znippy_sql.engines.parts import contents
    from znippy_sql.udfs.archive_udfs import archive_at
    from znippy_sql.views.opened import opened

    p = str(tmp_path / "a.znippy")
    write_archive(p, [Entry("f.txt", data=b"first")], fsync=False)
    assert contents([p], ["f.txt"]).to_pylist() == [b"first"]
    assert archive_at(p) is opened(p)
    write_archive(p, [Entry("f.txt", data=b"second, longer")], fsync=False)
    # the engines' workers used to keep serving the archive first opened at this path
    assert contents([p], ["f.txt"]).to_pylist() == [b"second, longer"]
    assert archive_at(p).read("f.txt") == b"second, longer"


def test_the_three_engines_filters_walk_to_the_same_conjuncts() -> None:
    """``repo == 'a' AND (module_name == 'x' OR module_name == 'y') AND pkg_type IN (1, 2)``
    in each engine's own language: one walk (engines/predicates.py), one answer."""
    import daft
    from pyspark.sql.datasource import EqualTo, In
    from ray.data.expressions import col as rcol

    from znippy_sql.engines import daft as edaft
    from znippy_sql.engines import ray as eray
    from znippy_sql.engines import spark as espark

    want = [("repo", "in", ("a",)), ("module_name", "in", ("x", "y")),
            ("pkg_type", "in", (1, 2))]
    dcol = daft.col
    d = (dcol("repo") == "a") & ((dcol("module_name") == "x") | (dcol("module_name") == "y")) \
        & dcol("pkg_type").is_in([1, 2])
    assert edaft.conjuncts(d) == want
    r = (rcol("repo") == "a") & ((rcol("module_name") == "x") | (rcol("module_name") == "y")) \
        & rcol("pkg_type").is_in([1, 2])
    assert eray.conjuncts(r) == want
    s = [EqualTo(("repo",), "a"), In(("module_name",), ("x", "y")), In(("pkg_type",), (1, 2))]
    assert espark._conjuncts(s)[0] == want


def test_files_start_at_chunk_seq_zero_for_signing_and_the_views(tmp_path: Path) -> None:
    import numpy as np

    from znippy_sql import open_archive, views
    from znippy_sql.format.files import file_starts
    from znippy_sql.provenance.sign import file_digests

    assert file_starts(np.array([0, 1, 2, 0, 0, 1], np.uint32)).tolist() == [0, 3, 4]
    p = tmp_path / "m.znippy"
    write_archive(p, [Entry(f"d/f{i}", data=bytes(range(256)) * (i + 1)) for i in range(6)],
                  block_size=512, fsync=False)
    with open_archive(p) as a:
        paths, digests = file_digests(a.lookup)
        rows = views.table(a, "files", ["relative_path", "digest"]).to_pylist()
    assert sorted(zip(paths, digests)) == sorted((r["relative_path"], r["digest"]) for r in rows)
    assert len(paths) == 6


def test_counts_and_sizes_are_spelled_once() -> None:
    from znippy_sql.cli import common
    from znippy_sql.format import units
    from znippy_sql.modules import commands
    from znippy_sql.read import extract

    assert common.counted is units.counted is commands.counted
    assert common.human is units.human is extract.human
    assert [units.human(n) for n in (512, 1536, 3 << 30)] == ["512 B", "1.5 KiB", "3.0 GiB"]
    assert (units.counted(1, "file"), units.counted(2, "file")) == ("1 file", "2 files")


class _Wheel:
    """A package-type module registered at run time (as a plugin's entry point would)."""

    name = "wheelhouse"
    pkg_type = 99
    fields = ()

    def claims(self, relative_path: str) -> bool:
        return False

    def columns(self, relative_path: str, read: object) -> dict[str, object]:
        return {}


@pytest.mark.parametrize("command", [["ls"], ["create"], ["append"], ["store", "add"]])
def test_pkg_type_help_names_the_registered_modules(
        command: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql import modules
    from znippy_sql.cli import main

    modules.all_modules()  # the built-in ones and the plugins first
    monkeypatch.setitem(modules._REGISTRY, "wheelhouse", _Wheel())
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "maven|cargo|npm|pypi|wheelhouse" in text
