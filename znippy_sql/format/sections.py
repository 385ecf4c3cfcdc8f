"""Reserved sections as a writer is given them: a name and an Arrow table or raw bytes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Union

import pyarrow as pa

from ..errors import FormatError
from .schema import ARROW_SECTIONS, LOOKUP, TRIE, is_reserved

Payload = Union[pa.Table, bytes]


@dataclass(frozen=True)
class ReservedSection:
    """A reserved section: ``pa.Table`` → Arrow IPC stream; ``bytes`` → raw bytes."""

    name: str
    payload: Payload


SectionBuilder = Callable[[pa.Table], Iterable[ReservedSection]]


def check_sections(sections: Sequence[ReservedSection]) -> None:
    """Refuse a section whose name is not reserved (FORMAT §4), is written by the tail itself
    (``__lookup__``, ``__trie__``), or is given twice."""
    seen: set[str] = set()
    for s in sections:
        if not isinstance(s, ReservedSection):
            raise FormatError(f"reserved sections must be ReservedSection objects, not {s!r}")
        if not is_reserved(s.name) or s.name in (LOOKUP, TRIE):
            raise FormatError(f"section name {s.name!r} is not a reserved name this writer takes "
                              "(it must start and end with '__')")
        if s.name in seen:
            raise FormatError(f"section {s.name!r} given twice")
        if not isinstance(s.payload, (pa.Table, bytes, bytearray, memoryview)):
            raise FormatError(f"section {s.name!r}: payload must be a pyarrow Table or bytes")
        if s.name in ARROW_SECTIONS and not isinstance(s.payload, pa.Table):
            raise FormatError(f"section {s.name!r} is an Arrow section: give a pyarrow Table")
        seen.add(s.name)
