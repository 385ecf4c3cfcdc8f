"""A directory walked, and its small files read and hashed, by two forked child processes.

The one-shot writer's caller thread is the critical path of a create of many small files
(bench/results-packed.md): per file it walked (``lstat``), opened, read, closed and hashed
before any pure-Python bookkeeping; and a thread cannot take that over, because a thread that
releases the GIL for every system call waits up to the switch interval (5 ms) to get it back
beside a thread running Python (bench/results-smallfiles.md). So child processes do it, forked
once: the *walker* runs the same :class:`~znippy_sql.write.source.Walk` and writes one record
per entry to a pipe (its facts; for a file the writer will pack, ``wants(path, size)``, a flag),
and sends the names of the flagged files to the *reader*, which reads and hashes each and writes
its bytes and BLAKE3, in the same order, to a second pipe. Two processes, not one, because each
gets its own share of a loaded machine's cores (at load 10 on 2 cores a single child walking,
reading and hashing was what the caller waited for). The caller reads both pipes a megabyte at
a time (``select``: it drains either while it waits for the other, so no child blocks on a full
pipe the caller is not reading) and yields the same :class:`Entry` objects in the same order as
the walk would; :meth:`ReadAhead.take` hands the writer the bytes and digest of the entry it
was just given.

Nothing about the output depends on it: the entries, their order and the bytes are the walk's
and the files'; a file the reader could not read whole is read by the writer as before (and
fails there, naming it). Used only where it is safe and cheap: in a process that asked for it
(:func:`allow`: the CLI's ``create``, a process of its own; a library does not fork behind its
caller's back), on Linux, with ``os.fork``, no other thread in the process (a fork copies no
threads but may copy a lock one of them held), and a source that is a directory. The children
(:func:`znippy_sql.forking.fork`) ignore SIGINT, exit when a pipe breaks (the caller gave up)
and are killed and reaped by :meth:`close`.
"""

from __future__ import annotations

import os
import mmap
import pickle
import select
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ZnippyError
from ..forking import end, fork
from ..format import b3 as blake3
from .source import Entry, Walk

#: kind, flags, path length, size, mode, mtime_ns; then the path's bytes, then by kind:
#: DATA (from the reader): a 32-byte BLAKE3; the bytes are in the ring at ``mode``, and
#: ``mtime`` is the reader's ring position after them (what the caller has taken, once it
#: has copied them); LINK: the target's ``size``
#: bytes; END: a pickle of the walk's counters (``size`` bytes); FAIL: the path is the problem,
#: and for a ``ZnippyError`` a pickle of its class, problem and path follows (``size`` bytes).
#: READ (from the walker): a file the reader reads; the reader answers DATA, or FILE when it
#: could not read it whole.
_HEAD = struct.Struct("<BBxxIqqq")
FILE, DATA, LINK, END, FAIL, READ = 0, 1, 2, 3, 4, 5
_SIZE, _MODE, _MTIME = 1, 2, 4  # flags: which of size, mode, mtime_ns the walk knew
_NAME = struct.Struct("<IQ")
_TAKEN = struct.Struct("<Q")  # walker to reader: path length, size; then the path's bytes
#: the children write in batches of at most this many bytes (or ``_ENTRIES`` records, so the
#: reader starts early); the caller reads as much at a time
_CHUNK = 1 << 20
_ENTRIES = 64
#: the reader puts file bytes in a shared memory ring of this size (the pipe carries only
#: where): a 1 MiB pipe of bytes made the caller and the reader wait for each other's turn
#: on a loaded machine, a scheduling delay every megabyte
_RING = 32 << 20
_RING_HEAD = 64  # the ring's first bytes: how far the caller has taken (u64)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
_F_SETPIPE_SZ = 1031  # Linux fcntl: a pipe buffer of one chunk


_allowed = False


def allow(on: bool = True) -> None:
    """Let one-shot writes of this process fork read-ahead children (off by default)."""
    global _allowed
    _allowed = on


