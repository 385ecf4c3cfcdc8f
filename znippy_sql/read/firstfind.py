"""The first ``find`` of an archive: the section digests computed beside the search.

``__trie__`` and ``__lookup__`` are checked against the BLAKE3 the manifest records the first
time they are read (docs/format.md, "Section digests"); on a 1,000,000-row archive that is
~52 MB of hashing before the first point read can answer. The hashing needs no GIL, the
search (the trie's CRC32C and fst, the lookup's batch walk and one batch decoded) is Python
and Arrow: :func:`first_find` starts the digests of both sections in a thread, searches with
their bytes meanwhile, then waits for the digests and answers only when both match. Nothing
read before the digests match is kept or returned: a mismatch raises the same
:class:`~znippy_sql.errors.FormatError` as the plain path, whatever the search found or
raised, and nothing is cached. The bytes met by the search before their digest is known are
guarded as with ``verify_sections=False`` (the fst frame's CRC32C and every fst call guarded;
every Arrow message walked and bounded before it is decoded).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import pyarrow as pa

from ..errors import FormatError
from ..format import b3 as blake3
from ..format.schema import LOOKUP, RESERVED_PKG_TYPE, TRIE, GroupKey
from ..format.trie import TrieMap

if TYPE_CHECKING:
    from .reader import Archive, FileInfo

#: what :func:`first_find` returns when it leaves the call to :meth:`Archive.find`
NOT_HANDLED = object()


def section_digest(buf: pa.Buffer) -> bytes:
    """BLAKE3 of a section's bytes (every core for a big one)."""
    threads = blake3.blake3.AUTO if buf.size > 8 << 20 else 1
    return blake3.blake3(memoryview(buf), max_threads=threads).digest()


class _Digests(threading.Thread):
    """BLAKE3 of each buffer, in a thread of its own (the hasher releases the GIL)."""

    def __init__(self, bufs: list[pa.Buffer]) -> None:
        super().__init__(name="znippy-section-digest", daemon=True)
        self.bufs = bufs
        self.digests: list[bytes] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.digests = [section_digest(b) for b in self.bufs]
        except BaseException as exc:  # given to the caller (a ChecksumError of the guard)
            self.error = exc


def first_find(archive: "Archive", path: str, key: bytes) -> "FileInfo | None | object":
    """:meth:`Archive.find` of the first call (neither the trie nor the lookup read yet);
    ``NOT_HANDLED`` when this archive's sections are not both recorded with a digest
    still to check, or its lookup is one record batch (then ``find`` goes its plain way)."""
    keys = [GroupKey(RESERVED_PKG_TYPE, "", name) for name in (TRIE, LOOKUP)]
    if not archive.verify_sections or any(
            k not in archive._by_key or archive._by_key[k].blake3 is None or k in archive._sound
            for k in keys):
        return NOT_HANDLED
    archive._fetch_paths()
    rows = [archive.manifest_row(k) for k in keys]
    bufs = [archive.source.read(r.index_offset, r.index_len, n)
            for r, n in zip(rows, (TRIE, LOOKUP))]
    digests = _Digests(bufs)
    digests.start()
    found: FileInfo | None = None
    problem: BaseException | None = None
    trie: TrieMap | None = None
    lazy = row = None
    try:
        trie = TrieMap(bufs[0], archive.path)
        row = trie.get(key)
        lazy = archive._batches_of(bufs[1])
        if row is not None and lazy is not None:
            found = lazy.file_at(archive, path, key, row)
    except Exception as exc:  # said below, unless the digests say the bytes are damaged
        problem = exc
    digests.join()
    if digests.error is not None:
        raise digests.error
    for k, name, digest in zip(keys, (TRIE, LOOKUP), digests.digests):
        if digest != archive._by_key[k].blake3:
            raise FormatError(f"{name}: its bytes do not match the BLAKE3 the manifest records "
                              "(damaged)", path=archive.path)
        archive._sound.add(k)
    if problem is not None:
        raise problem
    archive.__dict__.setdefault("trie", trie)
    archive.__dict__.setdefault("_lazy_lookup", lazy)
    if lazy is None or (row is not None and found is None):
        return NOT_HANDLED  # one batch, or a file the batches leave to the whole lookup
    return found
