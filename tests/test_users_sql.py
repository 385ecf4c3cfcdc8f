"""``znippy-sql sql``: the query from ``-f FILE``, ``-`` (stdin), piped stdin, or a prompt on a
terminal (issue 16, item 15)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive

CLI = [str(Path(sys.executable).parent / "znippy-sql")]
QUERY = "SELECT count(*) AS n FROM t_files"


@pytest.fixture
def arc(tmp_path: Path) -> Path:
    out = tmp_path / "t.znippy"
    write_archive(out, [Entry(f"f{i}", data=b"x" * i) for i in range(3)])
    return out


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.slow  # seven CLI processes, each importing DuckDB
def test_query_from_a_file_stdin_and_a_pipe(arc: Path, tmp_path: Path) -> None:
    qf = tmp_path / "q.sql"
    qf.write_text(QUERY + ";\n")
    for args, stdin in (([str(arc), "-f", str(qf)], None), ([str(arc), "-f", "-"], QUERY),
                        ([str(arc), "-"], QUERY), ([str(arc)], QUERY),
                        ([str(arc), QUERY], None)):
        r = _run(["sql", *args, "--format", "csv"], stdin)
        assert r.returncode == 0, (args, r.stderr)
        assert r.stdout.splitlines() == ['"n"', "3"], args
    r = _run(["sql", str(arc)], "")
    assert r.returncode == 2 and "no query" in r.stderr and "Traceback" not in r.stderr
    r = _run(["sql", str(arc), "-f", str(tmp_path / "missing.sql")])
    assert r.returncode == 2 and "missing.sql" in r.stderr and "Traceback" not in r.stderr


def _read_until(fd: int, marker: bytes, timeout: float = 30.0) -> bytes:
    got = b""
    end = time.monotonic() + timeout
    while marker not in got and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                got += os.read(fd, 4096)
            except OSError:
                break
    return got


def test_a_prompt_on_a_terminal(arc: Path) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "sql", str(arc), "--format", "csv"], stdin=slave,
                            stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        assert b"znippy-sql> " in _read_until(master, b"znippy-sql> ")
        os.write(master, b"SELECT count(*) AS n\n")  # a statement over two lines
        assert b"...> " in _read_until(master, b"...> ")
        os.write(master, b"FROM t_files;\n")
        out = _read_until(master, b"znippy-sql> ")
        assert b"\"n\"\r\n3\r\n" in out
        os.write(master, b"SELECT nonsense FROM nowhere;\n")  # an error: the prompt goes on
        out = _read_until(master, b"znippy-sql> ")
        assert b"nowhere" in out and b"Traceback" not in out
        os.write(master, b"\x04")  # Ctrl-D
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