def usable() -> bool:
    """Whether read-ahead children may be forked here (asked for, Linux, fork, no other
    thread)."""
    return (_allowed and sys.platform.startswith("linux") and hasattr(os, "fork")
            and threading.active_count() == 1)


class _Stream:
    """What the caller has read from one child's pipe and not used yet."""

    __slots__ = ("fd", "view", "pos", "parts", "queued", "eof")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.view = memoryview(b"")
        self.pos = 0
        self.parts: list[bytes] = []
        self.queued = 0  # bytes in ``parts``
        self.eof = False

    def avail(self) -> int:
        return len(self.view) - self.pos + self.queued

    def pull(self) -> None:
        got = os.read(self.fd, _CHUNK)
        if got:
            self.parts.append(got)
            self.queued += len(got)
        else:
            self.eof = True

    def gather(self) -> None:
        """Everything read so far as one view (a new buffer: views of the old stay valid)."""
        if self.parts:
            self.view = memoryview(b"".join([self.view[self.pos:], *self.parts]))
            self.pos, self.parts, self.queued = 0, [], 0


class ReadAhead:
    """The entries of ``walk``, walked by a child process; files of ``wants(path, size)``
    read and hashed by another. Iterate it once; :meth:`close` in any case."""

    def __init__(self, walk: Walk, wants: Callable[[str, int], bool]) -> None:
        self.walk = walk
        self.wants = wants
        self.pids: list[int] = []
        self._walker: _Stream | None = None
        self._reader: _Stream | None = None
        self._current: tuple[str, memoryview, bytes] | None = None
        self._ring: mmap.mmap | None = None

    # -- the caller's side ----------------------------------------------------------------
    def start(self) -> bool:
        """Fork the children (False: not here; walk in-process)."""
        if not usable() or not os.path.isdir(self.walk.root):
            return False
        self._ring = ring = mmap.mmap(-1, _RING_HEAD + _RING)  # shared with the children
        to_me, from_walker = _pipe()
        to_me2, from_reader = _pipe()
        names_r, names_w = os.pipe()
        self.pids.append(fork(lambda: _walk(self.walk, self.wants, from_walker, names_w),
                              _reporter(from_walker),
                              close=(to_me, to_me2, from_reader, names_r)))
        os.close(from_walker)
        os.close(names_w)
        self.pids.append(fork(lambda: _read_named(self.walk.root, names_r, from_reader, ring),
                              _reporter(from_reader), close=(to_me, to_me2)))
        os.close(from_reader)
        os.close(names_r)
        self._walker, self._reader = _Stream(to_me), _Stream(to_me2)
        return True

    def take(self, file: str) -> tuple[memoryview, bytes] | None:
        """The bytes and BLAKE3 of ``file`` when it is the entry just yielded and the reader
        read it, else None (the writer reads it itself)."""
        cur = self._current
        if cur is None or cur[0] != file:
            return None
        self._current = None
        return cur[1], cur[2]

    def _fill(self, stream: _Stream, need: int) -> bool:
        """Read until ``stream`` holds ``need`` bytes, draining the other pipe meanwhile
        (False: ``stream`` ended first)."""
        while stream.avail() < need:
            if stream.eof:
                return False
            if stream.parts:  # a whole chunk read already: use it before waiting for more
                stream.gather()
                continue
            both = [s for s in (self._walker, self._reader) if s is not None and not s.eof]
            poll = select.poll()  # (not select(): a descriptor may be above FD_SETSIZE)
            for s in both:
                poll.register(s.fd, select.POLLIN)
            ready = {fd for fd, _ in poll.poll()}
            for s in both:
                if s.fd in ready:
                    s.pull()
        stream.gather()
        return True

    def _record(self, stream: _Stream) -> tuple[int, int, int, int, int, str, int] | None:
        """The next record's head and path, the view at its payload (None: the pipe ended)."""
        hsize = _HEAD.size
        if len(stream.view) - stream.pos < hsize and not self._fill(stream, hsize):
            return None
        kind, flags, plen, size, mode, mtime = _HEAD.unpack_from(stream.view, stream.pos)
        need = hsize + plen + (32 if kind == DATA else size if kind in (LINK, END, FAIL) else 0)
        if len(stream.view) - stream.pos < need and not self._fill(stream, need):
            return None
        at = stream.pos + hsize
        rel = str(stream.view[at : at + plen], "utf-8", "surrogateescape")
        stream.pos += need
        return kind, flags, size, mode, mtime, rel, at + plen

    def _data(self, rel: str) -> tuple[memoryview, bytes] | None:
        """The reader's answer for ``rel`` (None: it could not read it, or it is gone)."""
        reader = self._reader
        if reader is None:
            return None
        got = self._record(reader)
        if got is None or got[5] != rel or got[0] != DATA:
            if got is None or got[5] != rel:  # out of step (cannot happen): read ourselves
                self._reader = None
            return None
        _, _, size, start, end, _, at = got
        ring = self._ring
        assert ring is not None
        data = ring[_RING_HEAD + start : _RING_HEAD + start + size]  # a copy: bytes
        _TAKEN.pack_into(ring, 0, end)  # the reader may write over it now
        return memoryview(data), bytes(reader.view[at : at + 32])

    def __iter__(self) -> Iterator[Entry]:
        walk = self.walk
        base = walk.root if walk.root.endswith("/") else walk.root + "/"
        walker = self._walker
        assert walker is not None, "ReadAhead.start first"
        while True:
            got = self._record(walker)
            if got is None:
                raise ZnippyError("the directory walk ended early (its process exited)",
                                  path=walk.root)
            kind, flags, size, mode, mtime, rel, at = got
            if kind == END:
                counts = pickle.loads(walker.view[at : at + size])
                (walk.directories, walk.links_left_out, walk.special_left_out,
                 walk.unreadable) = counts
                return
            if kind == FAIL:
                if size:  # the walk's own error (an unreadable directory ...), as it was
                    cls, problem, path = pickle.loads(walker.view[at : at + size])
                    raise cls(problem, path=path)
                raise ZnippyError(f"the directory walk failed: {rel}", path=walk.root)
            mode_v = mode if flags & _MODE else None
            mtime_v = mtime if flags & _MTIME else None
            if kind == LINK:
                target = bytes(walker.view[at : at + size])
                yield Entry(rel, data=target, link=os.fsdecode(target), mode=mode_v,
                            mtime_ns=mtime_v)
                continue
            file = base + rel
            if kind == READ:
                data = self._data(rel)
                if data is not None:
                    self._current = (file, data[0], data[1])
            yield Entry(rel, file=file, known_size=size if flags & _SIZE else None,
                        mode=mode_v, mtime_ns=mtime_v)
            self._current = None

    def close(self) -> None:
        """Stop and reap the children (done, or killed when the caller gave up)."""
        for stream in (self._walker, self._reader):
            if stream is not None and stream.fd >= 0:
                os.close(stream.fd)
                stream.fd = -1
        self._walker = self._reader = None
        if self._ring is not None:
            self._ring.close()
            self._ring = None
        pids, self.pids = self.pids, []
        for pid in pids:
            end(pid)


