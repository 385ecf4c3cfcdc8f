"""One timed ``Catalog.add`` of a whole fleet into a fresh warehouse, for A/B runs of two
checkouts on the same archives (bench/results-catalog.md, 2026-12-02 14:57).

Usage, alternating the checkouts::

    cd /tmp && PYTHONPATH=<checkout> <venv>/bin/python <checkout>/bench/ab_add.py LABEL \
        [--fleet /tmp/cat/fleet]

Prints the label, which ``znippy_sql`` ran, rows, wall and CPU seconds and rows/s.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import tempfile
import time

import znippy_sql
from znippy_sql.catalog import open_catalog


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("--fleet", default="/tmp/cat/fleet")
    args = ap.parse_args()
    archives = sorted(glob.glob(os.path.join(args.fleet, "*.znippy")))
    warehouse = tempfile.mkdtemp(prefix=f"ab-add-{args.label}-")
    try:
        cat = open_catalog(warehouse, create=True)
        t, c = time.perf_counter(), time.process_time()
        report = cat.add(archives)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
    print(f"{args.label} {znippy_sql.__file__} rows {report.rows} wall {wall:.2f} cpu {cpu:.2f} "
          f"rows/s {report.rows / wall:,.0f}")


if __name__ == "__main__":
    main()
