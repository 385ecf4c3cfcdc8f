"""A directory walked, and its small files read and hashed, by a forked child process.

The one-shot writer's caller thread is the critical path of a create of many small files
(bench/results-packed.md): per file it walked (``lstat``), opened, read, closed and hashed
before any pure-Python bookkeeping; and a thread cannot take that over, because a thread that
releases the GIL for every system call waits up to the switch interval (5 ms) to get it back
beside a thread running Python (bench/results-smallfiles.md). So a child process does it:
``os.fork`` once, the child runs the same :class:`~znippy_sql.write.source.Walk` and writes one
record per entry to a pipe — the entry's facts and, for a file the writer will pack
(``wants(path, size)``), its bytes and BLAKE3 — and the caller reads the pipe a megabyte at a
time and yields the same :class:`Entry` objects in the same order as the walk would.
:meth:`ReadAhead.take` hands the writer the bytes and digest of the entry it was just given.

Nothing about the output depends on it: the entries, their order and the bytes are the walk's
and the files'; a file the child could not read whole is read by the writer as before (and
fails there, naming it). Used only where it is safe and cheap: Linux, ``os.fork``, no other
thread in the process (a fork copies no threads but may copy a lock one of them held), and
a source that is a directory. The child ignores SIGINT, exits when the pipe breaks (the caller
gave up) and is killed and reaped by :meth:`close`.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ZnippyError
from ..format import b3 as blake3
from .source import Entry, Walk

#: kind, flags, path length, size, mode, mtime_ns; then the path's bytes, then by kind:
#: DATA: ``size`` bytes and a 32-byte BLAKE3; LINK: the target's ``size`` bytes; END: a
#: pickle of the walk's counters (``size`` bytes)
_HEAD = struct.Struct("<BBxxIqqq")
FILE, DATA, LINK, END, FAIL = 0, 1, 2, 3, 4
_SIZE, _MODE, _MTIME = 1, 2, 4  # flags: which of size, mode, mtime_ns the walk knew
#: the child writes records in batches of about this many bytes; the caller reads as much
_CHUNK = 1 << 20
_READ = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_F_SETPIPE_SZ = 1031  # Linux fcntl: a pipe buffer of one chunk


def usable() -> bool:
    """Whether a read-ahead child may be forked here (Linux, fork, no other thread)."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork")
            and threading.active_count() == 1)


