"""Two processes adding overlapping sets of archives at once: optimistic commits, retried,
lose and duplicate nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog

ADDER = """
import json, os, sys, time
from znippy_sql.catalog import open_catalog
wh, go, *paths = sys.argv[1:]
cat = open_catalog(wh)
while not os.path.exists(go):
    time.sleep(0.005)
r = cat.add(paths, batch_archives=1)
print(json.dumps({"seen": r.added + r.replaced + r.unchanged, "conflicts": r.conflicts}))
"""


@pytest.mark.slow
def test_two_concurrent_adders(tmp_path: Path) -> None:
    d = tmp_path / "fleet"
    d.mkdir()
    paths = []
    for i in range(14):
        p = d / f"a{i:02}.znippy"
        write_archive(p, [Entry(f"f{j}.txt", data=b"%d/%d" % (i, j), repo=f"r{i % 3}")
                          for j in range(i + 1)])
        paths.append(str(p))
    wh = tmp_path / "wh"
    open_catalog(wh, create=True)
    go = tmp_path / "go"
    first, second = paths[:10], paths[4:]  # 6 archives added by both
    procs = [subprocess.Popen([sys.executable, "-c", ADDER, str(wh), str(go), *part],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for part in (first, second)]
    time.sleep(1.0)  # both imported and waiting
    go.touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["seen"] for r in results] == [10, 10]
    cat = open_catalog(wh)
    got = cat.sql("SELECT archive_uri, count(*) n, count(DISTINCT relative_path) d "
                  "FROM files GROUP BY 1 ORDER BY 1").to_pylist()
    assert got == [{"archive_uri": p, "n": i + 1, "d": i + 1} for i, p in enumerate(paths)]
    arch = cat.archives(("archive_uri", "files")).to_pylist()
    assert arch == [{"archive_uri": p, "files": i + 1} for i, p in enumerate(paths)]
    assert cat.verify().ok
    print("conflicts met:", [r["conflicts"] for r in results])
