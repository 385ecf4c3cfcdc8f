"""What the command modules share: argument types, counts and sizes in words, the progress
bar, JSON output, and the lazy hooks into other CLI areas."""

from __future__ import annotations

import errno
import sys
import time

from ..format.units import counted, human  # noqa: F401  (the CLI modules import them here)

TYPE_CHECKING = False  # argparse (with re, enum), typing and json are imported when needed:
if TYPE_CHECKING:      # cli/fast.py's commands start without them (issue 33)
    import argparse
    from typing import Any, TextIO

    from ..read.reader import Archive

_SIZE_SUFFIXES = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


# -- argument types (public: other CLI areas reuse them) -------------------------------------
def _bad_argument(why: str) -> Exception:
    """``argparse.ArgumentTypeError(why)`` (argparse is imported by the parser already)."""
    import argparse

    return argparse.ArgumentTypeError(why)


def pkg_type_arg(value: str) -> int:
    """``--pkg-type`` for reading: a registry name (``maven``) or a number 0..127."""
    from ..modules.pkgtypes import resolve_pkg_type  # (pyarrow: not for cli/fast.py's verify)

    try:
        return resolve_pkg_type(value)
    except ValueError as exc:
        raise _bad_argument(str(exc)) from None


def create_pkg_type_arg(value: str) -> int | str:
    """``--pkg-type`` for writing: as :func:`pkg_type_arg`, or ``auto`` (modules claim files)."""
    if value.strip().lower() == "auto":
        return "auto"
    return pkg_type_arg(value)


def size_arg(value: str) -> int:
    """A byte count: ``65536``, ``64K``, ``10M``, ``1G`` (powers of 1024; ``KiB`` also read)."""
    text = value.strip().lower().removesuffix("ib").removesuffix("b")
    unit = text[-1:] if text[-1:] in _SIZE_SUFFIXES else ""
    number = text[: len(text) - len(unit)]
    try:
        size = int(number) * _SIZE_SUFFIXES[unit]
    except ValueError:
        raise _bad_argument(f"not a byte count: {value!r}") from None
    if size <= 0:
        raise _bad_argument(f"must be positive: {value!r}")
    return size


#: the compression levels OpenZL takes (it refuses 23 and above: "level must be less than 23")
LEVELS = range(1, 23)


def level_arg(value: str) -> int:
    """``--level``: a whole number in :data:`LEVELS`, checked before any work."""
    try:
        level = int(value)
    except ValueError:
        raise _bad_argument(f"not a number: {value!r}") from None
    if level not in LEVELS:
        raise _bad_argument(
            f"{level} is out of range: levels go from {LEVELS.start} to {LEVELS.stop - 1}")
    return level


#: The help of every ARCHIVE argument.
ARCHIVE_HELP = "the archive: a path, or a URL (s3://, gs://, az://, http(s)://, file://)"


def add_output_options(p: argparse.ArgumentParser) -> None:
    """``--format`` and ``--max-rows`` of the commands that print query results."""
    p.add_argument("--format", choices=("table", "csv", "json", "arrow"), default="table",
                   help="how results are printed: an aligned table (default), CSV, JSON "
                        "lines, or an Arrow IPC stream")
    p.add_argument("--max-rows", type=int, default=10_000, metavar="N",
                   help="rows shown by --format table (default 10000)")


def positive_int(value: str) -> int:
    return _whole(value, 1, "must be positive")


def count_arg(value: str) -> int:
    """A whole number, 0 or more (``--strip-components``)."""
    return _whole(value, 0, "must be 0 or more")


def _whole(value: str, least: int, words: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise _bad_argument(f"not a number: {value!r}") from None
    if number < least:
        raise _bad_argument(f"{words}: {value!r}")
    return number


class PkgTypeHelp(str):
    """A help text whose ``{types}`` becomes the registered package types' names when the
    help is shown (argparse formats every help with ``%``): parsing arguments does not load
    the module registry (its entry points cost ~0.1 s)."""

    def __mod__(self, params: Any) -> str:
        try:
            from .. import modules

            names = "|".join(m.name for m in modules.all_modules()) or "none"
        except Exception:  # noqa: BLE001  (a broken plugin: the command that uses it says so)
            names = "a module's name"
        return str.__mod__(str(self).replace("{types}", names), params)


def add_filter_options(parser: argparse.ArgumentParser) -> None:
    """``--repo``, ``--pkg-type`` and ``--glob``: the selection every reading command shares."""
    parser.add_argument("--repo", help="only files of this repo")
    parser.add_argument("--pkg-type", type=pkg_type_arg, metavar="TYPE",
                        help=PkgTypeHelp("only files of this package type (a module's "
                                         "name: {types}, raw, or a number)"))
    parser.add_argument("--glob", action="append", default=[], metavar="GLOB",
                        help="only paths matching this shell pattern ('*' spans '/'; "
                             "repeatable: any of them)")


# -- failures ---------------------------------------------------------------------------------
class Interrupted(Exception):
    """Ctrl-C, with the statement of what was left (``main`` prints it, exit 130)."""


#: errors of writing that stop a command at once: more writes will not do better
FATAL_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EFBIG})


