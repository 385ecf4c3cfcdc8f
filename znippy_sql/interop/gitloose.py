"""The Rust loose-object tier (``znippy-plugin-git`` 0.2.4, ``GitIndexBuilder::new``) as an
object store for this project's git commands (``git/objects.py``: ``cat-file``, ``show-ref``,
the ``git_log``/``git_reachable``/``git_cat`` macros).

What the library writes (``sections.rs``, ``object.rs``): each object is one data entry named
by its oid in lowercase hex whose bytes are the object's canonical form,
``<type> <size>\\0<payload>`` (not zlib-deflated: the archive's codec compresses it); the type
is recorded only there. ``__gunnar_oid__`` (``interop/gitoid.py``) maps an oid to its ordinal
(its rank in oid order) and the first lookup row of its entry. ``__gunnar_graph__`` has hex
``oid``/``parents``/``tree`` and ``committer_time``; ``__gunnar_reach__`` a Roaring bitmap of
object ordinals per selected commit (``reach.rs``: the commit, its ancestors and every tree
and blob under them), keyed by hex ``commit_oid``. The push logs ``__gunnar_refs__`` and
``__gunnar_secrets__`` are folded by ``interop/pushlog.py``.

Here those read as this project's shapes: :class:`LooseOidIndex` answers what
``format.gitindex.OidIndex`` answers (``find``, ``with_prefix``, ``oid``; ``order`` None:
bitmaps count ordinals), :class:`LooseTier` reads an object by ordinal (checked against its
id), its graph as ``oid``/``tree``/``parents`` (binary ids) and ``commit_time``, its bitmaps
by binary commit id. SHA-256 repositories (``oid_len`` 32) are refused: the commands hash
with SHA-1.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from ..errors import ChecksumError, FormatError, NotFoundError
from ..format.gitindex import OidIndex
from ..format.schema import GIT_GRAPH, GIT_OID, GIT_REACH
from .gitoid import HEADER, OID_LENS, VERSION, is_rust_oid_index

__all__ = ["LooseOidIndex", "LooseTier", "is_rust_oid_index", "unhex"]

#: the type codes of ``format.gitindex.TYPE_NAMES``
TYPE_CODES = {b"commit": 1, b"tree": 2, b"blob": 3, b"tag": 4}
_HEX40 = re.compile(r"[0-9a-f]{40}")


class ArchiveLike(Protocol):
    """What the tier reads of an open archive (``read.reader.Archive``)."""

    @property
    def path(self) -> str: ...
    @property
    def lookup(self) -> pa.Table: ...
    def section(self, name: str) -> pa.Table | memoryview: ...
    def has_section(self, name: str) -> bool: ...
    def read(self, path: str) -> bytes: ...


class LooseOidIndex(OidIndex):
    """A Rust ``__gunnar_oid__`` with ``OidIndex``'s lookups: the oids are sorted and
    contiguous after the keys, rows and ordinals, so ``find``/``with_prefix``/``oid`` are
    the inherited binary search over them (a fanout of first bytes made here)."""

    def __init__(self, data: memoryview | bytes, *, lookup_rows: int,
                 path: str | None = None) -> None:
        buf = memoryview(data).cast("B")
        if len(buf) < HEADER.size:
            raise FormatError(f"{GIT_OID} is {len(buf)} bytes, shorter than its header",
                              path=path)
        _magic, version, code, oid_len, header_len, count = HEADER.unpack_from(buf)
        if version != VERSION or OID_LENS.get(code) != oid_len or header_len < HEADER.size \
                or len(buf) != header_len + count * (20 + oid_len):
            raise FormatError(f"{GIT_OID}: version {version}, hash code {code}, oid length "
                              f"{oid_len}, {len(buf)} bytes for {count} objects do not fit "
                              f"the Rust oid index (version {VERSION})", path=path)
        if oid_len != 20:
            raise FormatError(f"{GIT_OID}: a SHA-256 repository; the git commands read SHA-1 "
                              "ones", path=path)
        self.buf, self.oid_len, self.count, self.version = buf, oid_len, count, VERSION
        self._oids_at = header_len + 20 * count
        self.rows = np.frombuffer(buf, "<u8", count, header_len + 8 * count)
        ords = np.frombuffer(buf, "<u4", count, header_len + 16 * count)
        if not np.array_equal(ords, np.arange(count, dtype=np.uint32)):
            raise FormatError(f"{GIT_OID}: the ordinals are not the oids' ranks", path=path)
        if count and int(self.rows.max()) >= lookup_rows:
            raise FormatError(f"{GIT_OID}: a row points past the lookup's {lookup_rows} rows",
                              path=path)
        oids = np.frombuffer(buf, np.uint8, count * oid_len, self._oids_at)
        firsts = oids.reshape(count, oid_len)[:, 0] if count else oids
        if count and bool((np.diff(firsts.astype(np.int16)) < 0).any()):
            raise FormatError(f"{GIT_OID}: the oids are not sorted", path=path)
        self.fanout = np.searchsorted(firsts, np.arange(256), side="right").tolist()
        #: bitmaps count ordinals (as this project's version 1)
        self.order = None


class LooseTier:
    """The objects, graph and bitmaps of a Rust loose-object archive."""

    def __init__(self, archive: ArchiveLike) -> None:
        self.archive = archive
        self.index = LooseOidIndex(archive.section(GIT_OID), path=archive.path,
                                   lookup_rows=archive.lookup.num_rows)
        self._last: tuple[int, int, bytes] | None = None

    def _entry(self, ordinal: int) -> str:
        oid = self.index.oid(ordinal).hex()
        row = int(self.index.rows[ordinal])
        name = self.archive.lookup.column("relative_path")[row].as_py()
        if name != oid:
            raise FormatError(f"{GIT_OID}: object {oid} points at lookup row {row}, the "
                              f"entry {name!r}", path=self.archive.path)
        return oid

    def read(self, ordinal: int) -> tuple[int, bytes]:
        """``(type code, payload)`` of one object: its entry's canonical bytes, checked
        (a known type, the size its header says, the SHA-1 its name says)."""
        last = self._last
        if last is not None and last[0] == ordinal:
            return last[1], last[2]
        oid = self._entry(ordinal)
        try:
            data = self.archive.read(oid)
        except NotFoundError:
            raise FormatError(f"{GIT_OID}: object {oid} has no entry", path=self.archive.path
                              ) from None
        head, nul, payload = data.partition(b"\0")
        kind, _sp, size = head.partition(b" ")
        if not nul or kind not in TYPE_CODES or not size.isdigit() \
                or int(size) != len(payload):
            raise FormatError(f"entry {oid} is not a canonical git object "
                              "(<type> <size>\\0<payload>)", path=self.archive.path)
        if hashlib.sha1(data).hexdigest() != oid:
            raise ChecksumError(f"entry {oid} does not hash to its name",
                                path=self.archive.path)
        self._last = (ordinal, TYPE_CODES[kind], payload)
        return TYPE_CODES[kind], payload

    def type_code(self, ordinal: int) -> int:
        return self.read(ordinal)[0]

    def size(self, ordinal: int) -> int:
        return len(self.read(ordinal)[1])

    def graph(self) -> pa.Table:
        """``__gunnar_graph__`` in this project's columns: ``oid``, ``parents``, ``tree``
        (binary ids), ``generation``, ``commit_time`` (the Rust ``committer_time``) and
        ``corrected_date`` (git's generation number v2, which the Rust graph does not hold:
        computed here, parents first in generation order)."""
        t = self._table(GIT_GRAPH, {"oid": pa.utf8(), "parents": pa.list_(pa.utf8()),
                                    "tree": pa.utf8(), "committer_time": pa.int64(),
                                    "generation": pa.uint32()})
        parents = t.column("parents").combine_chunks()
        times = t.column("committer_time").to_pylist()
        return pa.table({
            "oid": unhex(t.column("oid"), GIT_GRAPH, self.archive.path),
            "parents": pa.ListArray.from_arrays(
                parents.offsets, unhex(parents.flatten(), GIT_GRAPH, self.archive.path)),
            "tree": unhex(t.column("tree"), GIT_GRAPH, self.archive.path),
            "generation": t.column("generation"),
            "commit_time": t.column("committer_time"),
            "corrected_date": pa.array(corrected_dates(
                t.column("oid").to_pylist(), parents.to_pylist(), times,
                t.column("generation").to_pylist(), path=self.archive.path), pa.int64()),
        })

    def bitmaps(self) -> dict[bytes, bytes]:
        """commit id → its serialized bitmap, from ``__gunnar_reach__`` (none without it)."""
        if not self.archive.has_section(GIT_REACH):
            return {}
        t = self._table(GIT_REACH, {"commit_oid": pa.utf8(), "bitmap": pa.binary()})
        ids = unhex(t.column("commit_oid"), GIT_REACH, self.archive.path).to_pylist()
        return dict(zip(ids, t.column("bitmap").to_pylist()))

    def _table(self, name: str, want: dict[str, Any]) -> pa.Table:
        t = self.archive.section(name) if self.archive.has_section(name) else None
        if not isinstance(t, pa.Table) or any(
                n not in t.column_names or t.schema.field(n).type != k for n, k in want.items()):
            raise FormatError(f"{name} does not have the columns znippy-plugin-git writes "
                              f"({', '.join(f'{n}: {k}' for n, k in want.items())})",
                              path=self.archive.path)
        return t


def unhex(col: pa.Array | pa.ChunkedArray, section: str, path: str | None) -> pa.Array:
    """A column of 40-digit lowercase hex ids as ``binary(20)`` (a null or another text is
    damage naming the section)."""
    values = col.to_pylist()
    if col.null_count or not all(_HEX40.fullmatch(v) for v in values):
        raise FormatError(f"{section}: an object id that is not 40 lowercase hex digits",
                          path=path)
    raw = bytes.fromhex("".join(values))
    return pa.array([raw[i:i + 20] for i in range(0, len(raw), 20)], pa.binary(20))


def corrected_dates(oids: list[str], parents: list[list[str]], times: list[int],
                    generations: list[int], *, path: str | None = None) -> list[int]:
    """git's corrected commit date of each commit: max(commit time, largest parent's + 1),
    a parent the graph does not hold counting as none; parents come first in generation
    order (a parent's generation is smaller: the Rust graph's, as git's topological level)."""
    row = {o: i for i, o in enumerate(oids)}
    out = list(times)
    for i in sorted(range(len(oids)), key=generations.__getitem__):
        for p in parents[i]:
            j = row.get(p)
            if j is not None:
                if generations[j] >= generations[i]:
                    raise FormatError(f"{GIT_GRAPH}: commit {oids[i]} has generation "
                                      f"{generations[i]}, its parent {p} {generations[j]}",
                                      path=path)
                out[i] = max(out[i], out[j] + 1)
    return out
