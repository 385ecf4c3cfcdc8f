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


def _strace_works() -> bool:
    """strace runs here (a container may deny ptrace)."""
    if STRACE is None:
        return False
    return subprocess.run([STRACE, "-o", os.devnull, "true"], capture_output=True,
                          timeout=60).returncode == 0


def _tmpfile_works(where: Path) -> bool:
    """The file system under ``where`` makes unnamed files (O_TMPFILE; overlayfs before
    Linux 6.6 and some others do not: the extract then names a temporary and renames it)."""
    try:
        os.close(os.open(where, os.O_TMPFILE | os.O_WRONLY, 0o600))
    except OSError:
        return False
    return True
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


@pytest.mark.skipif(not _strace_works(), reason="strace shows the calls: it cannot run here")
def test_each_naming_writes_the_same_files(tmp_path: Path) -> None:
    if not _tmpfile_works(tmp_path):
        pytest.skip(f"{tmp_path}'s file system makes no O_TMPFILE files: the named path "
                    "runs (test_extract_kill.py)")
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