def os_problem(exc: OSError) -> str:
    """An OSError as words: ``No space left on device``."""
    return exc.strerror or str(exc)


# -- output helpers ---------------------------------------------------------------------------
#: seconds of progress after the first bytes before a rate (and an ETA) is shown
RATE_AFTER = 1.0


class Progress:
    """A one-line progress bar on a terminal; ``__call__(count, nbytes)`` is the writers' hook.

    Redraws at most ten times a second. With ``total_bytes`` the bar, the percentage and the
    ETA follow the bytes (what the time goes by); with only ``total`` they follow the count;
    with neither, a running count. No ETA is shown (``ETA --:--``) until a rate is known:
    :data:`RATE_AFTER` seconds after the first bytes came (an early frame's rate is noise).
    """

    def __init__(self, label: str, *, total: int | None = None, unit: str = "files",
                 total_bytes: int | None = None, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.total_bytes = total_bytes
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.started = time.perf_counter()
        self._last = 0.0
        self._state = (0, 0)
        self._first: tuple[float, int] | None = None  # when bytes first came, and how many

    def __call__(self, count: int, nbytes: int) -> None:
        self._state = (count, nbytes)
        if self._first is None and nbytes > 0:
            self._first = (time.perf_counter(), nbytes)
        now = time.perf_counter()
        if now - self._last >= 0.1:
            self._last = now
            self._draw()

    def line(self) -> str:
        """The bar as drawn now (without the carriage return and line clearing)."""
        count, nbytes = self._state
        now = time.perf_counter()
        elapsed = max(now - self.started, 1e-9)
        rate = nbytes / elapsed
        of = f"/{self.total}" if self.total else ""
        head = f"{count}{of} {self.unit}"
        if self.total_bytes:
            fraction = min(nbytes / self.total_bytes, 1.0)
            known = None  # bytes a second since the first bytes, once long enough to mean it
            if self._first is not None and now - self._first[0] >= RATE_AFTER:
                known = (nbytes - self._first[1]) / (now - self._first[0])
            left = (self.total_bytes - nbytes) / known if known else None
            eta = "ETA --:--" if left is None else f"ETA {_clock(max(left, 0.0))}"
            return (f"{self.label} [{'#' * int(fraction * 24):<24}] {fraction * 100:3.0f}%  "
                    f"{head}  {human(nbytes)}/{human(self.total_bytes)}  {human(rate)}/s  {eta}")
        if self.total:
            fraction = min(count / self.total, 1.0)
            return (f"{self.label} [{'#' * int(fraction * 24):<24}] {fraction * 100:3.0f}%  "
                    f"{head}  {human(nbytes)}  {human(rate)}/s")
        return f"{self.label} {head}  {human(nbytes)}  {human(rate)}/s"

    def _draw(self) -> None:
        self.stream.write(f"\r{self.line()}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        self._draw()
        self.stream.write("\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    minutes, sec = divmod(int(seconds + 0.5), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{sec:02}" if hours else f"{minutes}:{sec:02}"


def progress_for(label: str, *, total: int | None = None, unit: str = "files") -> Progress | None:
    """A :class:`Progress` when stderr is a terminal, else ``None`` (no output at all)."""
    isatty = getattr(sys.stderr, "isatty", None)
    return Progress(label, total=total, unit=unit) if isatty and isatty() else None


def done(progress: Progress | None) -> None:
    if progress is not None:
        progress.close()


def print_json(obj: Any) -> None:
    import json

    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False, default=json_value)
    sys.stdout.write("\n")


def json_value(value: Any) -> Any:
    """A value JSON has no type for, as JSON (``json.dump``'s ``default``): a decimal as a
    number (DuckDB's sums of integers: exact when integral), a duration as its seconds, a
    date, time or timestamp as ISO 8601 text, bytes as hex, anything else (a UUID) as its
    text. Every Arrow type a module column may have reaches ``ls --json`` and ``sql``."""
    import datetime
    from decimal import Decimal

    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime.timedelta):  # pandas' Timedelta too
        return value.total_seconds()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def open_archive_arg(path: str) -> Archive:
    from ..read.reader import open_archive

    return open_archive(path)
