"""The snippets of the docs that a user copies, run as they are (issue 16, item 16)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
CLI = Path(sys.executable).parent / "znippy-sql"


def snippet(doc: str, name: str) -> str:
    text = (DOCS / doc).read_text()
    m = re.search(rf"<!-- snippet: {re.escape(name)} -->\s*```python\n(.*?)```", text, re.S)
    assert m is not None, f"no snippet {name!r} in {doc}"
    return m.group(1)


def test_a_plain_pyiceberg_client_reads_the_store(tmp_path: Path) -> None:
    src = tmp_path / "dist"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    (src / "b.txt").write_text("b\n")
    subprocess.run([str(CLI), "store", "add", "--sidecar", "blobs.znippy", "--warehouse",
                    "warehouse", "--namespace", "builds", str(src), "--repo", "central"],
                   cwd=tmp_path, check=True, capture_output=True)
    code = snippet("lifecycle.md", "plain-pyiceberg")
    assert "znippy_sql" not in code  # a plain client: pyiceberg alone
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and '[0, "central", ""]' in lines[0] and lines[0].endswith(" 2")
