"""The two OpenZL frame shapes our writer's choices produce, built and read without the GIL.

OpenZL's Python binding holds the GIL while it compresses or decompresses, so the writer
needed worker processes (pickling every chunk across a pipe) and extract did too. With the
writer's fixed choices (docs/format.md: the ``Zstd`` graph, one serial input, format
version 8, no frame checksums) an OpenZL frame has one of two shapes, for a chunk of ``n``
bytes (``n < 2**32``):

- zstd:  ``c8 a5 b1 d7`` · u32le ``n`` · ``01 01 00 00 16 00 00 00`` · LEB128(len(z) + 1) ·
  ``01`` · ``z``, where ``z`` is the zstd frame of the chunk at the same level (content size
  in its header, no zstd checksum) — byte for byte what ``zstandard`` writes;
- stored: ``c8 a5 b1 d7`` · u32le ``n`` · ``00 01 00`` · LEB128(``n``) · the chunk, which
  OpenZL writes when zstd does not pay for its header (always larger than the chunk, so our
  writer stores such a chunk raw instead).

:class:`FastEncoder` builds the zstd shape with ``zstandard`` (which releases the GIL, so
threads compress in parallel) and is used only after :func:`fast_path_ok` has found its
frames byte-identical to OpenZL's own at that level (a self-check, once per process and
level, so a future OpenZL that lays frames out differently falls back to the binding).
:func:`parse` recognises exactly these two shapes for an expected size; any other frame is
left to the OpenZL binding, which decodes every valid frame. ``tests/test_zlframe.py``
checks both against OpenZL on thousands of inputs and all compression levels.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator

import zstandard

#: what ``zstandard``'s batch calls take (their stubs' ``ByteString``)
Bytes = bytes | bytearray | memoryview

MAGIC_V8 = b"\xc8\xa5\xb1\xd7"
_ZSTD_SHAPE = b"\x01\x01\x00\x00\x16\x00\x00\x00"
_STORE_SHAPE = b"\x00\x01\x00"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_U32 = struct.Struct("<I")
_ZSTD_HEAD = struct.Struct("<4sI8s")
MAX_FAST = (1 << 32) - 1  # the shape's size field is a u32


def leb128(value: int) -> bytes:
    if value < 0x4000:  # the lengths of small frames: one or two bytes, no loop
        return bytes((value,)) if value < 0x80 else bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zstd_header(n: int, zstd_len: int) -> bytes:
    """The OpenZL bytes in front of a zstd frame of ``zstd_len`` bytes for an ``n``-byte
    chunk."""
    return _ZSTD_HEAD.pack(MAGIC_V8, n, _ZSTD_SHAPE) + leb128(zstd_len + 1) + b"\x01"


class FastEncoder:
    """zstd frames of one level wrapped as OpenZL frames; one per thread (``zstandard``
    compressors are not thread-safe)."""

    def __init__(self, level: int, *, hash_log: int | None = None,
                 chain_log: int | None = None, window_log: int | None = None) -> None:
        if window_log is not None:  # directory packs (codec.LONG_WINDOW_LOG): long matches
            params = zstandard.ZstdCompressionParameters.from_level(
                level, window_log=window_log, enable_ldm=True, write_content_size=1,
                write_checksum=0, write_dict_id=0)
            self._zstd = zstandard.ZstdCompressor(compression_params=params)
        elif hash_log is None:
            self._zstd = zstandard.ZstdCompressor(level=level, write_content_size=True,
                                                  write_checksum=False, write_dict_id=False)
        else:  # packed blobs (codec.PACK_HASH_LOG): the level's parameters, smaller tables
            params = zstandard.ZstdCompressionParameters.from_level(
                level, hash_log=hash_log, chain_log=chain_log, write_content_size=1,
                write_checksum=0, write_dict_id=0)
            self._zstd = zstandard.ZstdCompressor(compression_params=params)

    def frame_if_smaller(self, chunk: Bytes) -> bytes | None:
        """The chunk's OpenZL frame, or None when it would not be smaller than the chunk
        (then OpenZL's own frame would not be either: it is this one or a stored frame)."""
        n = len(chunk)
        z = self._zstd.compress(chunk)
        head = zstd_header(n, len(z))
        if len(head) + len(z) >= n:
            return None
        return head + z

    def frames_if_smaller(self, chunks: list[Bytes]) -> list[tuple[bytes, object] | None]:
        """:meth:`frame_if_smaller` for many chunks in one call that holds the GIL only
        before and after (per-chunk calls would each have to win the GIL back). Each frame
        comes as ``(header, zstd frame)``: two buffers to write back to back."""
        if not chunks:
            return []
        zs = self._zstd.multi_compress_to_buffer(chunks, threads=1)
        out: list[tuple[bytes, object] | None] = []
        for i, chunk in enumerate(chunks):
            z = zs[i]
            n = len(chunk)
            head = zstd_header(n, len(z))
            out.append(None if len(head) + len(z) >= n else (head, z))
        return out


def parse(frame: bytes | memoryview, expected_size: int
          ) -> tuple[str, memoryview] | None:
    """``("zstd", zstd frame)`` or ``("stored", the chunk)`` when ``frame`` is exactly one of
    the two shapes for a chunk of ``expected_size`` bytes; None for anything else."""
    view = memoryview(frame)
    if view.format != "B":  # e.g. a pyarrow Buffer of the memory map exports signed bytes
        view = view.cast("B")
    head = bytes(view[:32])  # both headers fit (4 + 4 + 8 + a LEB128 of at most 10 + 1)
    if expected_size > MAX_FAST or len(head) < 12:
        return None
    if head[:16] == _ZSTD_HEAD.pack(MAGIC_V8, expected_size, _ZSTD_SHAPE):
        first = head[16] if len(head) > 17 else 0x80
        length: int | None
        if first < 0x80:  # the LEB128 length of a small frame: one or two bytes
            length, pos = first, 17
        elif head[17] < 0x80:
            length, pos = (first & 0x7F) | (head[17] << 7), 18
        else:
            length, pos = _read_leb128(head, 16)
        if length is None or length < 1 or pos + length != len(view):
            return None
        if head[pos : pos + 5] != b"\x01" + _ZSTD_MAGIC:
            return None
        payload = view[pos + 1 :]
        try:  # the zstd frame's own declared size: never allocate by an unchecked one
            if zstandard.frame_content_size(payload) != expected_size:
                return None
        except zstandard.ZstdError:
            return None
        return "zstd", payload
    if head[:4] != MAGIC_V8 or _U32.unpack_from(head, 4)[0] != expected_size:
        return None
    if head[8:11] == _STORE_SHAPE:
        length, pos = _read_leb128(head, 11)
        if length != expected_size or pos + length != len(view):
            return None
        return "stored", view[pos:]
    return None


def _read_leb128(head: bytes, pos: int) -> tuple[int | None, int]:
    value = shift = 0
    for i in range(pos, min(pos + 10, len(head))):
        byte = head[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i + 1
        shift += 7
    return None, pos


def stream_zstd(payload: memoryview, expected_size: int, piece: int) -> "Iterator[bytes]":
    """The zstd frame ``payload`` decoded in pieces of at most ``piece`` bytes (memory: a
    piece plus the frame's window, which zstd limits to 128 MiB); raises ``ValueError`` when
    zstd refuses it or it holds another size than ``expected_size``."""
    reader = zstandard.ZstdDecompressor().stream_reader(payload, read_size=1 << 17)
    done = 0
    try:
        while done < expected_size:
            out = reader.read(min(piece, expected_size - done))
            if not out:
                break
            done += len(out)
            yield out
        if done != expected_size or reader.read(1):
            raise ValueError(f"decoded {done} bytes or more, index says {expected_size}")
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a valid zstd frame ({exc})") from None
    finally:
        reader.close()


def zstd_prefix(payload: memoryview, upto: int) -> bytes:
    """The first ``upto`` bytes the zstd frame ``payload`` decodes to (the caller knows it
    holds more); raises ``ValueError`` when zstd refuses it or it ends before."""
    reader = zstandard.ZstdDecompressor().stream_reader(payload, read_size=1 << 17)
    parts: list[bytes] = []
    done = 0
    try:
        while done < upto:
            out = reader.read(upto - done)
            if not out:
                raise ValueError(f"decoded {done} bytes, {upto} needed")
            parts.append(out)
            done += len(out)
    except zstandard.ZstdError as exc:
        raise ValueError(f"not a valid zstd frame ({exc})") from None
    finally:
        reader.close()
    return parts[0] if len(parts) == 1 else b"".join(parts)


class FastDecoder:
    """Decodes the zstd shape with ``zstandard`` (GIL released); one per thread."""

    def __init__(self) -> None:
        self._zstd = zstandard.ZstdDecompressor()

    def decode(self, frame: bytes | memoryview, expected_size: int) -> bytes | memoryview | None:
        """The chunk, or None when the frame is not one of the two shapes or zstd refuses
        it (the caller then asks the OpenZL binding, which has the final word)."""
        shape = parse(frame, expected_size)
        if shape is None:
            return None
        kind, body = shape
        if kind == "stored":
            return body
        try:
            out = self._zstd.decompress(body, allow_extra_data=False)
        except (zstandard.ZstdError, MemoryError):
            return None
        return out if len(out) == expected_size else None

    def decode_many(self, frames: list[tuple[bytes | memoryview, int]]
                    ) -> list[memoryview | None]:
        """:meth:`decode` of many ``(frame, expected size)``, the zstd shapes in one call that
        holds the GIL only before and after; None where :meth:`decode` must be asked (another
        shape, or a frame zstd refuses: then the whole call's are retried one by one)."""
        out: list[memoryview | None] = [None] * len(frames)
        todo: list[int] = []
        payloads: list[Bytes] = []
        for i, (frame, size) in enumerate(frames):
            shape = parse(frame, size)
            if shape is None:
                continue
            if shape[0] == "stored":
                out[i] = shape[1]
            else:
                todo.append(i)
                payloads.append(shape[1])
        if payloads:
            try:
                decoded = self._zstd.multi_decompress_to_buffer(payloads, threads=1)
            except (zstandard.ZstdError, ValueError, MemoryError):
                return out
            for k, i in enumerate(todo):
                view = memoryview(decoded[k])  # type: ignore[arg-type]
                if view.nbytes == frames[i][1]:
                    out[i] = view
        return out


_CHECKED: dict[int, bool] = {}
_CHECK_LOCK = threading.Lock()


def fast_path_ok(level: int, openzl_encode) -> bool:  # type: ignore[no-untyped-def]
    """Whether :class:`FastEncoder` writes OpenZL's frames byte for byte at ``level``,
    checked once per process on a fixed sample (``openzl_encode(bytes) -> frame``)."""
    with _CHECK_LOCK:
        ok = _CHECKED.get(level)
        if ok is None:
            ok = _CHECKED[level] = _same_frames(level, openzl_encode)
        return ok


def _same_frames(level: int, openzl_encode) -> bool:  # type: ignore[no-untyped-def]
    fast = FastEncoder(level)
    words = [b"def", b"return", b"self", b"znippy", b"archive", b"(x)", b"\n    ", b"42",
             b"import", b"class", b"value", b"=", b"None", b"# note", b"for i in range"]
    sample = bytearray()
    state = 12345
    while len(sample) < 200_000:
        state = (state * 1103515245 + 12345) & 0x7FFFFFFF
        sample += words[state % len(words)] + b" "
    try:
        for size in (4096, 65_536, 200_000):
            chunk = bytes(sample[:size])
            mine = fast.frame_if_smaller(chunk)
            if mine is None or mine != openzl_encode(chunk):
                return False
    except Exception:  # noqa: BLE001  (any surprise: use the binding)
        return False
    return True
