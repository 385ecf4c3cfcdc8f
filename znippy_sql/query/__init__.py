"""The query layer: an archive's sections as DuckDB views and Polars scans, never unpacked.

- ``tables``: zero-copy Arrow tables per view; ``plan``: the views of one archive and group
  pruning; ``sql``: loading the packaged SQL (``queries/``) and quoting.
- ``duckdb``, ``polars``: the engines' entry points (public as :mod:`znippy_sql.duckdb` and
  :mod:`znippy_sql.polars`, which also reach the store's live views).
"""
