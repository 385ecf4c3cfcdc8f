"""Requests and bytes of ``znippy-sql cat`` on an archive with a large index, three runs with
the tail cache (cold, then warm), over the counting server of tests/remote_server.py.

Usage: .venv/bin/python bench/measure_tail_plan.py REPO_ROOT ARCHIVE
(the archive of tests/test_remote.py ``big_index``: 30,000 files, 7.0 MB lookup, 4.7 MB trie;
REPO_ROOT lets the same script measure another checkout's code).
"""
import os, sys, tempfile, io, contextlib
sys.path.insert(0, sys.argv[1] + "/tests")
from remote_server import RangeServer
from znippy_sql.cli import main
from znippy_sql import open_archive
os.environ["ZNIPPY_SQL_CACHE"] = tempfile.mkdtemp()
path = sys.argv[2]
srv = RangeServer(); data = open(path, "rb").read(); srv.put("big.znippy", data)
name = open_archive(path).select()[17123]
url = f"{srv.url}/big.znippy"
for run in ("cold", "2nd", "3rd"):
    srv.reset()
    saved = sys.stdout
    sys.stdout = io.TextIOWrapper(io.BytesIO())
    try:
        rc = main(["cat", url, name])
    finally:
        sys.stdout = saved
    g = srv.gets()
    print(f"{run}: rc={rc} requests={len(g)} statuses={[h.status for h in g]} bytes={srv.bytes_sent():,}")
srv.close()
