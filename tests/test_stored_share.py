"""``stored_size`` adds up (docs/format.md, "Stored sizes"; issue 35 item 1): a packed file is
charged its share of the shared frame, a dedup-shared blob is charged once, so a sum over any
selection of files is at most the bytes the archive spends on them, in every view (DuckDB,
the view catalog, Polars), in ``info`` and in ``ls``. The frame itself is ``blob_size``."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from conftest import text_bytes
from znippy_sql import Entry, open_archive, views, write_archive
from znippy_sql.cli import main
from znippy_sql.cli.common import human
from znippy_sql.duckdb import register
from znippy_sql.views.shares import row_shares


def _entries() -> list[Entry]:
    """Small text files in two groups (packed), copies of some in the other group (dedup
    across groups, into a pack's slices), an incompressible big file and its copy (a whole
    blob shared across groups), an empty file."""
    small = [Entry(f"src/d{i % 4}/f{i:04d}.txt", data=text_bytes(100 + 37 * i, i), repo="one")
             for i in range(300)]
    big = random.Random(7).randbytes(300_000)
    return [*small,
            *(Entry(f"other/copy{i}.txt", data=small[i].data, repo="two") for i in range(20)),
            Entry("other/big.bin", data=big, repo="two"),
            Entry("src/big-copy.bin", data=big, repo="one"),
            Entry("src/empty.txt", data=b"", repo="one")]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("share") / "p.znippy"
    write_archive(path, _entries(), pack=True, workers=1, fsync=False)
    return path


def _chunks(path: Path) -> list[dict[str, Any]]:
    with open_archive(path) as a:
        return [r for k in a.groups for r in a.group_table(k).to_pylist()]


def _spent(rows: list[dict[str, Any]]) -> int:
    """The bytes of the distinct blobs ``rows`` point at."""
    return sum(size for _, size in {(r["blob_offset"], r["blob_size"]) for r in rows})


def _duck(path: Path) -> dict[str, tuple[int, int]]:
    con = duckdb.connect()
    register(con, path, "p")
    got = con.sql("SELECT relative_path, stored_size, blob_size FROM p_files").fetchall()
    con.close()
    return {p: (s, b) for p, s, b in got}


def test_sums_over_any_selection_are_at_most_the_bytes_spent(packed: Path) -> None:
    chunks = _chunks(packed)
    assert len({r["blob_offset"] for r in chunks}) < len(chunks) // 10  # packed indeed
    files = _duck(packed)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in chunks:
        by_file.setdefault(r["relative_path"], []).append(r)
    size = packed.stat().st_size
    total = sum(s for s, _ in files.values())
    assert total == _spent(chunks) <= size
    # the frames counted whole, as before: more than the archive
    assert sum(b for _, b in files.values()) > size
    rng = random.Random(1)
    paths = sorted(files)
    selections = [[p for p in paths if p.startswith(pre)]
                  for pre in ("src/d0/", "src/d3/", "other/", "src/", "src/big")]
    selections += [rng.sample(paths, k) for k in (1, 2, 5, 50, 200) for _ in range(20)]
    for chosen in selections:
        got = sum(files[p][0] for p in chosen)
        assert got <= _spent([r for p in chosen for r in by_file[p]]), chosen[:3]
    # each packed frame is shared out exactly among its members
    frames: dict[tuple[int, int], int] = {}
    for r in chunks:
        if r["chunk_seq"] == 0 and len(by_file[r["relative_path"]]) == 1:
            key = (r["blob_offset"], r["blob_size"])
            frames[key] = frames.get(key, 0) + files[r["relative_path"]][0]
    assert all(got == size for (_, size), got in frames.items())
    small = files["src/d0/f0100.txt"]
    assert 0 < small[0] < small[1]  # a share of its frame, not the whole frame
    # a blob shared across groups is charged once, to the first path
    assert files["other/big.bin"][0] == files["other/big.bin"][1] > 0
    assert files["src/big-copy.bin"] == (0, files["other/big.bin"][1])
    assert files["src/empty.txt"] == (0, 0)
    # a copy in a pack of the other group: one slice, charged to the first path only
    assert files["other/copy0.txt"][0] > 0 and files["src/d0/f0000.txt"][0] == 0


def test_every_engine_agrees_with_duckdb(packed: Path) -> None:
    import polars as pl

    from znippy_sql.polars import scan

    want = _duck(packed)
    cols = ["relative_path", "stored_size", "blob_size"]
    mine = views.batches(str(packed), "files", cols).read_all().to_pylist()
    assert {r["relative_path"]: (r["stored_size"], r["blob_size"]) for r in mine} == want
    frame = scan(packed, "files").select(cols).collect()
    assert {p: (s, b) for p, s, b in frame.iter_rows()} == want
    # one group alone (pruned) still gets its shares of blobs shared with the other
    two = scan(packed, "files").filter(pl.col("repo") == "two").select(cols).collect()
    assert {p: (s, b) for p, s, b in two.iter_rows()} == {
        p: v for p, v in want.items() if p.startswith("other/")}
    con = duckdb.connect()
    register(con, packed, "p")
    groups = con.sql("SELECT repo, stored_size FROM p_groups ORDER BY repo").fetchall()
    con.close()
    assert groups == [(repo, sum(s for p, (s, _) in want.items()
                                 if p.startswith("other/") == (repo == "two")))
                      for repo in ("one", "two")]
    py_groups = views.batches(str(packed), "groups", ["repo", "stored_size"]).read_all()
    assert sorted(map(tuple, (r.values() for r in py_groups.to_pylist()))) == groups


def test_info_and_ls_totals(packed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    size = packed.stat().st_size
    assert main(["info", "--json", str(packed)]) == 0
    info = json.loads(capsys.readouterr().out)
    stored = sum(g["stored_bytes"] for g in info["groups"])
    assert stored == info["stored_blob_bytes"] <= info["blob_bytes"] <= size
    assert info["referenced_bytes"] >= stored
    assert main(["ls", "--json", str(packed)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sum(r["stored_size"] for r in rows) == stored
    assert main(["ls", "-l", str(packed), "--glob", "src/d1/*"]) == 0
    total = capsys.readouterr().out.splitlines()[-1]
    part = sum(r["stored_size"] for r in rows if r["relative_path"].startswith("src/d1/"))
    assert total.endswith(f"stored {human(part)}") and part < stored


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**64 - 1),
                          st.integers(0, 3),
                          st.one_of(st.integers(0, 2**40), st.integers(2**62, 2**64 - 1))),
                min_size=1, max_size=40))
def test_row_shares_sum_to_each_blob(rows: list[tuple[int, int, int, int]]) -> None:
    """Whatever the rows (hostile sizes included): each blob's shares sum to its size, so
    any subset sums to at most its distinct blobs."""
    sizes = {o: s for o, s, *_ in rows}  # one size per offset: a blob
    table = pa.table({
        "relative_path": [f"p{i % 7}" for i in range(len(rows))],
        "chunk_seq": pa.array([i // 7 for i in range(len(rows))], pa.uint32()),
        "blob_offset": pa.array([o for o, *_ in rows], pa.uint64()),
        "blob_size": pa.array([sizes[o] for o, *_ in rows], pa.uint64()),
        "compressed": [True] * len(rows),
        "uncompressed_size": pa.array([u for *_, u in rows], pa.uint64()),
        "inner_offset": pa.array([i for _, _, i, *_ in rows], pa.uint64()),
    })
    shares = row_shares(table)
    assert shares.dtype == np.uint64
    for offset, size in sizes.items():
        assert sum(int(s) for s, (o, *_) in zip(shares, rows) if o == offset) == size


def test_duckdb_reads_every_group_only_for_stored_size(
        packed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query that does not ask for stored_size reads only the groups it filters to (the
    shares are a function DuckDB calls only for that column); one that asks reads them all."""
    from znippy_sql.read.reader import Archive

    read: list[str] = []
    group_table = Archive.group_table
    monkeypatch.setattr(Archive, "group_table",
                        lambda self, key: read.append(key.repo) or group_table(self, key))
    con = duckdb.connect()
    register(con, packed, "p")
    read.clear()
    assert con.sql("SELECT count(*) FROM p_files WHERE repo = 'two'").fetchall() == [(21,)]
    assert con.sql("SELECT sum(size) FROM p_groups WHERE repo = 'two'").fetchall()[0][0] > 0
    assert set(read) == {"two"}
    got = con.sql("SELECT sum(stored_size) FROM p_files WHERE repo = 'two'").fetchall()
    assert set(read) == {"one", "two"} and got[0][0] > 0
    con.close()
