"""Damaged and hostile archives through every read path: a ZnippyError naming the archive,
never a traceback, a crash, a short file or an allocation sized by the file (issue 17).

Each test builds its archive from real bytes (this project's writer, or the independent
``RawArchive`` builder of conftest) and asserts the exception type and that the message names
the archive.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from conftest import RawArchive, text_bytes

from znippy_sql import Entry, ReservedSection, write_archive
from znippy_sql.errors import FormatError, ZnippyError
from znippy_sql.read.reader import open_archive

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-c", "import sys; from znippy_sql.cli import main; sys.exit(main())"]


def cli(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def assert_clean_failure(proc: subprocess.CompletedProcess[str], name: str) -> None:
    """Exit 1 or 2 (never a signal: 139 is a SIGSEGV), one message naming the archive."""
    assert proc.returncode in (1, 2), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stdout
    assert name in proc.stderr + proc.stdout


# -- the SIGSEGV ---------------------------------------------------------------------------
def test_damaged_sign_artifacts_do_not_crash(tmp_path: Path) -> None:
    """``segv-sign-artifacts.bin`` is the ``__sign_artifacts__`` stream of a one-file archive
    signed by this project, with bit 7 of its byte 398 flipped (an offset of the ``cms``
    column): the signature reader used to build the table without validating it, and
    ``znippy-sql verify`` died of a SIGSEGV (exit 139) reading past the buffer; a flip of
    bit 0 of byte 399 gave ``SystemError: Negative size passed to PyBytes_FromStringAndSize``.
    Now the stream is validated in full before a value is read."""
    damaged = (DATA / "segv-sign-artifacts.bin").read_bytes()
    out = tmp_path / "segv.znippy"
    write_archive(out, [Entry("a.txt", data=b"hello world\n" * 10)], fsync=False,
                  reserved_sections=[ReservedSection("__sign_artifacts__", damaged),
                                     ReservedSection("__sign_archive__", b"\x30\x03\x02\x01\x00")])
    from znippy_sql.provenance.sign import signatures_table, verify_signatures

    with open_archive(out) as a:
        with pytest.raises(FormatError, match="segv.znippy.*__sign_artifacts__"):
            verify_signatures(a, None)
        with pytest.raises(FormatError, match="segv.znippy"):
            signatures_table(a)
    for args in (("verify", out), ("verify", "--signatures-only", out), ("info", out)):
        proc = cli(*args)
        if "unrecognized arguments" in proc.stderr:
            continue  # --signatures-only belongs to the users' issue; not every build has it
        assert proc.returncode != -11 and proc.returncode != 139
        if proc.returncode:
            assert_clean_failure(proc, "segv.znippy")
    from znippy_sql.duckdb import register

    con = duckdb.connect()
    with pytest.raises(ZnippyError, match="segv.znippy"):
        register(con, out)
    from znippy_sql.polars import scan

    with pytest.raises(ZnippyError, match="segv.znippy"):
        scan(out, "signatures").collect()
