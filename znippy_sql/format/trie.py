"""``__trie__``: the fst map relative_path → lookup row, read through ``ducer`` (built by the core).

The only module that imports ``ducer`` (tests/test_native_guard.py). The fst code panics on
bytes it does not expect (a Rust panic reaches Python as a ``BaseException``), so its frame is
checked first (the CRC32C of fst format 3) and every call into it runs under
:func:`znippy_sql.native.guard`: a damaged trie is a :class:`FormatError` naming the section
and the archive, whatever the fst code makes of it.
"""

from __future__ import annotations

import struct
from typing import Any

import ducer
import google_crc32c
import pyarrow as pa

from .. import corelib
from ..errors import FormatError
from ..native import guard
from .schema import TRIE

_FST_HEADER = struct.Struct("<QQ")  # [0..16): version, fst type
_FST_CRC = struct.Struct("<I")      # [-4..]: masked CRC32C of every byte before it
_FST_MIN = 16 + 8 + 8 + 4  # header; footer: length, root address, checksum


def fst_problem(buf: Any) -> str | None:
    """What is wrong with an fst's frame, or None. Since fst format version 3 (the Rust ``fst``
    crate 0.4, which ``ducer`` wraps) the last 4 bytes are a masked CRC32C of all bytes before
    them; checking it keeps corrupt bytes away from the fst code, which panics on them."""
    buf = buf if isinstance(buf, pa.Buffer) else pa.py_buffer(buf)
    size = buf.size
    if size < _FST_MIN:
        return f"is {size} bytes, too short for an fst map"
    version, _kind = _FST_HEADER.unpack(buf.slice(0, 16).to_pybytes())
    if version < 3:
        return None  # older fst versions carry no checksum
    stored = _FST_CRC.unpack(buf.slice(size - 4, 4).to_pybytes())[0]
    crc = google_crc32c.value(buf.slice(0, size - 4))
    if ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF) != stored:
        return "fails its CRC32C checksum"
    return None


class TrieMap:
    """A read-only fst map whose every call is guarded (``get``, ``len``)."""

    def __init__(self, buf: Any, path: str | None) -> None:
        self.path = path
        problem = fst_problem(buf)
        if problem is not None:
            raise FormatError(f"{TRIE} {problem}", path=path)
        view = memoryview(buf).cast("B")
        with guard(FormatError, f"{TRIE} is not a valid fst map", path=path):
            self._map = ducer.Map(view)

    def get(self, key: bytes) -> int | None:
        with guard(FormatError, f"{TRIE} cannot be searched", path=self.path):
            row = self._map.get(key)
        return None if row is None else int(row)

    def __len__(self) -> int:
        with guard(FormatError, f"{TRIE} cannot be sized", path=self.path):
            return int(len(self._map))


def build(data: bytes, offsets: bytes, rows: bytes, *, path: str | None = None) -> bytes:
    """The fst map of the keys ``data[offsets[r]:offsets[r + 1]]`` → ``r`` for each row ``r``
    of ``rows`` (little-endian int32 offsets, uint64 rows; keys in sorted order), built by
    the core in one call (``native/src/create/tail.rs``: the crate ``ducer`` wraps, the same
    bytes)."""
    return corelib.trie_build(data, offsets, rows, path=path)


