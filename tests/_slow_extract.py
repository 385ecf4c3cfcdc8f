"""Python source for child processes that extract slowly (tests/test_extract_kill.py,
tests/test_extract_links_macro.py). The core writes the files (native/src/extract/) in a few
tens of milliseconds, less than the noise of a process start: the archive is read as a source
that is not a plain local file, so each unit of 8 files asks Python for its blobs with a pause,
and a signal lands while files are written (the writes, temporaries and renames are the
same)."""

_WATCH = r"""
import os, signal, sys, threading, time
n = int(os.environ["{ENV}"])
dest = sys.argv[-1] if "-o" not in sys.argv else sys.argv[sys.argv.index("-o") + 1]
def watch():  # the files are written by the native core: watch them appear
    while True:
        final = temp = 0
        for _, _, names in os.walk(dest):
            for name in names:
                if ".znippy-part-" in name:
                    temp += 1
                else:
                    final += 1
        if final >= n and (temp or final >= n + 20):
            os.kill(os.getpid(), signal.{SIG})
            return
        time.sleep(0.0002)
threading.Thread(target=watch, daemon=True).start()
"""

_SLOW = r"""
import sys, time
import znippy_sql.read.extract as _x, znippy_sql.read.many as _m, znippy_sql.read.tail as _t
class _Source(_t.MappedSource):
    pass
_t.MappedSource, _x.UNIT_FILES, _fetch = _Source, 8, _m.fetch_blobs
def _slow(*args):
    time.sleep({PAUSE})
    return _fetch(*args)
_m.fetch_blobs = _slow
"""

#: the CLI's Python extract (not its native fast path, which reads the file itself)
CLI_MAIN = r"""
import znippy_sql.cli.fast as _f
_f._extract = lambda *args: None
from znippy_sql.cli import main
sys.exit(main(sys.argv[1:]))
"""


def slow_source(pause: float) -> str:
    """Blobs fetched through Python, ``pause`` seconds a unit of 8 files."""
    return _SLOW.replace("{PAUSE}", repr(pause))


def signal_when(env: str, sig: str) -> str:
    """Read N from the environment variable ``env``, watch the destination (the argument
    after ``-o``, else the last) and send ``signal.<sig>`` to itself once N files are under
    final names."""
    return _WATCH.replace("{ENV}", env).replace("{SIG}", sig)
