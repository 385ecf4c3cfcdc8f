"""A catalog of many archives: their index rows in two Apache Iceberg tables (docs/catalog.md).

>>> import os, tempfile
>>> from znippy_sql import Entry, write_archive
>>> d = tempfile.mkdtemp()
>>> _ = write_archive(os.path.join(d, "a.znippy"), [Entry("x/y.txt", data=b"hi")])
>>> cat = open_catalog(os.path.join(d, "wh"), create=True)
>>> cat.add([os.path.join(d, "a.znippy")]).added
1
>>> cat.sql("SELECT relative_path, size FROM files").to_pylist()
[{'relative_path': 'x/y.txt', 'size': 2}]
"""

from __future__ import annotations

from .fleet import Catalog, CatalogAddReport, RemoveReport, open_catalog

__all__ = ["Catalog", "CatalogAddReport", "RemoveReport", "open_catalog"]
