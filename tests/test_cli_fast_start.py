"""The CLI's fast paths start light (issue 33): ``extract``, ``cat``, ``ls``, ``info`` and
``verify`` of a plain local archive reach the core without importing argparse (and its re,
enum), typing, contextlib or pyarrow — each a few ms of every run's start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_cli_fast import HEAVY

from znippy_sql import write_archive
from znippy_sql.write.source import Entry

CODE = ("import sys\nfrom znippy_sql.cli import main\nrc = main(sys.argv[1:])\n"
        "sys.stdout.flush()\nheavy = sorted({m.split('.')[0] for m in sys.modules} & "
        f"set({HEAVY!r}))\nprint('HEAVY', heavy, file=sys.stderr)\nsys.exit(rc)")


def test_fast_commands_import_nothing_heavy(tmp_path: Path) -> None:
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry(f"d/f{i}.txt", data=b"line\n" * (i + 1)) for i in range(20)])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    for argv in (["extract", str(arc), "-o", str(tmp_path / "out")], ["cat", str(arc), "d/f3.txt"],
                 ["ls", str(arc)], ["info", str(arc)], ["verify", str(arc)]):
        done = subprocess.run([sys.executable, "-c", CODE, *argv], capture_output=True,
                              env=env, timeout=60)
        assert done.returncode == 0, (argv, done.stderr)
        assert done.stderr.decode().splitlines()[-1] == "HEAVY []", argv
    assert (tmp_path / "out" / "d" / "f3.txt").read_bytes() == b"line\n" * 4
