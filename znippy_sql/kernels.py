"""Arrow compute kernels called without importing ``pyarrow.compute``.

The Python wrappers of ``pyarrow.compute`` take ~25 ms to import, and pyarrow imports them on
first use of ``Array.take``/``filter``/``cast`` and friends; every CLI command would pay that.
The writer's tail and the reader's hot paths call the same kernels through ``call_function``.
"""

from __future__ import annotations

from typing import Any

try:
    from pyarrow._compute import SortOptions, call_function
except ImportError:  # pragma: no cover  (a pyarrow that moved its private module)
    from pyarrow.compute import SortOptions, call_function

__all__ = ["SortOptions", "call_function", "filter_by", "one_array", "take"]


def take(values: Any, indices: Any) -> Any:
    """``values.take(indices)``."""
    return call_function("take", [values, indices])


def filter_by(values: Any, mask: Any) -> Any:
    """``values.filter(mask)``."""
    return call_function("filter", [values, mask])


def one_array(col: Any) -> Any:
    """A ChunkedArray as one Array: its only chunk as it is (``combine_chunks`` copies even
    one chunk: a whole lookup out of the memory map, or a whole table just built)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
