"""Arrow compute kernels called without importing ``pyarrow.compute``.

The Python wrappers of ``pyarrow.compute`` take ~25 ms to import, and pyarrow imports them on
first use of ``Array.take``/``filter``/``cast`` and friends; every CLI command would pay that.
The writer's tail and the reader's hot paths call the same kernels through ``call_function``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .build import arrow_of, numpy_of  # one definition (re-exported: read.reader, validate)

try:
    from pyarrow._compute import SortOptions, call_function
except ImportError:  # pragma: no cover  (a pyarrow that moved its private module)
    from pyarrow.compute import SortOptions, call_function

__all__ = ["SortOptions", "arrow_of", "call_function", "filter_by", "numpy_of", "one_array", "take",
           "utf8_parts"]


def take(values: Any, indices: Any) -> Any:
    """``values.take(indices)`` (NumPy indices too, without pyarrow's pandas shim)."""
    if isinstance(indices, np.ndarray):
        indices = arrow_of(indices)
    return call_function("take", [values, indices])


def filter_by(values: Any, mask: Any) -> Any:
    """``values.filter(mask)`` (a NumPy mask too, without pyarrow's pandas shim)."""
    if isinstance(mask, np.ndarray):
        mask = arrow_of(mask)
    return call_function("filter", [values, mask])


def one_array(col: Any) -> Any:
    """A ChunkedArray as one Array: its only chunk as it is (``combine_chunks`` copies even
    one chunk: a whole lookup out of the memory map, or a whole table just built)."""
    return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()


def utf8_parts(arr: Any) -> tuple[np.ndarray, memoryview]:
    """A utf8 Array's value offsets (int32, one more than its length, zero-copy) and its data
    buffer as unsigned bytes: value ``i`` is ``data[offsets[i]:offsets[i + 1]]``."""
    n = len(arr)
    _, offsets, data = arr.buffers()
    starts = (np.frombuffer(offsets, dtype=np.int32, count=n + 1, offset=arr.offset * 4)
              if n else np.zeros(1, dtype=np.int32))
    return starts, memoryview(data if data is not None else b"").cast("B")


def _type_ids() -> tuple[int, dict[int, np.dtype]]:
    import pyarrow as pa

    ints = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32,
            pa.int64(): np.int64, pa.uint8(): np.uint8, pa.uint16(): np.uint16,
            pa.uint32(): np.uint32, pa.uint64(): np.uint64}
    return pa.bool_().id, {t.id: np.dtype(d) for t, d in ints.items()}


_BOOL_ID, _INT_DTYPES = _type_ids()
