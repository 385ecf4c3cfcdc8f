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
from typing import NamedTuple

import pyarrow as pa

from ..errors import FormatError
from ..format.schema import LOOKUP, TRIE
from ..format.trie import TrieMap
from .columns import FileInfo
from .search import Batches, batches_of
from .tail import Tail, section_digest, section_key

#: what :func:`first_find` finds when it leaves the call to :meth:`Archive.find`
NOT_HANDLED = object()


class First(NamedTuple):
    """What :func:`first_find` read and checked: the answer (or ``NOT_HANDLED``), and the
    trie and the lookup's batches, for the archive to keep."""

    found: "FileInfo | None | object"
    trie: TrieMap | None
    batches: Batches | None


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


def first_find(tail: Tail, path: str, key: bytes) -> First | None:
    """:meth:`Archive.find` of the first call (neither the trie nor the lookup read yet);
    None when this archive's sections are not both recorded with a digest still to check
    (nothing read); ``found`` is ``NOT_HANDLED`` when its lookup is one record batch or the
    batches leave the file to the whole lookup (then ``find`` goes its plain way)."""
    keys = [section_key(name) for name in (TRIE, LOOKUP)]
    if not tail.verify_sections or not all(tail.digest_pending(k) for k in keys):
        return None
    tail.fetch_paths()
    rows = [tail.manifest_row(k) for k in keys]
    bufs = [tail.source.read(r.index_offset, r.index_len, n)
            for r, n in zip(rows, (TRIE, LOOKUP))]
    digests = _Digests(bufs)
    digests.start()
    found: FileInfo | None = None
    problem: BaseException | None = None
    trie: TrieMap | None = None
    lazy = row = None
    try:
        trie = TrieMap(bufs[0], tail.path)
        row = trie.get(key)
        lazy = batches_of(tail, bufs[1])
        if row is not None and lazy is not None:
            found = lazy.file_at(tail, path, key, row)
    except Exception as exc:  # said below, unless the digests say the bytes are damaged
        problem = exc
    digests.join()
    if digests.error is not None:
        raise digests.error
    for k, r, name, digest in zip(keys, rows, (TRIE, LOOKUP), digests.digests):
        if digest != r.blake3:
            raise FormatError(f"{name}: its bytes do not match the BLAKE3 the manifest records "
                              "(damaged)", path=tail.path)
        tail.sound.add(k)
    if problem is not None:
        raise problem
    if lazy is None or (row is not None and found is None):
        return First(NOT_HANDLED, trie, lazy)  # one batch, or a file left to the whole lookup
    return First(found, trie, lazy)