def _pipe() -> tuple[int, int]:
    r, w = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(w, _F_SETPIPE_SZ, _CHUNK)
    except OSError:
        pass  # a smaller pipe: more reads, the same records
    return r, w


# -- the children's side --------------------------------------------------------------------
def _reporter(out: int) -> Callable[[BaseException], None]:
    """How a child tells the caller it failed: a FAIL record on its pipe (the caller raises;
    a :class:`ZnippyError` as the same class with the same problem and path)."""
    def report(exc: BaseException) -> None:
        text = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")
        same = b""
        if isinstance(exc, ZnippyError):
            same = pickle.dumps((type(exc), exc.problem, exc.path))
        _write(out, [_HEAD.pack(FAIL, 0, len(text), len(same), 0, 0), text, same])
    return report


def _walk(walk: Walk, wants: Callable[[str, int], bool], out: int, names: int) -> None:
    """The walker: a record per entry to the caller, the files to read to the reader."""
    head = _HEAD.pack
    name = _NAME.pack
    records: list[Any] = []
    sends: list[Any] = []
    pending = 0
    for e in walk:
        rel = e.relative_path.encode("utf-8", "surrogateescape")
        flags = (_MODE if e.mode is not None else 0) | (_MTIME if e.mtime_ns is not None else 0)
        mode = e.mode or 0
        mtime = e.mtime_ns or 0
        if e.data is not None:  # a symbolic link: its target
            records += (head(LINK, flags, len(rel), len(e.data), mode, mtime), rel, e.data)
            pending += len(e.data)
        else:
            size = e.known_size
            kind = FILE
            if size is not None and 0 < size and wants(e.relative_path, size):
                kind = READ
                sends += (name(len(rel), size), rel)
            records += (head(kind, flags | (_SIZE if size is not None else 0), len(rel),
                             size or 0, mode, mtime), rel)
        pending += 64
        if pending >= _CHUNK or len(records) >= 2 * _ENTRIES:
            _write(out, records)  # the records first: the caller must see what it waits for
            records, pending = [], 0
            if sends:
                _write(names, sends)
                sends = []
    _write(out, records)
    if sends:
        _write(names, sends)
    os.close(names)  # the reader ends after the last name
    counts = pickle.dumps((walk.directories, walk.links_left_out, walk.special_left_out,
                           walk.unreadable))
    _write(out, [head(END, 0, 0, len(counts), 0, 0), counts])


