"""Arrow columns from Python values and to NumPy, without pyarrow's pandas paths.

``pa.array(list)``, ``pa.scalar``, ``pa.table({name: list})`` ask pyarrow's pandas shim whether
the value is a pandas object, and the shim imports pandas to answer when it is installed
(pyarrow 25: ~40 MB resident and 0.5–1 s on the first call of a process). A DuckDB
``register`` of an archive builds a few such columns (the groups view's rows, the archive's
path): built here from NumPy buffers and pyarrow's ``StringBuilder``, which never ask, so
registering an archive does not import pandas (``tests/test_views.py`` checks
``sys.modules``; ``bench/results-query.md`` has the figures). ``Array.to_numpy`` goes through
the same conversion (``ConvertArrayToPandas``): :func:`numpy_of` reads a fixed-width column's
buffer instead, for the checks every query's first scan runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def column(values: Sequence[Any], type: pa.DataType,
           memory_pool: pa.MemoryPool | None = None) -> pa.Array:
    """``values`` as an array of ``type``: an integer or boolean type (no nulls), or a
    string type (None: null)."""
    n = len(values)
    if pa.types.is_integer(type):
        kind = "i" if pa.types.is_signed_integer(type) else "u"
        data = np.asarray(values, dtype=np.dtype(f"<{kind}{type.bit_width // 8}")).reshape(n)
        return pa.Array.from_buffers(type, n, [None, pa.py_buffer(data.tobytes())])
    if pa.types.is_boolean(type):
        bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
        return pa.Array.from_buffers(type, n, [None, pa.py_buffer(bits.tobytes())])
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        fast = _ascii_strings(values, type)
        if fast is not None:
            return fast
        builder = pa.lib.StringBuilder(memory_pool)
        builder.append_values(list(values))
        out = builder.finish()
        return out if out.type == type else out.cast(type)
    raise TypeError(f"column(): no builder for {type}")  # pragma: no cover (a caller's bug)


def arrow_of(values: np.ndarray) -> pa.Array:
    """A one-dimensional NumPy integer or boolean array as Arrow (``pa.array(ndarray)`` asks
    the pandas shim too): integers zero-copy from their buffer, booleans packed to bits."""
    values = np.ascontiguousarray(values)
    n = len(values)
    if values.dtype == np.bool_:
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])
    if values.dtype.kind not in "iu":
        raise TypeError(f"arrow_of(): no builder for {values.dtype}")  # pragma: no cover
    type = pa.from_numpy_dtype(values.dtype.newbyteorder("="))
    return pa.Array.from_buffers(type, n, [None, pa.py_buffer(values.astype(
        values.dtype.newbyteorder("<"), copy=False))])


def repeat(value: Any, type: pa.DataType, n: int) -> pa.Array:
    """``value`` ``n`` times as an array of ``type`` (``pa.repeat(pa.scalar(value, type), n)``
    without the shim): a string built from one buffer, an integer or boolean from NumPy."""
    if value is None:
        return pa.nulls(n, type)
    if pa.types.is_string(type) or pa.types.is_large_string(type):
        raw = value.encode("utf-8")
        large = pa.types.is_large_string(type)
        if large or len(raw) * n < 2**31:
            offsets = np.arange(n + 1, dtype=np.int64 if large else np.int32) * len(raw)
            return pa.Array.from_buffers(type, n, [None, pa.py_buffer(offsets),
                                                   pa.py_buffer(raw * n)])
    elif pa.types.is_boolean(type):
        bits = np.packbits(np.full(n, bool(value)), bitorder="little")
        return pa.Array.from_buffers(type, n, [None, pa.py_buffer(bits)])
    elif (dt := _dtype(type)) is not None:
        return pa.Array.from_buffers(type, n, [None, pa.py_buffer(np.full(n, value, dtype=dt))])
    return pa.repeat(pa.scalar(value, type), n)  # pragma: no cover (no caller's type)


def _ascii_strings(values: Sequence[Any], type: pa.DataType) -> pa.Array | None:
    """``values`` as a string array from one joined buffer when every value is an ASCII
    ``str`` (then character and byte offsets agree: ~5x the builder's speed), else None."""
    try:
        joined = "".join(values)
    except TypeError:  # a None (a null) or a non-str: the builder says what it makes of it
        return None
    if not joined.isascii():
        return None
    n = len(values)
    large = pa.types.is_large_string(type)
    if not large and len(joined) >= 1 << 31:
        return None
    offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=n), out=offsets[1:])
    return pa.Array.from_buffers(type, n, [None, pa.py_buffer(offsets.tobytes()),
                                           pa.py_buffer(joined.encode("ascii"))])


def binary(values: Sequence[bytes | None], large: bool = False) -> pa.Array:
    """``values`` (None: null) as a ``binary`` (or ``large_binary``) array, from its
    buffers."""
    n = len(values)
    lengths = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=n)
    if not large and int(lengths.sum()) >= 2**31:
        raise ValueError("binary(): 2 GiB or more of values: use large=True")
    offsets = np.zeros(n + 1, dtype=np.int64 if large else np.int32)
    np.cumsum(lengths, out=offsets[1:], dtype=offsets.dtype)
    data = pa.py_buffer(b"".join(v for v in values if v is not None))
    nulls = sum(v is None for v in values)
    valid = None
    if nulls:
        bits = np.packbits(np.fromiter((v is not None for v in values), dtype=bool, count=n),
                           bitorder="little")
        valid = pa.py_buffer(bits.tobytes())
    return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), n,
                                 [valid, pa.py_buffer(offsets.tobytes()), data],
                                 null_count=nulls)


def table(columns: Mapping[str, Sequence[Any]], schema: pa.Schema,
          memory_pool: pa.MemoryPool | None = None) -> pa.Table:
    """A table of ``schema`` from one sequence of values per field."""
    return pa.Table.from_arrays([column(columns[f.name], f.type, memory_pool) for f in schema],
                                schema=schema)


def _dtype(type: pa.DataType) -> np.dtype | None:
    if pa.types.is_integer(type):
        kind = "i" if pa.types.is_signed_integer(type) else "u"
    elif pa.types.is_floating(type) and type.bit_width in (32, 64):
        kind = "f"
    else:
        return None
    return np.dtype(f"<{kind}{type.bit_width // 8}")


def numpy_of(array: pa.Array) -> np.ndarray:
    """``array`` as NumPy (as ``to_numpy(zero_copy_only=False)``): an integer, float or boolean
    array without nulls read from its buffer (read-only where it is a view); anything else
    through ``to_numpy``."""
    n = len(array)
    dt = _dtype(array.type)
    if array.null_count == 0 and (dt is not None or pa.types.is_boolean(array.type)):
        buf = array.buffers()[1]
        if dt is not None:
            if buf is None or n == 0:
                return np.zeros(0, dtype=dt)
            return np.frombuffer(buf, dtype=dt, count=n, offset=array.offset * dt.itemsize)
        if buf is None or n == 0:
            return np.zeros(0, dtype=bool)
        bits = np.unpackbits(np.frombuffer(buf, dtype=np.uint8), bitorder="little")
        return bits[array.offset : array.offset + n].astype(bool)
    return array.to_numpy(zero_copy_only=False)
