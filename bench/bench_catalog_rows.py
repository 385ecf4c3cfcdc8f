"""What the catalog's ``add`` costs an archive of N files (issue 33, item 5): Python function
calls (``sys.setprofile`` + ``threading.setprofile``; with ``c_call``: builtins called from
Python too) of ``read_rows`` and of ``Catalog.add``, and the median wall time of ``read_rows``
(7 runs). For A/B runs of two checkouts on the same archive, alternating::

    cd /tmp && PYTHONPATH=<checkout> <venv>/bin/python <checkout>/bench/bench_catalog_rows.py \
        --files 10000 --dir /tmp/rows
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _calls import python_calls  # noqa: E402

import znippy_sql  # noqa: E402
from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.catalog.rows import read_rows


def calls(fn: Callable[[], Any], events: tuple[str, ...]) -> int:
    return sum(python_calls(fn, events)[1].values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--dir", default="/tmp/rows")
    args = ap.parse_args()
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    small, big = base / "small.znippy", base / f"files{args.files}.znippy"
    if not big.exists():  # three groups (two repos, two pkg_types), small files
        write_archive(small, [Entry(f"s/{i}", data=b"x%d" % i) for i in range(5)], workers=1)
        write_archive(big, [Entry(f"d{i % 100:02d}/f{i:05d}.txt",
                                  data=b"file %d\n" % i * (1 + i % 7), repo="r" if i % 3 else "",
                                  pkg_type=7 if i % 3 == 2 else None)
                            for i in range(args.files)], workers=1)
    read_rows(str(big))
    n = args.files
    print(f"znippy_sql from {Path(znippy_sql.__file__).parent}; {n:,} files")
    for events in (("call",), ("call", "c_call")):
        c = calls(lambda: read_rows(str(big)), events)
        print(f"read_rows {'+'.join(events)}: {c:,} ({c / n:.3f} a file)")
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        catalog = open_catalog(Path(tmp) / "wh", create=True)
        catalog.add([small])
        c = calls(lambda: catalog.add([big]), ("call",))
        print(f"Catalog.add call: {c:,} ({c / n:.3f} a file)")
    times = []
    for _ in range(7):
        start = time.perf_counter()
        read_rows(str(big))
        times.append(time.perf_counter() - start)
    print(f"read_rows median {statistics.median(times) * 1000:.1f} ms "
          f"(min {min(times) * 1000:.1f})")


if __name__ == "__main__":
    main()
