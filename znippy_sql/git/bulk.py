"""A pack's commits and trees parsed in bulk: what the graph and the bitmaps need, as arrays.

The per-object Python work of an import was the cost (issue 28): a tree of 14 entries made 14
``bytes`` ids and two lists. Here every tree of a pack is parsed at once over the joined tree
bytes with numpy — an entry is ``<octal mode> SP <name> NUL <20-byte id>``, so from an
entry's start the next NUL ends its name and the entry ends 21 bytes later; all trees advance
one entry per step — and the ids stay rows of one ``uint8`` array. Commits are read with one
regular expression each (git's own header order: ``tree``, the ``parent`` lines, then the
``committer`` line gives the time). A tree whose bytes do not line up is parsed entry by entry
(:func:`~.pack.tree_links`, whose leniency it keeps); a commit without a tree line is a
:class:`PackError` naming the pack and the commit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import PackError

OID = 20
_HEAD = re.compile(rb"tree ([0-9a-fA-F]{40})\n((?:parent [0-9a-fA-F]{40}\n)*)")
_UNHEX = np.full(256, 255, dtype=np.uint8)
_UNHEX[np.frombuffer(b"0123456789", dtype=np.uint8)] = np.arange(10, dtype=np.uint8)
_UNHEX[np.frombuffer(b"abcdef", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_UNHEX[np.frombuffer(b"ABCDEF", dtype=np.uint8)] = np.arange(10, 16, dtype=np.uint8)
_TREE_MODE = np.frombuffer(b"40000 ", dtype=np.uint8)
_LINK_MODE = np.frombuffer(b"160000 ", dtype=np.uint8)
#: trees still unfinished below this many are finished entry by entry (a long tree alone
#: would cost a numpy step per entry)
_FEW = 64


_ENTRY = re.compile(rb"([0-7]+) [^\x00]*\x00(.{20})", re.S)


def tree_links(content: bytes) -> tuple[list[bytes], list[bytes]]:
    """``(subtree oids, blob oids)`` of a tree object's bytes; gitlinks (mode 160000, a
    commit of another repository) left out, as ``git rev-list --objects`` leaves them."""
    subtrees, blobs = [], []
    for mode, oid in _ENTRY.findall(content):
        if mode == b"40000":
            subtrees.append(oid)
        elif mode != b"160000":
            blobs.append(oid)
    return subtrees, blobs


@dataclass
class PackGraph:
    """The commits and trees of one pack."""

    commit_ids: np.ndarray    #: uint8[c, 20]
    tree_of: np.ndarray       #: uint8[c, 20]: the commit's tree
    parent_counts: np.ndarray  #: int64[c]
    parent_ids: np.ndarray    #: uint8[sum(parent_counts), 20]: parents, in commit order
    times: np.ndarray         #: int64[c]: committer time
    tree_ids: np.ndarray      #: uint8[t, 20]
    edge_tree: np.ndarray     #: int64[e]: which tree (index into ``tree_ids``), entry order
    edge_sub: np.ndarray      #: bool[e]: a subtree, else a blob (gitlinks left out)
    edge_ids: np.ndarray      #: uint8[e, 20]

    @classmethod
    def empty(cls) -> "PackGraph":
        i, ids = np.zeros(0, dtype=np.int64), np.zeros((0, OID), dtype=np.uint8)
        return cls(ids, ids, i, ids, i, ids, i, np.zeros(0, dtype=bool), ids)


def ids_of(raw: bytes) -> np.ndarray:
    """Joined 20-byte ids as a ``uint8[n, 20]`` array."""
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, OID)


def unhex(text: np.ndarray) -> np.ndarray:
    """``uint8[n, 40]`` hex digits (checked by the caller) → ``uint8[n, 20]``."""
    v = _UNHEX[text]
    return (v[:, 0::2] << 4) | v[:, 1::2]


def parse_commits(items: Sequence[tuple[bytes, bytes]], *, name: str
                  ) -> tuple[np.ndarray, ...]:
    """``(oid, content)`` of commits → ``(ids, tree ids, parent counts, parent ids,
    times)``."""
    trees: list[bytes] = []
    parents: list[bytes] = []
    counts: list[int] = []
    times: list[int] = []
    for oid, content in items:
        m = _HEAD.match(content)
        try:
            if m is None:
                raise ValueError("commit has no tree line")
            at = content.find(b"\ncommitter ", m.end() - 1)
            head_end = content.find(b"\n\n")
            if at < 0 or 0 <= head_end < at:
                when = 0                                  # no committer line: as before
            else:
                stop = content.find(b"\n", at + 1)
                when = int(content[at + 1:stop if stop >= 0 else len(content)]
                           .rsplit(b" ", 2)[1])
        except (ValueError, IndexError) as exc:
            raise PackError(f"pack {name}: commit {oid.hex()} is malformed: "
                            f"{exc}") from None
        trees.append(m.group(1))
        block = m.group(2)
        parents.append(block)
        counts.append(len(block) // 48)
        times.append(when)
    n = len(items)
    tree_hex = np.frombuffer(b"".join(trees), dtype=np.uint8).reshape(n, 40)
    lines = np.frombuffer(b"".join(parents), dtype=np.uint8).reshape(-1, 48)
    return (ids_of(b"".join(o for o, _c in items)), unhex(tree_hex),
            np.array(counts, dtype=np.int64), unhex(lines[:, 7:47]),
            np.array(times, dtype=np.int64))


def parse_trees(contents: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tree objects' bytes → ``(tree index, is subtree, child id)`` per entry (gitlinks left
    out), in entry order within each tree."""
    got = _parse_trees_joined(contents)
    if got is not None:
        return got
    owner: list[int] = []
    sub: list[bool] = []
    kids: list[bytes] = []
    for k, content in enumerate(contents):        # bytes that do not line up: one by one
        subtrees, blobs = tree_links(content)
        owner += [k] * (len(subtrees) + len(blobs))
        sub += [True] * len(subtrees) + [False] * len(blobs)
        kids += subtrees + blobs
    return (np.array(owner, dtype=np.int64), np.array(sub, dtype=bool),
            ids_of(b"".join(kids)))


