"""Forked child processes, one way: ``git import``'s tree worker (``git/forked.py``) starts
its children here.

:func:`fork` runs ``work`` in the child over the memory it shares with the parent and ends it
with ``os._exit`` (no Python clean-up, no buffered output of the parent written twice, never a
return into the caller's code). The child ignores SIGINT (the parent decides: it kills and
reaps the child when it gives up), takes a broken pipe as "the parent wants no more" (exit 0),
and hands any other failure to ``report`` (exit 1). Called from a process with threads, only
the forking thread lives on in the child, so ``work`` must not take a lock another thread may
hold (logging, a thread pool).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable


def can_fork() -> bool:
    """Forking is used where the platform has it (not on Windows) and the interpreter is not
    shutting down."""
    return hasattr(os, "fork") and not sys.is_finalizing()


def fork(work: Callable[[], None], report: Callable[[BaseException], None] | None = None,
         close: tuple[int, ...] = ()) -> int:
    """Fork; in the child close the descriptors ``close``, run ``work`` and exit. Returns the
    child's pid (in the parent only)."""
    with warnings.catch_warnings():     # 3.12+ warns of fork() with threads: see module doc
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for fd in close:
            os.close(fd)
        work()
    except BrokenPipeError:
        pass  # the parent closed its end: it does not want the rest
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, never raised here
        code = 1
        if report is not None:
            with contextlib.suppress(BaseException):
                report(exc)
    os._exit(code)


def end(pid: int) -> None:
    """Reap the child ``pid``, killing it first if it has not exited."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if not done:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass
