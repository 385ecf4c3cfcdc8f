"""Peak RSS of streaming a chunk that decodes to 512 MiB (issue 23 §7): extract, cat,
``extract -o -``, against ``info`` of the same archive (the baseline: imports and open).

Usage: ``.venv/bin/python bench/bench_bounded.py [--tree DIR ...]``: each tree (a checkout:
its ``znippy_sql`` is put first on ``PYTHONPATH``) is measured on one archive written once,
so an older checkout is the peer of this one. Peak RSS is the child's ``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
BIG = 512 << 20
#: a fresh small process runs the command and reports its children's peak RSS (ru_maxrss
#: survives fork and exec: measured from a big parent, the parent's size would show)
LAUNCH = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, file=sys.stderr)
sys.exit(code)
"""
CLI = "import sys; from znippy_sql.cli import main; sys.exit(main(sys.argv[1:]))"


def rss(tree: Path, *argv: str) -> int:
    env = dict(os.environ, PYTHONPATH=str(tree))
    # cwd: not a checkout (python -c puts the cwd first on sys.path)
    done = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-c", CLI, *argv],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=env, timeout=900, cwd=tempfile.gettempdir())
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return int(done.stderr.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", default=[], type=Path)
    args = ap.parse_args()
    trees = args.tree or [HERE]
    sys.path.insert(0, str(HERE))
    from znippy_sql import write_archive

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        with open(root / "src" / "zeros.bin", "wb") as fh:
            fh.truncate(BIG)
        arc = root / "huge.znippy"
        write_archive(arc, root / "src", block_size=BIG, workers=1, fsync=False, dedup=False)
        print(f"archive: {arc.stat().st_size:,} bytes, one chunk of {BIG >> 20} MiB; "
              f"load {os.getloadavg()[0]:.1f}")
        print("| tree | info (baseline) | extract | cat | extract -o - |")
        print("|---|---|---|---|---|")
        for tree in trees:
            base = rss(tree, "info", str(arc))
            ex = rss(tree, "extract", str(arc), "-o", str(root / f"o-{tree.name}"))
            cat = rss(tree, "cat", str(arc), "zeros.bin")
            dash = rss(tree, "extract", str(arc), "-o", "-")
            print(f"| {tree} | {base} MiB | {ex} MiB (+{ex - base}) | {cat} MiB (+{cat - base}) "
                  f"| {dash} MiB (+{dash - base}) |")


if __name__ == "__main__":
    main()