def _parse_trees_joined(contents: Sequence[bytes]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The bulk parse, or ``None`` when some tree's bytes do not line up."""
    lengths = np.fromiter((len(c) for c in contents), dtype=np.int64, count=len(contents))
    ends = np.cumsum(lengths)
    raw = b"".join(contents) + b"\0" * 32               # padded: peeks past the end are safe
    buf = np.frombuffer(raw, dtype=np.uint8)
    nul = np.flatnonzero(buf == 0)                       # ends with the padding's NULs
    live = lengths > 0
    cur, owner, end = (ends - lengths)[live], np.flatnonzero(live), ends[live]
    starts: list[np.ndarray] = []
    nuls: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    while len(cur) > _FEW:                               # every tree one entry further
        z = nul[np.searchsorted(nul, cur)]
        nxt = z + 1 + OID
        if bool((nxt > end).any()):
            return None
        starts.append(cur)
        nuls.append(z)
        owners.append(owner)
        keep = nxt < end
        cur, owner, end = nxt[keep], owner[keep], end[keep]
    steps = len(starts)
    rest: list[list[int]] = [[], [], [], []]               # start, NUL, tree, step
    for c, o, e in zip(cur.tolist(), owner.tolist(), end.tolist()):   # the few long ones
        step = steps
        while c < e:
            name_end = raw.find(b"\0", c, e)
            if name_end < 0 or name_end + 1 + OID > e:
                return None
            for column, value in zip(rest, (c, name_end, o, step)):
                column.append(value)
            c, step = name_end + 1 + OID, step + 1
    at = np.concatenate(starts + [np.array(rest[0], dtype=np.int64)])
    zs = np.concatenate(nuls + [np.array(rest[1], dtype=np.int64)])
    who = np.concatenate(owners + [np.array(rest[2], dtype=np.int64)])
    step_of = np.concatenate([np.full(len(x), k, dtype=np.int64) for k, x in enumerate(starts)]
                             + [np.array(rest[3], dtype=np.int64)])
    # tree by tree, each in entry order: an entry's place is its tree's first + its step
    first = np.zeros(len(contents) + 1, dtype=np.int64)
    np.cumsum(np.bincount(who, minlength=len(contents)), out=first[1:])
    place = np.empty(len(at), dtype=np.int64)
    place[first[who] + step_of] = np.arange(len(at))
    at, zs, who = at[place], zs[place], who[place]
    window = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - 32, 8), strides=(1, 1))
    head = window[at].copy().view("<u8")[:, 0]            # the first 8 bytes of each entry
    is_tree = (head & _MASK6) == _TREE6
    if not (bool((is_tree | np.isin(head & _MASK7, _KNOWN7)).all())
            or _modes_ok(buf, at, zs)):
        return None
    keep = (head & _MASK7) != _LINK7
    ids = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - 32, OID), strides=(1, 1))
    return who[keep], is_tree[keep], ids[zs[keep] + 1]


def _word(text: bytes) -> int:
    return int.from_bytes(text.ljust(8, b"\0"), "little")


_MASK6, _MASK7 = np.uint64((1 << 48) - 1), np.uint64((1 << 56) - 1)
_TREE6 = np.uint64(_word(b"40000 "))
_LINK7 = np.uint64(_word(b"160000 "))
#: the other modes git writes, each with its space
_KNOWN7 = np.array([_word(m) for m in (b"100644 ", b"100755 ", b"120000 ", b"160000 ")],
                   dtype=np.uint64)


def _modes_ok(buf: np.ndarray, at: np.ndarray, zs: np.ndarray) -> bool:
    """Every entry's mode is 1-7 octal digits then a space, before its NUL (the check for
    trees with modes other than git's usual ones: ``40000`` trees are here too)."""
    space = np.flatnonzero(buf == 0x20)
    first = np.searchsorted(space, at)
    if bool((first >= len(space)).any()):
        return False
    width = space[first] - at
    if bool((width < 1).any() or (width > 7).any() or (at + width >= zs).any()):
        return False
    for k in range(7):
        d = buf[at + k]
        if bool(((k < width) & ((d < 0x30) | (d > 0x37))).any()):
            return False
    return True


def pack_graph(commits: Sequence[tuple[bytes, bytes]], trees: Sequence[tuple[bytes, bytes]],
               *, name: str) -> PackGraph:
    """The :class:`PackGraph` of a pack's inflated commits and trees ``(oid, content)``."""
    empty = PackGraph.empty()
    ids, tree_of, counts, parents, times = parse_commits(commits, name=name) if commits else (
        empty.commit_ids, empty.tree_of, empty.parent_counts, empty.parent_ids, empty.times)
    owner, sub, kids = parse_trees([c for _o, c in trees])
    return PackGraph(ids, tree_of, counts, parents, times,
                     ids_of(b"".join(o for o, _c in trees)), owner, sub, kids)
