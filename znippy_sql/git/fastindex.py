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
from .pack import (COMMIT, OFS_DELTA, REF_DELTA, TREE, TYPE_NAMES, ParsedPack, check_header,
                   check_trailer, entry_header, object_id, ofs_distance, parse_commit,
                   tree_links)

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
    bases in this pack), its delta base's entry (-1: none) and where its zlib data starts."""
    end = len(pack) - 20
    at_offset = {o: i for i, o in enumerate(offsets)}
    by_id = {o: i for i, o in enumerate(oids)}
    base: list[int] = [-1] * len(offsets)
    data = [0] * len(offsets)
    types = [0] * len(offsets)
    for i, at in enumerate(offsets):
        try:
            kind, _size, pos = entry_header(pack, at, end)
            if kind == OFS_DELTA:
                dist, pos = ofs_distance(pack, pos, end)
                b = at_offset.get(at - dist)
            elif kind == REF_DELTA:
                b = by_id.get(bytes(pack[pos:pos + 20]))
                pos += 20
            elif kind in TYPE_NAMES:
                types[i], data[i] = kind, pos
                continue
            else:
                raise PackError(f"pack {name}: object at offset {at}: unknown type {kind}")
        except IndexError:
            raise PackError(f"pack {name}: object at offset {at}: entry header runs past the "
                            "end") from None
        if b is None:
            raise PackError(f"pack {name}: object at offset {at}: its delta base is not in "
                            "this pack")
        base[i], data[i] = b, pos
    for i in range(len(offsets)):
        chain = []
        j = i
        while types[j] == 0:
            chain.append(j)
            j = base[j]
            if len(chain) > len(offsets):
                raise PackError(f"pack {name}: object at offset {offsets[i]}: its delta "
                                "chain loops")
        for k in chain:
            types[k] = types[j]
    return types, base, data


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

    for i, kind in enumerate(types):
        if kind not in want or i in out:
            continue
        chain = []
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
    for i, content in inflate_wanted(pack, offsets, types, base, data,
                                     frozenset((COMMIT, TREE)), name=name).items():
        oid, kind = oids[i], types[i]
        if object_id(kind, content) != oid:
            raise IdxMismatch(f"pack {name}: object at offset {offsets[i]} does not hash "
                              f"to its .idx id {oid.hex()}")
        try:
            if kind == COMMIT:
                parsed.commits[oid] = parse_commit(content)
            else:
                parsed.trees[oid] = tree_links(content)
        except (ValueError, IndexError) as exc:
            raise PackError(f"pack {name}: {TYPE_NAMES[kind].decode()} {oid.hex()} is "
                            f"malformed: {exc}") from None
    return parsed
