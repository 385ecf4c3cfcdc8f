"""Every Arrow type a module may declare for its columns works in every read path, or the
writer refuses it (issue 35 item 13; docs/format.md, "What a reader accepts"): DuckDB's
views, the view catalog (and the engines' parts), Polars, ``ls`` (plain, ``-l``,
``--json``), ``info`` and ``sql --format json``. A type an engine cannot take is read as one
it can (``validate.portable``: a half float as a float, ...); JSON output writes temporal,
decimal and binary values as text or numbers (``cli.common.json_value``)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from znippy_sql import Entry, modules, open_archive, views, write_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.errors import ZnippyError

UTC = dt.timezone.utc
#: column suffix -> (type, the value the module gives, what ``ls --json`` shows of it)
TYPES: dict[str, tuple[pa.DataType, Any, Any]] = {
    "f16": (pa.float16(), 1.5, 1.5),
    "f32": (pa.float32(), 1.5, 1.5),
    "d64": (pa.date64(), dt.date(2024, 1, 2), "2024-01-02"),
    "t32": (pa.time32("ms"), dt.time(1, 2, 3), "01:02:03"),
    "t64": (pa.time64("us"), dt.time(1, 2, 3, 4), "01:02:03.000004"),
    "t64ns": (pa.time64("ns"), dt.time(1, 2, 3, 4), "01:02:03.000004"),
    "tsns": (pa.timestamp("ns"), dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02T03:04:05"),
    "tsutc": (pa.timestamp("us", "UTC"), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
              "2024-01-02T03:04:05+00:00"),
    "tsparis": (pa.timestamp("s", "Europe/Paris"), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                "2024-01-02T04:04:05+01:00"),
    "tsoff": (pa.timestamp("ms", "+02:00"), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
              "2024-01-02T05:04:05+02:00"),
    "durs": (pa.duration("s"), dt.timedelta(seconds=5), 5.0),
    "durns": (pa.duration("ns"), dt.timedelta(seconds=5), 5.0),
    "ival": (pa.month_day_nano_interval(), pa.MonthDayNano([1, 2, 3]), "[1, 2, 3]"),
    "dec": (pa.decimal128(10, 2), decimal.Decimal("12.34"), 12.34),
    "dec32": (pa.decimal32(5, 2), decimal.Decimal("1.25"), 1.25),
    "dec256": (pa.decimal256(20, 3), decimal.Decimal("12.5"), 12.5),
    "decwide": (pa.decimal256(50, 3), decimal.Decimal("12.5"), "12.500"),
    "bin": (pa.binary(), b"\x00\xff", "00ff"),
    "lbin": (pa.large_binary(), b"\x00\xff", "00ff"),
    "fsb": (pa.binary(4), b"abcd", "61626364"),
    "bview": (pa.binary_view(), b"x", "78"),
    "sview": (pa.string_view(), "x", "x"),
    "lstr": (pa.large_utf8(), "x", "x"),
    "lst": (pa.list_(pa.int32()), [1, 2], [1, 2]),
    "lstf16": (pa.list_(pa.float16()), [1.5], [1.5]),
    "lsttime": (pa.large_list(pa.time64("us")), [dt.time(1)], ["01:00:00"]),
    "fsl": (pa.list_(pa.int32(), 2), [1, 2], [1, 2]),
    "lview": (pa.list_view(pa.int32()), [1, 2], [1, 2]),
    "map": (pa.map_(pa.utf8(), pa.float16()), [("a", 1.5)], [["a", 1.5]]),
    "st": (pa.struct([("a", pa.float16()), ("b", pa.duration("ms"))]),
           {"a": 1.5, "b": dt.timedelta(seconds=2)}, {"a": 1.5, "b": 2.0}),
    "dict": (pa.dictionary(pa.int32(), pa.utf8()), "x", "x"),
    "ree": (pa.run_end_encoded(pa.int32(), pa.utf8()), "x", "x"),
    "null": (pa.null(), None, None),
    "uuid": (pa.uuid(), b"0123456789abcdef", b"0123456789abcdef".hex()),  # its storage
    "json": (pa.json_(), '{"a": 1}', '{"a": 1}'),
}


class Exotic:
    """A third-party module whose columns have every type of ``TYPES``."""

    name = "exo"
    pkg_type = 42

    def __init__(self, types: Mapping[str, tuple[pa.DataType, Any, Any]]) -> None:
        self.types = types
        self.fields = tuple(pa.field(f"exo_{k}", t) for k, (t, _, _) in types.items())

    def claims(self, relative_path: str) -> bool:
        return relative_path.startswith("exo/")

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> dict[str, Any]:
        return {f"exo_{k}": v for k, (_, v, _) in self.types.items()}


@pytest.fixture(scope="module")
def exotic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exotic") / "exo.znippy"
    saved = dict(modules._REGISTRY)
    modules.register(Exotic(TYPES))
    try:
        write_archive(path, [Entry("exo/a.txt", data=b"hello"),
                             Entry("exo/b.txt", data=b"world" * 100),
                             Entry("plain.txt", data=b"raw")],
                      pkg_type="auto", fsync=False)
    finally:
        modules._REGISTRY.clear()
        modules._REGISTRY.update(saved)
    return path


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_duckdb_views_read_every_type(exotic: Path) -> None:
    con = duckdb.connect()
    register(con, exotic, "x")
    for view in ("files", "chunks", "groups"):
        con.sql(f"SELECT * FROM x_{view}").fetchall()
        con.sql(f"SELECT * FROM x_{view}").to_arrow_table()
    row = con.sql("SELECT exo_f16, exo_lstf16, exo_dec256, exo_ree, exo_ival FROM x_files "
                  "WHERE relative_path = 'exo/a.txt'").fetchall()
    assert row == [(1.5, [1.5], decimal.Decimal("12.500"), "x", "[1, 2, 3]")]
    types = dict(con.sql("SELECT column_name, column_type FROM (DESCRIBE x_files)").fetchall())
    assert types["exo_f16"] == "FLOAT"
    con.close()


def test_view_catalog_polars_and_parts_read_every_type(exotic: Path) -> None:
    from znippy_sql.polars import scan

    for view in ("files", "chunks", "groups"):
        table = views.batches(str(exotic), view).read_all()
        assert table.schema.equals(views.schema(str(exotic), view))
        for part in views.plan([str(exotic)], view):  # what Spark, Daft and Ray read
            assert views.read_part(part, view).read_all().num_rows
    files = views.batches(str(exotic), "files").read_all()
    assert files.schema.field("exo_f16").type == pa.float32()
    assert files.schema.field("exo_lview").type == pa.list_(pa.int32())
    assert files.schema.field("exo_ree").type == pa.utf8()
    frame = scan(exotic, "files").collect()
    assert frame.height == 3
    got = frame.filter(frame["relative_path"] == "exo/a.txt").row(0, named=True)
    assert got["exo_f16"] == 1.5 and got["exo_lview"] == [1, 2] and got["exo_ree"] == "x"
    assert got["exo_durs"] == dt.timedelta(seconds=5)
    scan(exotic, "chunks").collect()


def test_spark_and_daft_take_every_type(exotic: Path) -> None:
    """Spark's schema (converted without a SparkSession) and a Daft read of the view."""
    from znippy_sql.daft import read_archives
    from znippy_sql.engines.spark import struct_type

    for view in ("files", "chunks"):
        struct_type(views.schema(str(exotic), view))
    frame = read_archives([str(exotic)]).to_arrow()
    assert frame.num_rows == 3 and "exo_t32" in frame.column_names


