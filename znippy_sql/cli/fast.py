"""The CLI's fast path (issue 33, item 6): ``cat ARCHIVE PATH...``, ``ls ARCHIVE [PATH...]``,
``verify ARCHIVE`` and ``info ARCHIVE [--json]`` of a local archive answered by the compiled
core (``native/src/cat.rs``: footer, manifest, trie, lookup rows, frames, BLAKE3;
``native/src/ls.rs``: the data sub-indexes; ``native/src/verify.rs``: every check, for a
sound archive; ``native/src/info.rs``: the facts ``cli/infotext.py`` prints), and
``extract ARCHIVE -o DIR`` (``native/src/extract/``: the plan and the writes) without
importing pyarrow, numpy, DuckDB or Polars.

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
COMMANDS = ("cat", "ls", "verify", "info", "extract")
#: ``format.rollback.JOURNAL_SUFFIX`` (not imported: it would bring the blake3 package; a test
#: keeps the two equal)
JOURNAL_SUFFIX = ".znippy-journal"


def run(argv: Sequence[str]) -> int | None:
    """The exit code of a command answered here, or None when ``main`` must answer it."""
    if argv[:1] == ["extract"]:
        return _extract_argv(list(argv))
    if len(argv) < (3 if argv[:1] == ["cat"] else 2) or argv[0] not in COMMANDS:
        return None
    archive, paths = argv[1], list(argv[2:])
    if argv[0] == "info" and paths == ["--json"]:
        return _info(archive, json=True)
    if any(a.startswith("-") for a in argv[1:]):  # an option, or what argparse takes for one
        return None
    if "://" in archive or os.path.exists(archive + JOURNAL_SUFFIX):
        return None
    try:
        if argv[0] == "verify":
            return _verify(archive) if not paths else None
        if argv[0] == "info":
            return _info(archive, json=False) if not paths else None
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


def _info(archive: str, *, json: bool) -> int | None:
    """``info ARCHIVE [--json]`` from the facts the core reads (``cli/infotext.py`` derives
    and prints them, as for the Python path); None for what the core does not read, or a
    pkg_type only the module registry names."""
    if archive.startswith("-") or "://" in archive or os.path.exists(archive + JOURNAL_SUFFIX):
        return None
    try:
        from .. import corelib

        facts = corelib.info_facts(archive)
    except (ImportError, ZnippyError, OSError, ValueError):
        return None
    if facts is None:
        return None
    from .infotext import builtin_name, summary, write_text

    groups = []
    for t, repo, module, *counts in facts["groups"]:
        name = builtin_name(t)
        if name is None:
            return None
        groups.append((t, name, repo, module, *counts))
    info = summary(
        path=archive, size=facts["archive_bytes"], tail_offset=facts["tail_offset"],
        blob_end=facts["blob_end"], groups=groups, manifest=facts["manifest"],
        codec=dict(facts["codec"]), referenced=facts["referenced"], distinct=facts["distinct"],
        packs=facts["packs"], git_packs=False, lookup_in_memory=False, not_understood={},
        writer=None, read_as=None,
        sections=[m[2] for m in facts["manifest"] if m[0] == -1])
    if json:
        from .common import print_json

        print_json(info)
    else:
        write_text(info)
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
    from ..format.units import counted, human

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


def _extract_argv(argv: list[str]) -> int | None:
    """``extract ARCHIVE -o DIR`` (either order), nothing else."""
    if len(argv) != 4:
        return None
    rest = argv[1:]
    at = rest.index("-o") if "-o" in rest else rest.index("--out") if "--out" in rest else -1
    if at < 0 or at == 2:
        return None
    dest = rest[at + 1]
    archive = rest[2] if at == 0 else rest[0]
    if archive.startswith("-") or dest == "-" or dest.startswith("-") \
            or "://" in archive or os.path.exists(archive + JOURNAL_SUFFIX):
        return None
    try:
        return _extract(archive, dest)
    except KeyboardInterrupt:  # before the core wrote anything
        print("znippy-sql: interrupted", file=sys.stderr)
        return 130


def _joined(names: list[str]) -> tuple[bytes, bytes]:
    encoded = [n.encode() for n in names]
    offsets = [0]
    for e in encoded:
        offsets.append(offsets[-1] + len(e))
    return b"".join(encoded), b"".join(o.to_bytes(8, "little") for o in offsets)


def _decode(frame: bytes, n: int) -> object:
    """A frame the core does not decode (the Rust tool's OpenZL graphs): the binding."""
    from ..read.extract import decode_frame

    return decode_frame(frame, n)


def _extract(archive: str, dest: str) -> int | None:
    """Every file of a local archive under ``dest`` (``cmd_extract``'s output and exit code);
    None before anything is written for what the Python extract must answer: a progress
    bar (stderr a terminal), links, a section or path it words, a symlink in the way."""
    if sys.stderr.isatty():
        return None
    import time

    started = time.perf_counter()
    try:
        from .. import corelib

        plan = corelib.extract_plan(archive)
        if plan is None:
            return None
        cols, tail, packed, firsts, names, offsets, dirs = plan
        root = os.path.realpath(dest)
        problem, _, existing = corelib.check_targets(dest, root, names, offsets)
        if problem is None and dirs:
            problem = corelib.check_targets(dest, root, *_joined(dirs))[0]
        if problem is not None:
            return None
        os.makedirs(dest, exist_ok=True)
    except (ImportError, ZnippyError, OSError, ValueError):
        return None
    corelib.remove_leftovers(existing)
    got, problems, fatal, _, stopped, _ = corelib.extract_files(
        cols, tail, packed, archive, None, _decode, root, firsts, names, offsets, None, None,
        True, os.cpu_count() or 1, corelib.UNIT_BYTES, corelib.UNIT_FILES, None,
        archive=archive)
    sizes = [n for n in memoryview(got).cast("q") if n >= 0]
    failed: dict[str, str] = {}
    for d in dirs if not (stopped or fatal) else ():  # recorded directories, after the files
        try:
            os.makedirs(os.path.join(root, d), exist_ok=True)
        except OSError as exc:
            failed[d] = f"cannot create directory: {exc.strerror or exc}"
    if stopped or fatal or problems or failed:
        return _extract_report(dest, names, offsets, got, problems, fatal, stopped, failed,
                               time.perf_counter() - started)
    from ..format.units import counted, human

    print(f"{dest}: {counted(len(sizes), 'file')}, {human(sum(sizes))} extracted in "
          f"{time.perf_counter() - started:.2f} s")
    return 0


def _extract_report(dest: str, names: bytes, offsets: bytes, got: bytes,
                    problems: list[tuple[int, str]], fatal: tuple[int, str] | None,
                    stopped: bool, failed: dict[str, str], seconds: float) -> int:
    """What ``cmd_extract`` says of an extract that did not go through whole."""
    from ..read.extract import ExtractReport, fatal_error
    from .extract import interrupted_text, print_report

    ends = memoryview(offsets).cast("Q")
    paths = [names[ends[k]:ends[k + 1]].decode() for k in range(len(ends) - 1)]
    outcome = memoryview(got).cast("q")
    report = ExtractReport(dest=dest, seconds=seconds)
    report.written = [p for p, n in zip(paths, outcome) if n >= 0]
    report.files = len(report.written)
    report.bytes_written = sum(n for n in outcome if n >= 0)
    report.failed = {paths[k]: why for k, why in problems} | failed
    if stopped:
        print(f"znippy-sql: {interrupted_text(report.files, dest)}", file=sys.stderr)
        return 130
    if fatal is not None:
        print(f"znippy-sql: error: {fatal_error(report, dest, paths[fatal[0]], fatal[1])}",
              file=sys.stderr)
        return 2
    return print_report(report)
