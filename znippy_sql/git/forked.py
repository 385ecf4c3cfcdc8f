"""One function run in a forked child process while this one goes on (``git import``'s trees).

The import of a large pack is CPU work in one Python thread; a machine has two cores or more.
:func:`run_forked` forks (:func:`znippy_sql.forking.fork`); the child runs the function over
the memory it shares with the parent (the pack bytes are not copied) and sends back the result
pickled through a pipe. The parent gets a callable that waits for the child and returns the
result, or raises what the child raised: a :class:`~znippy_sql.errors.ZnippyError` subclass
with its class, message and path; anything else, or a child that ended without an answer, as
:class:`WorkerLost` (the caller then does the work itself). The function must not take a lock
another thread may hold: the trees' work is zlib, hashlib, dulwich's C ``apply_delta`` and
numpy."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import Generic, TypeVar

from ..errors import ZnippyError
from ..forking import can_fork, end, fork

T = TypeVar("T")
__all__ = ["Forked", "WorkerLost", "can_fork", "run_forked"]


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
                self._done = True
                end(self._pid)
        self._reap()

    def _reap(self) -> None:
        if not self._done:
            self._done = True
            os.waitpid(self._pid, 0)


def run_forked(fn: Callable[[], T]) -> Forked[T]:
    """``fn()`` in a forked child; its result (or error) through :meth:`Forked.result`."""
    read, write = os.pipe()

    def work() -> None:
        try:
            answer: tuple[bool, object] = (True, fn())
        except ZnippyError as exc:
            answer = (False, (type(exc), (exc.problem,), exc.path))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            answer = (False, (None, (f"{type(exc).__name__}: {exc}",), None))
        with os.fdopen(write, "wb", closefd=True) as pipe:
            pipe.write(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))

    pid = fork(work, close=(read,))
    os.close(write)
    return Forked(pid, read)
