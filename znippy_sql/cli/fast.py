"""The CLI's fast path (issue 33, item 6): ``cat ARCHIVE PATH...``, ``ls ARCHIVE [PATH...]`` and
``verify ARCHIVE`` of a local archive answered by the compiled core (``native/src/cat.rs``:
footer, manifest, trie, lookup rows, frames, BLAKE3; ``native/src/ls.rs``: the data
sub-indexes; ``native/src/verify.rs``: every check, for a sound archive) without importing
pyarrow, numpy, DuckDB or Polars.

:func:`run` is tried first by :func:`znippy_sql.cli.main`. It takes only plain arguments on a
local file; it returns None — and ``main`` goes its usual way, which answers with today's
output and exit code — for anything else: an option, a URL, an interrupted append to roll
back, a layout or frame the core does not read (the Rust tool's, real OpenZL graphs, a chunk
the Python reader streams), a path that is not there, and any failure met before the first
byte is written (the Python reader then words it). Once bytes are out, a failing chunk is
reported as the Python path reports it (``to_stdout``): a corrupt chunk exits 1, any other
failure 2.
"""

from __future__ import annotations

import os
import sys

from ..errors import ChecksumError, CodecError, ZnippyError

TYPE_CHECKING = False  # typing and collections are not imported: start-up time is the point
if TYPE_CHECKING:
    from collections.abc import Sequence

#: the commands :func:`run` may answer
COMMANDS = ("cat", "ls", "verify")
#: ``format.rollback.JOURNAL_SUFFIX`` (not imported: it would bring the blake3 package; a test
#: keeps the two equal)
JOURNAL_SUFFIX = ".znippy-journal"


def run(argv: Sequence[str]) -> int | None:
    """The exit code of a command answered here, or None when ``main`` must answer it."""
    if len(argv) < (3 if argv[:1] == ["cat"] else 2) or argv[0] not in COMMANDS:
        return None
    archive, paths = argv[1], list(argv[2:])
    if any(a.startswith("-") for a in argv[1:]):  # an option, or what argparse takes for one
        return None
    if "://" in archive or os.path.exists(archive + JOURNAL_SUFFIX):
        return None
    try:
        if argv[0] == "verify":
            return _verify(archive) if not paths else None
        return _ls(archive, paths) if argv[0] == "ls" else _cat(archive, paths)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("znippy-sql: interrupted", file=sys.stderr)
        return 130


def _ls(archive: str, members: list[str]) -> int | None:
    try:
        from .. import corelib  # the core may be absent from a source tree not built yet

        text = corelib.ls_text(archive, members)
    except (ImportError, ZnippyError, OSError, ValueError):
        return None
    if text is None:
        return None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _verify(archive: str) -> int | None:
    """The OK line of a sound archive (``cli/core.py`` ``cmd_verify``'s); None for anything
    else: a finding, a note, a progress bar (stderr a terminal), what the core does not read."""
    if sys.stderr.isatty():
        return None
    import time

    started = time.perf_counter()
    try:
        from .. import corelib

        counts = corelib.verify_clean(archive)
    except (ImportError, ZnippyError, OSError, ValueError):
        return None
    if counts is None:
        return None
    seconds = time.perf_counter() - started
    from .common import counted, human

    files, chunks, checked = counts
    print(f"{archive}: OK: {counted(files, 'file')}, {counted(chunks, 'chunk')}, "
          f"{human(checked)} checked in {seconds:.2f} s")
    return 0


def _cat(archive: str, paths: list[str]) -> int | None:
    """Each path's chunks to stdout; None when the plan or the first chunk fails (nothing
    is written then: the Python path answers and words it)."""
    try:
        from .. import corelib

        plan = corelib.cat_plan(archive, paths)
    except (ImportError, ZnippyError, OSError, ValueError):
        return None
    if plan is None:
        return None
    out = sys.stdout.buffer
    sys.stdout.flush()
    written = False
    for i, n in enumerate(plan.counts()):
        for j in range(n):
            try:
                data = corelib.cat_chunk(plan, i, j, archive)
            except (ChecksumError, CodecError) as exc:
                if not written:
                    return None
                out.flush()
                print(f"znippy-sql: cat: {exc}", file=sys.stderr)
                return 1
            except ZnippyError as exc:
                if not written:
                    return None
                out.flush()
                print(f"znippy-sql: error: {exc}", file=sys.stderr)
                return 2
            if data:
                out.write(data)
                written = True
    out.flush()
    return 0
