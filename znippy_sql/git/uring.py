"""UringWriter: SafeWriter's contract, its durable steps submitted as one io_uring chain.

Per append: ``pwrite`` the blob bytes (a loop, so a short write cannot tear a pack), then ONE
``io_uring_enter`` carrying linked entries — ``fsync(blobs)`` → ``write(journal row)`` →
``fsync(journal)`` → a zero-length write to the blob file — that the kernel runs in that order,
each only after the previous one succeeded (``IOSQE_IO_LINK``; a failure cancels the rest).

The writer lock is the blob file's flock. The kernel keeps a request's file open until the
request completes, so when a writer is killed mid-chain its flock lasts until the chain is
done (the last entry names the blob file for that reason): the next writer is refused for those
milliseconds rather than racing a late journal write of the dead one. In the SIGKILL test's
runs of 2026-12-01, 4-6 of 220 kills made the next opener wait, 14 ms at most; SafeWriter's
lock was back at once every time. Same lock, same journal bytes as
:class:`~znippy_sql.git.writers.SafeWriter`; the row is written at an offset this writer
tracks, so a failed row is overwritten by the next one rather than left torn.

Needs the ``liburing`` package (PyPI, a Zig-built wrapper of the C liburing) and a kernel that
allows io_uring; otherwise opening says so (:class:`ZnippyError`).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
from typing import Any

from ..errors import ZnippyError
from .journal import Extent, encode_row, journal_path
from .writers import _BlobFile, open_log


#: what the probe child runs: the calls every UringWriter makes first
_PROBE = ("import liburing as L; r = L.Ring(); L.io_uring_queue_init(8, r); "
          "L.io_uring_queue_exit(r)")
_usable: dict[str, str | None] = {}


def probe(code: str = _PROBE) -> str | None:
    """``None`` when ``code`` runs in a child process; else why not, in a few words.

    liburing's wheels are built for one CPU baseline: on another CPU the first call into the
    extension dies with SIGILL instead of raising, which would take the caller's process with
    it. So it is tried once per process in a child, and a crash there is an error here.
    """
    if code not in _usable:
        try:
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _usable[code] = f"the probe could not run ({exc})"
        else:
            if run.returncode < 0:
                name = signal.Signals(-run.returncode).name
                _usable[code] = f"liburing crashed in a probe process ({name})"
            elif run.returncode:
                last = (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[-1]
                _usable[code] = f"liburing failed in a probe process: {last}"
            else:
                _usable[code] = None
    return _usable[code]


def _liburing() -> Any:
    try:
        import liburing
    except ImportError:
        raise ZnippyError("UringWriter needs the liburing package (pip install liburing)"
                          ) from None
    why = probe()
    if why is not None:
        raise ZnippyError(f"io_uring is not usable here: {why}")
    return liburing


class UringWriter(_BlobFile):
    """Durable before ack, like SafeWriter, with the three ordered durable steps in one
    submission."""

    name = "UringWriter"
    durability = ("full: blob fsynced, then a journal row fsynced (one linked io_uring chain); "
                  "a crash after return keeps both")

    def __init__(self, blobs: str | os.PathLike[str]) -> None:
        self._uring = _liburing()
        super().__init__(blobs)
        self.journal = journal_path(self.path)
        self._ring = None
        try:
            self._jfd = os.open(self.journal, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            super().close()
            raise ZnippyError(f"cannot open the journal: {exc.strerror}", path=self.journal
                              ) from None
        try:
            self._jend = open_log(self._jfd, self.journal)
            ring = self._uring.Ring()
            try:
                self._uring.io_uring_queue_init(8, ring)
            except OSError as exc:
                raise ZnippyError(f"io_uring is not available here: {exc}", path=self.path
                                  ) from None
            self._ring = ring
            self._cqe = self._uring.Cqe()
        except BaseException:
            self.close()
            raise
        self._jlock = threading.Lock()  # one ring, one journal end: one chain at a time

    def append(self, data: bytes | memoryview) -> Extent:
        """Write ``data`` verbatim at the end; return once bytes and row are durable."""
        offset, size = self._write_blob(data)
        row = encode_row(offset, size)
        L = self._uring
        with self._jlock:
            at = self._jend
            steps = ((L.io_uring_prep_fsync, (self._fd,)),
                     (L.io_uring_prep_write, (self._jfd, row, at)),
                     (L.io_uring_prep_fsync, (self._jfd,)),
                     # a no-op on the locked blob file, last: the kernel holds a request's
                     # file until it completes, so a killed writer's flock outlives its chain
                     (L.io_uring_prep_write, (self._fd, b"", 0)))
            for i, (prep, args) in enumerate(steps):
                sqe = L.io_uring_get_sqe(self._ring)
                prep(sqe, *args)
                sqe.user_data = i
                if i < len(steps) - 1:
                    L.io_uring_sqe_set_flags(sqe, L.IOSQE_IO_LINK)
            L.io_uring_submit_and_wait(self._ring, len(steps))
            results = self._reap(len(steps))
            wanted = {0: 0, 1: len(row), 2: 0, 3: 0}
            bad = [(i, r) for i, r in sorted(results.items()) if r != wanted[i]]
            if bad:
                i, r = bad[0]
                what = ("fsync of the blob file", "journal row write", "fsync of the journal",
                        "closing no-op on the blob file")[i]
                why = os.strerror(-r) if r < 0 else f"short write ({r} of {len(row)} bytes)"
                raise ZnippyError(f"{what} failed: {why}", path=self.path)
            self._jend = at + len(row)
        return offset, size

    def _reap(self, n: int) -> dict[int, int]:
        L = self._uring
        got: dict[int, int] = {}
        while len(got) < n:
            L.io_uring_wait_cqe(self._ring, self._cqe)
            ready = L.io_uring_cq_ready(self._ring)
            for i in range(ready):
                c = self._cqe[i]
                got[c.user_data] = c.res if c.res is not None else -errno.EIO
            L.io_uring_cq_advance(self._ring, ready)
        return got

    def close(self) -> None:
        if getattr(self, "_ring", None) is not None:
            self._uring.io_uring_queue_exit(self._ring)
            self._ring = None
        jfd = getattr(self, "_jfd", -1)
        if jfd >= 0:
            os.close(jfd)
            self._jfd = -1
        super().close()
