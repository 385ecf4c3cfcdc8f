"""The dynamic store (sidecar blobs + Iceberg index) and its seal into a static archive.

>>> import tempfile, os
>>> from znippy_sql import Entry, open_archive
>>> d = tempfile.mkdtemp()
>>> with open_store(os.path.join(d, "blobs.znippy"), os.path.join(d, "wh"), "demo") as s:
...     s.add([Entry("a.txt", data=b"hello")]).files_added
1
>>> report = seal(os.path.join(d, "blobs.znippy"), os.path.join(d, "wh"), "demo",
...               os.path.join(d, "sealed.znippy"))
>>> open_archive(os.path.join(d, "sealed.znippy")).read("a.txt")
b'hello'
"""

from __future__ import annotations

from .dynamic import AddReport, Store, open_store
from .seal import SealReport, seal

__all__ = ["AddReport", "SealReport", "Store", "open_store", "seal"]