def test_ls_and_info_show_every_type(exotic: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r["relative_path"]: r for r in json.loads(_cli(["ls", "--json", str(exotic)],
                                                            capsys))}
    a = rows["exo/a.txt"]
    for k, (_, _, shown) in TYPES.items():
        assert a.get(f"exo_{k}") == shown, k  # a null column is left out, as null
    assert "exo_f16" not in rows["plain.txt"]
    assert "exo/a.txt" in _cli(["ls", "-l", str(exotic)], capsys)
    assert _cli(["ls", str(exotic)], capsys).split() == ["exo/a.txt", "exo/b.txt", "plain.txt"]
    info = json.loads(_cli(["info", "--json", str(exotic)], capsys))
    assert info["files"] == 3
    assert "groups" in _cli(["info", str(exotic)], capsys)
    out = _cli(["sql", str(exotic), "SELECT relative_path, exo_t64, exo_durs, exo_dec, exo_bin "
                "FROM exo_files WHERE relative_path = 'exo/a.txt'", "--format", "json"], capsys)
    assert json.loads(out) == {"relative_path": "exo/a.txt", "exo_t64": "01:02:03.000004",
                               "exo_dec": 12.34, "exo_bin": "00ff",
                               # DuckDB reads a duration as an INTERVAL: [months, days, ns]
                               "exo_durs": [0, 0, 5_000_000_000]}


