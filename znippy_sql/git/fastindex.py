"""A local repository's pack indexed from what git computed: its ``.idx``, checked.

``git import`` of a repository whose packs have their ``.idx`` (every pack git writes does)
takes each object's id and offset from the ``.idx`` instead of inflating and hashing every
object of the pack. What is taken is checked: the ``.idx``'s own SHA-1 trailer, that it names
this pack (the pack's trailer, whose SHA-1 over the pack bytes is checked too), the object
count, ids strictly ascending under a cumulative fanout, offsets that are entry starts, and
the CRC32 of every entry's stored bytes against the ``.idx``'s. Any mismatch
(:class:`IdxMismatch`) sends the importer to the whole parse of git/pack.py instead. Types come from the entry
headers (a delta takes its base's). Commits and trees — what the graph and the bitmaps need —
are inflated (deltas applied) and each is hashed against its id. A blob's id is not
re-hashed here: every read of an object checks its SHA-1 (git/objects.py), and ``verify``
checks the pack bytes.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from collections.abc import Callable

import numpy as np
from dulwich.errors import ApplyDeltaError

from ..errors import PackError
from .bulk import PackGraph, ids_of, parse_commits, parse_trees
from .forked import WorkerLost, can_fork, run_forked
from .pack import (COMMIT, OFS_DELTA, REF_DELTA, TREE, ParsedPack, apply_delta,
                   check_header, check_trailer, object_id)

IDX_MAGIC = b"\xfftOc"
#: a pack of at least this many trees has them inflated, hashed and parsed in a forked child
#: process (git/forked.py) while this one checks the CRC32s and reads the commits, when a core
#: is idle (:func:`a_core_is_idle`); None: never
FORK_TREES: int | None = 2000


def a_core_is_idle() -> bool:
    """Whether the 1-minute load leaves a core free. Forking pays only then: measured on
    psf/requests (2 cores), the child costs 0.15-0.2 s more CPU in all (pages copied on
    write, the answer pickled) for ~0.15 s less wall time on an idle machine, and on a busy
    one (load 6-10) it was no faster."""
    try:
        return os.getloadavg()[0] + 1 <= (os.cpu_count() or 1)
    except OSError:
        return False
#: a pack's trees: their ids joined, and :func:`~.bulk.parse_trees` of their contents
TreeParts = tuple[bytes, np.ndarray, np.ndarray, np.ndarray]


class IdxMismatch(PackError):
    """The ``.idx`` is damaged or does not describe the pack's bytes: the caller parses the
    pack whole instead (which finds the damage, if it is the pack's)."""


def read_idx(idx: bytes, pack: memoryview, *, name: str, trailer: bool = True
             ) -> tuple[list[bytes], list[int]]:
    """``(ids, offsets)`` of a version-2 ``.idx``, in pack (offset) order, checked against
    the pack's bytes (``trailer=False``: all but the pack's own SHA-1, which the caller
    checks with :func:`pack_checksum`)."""
    oids, offsets, crcs = idx_entries(idx, pack, name=name, trailer=trailer)
    check_crcs(pack, offsets, crcs, name=name)
    return oids, offsets


def idx_entries(idx: bytes, pack: memoryview, *, name: str, trailer: bool = True
                ) -> tuple[list[bytes], list[int], list[int]]:
    """:func:`read_idx` but the entries' CRC32s, given back (in offset order) for
    :func:`check_crcs`."""
    def bad(why: str) -> PackError:
        return IdxMismatch(f"pack {name}: its .idx {why}")

    if len(idx) < 8 + 1024 + 40 or idx[:4] != IDX_MAGIC or idx[4:8] != b"\0\0\0\2":
        raise bad("is not a version-2 pack index")
    if hashlib.sha1(idx[:-20]).digest() != idx[-20:]:
        raise bad("does not match its own SHA-1 trailer (damaged)")
    count = check_header(pack, name)
    if idx[-40:-20] != bytes(pack[-20:]):
        raise bad("belongs to another pack (its pack checksum differs)")
    if trailer:
        pack_checksum(pack, name=name)()
    fanout = np.frombuffer(idx, dtype=">u4", count=256, offset=8)
    n = int(fanout[-1])
    if n != count or bool((fanout[1:] < fanout[:-1]).any()):
        raise bad(f"lists {n} objects, the pack holds {count}")
    at = 8 + 1024
    names = np.frombuffer(idx, dtype=np.uint8, count=20 * n, offset=at).reshape(n, 20)
    at += 20 * n
    crcs = np.frombuffer(idx, dtype=">u4", count=n, offset=at)
    at += 4 * n
    small = np.frombuffer(idx, dtype=">u4", count=n, offset=at).astype(np.uint64)
    at += 4 * n
    large = small >= 0x80000000
    wide = int(large.sum())
    if len(idx) != at + 8 * wide + 40:
        raise bad("has the wrong size for its object count")
    if wide:
        table = np.frombuffer(idx, dtype=">u8", count=wide, offset=at)
        where = (small[large] & 0x7FFFFFFF).astype(np.int64)
        if int(where.max()) >= wide:
            raise bad("names a large offset past its table")
        small[large] = table[where]
    if n > 1:
        diff = names[1:] != names[:-1]
        first = diff.argmax(axis=1)
        rows = np.arange(n - 1)
        if not bool(diff.any(axis=1).all()) or bool(
                (names[rows, first] > names[rows + 1, first]).any()):
            raise bad("lists ids that are not strictly ascending")
    if n and not np.array_equal(np.bincount(names[:, 0], minlength=256).cumsum(), fanout):
        raise bad("has a fanout that does not match its ids")
    order = np.argsort(small, kind="stable")
    offsets = small[order]
    end = len(pack) - 20
    if n and (int(offsets[0]) != 12 or bool((offsets[1:] == offsets[:-1]).any())
              or int(offsets[-1]) >= end):
        raise bad("has offsets that are not the pack's entries")
    raw = names[order].tobytes()
    return [raw[20 * i:20 * i + 20] for i in range(n)], offsets.tolist(), crcs[order].tolist()


def check_crcs(pack: memoryview, offsets: list[int], crcs: list[int], *, name: str) -> None:
    """Every entry's stored bytes (to the next entry; the last to the trailer) against its
    CRC32 in the ``.idx``: an :class:`IdxMismatch` at the first that differs."""
    bounds = offsets + [len(pack) - 20]
    crc32 = zlib.crc32
    for i, want in enumerate(crcs):
        if crc32(pack[bounds[i]:bounds[i + 1]]) != want:
            raise IdxMismatch(f"pack {name}: its .idx has a CRC32 that does not match the "
                              f"entry at offset {bounds[i]}")


def pack_checksum(pack: memoryview, *, name: str) -> Callable[[], None]:
    """The pack's SHA-1 over its bytes, checked against its trailer in a thread (hashlib lets
    go of the GIL over a large buffer, so it runs beside the caller's work); the callable
    returned waits for it and raises :class:`IdxMismatch` when it differs."""
    failed: list[str] = []

    def run() -> None:
        try:
            check_trailer(pack, name)
        except PackError as exc:
            failed.append(exc.problem)

    thread = threading.Thread(target=run, name="znippy-pack-sha1", daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if failed:
            raise IdxMismatch(failed[0])
    return wait


def entry_types(pack: memoryview, oids: list[bytes], offsets: list[int], *, name: str
                ) -> tuple[list[int], list[int], list[int]]:
    """``(types, bases, data)``: each entry's real type (its header's, or a delta's base's,
    bases in this pack), its delta base's entry (-1: none) and where its zlib data starts.
    Read for all entries at once (numpy): the varints are at most 10 bytes, so each is a few
    array steps; a header that runs past its entry is a :class:`PackError`."""
    n = len(offsets)
    end = len(pack) - 20
    buf = np.frombuffer(pack, dtype=np.uint8)
    at = np.asarray(offsets, dtype=np.int64)
    limit = np.append(at[1:], end) if n else at          # each entry's end (tiled by the CRCs)

    def byte(pos: np.ndarray, which: np.ndarray | slice = slice(None)) -> np.ndarray:
        past = pos >= limit[which]
        if bool(past.any()):
            bad = int(at[which][int(np.argmax(past))])
            raise PackError(f"pack {name}: object at offset {bad}: entry header runs past "
                            "the end")
        return buf[pos].astype(np.int64)

    c = byte(at)
    kind = (c >> 4) & 7
    pos = at + 1
    more = (c & 0x80) != 0
    for _ in range(10):                                  # the size varint
        if not bool(more.any()):
            break
        c = byte(np.where(more, pos, at))
        pos = np.where(more, pos + 1, pos)
        more &= (c & 0x80) != 0
    if bool(more.any()):
        bad = int(at[int(np.argmax(more))])
        raise PackError(f"pack {name}: object at offset {bad}: entry header runs past the end")
    unknown = (kind == 0) | (kind == 5)
    if bool(unknown.any()):
        i = int(np.argmax(unknown))
        raise PackError(f"pack {name}: object at offset {offsets[i]}: unknown type "
                        f"{int(kind[i])}")
    base = np.full(n, -1, dtype=np.int64)
    ofs = np.flatnonzero(kind == OFS_DELTA)
    if len(ofs):                                         # git's offset encoding
        p = pos[ofs]
        c = byte(p, ofs)
        dist = c & 0x7F
        p = p + 1
        more = (c & 0x80) != 0
        for _ in range(9):
            if not bool(more.any()):
                break
            c = byte(np.where(more, p, at[ofs]), ofs)
            dist = np.where(more, ((dist + 1) << 7) | (c & 0x7F), dist)
            p = np.where(more, p + 1, p)
            more &= (c & 0x80) != 0
        target = at[ofs] - dist
        k = np.minimum(np.searchsorted(at, target), max(n - 1, 0))
        found = (dist > 0) & (at[k] == target) & ~more
        if not bool(found.all()):
            i = int(ofs[int(np.argmin(found))])
            raise PackError(f"pack {name}: object at offset {offsets[i]}: its delta base is "
                            "not in this pack")
        base[ofs] = k
        pos[ofs] = p
    ref = np.flatnonzero(kind == REF_DELTA)
    if len(ref):
        by_id = {o: i for i, o in enumerate(oids)}
        for i in ref.tolist():
            q = int(pos[i])
            b = by_id.get(bytes(pack[q:q + 20])) if q + 20 <= int(limit[i]) else None
            if b is None:
                raise PackError(f"pack {name}: object at offset {offsets[i]}: its delta base "
                                "is not in this pack")
            base[i] = b
        pos[ref] += 20
    types = np.where(kind < OFS_DELTA, kind, 0)
    todo = np.flatnonzero(types == 0)
    while len(todo):                                     # a delta takes its base's type
        got = types[base[todo]]
        types[todo] = got
        left = todo[got == 0]
        if len(left) == len(todo):
            raise PackError(f"pack {name}: object at offset {offsets[int(left[0])]}: its "
                            "delta chain loops")
        todo = left
    return types.tolist(), base.tolist(), pos.tolist()


def inflate_wanted(pack: memoryview, offsets: list[int], types: list[int], base: list[int],
                   data: list[int], want: frozenset[int], *, name: str) -> dict[int, bytes]:
    """Entry index → content of every entry whose type is in ``want``, deltas applied (a
    delta's base has its type, so it is inflated here too). Each entry's zlib stream runs to
    the next entry (the CRC32s tiled them), and must inflate whole."""
    bounds = offsets[1:] + [len(pack) - 20]
    out: dict[int, bytes] = {}

    def raw(i: int) -> bytes:
        try:
            d = zlib.decompressobj()
            got = d.decompress(pack[data[i]:bounds[i]])
            if not d.eof or d.unused_data:
                raise zlib.error("the stream does not end with its entry")
            return got
        except zlib.error as exc:
            raise PackError(f"pack {name}: object at offset {offsets[i]}: bad zlib stream "
                            f"({exc})") from None

    inflater = zlib.decompressobj
    for i in [i for i, kind in enumerate(types) if kind in want]:
        j = base[i]
        if j < 0:                          # a whole object: the common case, kept short
            d = inflater()
            try:
                content = d.decompress(pack[data[i]:bounds[i]])
            except zlib.error:
                content = b""              # raw() below names the problem
            if d.eof and not d.unused_data:
                out[i] = content
                continue
        elif j < i and j in out:           # a delta on a base already made (OFS: it is before)
            try:
                got = apply_delta(out[j], raw(i))
            except (ApplyDeltaError, ValueError) as exc:
                raise PackError(f"pack {name}: object at offset {offsets[i]}: delta does not "
                                f"apply ({exc})") from None
            out[i] = got[0] if len(got) == 1 else b"".join(got)
            continue
        if i in out:
            continue
        chain = []                         # (and a stream that does not end: raw() says so)
        j = i
        while j not in out and base[j] >= 0:
            chain.append(j)
            j = base[j]
        content = out[j] if j in out else raw(j)
        out[j] = content
        for k in reversed(chain):
            try:
                got = apply_delta(content, raw(k))
            except (ApplyDeltaError, ValueError) as exc:
                raise PackError(f"pack {name}: object at offset {offsets[k]}: delta does not "
                                f"apply ({exc})") from None
            content = got[0] if len(got) == 1 else b"".join(got)
            out[k] = content
    return out


def index_with_idx(pack: memoryview, idx: bytes, *, name: str) -> ParsedPack:
    """The :class:`ParsedPack` of a local pack from its checked ``.idx`` (module doc). The
    pack's SHA-1 is taken in a thread meanwhile; a damaged pack (its SHA-1 differs) is an
    :class:`IdxMismatch` whatever else went wrong first, so the whole parse names the damage."""
    checked = pack_checksum(pack, name=name)
    try:
        parsed = _index_with_idx(pack, idx, name=name)
    except PackError:
        checked()
        raise
    checked()
    return parsed


def _index_with_idx(pack: memoryview, idx: bytes, *, name: str) -> ParsedPack:
    oids, offsets, crcs = idx_entries(idx, pack, name=name, trailer=False)
    types, base, data = entry_types(pack, oids, offsets, name=name)
    parsed = ParsedPack(name, oids, types, offsets)

    def objects(kind: int) -> list[tuple[bytes, bytes]]:
        """``(id, content)`` of every entry of ``kind``, each hashed against its id."""
        got = []
        for i, content in inflate_wanted(pack, offsets, types, base, data, frozenset((kind,)),
                                         name=name).items():
            oid = oids[i]
            if object_id(kind, content) != oid:
                raise IdxMismatch(f"pack {name}: object at offset {offsets[i]} does not hash "
                                  f"to its .idx id {oid.hex()}")
            got.append((oid, content))
        return got

    def trees() -> TreeParts:
        got = objects(TREE)
        return (b"".join(o for o, _c in got), *parse_trees([c for _o, c in got]))

    later = (run_forked(trees) if FORK_TREES is not None and can_fork()
             and types.count(TREE) >= FORK_TREES and a_core_is_idle() else None)
    empty = PackGraph.empty()
    try:
        check_crcs(pack, offsets, crcs, name=name)
        commits = objects(COMMIT)
        ids, tree_of, counts, parents, times = parse_commits(commits, name=name) if commits \
            else (empty.commit_ids, empty.tree_of, empty.parent_counts, empty.parent_ids,
                  empty.times)
        try:
            tree_ids, owner, sub, kids = later.result() if later is not None else trees()
        except WorkerLost:
            tree_ids, owner, sub, kids = trees()     # the child died: done here instead
    finally:
        if later is not None:
            later.cancel()                # reaped (and ended, if it had not answered)
    parsed.graph = PackGraph(ids, tree_of, counts, parents, times, ids_of(tree_ids), owner,
                             sub, kids)
    return parsed
