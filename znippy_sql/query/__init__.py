"""The query layer's shared parts: zero-copy Arrow tables of an archive, and view SQL.

Engines live in :mod:`znippy_sql.duckdb` and :mod:`znippy_sql.polars`.
"""
