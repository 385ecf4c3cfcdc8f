"""Spark: Python Data Sources ``znippy`` (archives) and ``znippy-catalog`` (the fleet catalog).

``spark.read.format("znippy").option("view", "files").load("dumps/*.znippy")``: one input
partition per part of the plan (manifests only, on the driver); each partition is read by a
Python worker with :func:`znippy_sql.views.read_part` and handed to Spark as Arrow batches.
``znippy-catalog`` plans the catalog's table with pyiceberg on the driver and reads its data
files on the workers (no Iceberg jar). With ``spark.sql.python.filterPushdown.enabled``,
``pushFilters`` takes ``=``/``IN``/``startswith`` on ``repo``, ``pkg_type``,
``pkg_type_name``, ``module_name``, ``relative_path`` to prune before any task runs (every
filter is still evaluated by Spark: a pushed one only prunes); on ``znippy-catalog`` a path
filter goes through the catalog's path index ``paths`` (the ``files`` scan pruned to the
archives it lists, or ``paths`` read when the schema asked for holds only its columns).
Options:

- ``view`` (``files``), ``content`` (``false``): the files' bytes as a ``content`` column
  (a Spark data source cannot prune a column it declared, so it is asked for explicitly);
- ``repo``, ``pkg_type``, ``module_name``, ``path_prefix``, ``path``: a comma-separated
  list, a :class:`~znippy_sql.views.Where` given up front;
- ``storage.<key>`` = value, or ``storage_options`` = a JSON object: the remote archives'
  storage options; ``target_bytes``: index bytes per partition;
- for ``znippy-catalog``: ``table`` (``files``), ``namespace`` (``fleet``),
  ``catalog.<key>`` = value or ``catalog`` = a JSON object (pyiceberg catalog properties).

Unsigned integers become Spark ``long`` (``uint64`` values above 2**63 do not occur in an
archive's sizes and offsets), fixed-size binaries ``binary``, timestamps microseconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, In, InputPartition,
                                    StringStartsWith)

from .catalog import CatalogPart, CatalogScan
from .parts import TARGET_BYTES, Scan
from .predicates import PUSHABLE, Conjunct, Node, conjuncts_of, where_of
from .sources import expand

FILTER_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: Any) -> None:
    """Register the ``znippy`` and ``znippy-catalog`` formats with ``spark`` (a
    SparkSession) and turn on Python filter pushdown for that SparkSession."""
    spark.dataSource.register(ZnippyDataSource)
    spark.dataSource.register(ZnippyCatalogDataSource)
    try:
        spark.conf.set(FILTER_CONF, "true")
    except Exception:  # noqa: BLE001  (a Spark without it: filters are evaluated by Spark)
        pass


# -- options -----------------------------------------------------------------------------------

def _paths(options: Mapping[str, str]) -> list[str]:
    if "paths" in options and options["paths"] not in ("", "[]"):
        return list(json.loads(options["paths"]))
    if "path" in options:
        return [options["path"]]
    raise ValueError("format znippy: give the archives to .load(path or [paths])")


def _prefixed(options: Mapping[str, str], prefix: str, whole: str) -> dict[str, str] | None:
    out: dict[str, str] = dict(json.loads(options[whole])) if options.get(whole) else {}
    out.update({k[len(prefix):]: v for k, v in options.items()
                if k.lower().startswith(prefix)})
    return out or None


def _bool(options: Mapping[str, str], key: str) -> bool:
    text = str(options.get(key, "false")).lower()
    if text not in ("true", "false"):
        raise ValueError(f"option {key}={text!r}: true or false")
    return text == "true"


def _list(text: str | None) -> tuple[str, ...] | None:
    return None if text is None else tuple(s.strip() for s in text.split(","))


def scan_of(options: Mapping[str, str]) -> Scan:
    from .predicates import where_kwargs

    storage = _prefixed(options, "storage.", "storage_options")
    names = _list(options.get("pkg_type"))
    pkg = None if names is None else tuple(int(p) if p.isdigit() else p for p in names)
    where = where_kwargs(repo=_list(options.get("repo")), pkg_type=pkg,
                         module_name=_list(options.get("module_name")),
                         path_prefix=_list(options.get("path_prefix")),
                         path=_list(options.get("path_exact")))
    return Scan(tuple(expand(_paths(options), storage)), options.get("view", "files"), where,
                storage, _bool(options, "content"),
                int(options.get("target_bytes", TARGET_BYTES)))


# -- types -------------------------------------------------------------------------------------

def spark_arrow_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark takes for ``t`` (no unsigned integers, no fixed-size binary)."""
    if pa.types.is_unsigned_integer(t):
        return pa.int64() if t.bit_width >= 32 else pa.int32() if t.bit_width == 16 \
            else pa.int16()
    if pa.types.is_fixed_size_binary(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_string(t):
        return pa.utf8()
    if pa.types.is_timestamp(t):  # Spark's timestamps are microseconds
        return pa.timestamp("us", t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(spark_arrow_field(t.value_field))
    if pa.types.is_struct(t):
        return pa.struct([spark_arrow_field(f) for f in t])
    if pa.types.is_map(t):
        return pa.map_(spark_arrow_type(t.key_type), spark_arrow_type(t.item_type))
    if pa.types.is_dictionary(t):
        return spark_arrow_type(t.value_type)
    return t


def spark_arrow_field(f: pa.Field) -> pa.Field:
    return pa.field(f.name, spark_arrow_type(f.type), nullable=True)


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([spark_arrow_field(f) for f in schema])


def struct_type(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(spark_arrow_schema(schema))


def _batches(rows: Iterator[pa.RecordBatch], out: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in rows:
        if not out:  # no column: the rows still count
            yield batch.select([])
            continue
        yield pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(batch.columns, out)],
                                         schema=out)


def _conjuncts(filters: list[Any]) -> tuple[list[Conjunct], list[Any]]:
    """(conjuncts to prune with, every filter: Spark evaluates them all again)."""
    tree: Node = None
    for f in filters:
        tree = ("and", tree, _node(f))
    return [c for c in conjuncts_of(tree) if c[0] in PUSHABLE], list(filters)


def _node(f: Any) -> Node:
    """A Spark filter spelled as a :data:`~.predicates.Node` (a list of them is AND-ed)."""
    attribute: tuple[str, ...] = getattr(f, "attribute", ())  # Not, And, Or: none
    if len(attribute) != 1:
        return None
    column = ("col", attribute[0])
    if isinstance(f, EqualTo):
        return ("eq", column, ("lit", f.value))
    if isinstance(f, In):
        return ("in", column, tuple(f.value))
    if isinstance(f, StringStartsWith):
        return ("prefix", column, ("lit", f.value))
    return None


# -- format "znippy" ---------------------------------------------------------------------------

class _Part(InputPartition):
    def __init__(self, value: Any) -> None:
        super().__init__(value)


class ZnippyDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "znippy"

    def schema(self) -> Any:
        return struct_type(scan_of(self.options).schema())

    def reader(self, schema: Any) -> DataSourceReader:
        return ZnippyReader(scan_of(self.options), schema)


class ZnippyReader(DataSourceReader):
    def __init__(self, scan: Scan, schema: Any) -> None:
        self.scan = scan
        self.arrow = scan.schema()
        self.out = spark_arrow_schema(pa.schema([self.arrow.field(f.name) for f in schema]))
        self.conjuncts: list[Conjunct] = []

    def pushFilters(self, filters: list[Any]) -> Any:  # noqa: N802  (Spark's name)
        self.conjuncts, rest = _conjuncts(filters)
        return rest

    def partitions(self) -> list[InputPartition]:
        return [_Part(p) for p in self.scan.plan(where_of(self.conjuncts))] or \
            [_Part(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if partition.value is None:
            return iter(())
        rows = self.scan.read(partition.value, self.arrow, self.out.names,
                              where_of(self.conjuncts))
        return _batches(rows, self.out)


# -- format "znippy-catalog" -------------------------------------------------------------------

def catalog_scan_of(options: Mapping[str, str]) -> CatalogScan:
    if "path" not in options:
        raise ValueError("format znippy-catalog: give the warehouse to .load(warehouse)")
    return CatalogScan(options["path"], options.get("table", "files"),
                       _prefixed(options, "catalog.", "catalog"),
                       options.get("namespace", "fleet"), _bool(options, "content"),
                       _prefixed(options, "storage.", "storage_options"))


class ZnippyCatalogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "znippy-catalog"

    def schema(self) -> Any:
        return struct_type(catalog_scan_of(self.options).schema())

    def reader(self, schema: Any) -> DataSourceReader:
        return ZnippyCatalogReader(catalog_scan_of(self.options), schema)


class ZnippyCatalogReader(DataSourceReader):
    def __init__(self, scan: CatalogScan, schema: Any) -> None:
        self.scan = scan
        self.out = spark_arrow_schema(pa.schema([scan.schema().field(f.name)
                                                 for f in schema]))
        self.conjuncts: list[Conjunct] = []

    def pushFilters(self, filters: list[Any]) -> Any:  # noqa: N802
        self.conjuncts, rest = _conjuncts(filters)
        return rest

    def partitions(self) -> list[InputPartition]:
        return [_Part(p) for p in self.scan.plan(self.conjuncts, self.out.names)] or \
            [_Part(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        part: CatalogPart | None = partition.value
        if part is None:
            return iter(())
        return _batches(self.scan.read(part, self.out.names, self.conjuncts), self.out)
