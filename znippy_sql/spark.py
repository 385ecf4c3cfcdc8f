"""Spark over znippy archives and the fleet catalog (``pip install 'znippy_sql[spark]'``).

>>> import znippy_sql.spark; znippy_sql.spark.register(spark)         # doctest: +SKIP
>>> spark.read.format("znippy").option("view", "files").load("dumps/*.znippy")  # doctest: +SKIP
>>> spark.read.format("znippy-catalog").load("warehouse/")            # doctest: +SKIP

The implementation is :mod:`znippy_sql.engines.spark`; docs/engines.md lists the options.
"""

from __future__ import annotations

from .engines.spark import ZnippyCatalogDataSource, ZnippyDataSource, register

__all__ = ["ZnippyCatalogDataSource", "ZnippyDataSource", "register"]
