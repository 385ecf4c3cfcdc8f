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
import zlib

import numpy as np
from dulwich.errors import ApplyDeltaError
from dulwich.pack import apply_delta

from ..errors import PackError
from .bulk import pack_graph
from .pack import (COMMIT, OFS_DELTA, REF_DELTA, TREE, ParsedPack, check_header,
                   check_trailer, object_id)

IDX_MAGIC = b"\xfftOc"


class IdxMismatch(PackError):
    """The ``.idx`` is damaged or does not describe the pack's bytes: the caller parses the
    pack whole instead (which finds the damage, if it is the pack's)."""


def read_idx(idx: bytes, pack: memoryview, *, name: str) -> tuple[list[bytes], list[int]]:
    """``(ids, offsets)`` of a version-2 ``.idx``, in pack (offset) order, checked against
    the pack's bytes."""
    def bad(why: str) -> PackError:
        return IdxMismatch(f"pack {name}: its .idx {why}")

    if len(idx) < 8 + 1024 + 40 or idx[:4] != IDX_MAGIC or idx[4:8] != b"\0\0\0\2":
        raise bad("is not a version-2 pack index")
    if hashlib.sha1(idx[:-20]).digest() != idx[-20:]:
        raise bad("does not match its own SHA-1 trailer (damaged)")
    count = check_header(pack, name)
    if idx[-40:-20] != bytes(pack[-20:]):
        raise bad("belongs to another pack (its pack checksum differs)")
    try:
        check_trailer(pack, name)
    except PackError as exc:
        raise IdxMismatch(exc.problem) from None
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
    bounds = offsets.tolist() + [end]
    want = crcs[order].tolist()
    for i in range(n):
        if zlib.crc32(pack[bounds[i]:bounds[i + 1]]) != want[i]:
            raise bad(f"has a CRC32 that does not match the entry at offset {bounds[i]}")
    raw = names[order].tobytes()
    return [raw[20 * i:20 * i + 20] for i in range(n)], bounds[:-1]


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
    for i, kind in enumerate(types):
        if kind not in want:
            continue
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
    """The :class:`ParsedPack` of a local pack from its checked ``.idx`` (module doc)."""
    oids, offsets = read_idx(idx, pack, name=name)
    types, base, data = entry_types(pack, oids, offsets, name=name)
    parsed = ParsedPack(name, oids, types, offsets)
    commits: list[tuple[bytes, bytes]] = []
    trees: list[tuple[bytes, bytes]] = []
    for i, content in inflate_wanted(pack, offsets, types, base, data,
                                     frozenset((COMMIT, TREE)), name=name).items():
        oid, kind = oids[i], types[i]
        if object_id(kind, content) != oid:
            raise IdxMismatch(f"pack {name}: object at offset {offsets[i]} does not hash "
                              f"to its .idx id {oid.hex()}")
        (commits if kind == COMMIT else trees).append((oid, content))
    parsed.graph = pack_graph(commits, trees, name=name)
    return parsed
