"""How the native extract names a finished file (``native/src/extract/targets.rs``): by
default unnamed (``O_TMPFILE`` in the target's directory) and linked under its final name once
complete — no temporary name and no rename a file; where that cannot be, the fallbacks
(``ZNIPPY_EXTRACT_NAMING``: ``proc`` links through ``/proc/self/fd``, ``named`` writes
``.NAME.znippy-part-PID`` and renames it) give the same files; an existing file is replaced
(``extract`` answers with the same line). Seen with strace: which calls each way makes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql import write_archive
from znippy_sql.write.source import Entry

CLI = "import sys\nfrom znippy_sql.cli import main\nsys.exit(main(sys.argv[1:]))"
STRACE = shutil.which("strace")
FILES = {f"d{i % 3}/f{i:02d}.txt": b"x" * (i * 37) for i in range(12)}


def _extract(arc: Path, dest: Path, naming: str | None) -> tuple[str, str]:
    """stdout of the CLI extract, and the calls strace saw."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    env.pop("ZNIPPY_EXTRACT_NAMING", None)
    if naming:
        env["ZNIPPY_EXTRACT_NAMING"] = naming
    log = dest.parent / f"{dest.name}.strace"
    done = subprocess.run([STRACE or "", "-f", "-o", str(log), "-e",
                           "trace=openat,linkat,renameat,renameat2", sys.executable, "-c", CLI,
                           "extract", str(arc), "-o", str(dest)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    for name, data in FILES.items():
        assert (dest / name).read_bytes() == data
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) \
        == sorted(FILES)
    return done.stdout.split(" extracted")[0], log.read_text()


@pytest.mark.skipif(STRACE is None, reason="strace shows the calls: not installed here")
def test_each_naming_writes_the_same_files(tmp_path: Path) -> None:
    arc = tmp_path / "a.znippy"
    write_archive(arc, [Entry(k, data=v) for k, v in FILES.items()])
    said, calls = _extract(arc, tmp_path / "unnamed", None)
    assert calls.count("O_TMPFILE") >= len(FILES)
    assert "AT_EMPTY_PATH" in calls and "renameat" not in calls and ".znippy-part-" in calls
    for name in FILES:  # only the one probe (the first file's temporary name, empty) named
        assert f'"{name.split("/")[1]}", AT_EMPTY_PATH) = 0' in calls
    again, calls = _extract(arc, tmp_path / "unnamed", None)  # every name taken: replaced
    assert again == said and calls.count("renameat(") == len(FILES)
    proc, calls = _extract(arc, tmp_path / "proc", "proc")
    assert proc.replace("proc", "unnamed") == said
    assert calls.count('linkat(AT_FDCWD, "/proc/self/fd/') == len(FILES)
    assert "renameat" not in calls and ".znippy-part-" not in calls
    named, calls = _extract(arc, tmp_path / "named", "named")
    assert named.replace("named", "unnamed") == said
    assert "O_TMPFILE" not in calls and calls.count("renameat(") == len(FILES)
