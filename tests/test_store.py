"""The dynamic store: real Iceberg tables (SQLite catalog), restart, replacement, crash leftovers."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import text_bytes

from znippy_sql import DuplicatePathError, Entry, LockError, StoreError, open_archive, \
    write_archive
from znippy_sql.cli import main as cli_main
from znippy_sql.format.schema import GroupKey
from znippy_sql.store import open_store, seal
from znippy_sql.store import convert
from znippy_sql.store.iceberg import create_transaction, group_tables, open_catalog, read_rows

BLOCK = 2048


def text(n: int, seed: int) -> bytes:
    return text_bytes(n, seed)


def batch(prefix: str, count: int, seed: int) -> list[Entry]:
    rng = random.Random(seed)
    out = [Entry(f"{prefix}/f{i:02d}.txt", data=text(rng.randint(1, 3 * BLOCK), seed + i))
           for i in range(count)]
    out.append(Entry(f"{prefix}/empty", data=b""))
    out.append(Entry(f"{prefix}/other.txt", data=text(700, seed), repo="r2"))
    return out


def paths(table: pa.Table) -> list[str]:
    first = table.filter(pc.equal(table.column("chunk_seq"), 0))
    return sorted(first.column("relative_path").to_pylist())


@pytest.fixture
def where(tmp_path: Path) -> tuple[str, str]:
    return str(tmp_path / "blobs.znippy"), str(tmp_path / "warehouse")


def test_add_restart_add_and_live_index(where: tuple[str, str], tmp_path: Path) -> None:
    sidecar, wh = where
    a, b = batch("a", 6, 1), batch("b", 4, 2)
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        r1 = store.add(a)
        assert r1.files_added == len(a) and r1.sidecar_start == 0
        assert len(r1.tables) == 2  # two groups: one commit each
    assert os.path.exists(os.path.join(wh, "catalog.db"))
    with open_store(sidecar, wh, "ns") as store:  # a restart: options come from the namespace
        assert store.options.block_size == BLOCK
        assert store.committed_end == r1.sidecar_end
        r2 = store.add(b)
        assert r2.sidecar_start == r1.sidecar_end
        files = store.files()
    assert paths(files) == sorted(e.relative_path for e in a + b)
    assert os.path.getsize(sidecar) == r2.sidecar_end  # pure blobs, nothing else
    with open_store(sidecar, wh, "ns", writable=False) as reader, reader.snapshot() as snap:
        assert snap.read(b[1].relative_path) == b[1].data and snap.verify().ok
    # the live index is what the sealed archive's index says
    out = tmp_path / "s.znippy"
    seal(sidecar, wh, "ns", out)
    with open_archive(out) as arc:
        assert arc.index().sort_by("relative_path").equals(files.sort_by("relative_path"))


def test_one_writer_at_a_time(where: tuple[str, str]) -> None:
    sidecar, wh = where
    with open_store(sidecar, wh, "ns"):
        with pytest.raises(LockError, match="writing"):
            open_store(sidecar, wh, "ns")
        reader = open_store(sidecar, wh, "ns", writable=False)  # readers need no lock
        assert reader.files().num_rows == 0
        with pytest.raises(StoreError, match="read-only"):
            reader.add([Entry("x", data=b"x")])


def test_options_are_fixed_at_creation(where: tuple[str, str]) -> None:
    sidecar, wh = where
    open_store(sidecar, wh, "ns", level=5, block_size=BLOCK).close()
    with pytest.raises(StoreError, match="block_size=2048"):
        open_store(sidecar, wh, "ns", block_size=4096)
    with open_store(sidecar, wh, "ns") as store:
        assert (store.options.level, store.options.block_size) == (5, BLOCK)


def test_readd_replaces_older_rows(where: tuple[str, str], tmp_path: Path) -> None:
    sidecar, wh = where
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        store.add(batch("a", 4, 3))
        old = {p: n for p, n in zip(*_sizes(store.files()))}
        new = text(3 * BLOCK + 1, 77)
        r = store.add([Entry("a/f01.txt", data=new),
                       Entry("a/other.txt", data=b"moved", repo="")])  # moves from repo r2
        assert r.files_replaced == 2
        assert r.rows_replaced == 1 + 1 + (old["a/f01.txt"] - 1) // BLOCK
        files = store.files()
        assert files.filter(pc.equal(files.column("relative_path"), "a/f01.txt")).num_rows == 4
        moved = files.filter(pc.equal(files.column("relative_path"), "a/other.txt"))
        assert moved.column("repo").to_pylist() == [""]
        # the rows are gone from the Iceberg tables themselves, not just hidden
        for key in store.groups:
            raw = read_rows(store._groups[key])
            counts = pc.value_counts(raw.filter(pc.equal(raw.column("chunk_seq"), 0))
                                     .column("relative_path"))
            assert all(c["counts"] == 1 for c in counts.to_pylist())
    out = tmp_path / "r.znippy"
    report = seal(sidecar, wh, "ns", out)
    assert report.dead_bytes == r.dead_bytes > 0
    with open_archive(out) as arc:
        assert arc.verify().ok
        assert arc.read("a/f01.txt") == new and arc.read("a/other.txt") == b"moved"


def _sizes(files: pa.Table) -> tuple[list[str], list[int]]:
    agg = files.group_by("relative_path").aggregate([("uncompressed_size", "sum")])
    return agg.column(0).to_pylist(), agg.column(1).to_pylist()


def test_duplicate_in_a_batch_commits_nothing(where: tuple[str, str]) -> None:
    sidecar, wh = where
    with open_store(sidecar, wh, "ns") as store:
        store.add([Entry("keep.txt", data=b"keep")])
        end = store.committed_end
        with pytest.raises(DuplicatePathError):
            store.add([Entry("n.txt", data=text(5000, 1)), Entry("n.txt", data=b"2")])
        assert os.path.getsize(sidecar) == end
        assert paths(store.files()) == ["keep.txt"]


def test_unsigned_and_fixed_columns_round_trip_exactly(tmp_path: Path) -> None:
    """u64 2^64-1, u32 max, int8 -128, fixed[32] through a real Iceberg table and back."""
    schema = pa.schema([
        pa.field("relative_path", pa.utf8(), nullable=False),
        pa.field("blob_offset", pa.uint64(), nullable=False),
        pa.field("chunk_seq", pa.uint32(), nullable=False),
        pa.field("pkg_type", pa.int8(), nullable=True),
        pa.field("checksum", pa.binary(32), nullable=False),
        pa.field("x_count", pa.uint64(), nullable=True),
    ])
    rows = pa.table({
        "relative_path": ["max", "zero"],
        "blob_offset": pa.array([2**64 - 1, 0], pa.uint64()),
        "chunk_seq": pa.array([2**32 - 1, 0], pa.uint32()),
        "pkg_type": pa.array([-128, None], pa.int8()),
        "checksum": pa.array([b"\xff" * 32, b"\0" * 32], pa.binary(32)),
        "x_count": pa.array([None, 2**63], pa.uint64()),
    }, schema=schema)
    catalog = open_catalog(tmp_path / "wh", None)
    catalog.create_namespace("t")
    key = GroupKey(4, "repo/with spaces", "pypi")
    tx = create_transaction(catalog, "t", key, schema)
    tx.append(convert.to_iceberg(rows, pa.array([0, 1], pa.int64())))
    tx.commit_transaction()
    (group,) = group_tables(catalog, "t").values()
    assert group.key == key and group.schema.equals(schema)
    stored = read_rows(group)
    assert stored.schema.field("blob_offset").type == pa.int64()
    assert stored.column("blob_offset").to_pylist() == [-1, 0]  # bit-cast, not clamped
    assert str(group.table.schema().find_field("checksum").field_type) == "fixed[32]"
    back, ordinals = convert.from_iceberg(stored, schema)
    back, ordinals = convert.in_order(back, ordinals)
    assert back.equals(rows) and ordinals.to_pylist() == [0, 1]


def test_polars_scan_iceberg_reads_the_tables_directly(where: tuple[str, str]) -> None:
    sidecar, wh = where
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        store.add(batch("a", 3, 4))
        table = store.iceberg_table(GroupKey(0, "r2", ""))
        df = pl.scan_iceberg(table, reader_override="pyiceberg").collect()
        assert df["relative_path"].to_list() == ["a/other.txt"]
        assert df.schema["blob_offset"] == pl.Int64 and convert.ORDINAL in df.columns
        # the same through the catalog, as another engine would see it
        catalog = open_catalog(wh, None)
        names = sorted(".".join(t) for t in catalog.list_tables("ns"))
        assert len(names) == 2
        total = sum(pl.scan_iceberg(catalog.load_table(n), reader_override="pyiceberg")
                    .select(pl.len()).collect().item() for n in names)
        assert total == store.files().num_rows


def test_catalog_argument_takes_pyiceberg_properties(tmp_path: Path) -> None:
    db = tmp_path / "shared-catalog.db"
    catalog = {"type": "sql", "uri": f"sqlite:///{db}", "name": "shared"}
    sidecar, wh = str(tmp_path / "b.znippy"), str(tmp_path / "wh")
    with open_store(sidecar, wh, "team_builds", catalog=catalog) as store:
        store.add([Entry("x.txt", data=b"x")])
    assert db.exists() and not (tmp_path / "wh" / "catalog.db").exists()
    out = tmp_path / "o.znippy"
    seal(sidecar, wh, "team_builds", out, catalog=catalog)
    with open_archive(out) as arc:
        assert arc.read("x.txt") == b"x"


# -- crashes: killed between the sidecar fsync and the commits ----------------------------------
CRASHER = textwrap.dedent(r'''
    import json, os, signal, sys
    from pyiceberg.catalog.sql import SqlCatalog
    from znippy_sql import Entry
    from znippy_sql.store import open_store

    sidecar, wh, kill_at, spec = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
    real = SqlCatalog.commit_table
    count = [0]
    def commit(self, *args, **kwargs):  # every table commit of the add goes through here
        count[0] += 1
        if count[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, *args, **kwargs)
    SqlCatalog.commit_table = commit
    entries = [Entry(p, data=d.encode(), repo=r) for p, d, r in spec]
    with open_store(sidecar, wh, "ns", block_size=2048) as store:
        store.add(entries)
''')


def crash_add(tmp_path: Path, sidecar: str, wh: str, kill_at: int,
              entries: list[tuple[str, str, str]]) -> None:
    script = tmp_path / "crasher.py"
    script.write_text(CRASHER)
    proc = subprocess.run([sys.executable, str(script), sidecar, wh, str(kill_at),
                           json.dumps(entries)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr


def test_crash_before_commit_leaves_orphans_only(where: tuple[str, str], tmp_path: Path) -> None:
    sidecar, wh = where
    a = [Entry("a.txt", data=text(3000, 1)), Entry("b.txt", data=text(100, 2))]
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        store.add(a)
        end = store.committed_end
    crash_add(tmp_path, sidecar, wh, 1, [("c.txt", "c" * 5000, ""), ("a.txt", "new a", "")])
    assert os.path.getsize(sidecar) > end  # fsynced blobs that nothing references
    sealed, one = tmp_path / "s.znippy", tmp_path / "one.znippy"
    report = seal(sidecar, wh, "ns", sealed)
    assert report.orphan_bytes_skipped == os.path.getsize(sidecar) - end
    write_archive(one, a, block_size=BLOCK)
    assert sealed.read_bytes() == one.read_bytes()
    b = [Entry("d.txt", data=text(900, 4))]
    with open_store(sidecar, wh, "ns") as store:
        assert paths(store.files()) == ["a.txt", "b.txt"]
        r = store.add(b)
        assert r.orphan_bytes_truncated > 0 and r.sidecar_start == end
    seal(sidecar, wh, "ns", sealed)
    write_archive(one, a + b, block_size=BLOCK)
    assert sealed.read_bytes() == one.read_bytes()


def test_crash_between_table_commits_never_loses_a_file(where: tuple[str, str],
                                                        tmp_path: Path) -> None:
    sidecar, wh = where
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        store.add([Entry("m.txt", data=b"old", repo="r1"), Entry("k.txt", data=b"k", repo="r1")])
    # m.txt moves to repo r2: r2's table (new rows) commits first; killed before r1's delete
    crash_add(tmp_path, sidecar, wh, 2, [("m.txt", "new", "r2")])
    with open_store(sidecar, wh, "ns") as store:
        files = store.files()
        assert paths(files) == ["k.txt", "m.txt"]
        row = files.filter(pc.equal(files.column("relative_path"), "m.txt"))
        assert row.column("repo").to_pylist() == ["r2"]  # the highest ordinal wins
        out = tmp_path / "s.znippy"
        seal(sidecar, wh, "ns", out)
        with open_archive(out) as arc:
            assert arc.read("m.txt") == b"new" and arc.verify().ok
        store.add([Entry("z.txt", data=b"z")])  # the next add deletes the stale copy
        r1 = read_rows(store._groups[GroupKey(0, "r1", "")])
        assert r1.column("relative_path").to_pylist() == ["k.txt"]


# -- CLI ----------------------------------------------------------------------------------------
def test_cli_store_add_ls_seal(where: tuple[str, str], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    sidecar, wh = where
    src = tmp_path / "src"
    for e in batch("p", 3, 5):
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data or b"")
    common = ["--sidecar", sidecar, "--warehouse", wh, "--namespace", "ns"]
    assert cli_main(["store", "add", *common, str(src), "--repo", "cli"]) == 0
    capsys.readouterr()
    assert cli_main(["store", "ls", *common, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(r["path"] for r in listed) == sorted(
        str(p.relative_to(src)) for p in src.rglob("*") if p.is_file())
    assert {r["repo"] for r in listed} == {"cli"}
    out = tmp_path / "cli.znippy"
    assert cli_main(["store", "seal", *common, "-o", str(out), "--json",
                     "--meta", "build=42"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files_sealed"] == len(listed) and report["path"] == str(out)
    with open_archive(out) as arc:
        assert arc.verify().ok
        meta = arc.section("__meta__").to_pylist()
        assert {"relative_path": None, "key": "build", "value": "42"} in meta
    # the same store through an explicit catalog uri (the default one, spelled out)
    uri = f"sqlite:///{os.path.join(wh, 'catalog.db')}"
    assert cli_main(["store", "ls", "--sidecar", sidecar, "--warehouse", wh, "--namespace",
                     "ns", "--catalog-uri", uri, "--catalog-prop", "name=znippy"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(listed)
    assert cli_main(["store", "ls", "--sidecar", sidecar, "--warehouse", wh,
                     "--namespace", "missing"]) == 2


# -- live views: the same views as the sealed archive -------------------------------------------
def test_duckdb_and_polars_views_match_the_sealed_archive(where: tuple[str, str],
                                                          tmp_path: Path) -> None:
    import duckdb

    from znippy_sql import duckdb as zduckdb
    from znippy_sql import polars as zpolars

    sidecar, wh = where
    store = open_store(sidecar, wh, "live", block_size=BLOCK)
    try:
        a = batch("a", 5, 6) + [Entry("org/x/lib/1.0/lib-1.0.pom", data=b"<project/>" * 600,
                                      pkg_type="maven")]
        store.add(a)
        con = duckdb.connect()
        assert zduckdb.register_store(con, store) == "live"
        sealed = tmp_path / "sealed.znippy"
        seal(sidecar, wh, "live", sealed)
        zduckdb.register(con, sealed, "frozen")
        for view in ("files", "chunks", "groups", "lookup"):
            live = con.sql(f"SELECT * FROM live_{view} ORDER BY ALL").fetchall()
            frozen = con.sql(f"SELECT * FROM frozen_{view} ORDER BY ALL").fetchall()
            assert live == frozen, view
        # contents come from the sidecar, verified
        (row,) = con.sql("SELECT content FROM znippy_cat('live', 'a/f02.txt')").fetchall()
        assert row[0] == a[2].data
        # a later commit shows after registering again
        store.add([Entry("late.txt", data=b"late")])
        zduckdb.register_store(con, store, "live")
        assert con.sql("SELECT count(*) FROM live_files").fetchall() == [(len(a) + 1,)]
        lazy = zpolars.scan_store(store)
        df = lazy.filter(pl.col("repo") == "r2").select("relative_path", "size").collect()
        assert df.rows() == [("a/other.txt", 700)]
        frozen_df = zpolars.scan(sealed, "chunks").collect()
        live_df = zpolars.scan_store(store, "chunks").filter(
            pl.col("relative_path") != "late.txt").collect()
        assert live_df.sort("relative_path", "chunk_seq").equals(
            frozen_df.sort("relative_path", "chunk_seq"))
        # unregistering drops the views and the snapshot's temporary tail file
        from znippy_sql.store.views import _REGISTERED, unregister_store

        snap_path = _REGISTERED[(id(con), "live")].path
        assert os.path.exists(snap_path)
        unregister_store(con, "live")
        assert not os.path.exists(snap_path)
        assert not con.sql("SELECT * FROM duckdb_views() WHERE view_name = 'live_files'"
                           ).fetchall()
        con.close()
    finally:
        store.close()


def test_snapshot_read_many_and_extract(where: tuple[str, str], tmp_path: Path) -> None:
    """The view paths count what they read on the snapshot's source (it once had no setter:
    read_many and extract of a snapshot failed with AttributeError)."""
    sidecar, wh = where
    a = batch("a", 4, 3)
    with open_store(sidecar, wh, "ns", block_size=BLOCK) as store:
        store.add(a)
    with open_store(sidecar, wh, "ns", writable=False) as reader, reader.snapshot() as snap:
        before = snap.source.bytes_read
        got = dict(snap.read_many([e.relative_path for e in a]))
        assert got == {e.relative_path: e.data for e in a}
        assert snap.source.bytes_read > before
        report = snap.extract(str(tmp_path / "out"))
        assert report.ok and report.files == len(a)
    assert (tmp_path / "out" / a[0].relative_path).read_bytes() == a[0].data
