"""One function run in a forked child process while this one goes on (``git import``'s trees).

The import of a large pack is CPU work in one Python thread; a machine has two cores or more.
:func:`run_forked` forks, the child runs the function over the memory it shares with the
parent (the pack bytes are not copied), sends back the result pickled through a pipe and ends
with ``os._exit`` (no Python clean-up, no buffered output of the parent written twice). The
parent gets a callable that waits for the child and returns the result, or raises what the
child raised: a :class:`~znippy_sql.errors.ZnippyError` subclass with its class, message and
path; anything else, or a child that ended without an answer, as :class:`WorkerLost` (the
caller then does the work itself). Called from a
process with threads, only the forking thread lives on in the child, so the function must
not take a lock another thread may hold (logging, a thread pool): the trees' work is zlib,
hashlib, dulwich's C ``apply_delta`` and numpy.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import warnings
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import ZnippyError

T = TypeVar("T")


def can_fork() -> bool:
    """Forking is used where the platform has it (not on Windows) and the interpreter is not
    shutting down."""
    return hasattr(os, "fork") and not sys.is_finalizing()


class WorkerLost(ZnippyError):
    """The child ended without an answer (killed, out of memory) or failed with something
    other than a :class:`~znippy_sql.errors.ZnippyError`: the caller does the work itself."""


class Forked(Generic[T]):
    """The child's result, once: :meth:`result` waits, :meth:`cancel` ends it unread."""

    def __init__(self, pid: int, fd: int) -> None:
        self._pid, self._fd = pid, fd
        self._done = False

    def result(self) -> T:
        try:
            with os.fdopen(self._fd, "rb", closefd=True) as pipe:
                self._fd = -1
                data = pipe.read()
        finally:
            self._reap()
        if not data:
            raise WorkerLost("a forked worker of the import ended without an answer")
        ok, value = pickle.loads(data)
        if ok:
            return value                    # pickled by the child: a T
        cls, args, path = value
        if isinstance(cls, type) and issubclass(cls, ZnippyError):
            raise cls(args[0] if args else "", path=path)
        raise WorkerLost(f"a forked worker of the import failed: {args[0] if args else ''}")

    def cancel(self) -> None:
        """End the child if its answer was not read (the caller failed first) and reap it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if not self._done:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        if not self._done:
            self._done = True
            os.waitpid(self._pid, 0)


def run_forked(fn: Callable[[], T]) -> Forked[T]:
    """``fn()`` in a forked child; its result (or error) through :meth:`Forked.result`."""
    read, write = os.pipe()
    with warnings.catch_warnings():     # 3.12+ warns of fork() with threads: see module doc
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:                                      # the child
        code = 0
        try:
            os.close(read)
            try:
                answer: tuple[bool, object] = (True, fn())
            except ZnippyError as exc:
                answer = (False, (type(exc), (exc.problem,), exc.path))
            except BaseException as exc:  # reported to the parent, never raised here
                answer = (False, (None, (f"{type(exc).__name__}: {exc}",), None))
            with os.fdopen(write, "wb", closefd=True) as pipe:
                pipe.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        except BaseException:  # a closed pipe (the parent cancelled): nothing to tell
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    return Forked(pid, read)
