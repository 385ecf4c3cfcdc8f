"""The view catalog: every table an archive offers, defined once, read as Arrow record batches.

>>> import tempfile, os
>>> from znippy_sql import write_archive, Entry, views
>>> p = os.path.join(tempfile.mkdtemp(), "demo.znippy")
>>> _ = write_archive(p, [Entry("a.txt", data=b"hi", repo="r")], fsync=False)
>>> views.batches(p, "files", ["relative_path", "size"]).read_all().to_pylist()
[{'relative_path': 'a.txt', 'size': 2}]

A view (:class:`View`) is a schema for one archive plus a function yielding its rows; each is
defined in one file, in its capability's package (:mod:`.registry` lists where). Every engine
(DuckDB, Polars, ``ls``, ``info``, the catalog, Spark/Daft/Ray sources) reads through
:func:`batches`, which applies projection, group pruning and the :class:`Where` predicates
once, here. This package imports no engine.

Order of rows: a view's own order (``files``/``chunks``: group by group in tail order, rows in
their canonical order inside a group; ``lookup``: path order), archive by archive in the order
given for :func:`batches_many`.
"""

from __future__ import annotations

from .base import Request, View, Where
from .core import (ARCHIVE_FIELD, ArchiveLike, archive_name, batches, batches_many, conform,
                   merge_schemas, schema, schema_many, table)
from .parts import Part, plan, read_part
from .registry import get, names, present, register

__all__ = ["ARCHIVE_FIELD", "ArchiveLike", "Part", "Request", "View", "Where", "archive_name",
           "batches", "batches_many", "conform", "get", "merge_schemas", "names", "plan",
           "present", "read_part", "register", "schema", "schema_many", "table"]
