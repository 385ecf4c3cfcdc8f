"""The Iceberg side of the store: the catalog, one table per group, and the keys they carry.

Default catalog: pyiceberg's ``SqlCatalog`` over SQLite, ``<warehouse>/catalog.db``, data and
metadata files under ``<warehouse>``. ``catalog=`` takes any pyiceberg catalog properties
instead (``type``, ``uri``, ``warehouse``, credentials ...; docs/lifecycle.md).

A group ``(pkg_type, repo, module_name)`` lives in the table
``<namespace>.g<pkg_type>_<repo slug>_<module slug>_<hash>``: the slugs keep names readable, the
hash (SHA-256 of the exact key, 10 hex digits) keeps distinct keys apart. The exact key and the
group's Arrow schema are table properties; a table without them is not the store's and is
ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import StoreError
from ..format.schema import GroupKey
from .convert import decode_schema, encode_schema, iceberg_schema

CATALOG_NAME = "znippy"
PROP_KEY = "znippy.group"  # JSON [pkg_type, repo, module_name]
PROP_SCHEMA = "znippy.arrow_schema"
PROP_FORMAT = "znippy.format"
FORMAT = "znippy-store-v1"
NS_LEVEL = "znippy.openzl.level"
NS_BLOCK = "znippy.block_size"
#: packed blobs and compressed index streams, fixed when the store is created ("1"/"0"); a
#: namespace without them predates both: neither
NS_PACK = "znippy.pack"
NS_INDEX = "znippy.index_compression"


def open_catalog(warehouse: str | os.PathLike[str], catalog: Mapping[str, Any] | None, *,
                 create: bool = True) -> Any:
    """A pyiceberg catalog: the embedded SQLite one, or the one ``catalog`` describes.

    ``create=False`` refuses a local warehouse or default catalog that does not exist yet.
    """
    warehouse = os.fspath(warehouse)
    local = "://" not in warehouse
    if local and not create:
        missing = warehouse if not os.path.isdir(warehouse) else (
            os.path.join(warehouse, "catalog.db") if catalog is None
            and not os.path.exists(os.path.join(warehouse, "catalog.db")) else None)
        if missing:
            raise StoreError("no such warehouse or catalog", path=missing)
    if local:
        os.makedirs(warehouse, exist_ok=True)
        location = "file://" + os.path.abspath(warehouse)
    else:
        location = warehouse
    if catalog is None:
        if not local:
            raise StoreError("a remote warehouse needs catalog= (pyiceberg catalog properties)",
                             path=warehouse)
        from pyiceberg.catalog.sql import SqlCatalog

        db = os.path.join(os.path.abspath(warehouse), "catalog.db")
        return SqlCatalog(CATALOG_NAME, uri=f"sqlite:///{db}", warehouse=location)
    from pyiceberg.catalog import load_catalog

    props = {k: str(v) for k, v in catalog.items()}
    name = props.pop("name", CATALOG_NAME)
    props.setdefault("warehouse", location)
    uri = props.get("uri", "")
    if "type" not in props and uri.split(":", 1)[0].split("+")[0] in ("sqlite", "postgresql",
                                                                        "mysql"):
        props["type"] = "sql"
    return load_catalog(name, **props)


def table_name(key: GroupKey) -> str:
    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:40] or "x"

    digest = hashlib.sha256(json.dumps(list(key)).encode("utf-8")).hexdigest()[:10]
    return f"g{key.pkg_type}_{slug(key.repo)}_{slug(key.module_name)}_{digest}"


def table_properties(key: GroupKey, schema: pa.Schema) -> dict[str, str]:
    return {PROP_FORMAT: FORMAT, PROP_KEY: json.dumps(list(key)),
            PROP_SCHEMA: encode_schema(schema)}


@dataclass
class GroupTable:
    """One group's Iceberg table and the Arrow schema its rows come back in."""

    key: GroupKey
    table: Any  # pyiceberg.table.Table
    schema: pa.Schema


def group_tables(catalog: Any, namespace: str) -> dict[GroupKey, GroupTable]:
    """Every store table of ``namespace``, by group key."""
    out: dict[GroupKey, GroupTable] = {}
    for ident in catalog.list_tables(namespace):
        table = catalog.load_table(ident)
        props = table.properties
        if props.get(PROP_FORMAT) != FORMAT:
            continue
        try:
            p, repo, module = json.loads(props[PROP_KEY])
            key = GroupKey(int(p), str(repo), str(module))
            schema = decode_schema(props[PROP_SCHEMA])
        except (KeyError, ValueError, TypeError, pa.ArrowException) as exc:
            raise StoreError(f"table {'.'.join(ident)} has broken znippy properties: {exc}",
                             path=namespace) from None
        out[key] = GroupTable(key, table, schema)
    return out


def create_transaction(catalog: Any, namespace: str, key: GroupKey, schema: pa.Schema) -> Any:
    """A transaction that creates the group's table; committed together with its first rows."""
    ident = f"{namespace}.{table_name(key)}"
    return catalog.create_table_transaction(ident, schema=iceberg_schema(schema),
                                            properties=table_properties(key, schema))


def read_rows(group: GroupTable, columns: tuple[str, ...] | None = None) -> pa.Table:
    """The table's current snapshot as Arrow (``columns`` to read only some)."""
    scan = group.table.scan(selected_fields=columns) if columns else group.table.scan()
    return scan.to_arrow()