class ReadAhead:
    """The entries of ``walk``, walked by a child process; files of ``wants(path, size)``
    read and hashed there too. Iterate it once; :meth:`close` in any case."""

    def __init__(self, walk: Walk, wants: Callable[[str, int], bool]) -> None:
        self.walk = walk
        self.wants = wants
        self.pid = 0
        self._fd = -1
        self._current: tuple[str, memoryview, bytes] | None = None

    # -- the caller's side ----------------------------------------------------------------
    def start(self) -> bool:
        """Fork the child (False: not here; walk in-process)."""
        if not usable() or not os.path.isdir(self.walk.root):
            return False
        r, w = os.pipe()
        try:
            import fcntl

            fcntl.fcntl(w, _F_SETPIPE_SZ, _CHUNK)
        except OSError:
            pass  # a smaller pipe: more reads, the same records
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(r)
            _child(self.walk, self.wants, w)
        os.close(w)
        self.pid, self._fd = pid, r
        return True

    def take(self, file: str) -> tuple[memoryview, bytes] | None:
        """The bytes and BLAKE3 of ``file`` when it is the entry just yielded and the child
        read it, else None (the writer reads it itself)."""
        cur = self._current
        if cur is None or cur[0] != file:
            return None
        self._current = None
        return cur[1], cur[2]

    def __iter__(self) -> Iterator[Entry]:
        walk = self.walk
        base = walk.root if walk.root.endswith("/") else walk.root + "/"
        head = _HEAD
        hsize = head.size
        fd = self._fd
        buf = memoryview(b"")
        pos = 0
        while True:
            if len(buf) - pos < hsize:
                buf, pos = _more(fd, buf, pos, hsize)
            kind, flags, plen, size, mode, mtime = head.unpack_from(buf, pos)
            need = hsize + plen + (size + 32 if kind == DATA else size if kind in (LINK, END)
                                   else 0)
            if len(buf) - pos < need:
                buf, pos = _more(fd, buf, pos, need)
            at = pos + hsize
            rel = str(buf[at : at + plen], "utf-8", "surrogateescape")
            at += plen
            if kind == END:
                counts = pickle.loads(buf[at : at + size])
                walk.directories, walk.links_left_out, walk.special_left_out = counts
                return
            if kind == FAIL:
                raise ZnippyError(f"the directory walk failed: {rel}", path=walk.root)
            pos = at
            mode_v = mode if flags & _MODE else None
            mtime_v = mtime if flags & _MTIME else None
            if kind == LINK:
                target = bytes(buf[at : at + size])
                pos += size
                yield Entry(rel, data=target, link=os.fsdecode(target), mode=mode_v,
                            mtime_ns=mtime_v)
                continue
            if kind == DATA:
                self._current = (base + rel, buf[at : at + size], bytes(buf[at + size :
                                                                            at + size + 32]))
                pos += size + 32
            yield Entry(rel, file=base + rel, known_size=size if flags & _SIZE else None,
                        mode=mode_v, mtime_ns=mtime_v)
            self._current = None

    def close(self) -> None:
        """Stop and reap the child (it is done, or killed when the caller gave up)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.pid:
            pid, self.pid = self.pid, 0
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
                if not done:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _more(fd: int, buf: memoryview, pos: int, need: int) -> tuple[memoryview, int]:
    """``buf[pos:]`` with at least ``need`` bytes, reading the pipe (a new buffer: views of
    the old one stay valid)."""
    parts = [buf[pos:]]
    have = len(buf) - pos
    while have < need:
        got = os.read(fd, max(_CHUNK, need - have))
        if not got:
            raise ZnippyError("the directory walk ended early (its reader process exited)")
        parts.append(memoryview(got))
        have += len(got)
    return memoryview(b"".join(parts)), 0


# -- the child's side -----------------------------------------------------------------------
def _child(walk: Walk, wants: Callable[[str, int], bool], fd: int) -> None:
    """Walk, read, hash, write records; exit (never return into the caller's code)."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _produce(walk, wants, fd)
    except BrokenPipeError:
        pass  # the caller closed its end: it does not want the rest
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which raises
        try:
            text = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
            _write(fd, [_HEAD.pack(FAIL, 0, len(text), 0, 0, 0), text])
        except BaseException:  # noqa: BLE001
            pass
        code = 1
    os._exit(code)


def _produce(walk: Walk, wants: Callable[[str, int], bool], fd: int) -> None:
    head = _HEAD.pack
    base = walk.root if walk.root.endswith("/") else walk.root + "/"
    hasher = blake3.blake3
    out: list[Any] = []
    pending = 0
    for e in walk:
        rel = e.relative_path.encode("utf-8", "surrogateescape")
        flags = (_MODE if e.mode is not None else 0) | (_MTIME if e.mtime_ns is not None else 0)
        mode = e.mode or 0
        mtime = e.mtime_ns or 0
        if e.data is not None:  # a symbolic link: its target
            out += (head(LINK, flags, len(rel), len(e.data), mode, mtime), rel, e.data)
            pending += len(e.data)
        else:
            size = e.known_size
            data = None
            if size is not None and 0 < size and wants(e.relative_path, size):
                data = _read(base + e.relative_path, size)
            if data is not None:
                out += (head(DATA, flags | _SIZE, len(rel), size, mode, mtime), rel, data,
                        hasher(data).digest())
                pending += len(data)
            else:
                known = size is not None
                out += (head(FILE, flags | (_SIZE if known else 0), len(rel),
                             size if known else 0, mode, mtime), rel)
        pending += 64
        if pending >= _CHUNK:
            _write(fd, out)
            out, pending = [], 0
    counts = pickle.dumps((walk.directories, walk.links_left_out, walk.special_left_out))
    out += (head(END, 0, 0, len(counts), 0, 0), counts)
    _write(fd, out)


def _read(name: str, size: int) -> bytes | None:
    """The whole file when it still has ``size`` bytes, else None (the writer reads it and
    says what is wrong)."""
    try:
        fd = os.open(name, _READ)
    except OSError:
        return None
    try:
        data = os.pread(fd, size + 1, 0)  # one byte more: a file that grew is not whole
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None


def _write(fd: int, parts: list[Any]) -> None:
    view = memoryview(b"".join(parts))
    while view:
        view = view[os.write(fd, view):]
