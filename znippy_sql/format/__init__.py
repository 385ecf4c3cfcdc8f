"""The on-disk format, bottom layer: nothing here imports a reader, a writer or an engine.

- ``footer``, ``manifest``, ``schema``: the 16-byte footer, the manifest of byte ranges, the
  Arrow schemas, pkg_type registry and reserved names (FORMAT §1–§4).
- ``rangeio``: ``RangeSource``, the checked byte-range fetcher every reader goes through.
- ``ipc``: Arrow IPC streams written and read (with their validation); ``kernels``: the Arrow
  compute calls the format code needs, without importing ``pyarrow.compute``.
- ``codec``, ``zlframe``: OpenZL frames (FORMAT §5).
- ``paths``: path safety; ``files``: the per-file table and file digests; ``lookup``: the sorted
  lookup built from data rows; ``sections``: reserved sections as writers take them;
  ``gitindex``: the ``__gunnar_oid__`` layout.
- ``rollback``: the hot journal of an interrupted append, a property of the file that every
  opener recovers; ``fsio``: full writes and directory fsyncs.
"""
