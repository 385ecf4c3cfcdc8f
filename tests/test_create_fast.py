"""The create path's speed work (issue 26): what it must not do, and that it changes no byte.

``znippy-sql create`` must not import pandas (pyarrow's ``pa.array(list)``/``pa.table`` and
``Array.to_numpy`` would, ~0.5-1 s a process): the index and ``__meta__`` are built from
buffers (``format/build.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import text_bytes


def _tree(root: Path, files: int = 60) -> None:
    for i in range(files):
        d = root / f"d{i % 4}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.txt").write_bytes(text_bytes(500 + 97 * i, seed=i))
    (root / "empty.txt").write_bytes(b"")


def test_cli_create_does_not_import_pandas(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _tree(src)
    code = ("import sys\nfrom znippy_sql.cli import main\n"
            f"rc = main(['create', {str(src)!r}, '-o', {str(tmp_path / 'a.znippy')!r}, "
            "'--meta', 'k=v'])\n"
            "print(rc, 'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip().splitlines()[-1] == "0 False"
