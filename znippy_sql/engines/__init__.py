"""Distributed engines over the views: Daft (:mod:`.daft`), Spark (:mod:`.spark`), Ray
(:mod:`.ray`), each a thin adapter over :func:`znippy_sql.views.plan` /
:func:`~znippy_sql.views.read_part` and ``Archive.read_many``; the public faces are
``znippy_sql.daft``, ``znippy_sql.spark`` and ``znippy_sql.ray`` (docs/engines.md).

What the three share lives here, free of any engine import: which archives a path, glob, list
or URL names (:mod:`.sources`), the predicates an engine hands over turned into a
:class:`~znippy_sql.views.Where` (:mod:`.predicates`), the parts of a plan and their rows with
or without content (:mod:`.parts`), and the catalog's files read through pyiceberg's planning
(:mod:`.catalog`).
"""