def _read_named(root: str, names: int, out: int, ring: mmap.mmap) -> None:
    """The reader: each named file's bytes into the ring, and where they are with their
    BLAKE3 (or that it could not read it whole) to the caller, in order."""
    base = root if root.endswith("/") else root + "/"
    parent = os.getppid()
    head = _HEAD.pack
    hasher = blake3.blake3
    nsize = _NAME.size
    view = memoryview(ring)[_RING_HEAD:]
    spare = bytearray(1)
    written = 0  # ring bytes ever used, the gaps at its end included
    rest = b""
    while True:
        got = os.read(names, _CHUNK)
        if not got:
            return
        buf = rest + got
        pos = 0
        out_parts: list[Any] = []
        while len(buf) - pos >= nsize:
            plen, size = _NAME.unpack_from(buf, pos)
            if len(buf) - pos < nsize + plen:
                break
            rel = buf[pos + nsize : pos + nsize + plen]
            pos += nsize + plen
            at = written % _RING
            if at + size > _RING:  # no room before the end: start again at 0
                written += _RING - at
                at = 0
            if written + size - _TAKEN.unpack_from(ring, 0)[0] > _RING:
                if out_parts:  # the caller frees room as it reads these
                    _write(out, out_parts)
                    out_parts = []
                while written + size - _TAKEN.unpack_from(ring, 0)[0] > _RING:
                    if os.getppid() != parent:  # the caller is gone (killed): so are we
                        return
                    time.sleep(0.0005)
            place = view[at : at + size]
            if _read_into(base + str(rel, "utf-8", "surrogateescape"), place, spare):
                written += size
                out_parts += (head(DATA, 0, plen, size, at, written), rel,
                              hasher(place).digest())
            else:
                out_parts += (head(FILE, 0, plen, 0, 0, 0), rel)
            if len(out_parts) >= 3 * _ENTRIES:
                _write(out, out_parts)
                out_parts = []
        rest = buf[pos:]
        if out_parts:
            _write(out, out_parts)


def _read_into(name: str, place: memoryview, spare: bytearray) -> bool:
    """Whether the file still had ``len(place)`` bytes, read into ``place``."""
    try:
        fd = os.open(name, _READ_FLAGS)
    except OSError:
        return False
    try:
        got = os.preadv(fd, [place, spare], 0)  # one byte more: a file that grew is not whole
    except OSError:
        return False
    finally:
        os.close(fd)
    return got == len(place)


def _write(fd: int, parts: list[Any]) -> None:
    view = memoryview(b"".join(parts))
    while view:
        view = view[os.write(fd, view):]