def test_the_catalog_takes_every_type(exotic: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``catalog add`` maps each module column to an Iceberg type (``catalog.schema.
    iceberg_type``) and ``catalog sql`` reads it back."""
    warehouse = str(tmp_path / "wh")
    _cli(["catalog", "add", warehouse, str(exotic)], capsys)
    out = _cli(["catalog", "sql", warehouse, "SELECT exo_f16, exo_t32, exo_durs, exo_null, "
                "exo_json FROM files WHERE relative_path = 'exo/a.txt'", "--format", "json"],
               capsys)
    assert json.loads(out) == {"exo_f16": 1.5, "exo_t32": "01:02:03", "exo_durs": 5,
                               "exo_null": None, "exo_json": '{"a": 1}'}


@pytest.mark.parametrize("kind", [
    pa.dense_union([pa.field("i", pa.int32()), pa.field("s", pa.utf8())]),
    pa.sparse_union([pa.field("i", pa.int32())]),
    pa.list_(pa.sparse_union([pa.field("i", pa.int32())])),
])
def test_a_union_column_is_refused_at_write(tmp_path: Path, kind: pa.DataType,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modules, "_REGISTRY", dict(modules._REGISTRY))
    modules.register(Exotic({"u": (kind, None, None)}))
    with pytest.raises(ZnippyError, match=r"'exo_u'.*a union type cannot be written"):
        write_archive(tmp_path / "u.znippy", [Entry("exo/a.txt", data=b"x")],
                      pkg_type="auto", fsync=False)
    assert not (tmp_path / "u.znippy").exists()


def test_a_value_that_does_not_fit_its_type_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(modules, "_REGISTRY", dict(modules._REGISTRY))
    modules.register(Exotic({"n": (pa.int8(), 1000, None)}))
    with pytest.raises(ZnippyError, match=r"module 'exo': column 'exo_n' \(int8\): a value"):
        write_archive(tmp_path / "n.znippy", [Entry("exo/a.txt", data=b"x")],
                      pkg_type="auto", fsync=False)


def test_another_writers_union_and_interval_columns_read_as_text(
        tmp_path: Path, raw_archive: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A union (which this writer refuses) or an interval in another writer's archive: read
    in every path as each value's JSON text."""
    def add(name: str, table: pa.Table) -> pa.Table:
        if name != "sub":
            return table
        n = table.num_rows
        union = pa.UnionArray.from_sparse(pa.array([0, 1] * (n // 2), pa.int8()),
                                          [pa.array(range(n), pa.int32()),
                                           pa.array([f"s{i}" for i in range(n)])], ["i", "s"])
        ival = pa.array([pa.MonthDayNano([i, 0, 5]) for i in range(n)],
                        pa.month_day_nano_interval())
        ree = pc.run_end_encode(pa.array(["x"] * n))
        nested = pa.StructArray.from_arrays([ree], ["r"])  # a run-end encoding inside
        return table.append_column("ext_u", union).append_column("ext_i", ival) \
            .append_column("ext_r", ree).append_column("ext_s", nested)

    path = raw_archive([("a.txt", b"a"), ("b.txt", b"b")]).write(tmp_path / "f.znippy",
                                                                  table_edit=add)
    with open_archive(path) as arc:
        assert arc.read("a.txt") == b"a"
    con = duckdb.connect()
    register(con, path, "f")
    got = con.sql("SELECT relative_path, ext_u, ext_i FROM f_files ORDER BY 1").fetchall()
    assert got == [("a.txt", "0", "[0, 0, 5]"), ("b.txt", '"s1"', "[1, 0, 5]")]
    from znippy_sql.polars import scan

    assert scan(path, "files").collect()["ext_u"].to_list() == ["0", '"s1"']
    rows = json.loads(_cli(["ls", "--json", str(path)], capsys))
    assert rows[0]["ext_i"] == "[0, 0, 5]" and rows[1]["ext_r"] == "x"
    assert rows[1]["ext_s"] == '{"r": "x"}'
