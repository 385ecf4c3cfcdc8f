"""The remote part of the fuzz campaign: lying replies and random storage options.

Usage::

    .venv/bin/python bench/fuzz_remote.py [--seconds 120] [--seed 0]

Reply cases (``tests/_fuzz_remote.py`` ``reply_case``): an archive of 121 files (one of
600 KB) on the counting server of ``tests/remote_server.py`` (127.0.0.1), one to three faults
on chosen requests (short bodies, a Content-Range one byte off, shifted or halved ranges,
other bytes under the same ETag, a changed or missing ETag, a wrong total size, a reply to the
whole object, resets, 5xx/4xx), under open, ls, cat, a big cat, extract, verify and a Polars
scan. Option cases (``option_case``): random keys (near-misses, upper case, junk) and values
(empty, wrong kinds, JSON, a marker that must never be printed) parsed and made into stores.
A case that raises anything but one ``ZnippyError`` line naming the URL, or answers wrongly,
stops the run with its seed. The summary is printed as Markdown.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.environ.setdefault("ZNIPPY_SQL_CACHE", tempfile.mkdtemp(prefix="fuzz-remote-cache-"))
    from _fuzz_remote import option_case, reply_case
    from conftest import random_bytes, text_bytes
    from remote_server import RangeServer, free_port
    from znippy_sql import Entry, write_archive

    work = Path(tempfile.mkdtemp(prefix="fuzz-remote-"))
    local = work / "a.znippy"
    entries = [Entry(f"r{r}/pkg{i % 5}/f{i}.txt",
                     data=random_bytes(300 + i, seed=i) if i % 3 else text_bytes(500 + i, seed=i),
                     repo=f"r{r}") for r in range(3) for i in range(40)]
    entries.append(Entry("r0/big.bin", data=random_bytes(600_000, seed=9), repo="r0"))
    write_archive(local, entries, block_size=64 << 10, workers=1, fsync=False)
    srv = RangeServer()
    srv.put("a.znippy", local.read_bytes())
    url = f"{srv.url}/a.znippy"
    replies: Counter[str] = Counter()
    options: Counter[str] = Counter()
    start = time.monotonic()
    seed = args.seed
    try:
        while time.monotonic() - start < args.seconds:
            replies[reply_case(srv, url, local, work, seed).split(":")[0]] += 1
            for s in range(seed * 4, seed * 4 + 4):
                options[option_case(s, free_port())] += 1
            seed += 1
    finally:
        srv.close()
    took = time.monotonic() - start
    print(f"| cases | outcomes | seconds |\n|---|---|---|")
    print(f"| {sum(replies.values())} replies (seeds {args.seed}..{seed - 1}) | "
          f"{dict(replies)} | {took:.0f} |")
    print(f"| {sum(options.values())} option sets | {dict(options)} | |")


if __name__ == "__main__":
    main()
