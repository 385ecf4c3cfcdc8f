"""The catalog's two Iceberg tables: schemas, partition spec, sort order, properties.

``files`` is partitioned by ``identity(pkg_type), identity(repo), identity(archive_uri)``: the
first two prune a one-repo or one-type query to its data files, the third keeps each archive's
rows in data files of their own, so replacing or removing an archive drops whole files. Data
files are placed without partition directories (an archive URI is too long for a file name).
``archives`` is small and unpartitioned. See docs/catalog.md.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (BooleanType, FixedType, IntegerType, ListType, LongType, MapType,
                             NestedField, StringType, StructType, TimestamptzType)

FILES = "files"
ARCHIVES = "archives"
NAMESPACE = "fleet"
PROP_FORMAT = "znippy.format"
FORMAT = "znippy-catalog-v1"


_CHUNK = StructType(
    NestedField(11, "blob_offset", LongType(), required=True),
    NestedField(12, "blob_size", LongType(), required=True),
    NestedField(13, "compressed", BooleanType(), required=True),
    NestedField(14, "uncompressed_size", LongType(), required=True),
    NestedField(15, "checksum", FixedType(32), required=True),
)

FILES_SCHEMA = Schema(
    NestedField(1, "archive_uri", StringType(), required=True),
    NestedField(2, "relative_path", StringType(), required=True),
    NestedField(3, "repo", StringType(), required=True),
    NestedField(4, "pkg_type", IntegerType(), required=True),
    NestedField(5, "pkg_type_name", StringType(), required=True),
    NestedField(6, "module_name", StringType(), required=True),
    NestedField(7, "size", LongType(), required=True),
    NestedField(8, "digest", FixedType(32), required=True),
    NestedField(9, "chunks", ListType(10, _CHUNK, element_required=True), required=True),
)

ARCHIVES_SCHEMA = Schema(
    NestedField(1, "archive_uri", StringType(), required=True),
    NestedField(2, "size", LongType(), required=True),
    NestedField(3, "etag_or_mtime", StringType(), required=True),
    NestedField(4, "root_digest", FixedType(32), required=True),
    NestedField(5, "files", LongType(), required=True),
    NestedField(6, "groups", IntegerType(), required=True),
    NestedField(7, "chunk_rows", LongType(), required=True),
    NestedField(8, "added_at", TimestamptzType(), required=True),
    NestedField(9, "meta", MapType(10, StringType(), 11, StringType(), value_required=True),
                required=False),
)

FILES_SPEC = PartitionSpec(
    PartitionField(source_id=4, field_id=1000, transform=IdentityTransform(), name="pkg_type"),
    PartitionField(source_id=3, field_id=1001, transform=IdentityTransform(), name="repo"),
    PartitionField(source_id=1, field_id=1002, transform=IdentityTransform(),
                   name="archive_uri"),
)
FILES_SORT = SortOrder(SortField(source_id=2, transform=IdentityTransform()))

_COMMON = {
    PROP_FORMAT: FORMAT,
    "format-version": "2",
    "write.parquet.compression-codec": "zstd",
    "write.object-storage.enabled": "true",
    "write.object-storage.partitioned-paths": "false",
    "write.metadata.metrics.column.archive_uri": "full",
    # a lost race is redone by the catalog on the new snapshot (fleet.py), never rebased
    # by pyiceberg: a rebased append would keep a delete decided on the old snapshot
    "commit.retry.num-retries": "0",
}
FILES_PROPERTIES = {**_COMMON, "write.metadata.metrics.column.relative_path": "full",
                    # point lookups by path skip row groups by their min/max
                    "write.parquet.row-group-limit": "65536"}
ARCHIVES_PROPERTIES = dict(_COMMON)


def table_spec(name: str) -> dict[str, Any]:
    """``create_table`` keyword arguments of one of the two tables."""
    if name == FILES:
        return {"schema": FILES_SCHEMA, "partition_spec": FILES_SPEC, "sort_order": FILES_SORT,
                "properties": FILES_PROPERTIES}
    return {"schema": ARCHIVES_SCHEMA, "properties": ARCHIVES_PROPERTIES}


#: columns of ``files`` renamed since the first catalogs, old name → new: a catalog written
#: before is renamed when opened (Iceberg renames keep the field id: its data files read on)
RENAMED = {"module": "module_name"}


def upgrade(table: Any, where: str) -> Any:
    """``table`` (the ``files`` table) with the old names of :data:`RENAMED` renamed, in one
    schema commit (metadata only: no data file is rewritten); the table as it now stands."""
    from ..errors import CatalogError

    def todo(t: Any) -> dict[str, str]:
        names = {f.name for f in t.schema().fields}
        return {old: new for old, new in RENAMED.items() if old in names and new not in names}

    if not todo(table):
        return table
    try:
        with table.update_schema() as update:
            for old, new in todo(table).items():
                update.rename_column(old, new)
    except Exception as exc:  # noqa: BLE001  (a lost race, or no write access: see below)
        table.refresh()
        if todo(table):
            raise CatalogError(f"the files table names its column 'module' (a catalog written "
                               f"before 'module_name'); renaming it failed ({exc}): open the "
                               "catalog once where it may be written", path=where) from None
    table.refresh()
    return table


def module_field(field: pa.Field) -> pa.Field:
    """A module column as the ``files`` table holds it: nullable, in an Iceberg type
    (:func:`iceberg_type`)."""
    return pa.field(field.name, iceberg_type(field.type), nullable=True)


def iceberg_type(t: pa.DataType) -> pa.DataType:
    """The type a module column of Arrow type ``t`` takes in the catalog, at any depth: an
    unsigned or narrow integer widened, large strings and binaries plain, a date64 a date, a
    time or timestamp in microseconds (a time zone as UTC: the instants are the same), a
    duration the count of its unit (Int64), a 32/64-bit decimal a 128-bit one, a dictionary
    its values, a null column or an extension other than UUID its storage or text."""
    if pa.types.is_uint64(t) or pa.types.is_uint32(t):
        return pa.int64()
    if pa.types.is_integer(t) and t.bit_width < 32:
        return pa.int32()
    if pa.types.is_large_string(t) or pa.types.is_null(t):
        return pa.utf8()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", None if t.tz is None else "UTC")
    if pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_decimal32(t) or pa.types.is_decimal64(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_dictionary(t):
        return iceberg_type(t.value_type)
    if isinstance(t, pa.BaseExtensionType) and t != pa.uuid():
        return iceberg_type(t.storage_type)
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(iceberg_type(t.key_type)),
                       t.item_field.with_type(iceberg_type(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(iceberg_type(t.field(i).type))
                          for i in range(t.num_fields)])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(iceberg_type(t.value_type)))
    return t
