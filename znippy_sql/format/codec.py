"""OpenZL frames: the writer's fixed choices, decoding any valid frame, and the skip list.

Writer choices [fixed here, restated in docs/format.md]: the ``Zstd`` graph of OpenZL, compression
level 3, format version 8 (``MIN_FORMAT_VERSION`` of openzl 0.3: the oldest one, so older
OpenZL releases can decode our frames), a chunk stored raw when its frame is not smaller, and
no OpenZL frame checksums (neither content nor compressed): every chunk's BLAKE3 is in the index
and checked on every read, so frame checksums would only cost 8 bytes a frame and a hash pass.
Decoding accepts frames with or without them.

Frames of our two shapes are written and read through ``zstandard`` without the GIL
(:mod:`znippy_sql.format.zlframe`: byte-identical to the binding's, self-checked); every other frame
goes through the OpenZL binding.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import openzl.ext as zl
import zstandard

from . import zlframe
from ..errors import CodecError

GRAPH = "zstd"
DEFAULT_LEVEL = 3
FORMAT_VERSION = 8
FRAME_CHECKSUMS = False
#: Packed blobs [docs/format.md]: the level's zstd parameters with these hash and chain table
#: sizes (level 3's own, 17/16, are sized for larger inputs: on 1 MiB packs of source files
#: these compress ~1.8x faster for 0.3 % more bytes, bench/results-packed.md)
PACK_HASH_LOG = 16
PACK_CHAIN_LOG = 15
#: Directory packs [docs/format.md]: the level's zstd parameters with a window of
#: ``2**LONG_WINDOW_LOG`` bytes (the largest pack, ``pack.DIR_PACK_MAX``: zstd shrinks it to a
#: smaller pack's size) and long-distance matching, so a version of a jar finds the entries it
#: shares with the version before it anywhere in the pack (bench/results-packed.md). Every
#: zstd decoder takes windows up to 2**27 (``ZSTD_WINDOWLOG_LIMIT_DEFAULT``), the OpenZL
#: binding included (tests/test_dirpack.py).
LONG_WINDOW_LOG = 25
_TERNARY_DISABLE = 2  # ZL_TernaryParam_disable

#: file suffixes (after the last dot, case-insensitive) a write cuts at zip entry boundaries
#: (``write/zipcut.py``; here, free of numpy, for the routing rule ``write/early.py`` builds)
ZIP_SUFFIXES: frozenset[str] = frozenset("jar war ear aar whl zip nupkg".split())

#: Already-compressed suffixes stored raw without trying the codec (FORMAT §3, Rust skip.rs).
SKIP_SUFFIXES: frozenset[str] = frozenset(
    """zip gz tgz bz2 xz lz lzma lz4 zst zstd 7z rar z br sz snappy jar war ear aar apk ipa whl
    egg crate nupkg gem deb rpm png jpg jpeg gif webp avif heic ico mp3 mp4 m4a m4v mkv mov avi
    webm ogg oga ogv opus flac aac wmv wma pdf parquet orc avro arrow feather woff woff2 dmg iso
    squashfs cab msi docx xlsx pptx odt ods odp epub""".split()
)


#: What the writer does with a chunk (``pipeline.Job.mode``): compress it (the frame kept when
#: smaller), store it raw without trying, or :func:`probe` it first (skip-listed chunks).
COMPRESS, RAW, PROBE = 0, 1, 2

#: The probe [docs/format.md]: up to ``PROBE_SAMPLES`` samples of ``PROBE_SAMPLE`` bytes (start,
#: middle, end; the whole chunk when it is no longer than that) compressed by zstd at
#: ``PROBE_LEVEL``; the chunk is worth compressing when they shrink below ``PROBE_RATIO``.
#: a chunk that decodes to more than this is streamed in pieces where its bytes go to a file
#: or a socket (extract, cat, ``-o -``, ArchiveFile): memory stays bounded by a piece plus
#: the zstd window whatever size the archive claims (docs/format.md, "Bounded memory")
STREAM_BYTES = 64 << 20
PIECE_BYTES = 8 << 20
PROBE_SAMPLE = 4 << 10
PROBE_SAMPLES = 3
PROBE_LEVEL = 1
PROBE_RATIO = 0.97


def probe_samples(chunk: zlframe.Bytes) -> list[zlframe.Bytes]:
    """The parts of ``chunk`` the probe compresses."""
    n = len(chunk)
    if n <= PROBE_SAMPLE * PROBE_SAMPLES:
        return [chunk]
    view = memoryview(chunk)
    step = (n - PROBE_SAMPLE) // (PROBE_SAMPLES - 1)
    return [view[i * step : i * step + PROBE_SAMPLE] for i in range(PROBE_SAMPLES)]


def probe_verdict(sample_bytes: int, compressed_bytes: int) -> bool:
    """True when samples of ``sample_bytes`` that compressed to ``compressed_bytes`` say the
    chunk is worth a full compression."""
    return compressed_bytes < PROBE_RATIO * sample_bytes


def probe(chunk: bytes | memoryview) -> bool:
    """True when a skip-listed chunk is worth compressing (a stored-entry jar, a jmod, the
    headers of a zip): a function of the chunk's bytes only."""
    return probe_many([chunk])[0]


def probe_many(chunks: list[zlframe.Bytes]) -> list[bool]:
    """:func:`probe` of each chunk, the samples compressed in one call without the GIL."""
    samples: list[zlframe.Bytes] = []
    owner: list[int] = []
    for i, chunk in enumerate(chunks):
        if chunk:
            parts = probe_samples(chunk)
            samples += parts
            owner += [i] * len(parts)
    if not samples:
        return [False] * len(chunks)
    zs = _probe_compressor().multi_compress_to_buffer(samples, threads=1)
    raw = [0] * len(chunks)
    packed = [0] * len(chunks)
    for k, i in enumerate(owner):
        raw[i] += len(samples[k])
        packed[i] += len(zs[k])
    return [bool(r) and probe_verdict(r, p) for r, p in zip(raw, packed)]


def _probe_compressor() -> zstandard.ZstdCompressor:
    z = getattr(_LOCAL, "probe", None)
    if z is None:
        z = _LOCAL.probe = zstandard.ZstdCompressor(level=PROBE_LEVEL, write_checksum=False,
                                                    write_content_size=False)
    return z


def is_skipped(path: str) -> bool:
    """True when the file name ends with a known already-compressed suffix."""
    dot = path.rfind(".")
    # a suffix needs a dot inside the last component, not at its start (".gz" is a bare name)
    return dot > path.rfind("/") + 1 and path[dot + 1 :].lower() in SKIP_SUFFIXES


class Encoder:
    """Compresses chunks; holds one OpenZL context (not thread-safe: one per thread,
    :func:`encoder`)."""

    def __init__(self, level: int = DEFAULT_LEVEL) -> None:
        self.level = level
        self._compressor = zl.Compressor()
        graph = zl.graphs.Zstd()(self._compressor)
        self._compressor.select_starting_graph(graph)
        self._cctx = zl.CCtx()
        self._cctx.ref_compressor(self._compressor)
        self._cctx.set_parameter(zl.CParam.StickyParameters, 1)
        self._cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
        self._cctx.set_parameter(zl.CParam.CompressionLevel, level)
        if not FRAME_CHECKSUMS:
            self._cctx.set_parameter(zl.CParam.ContentChecksum, _TERNARY_DISABLE)
            self._cctx.set_parameter(zl.CParam.CompressedChecksum, _TERNARY_DISABLE)

        self._fast = (zlframe.FastEncoder(level)
                      if zlframe.fast_path_ok(level, self._binding_encode) else None)
        self._pack = (zlframe.FastEncoder(level, hash_log=PACK_HASH_LOG,
                                          chain_log=PACK_CHAIN_LOG)
                      if self._fast is not None else None)
        self._long: zlframe.FastEncoder | None = None  # made on first use

    def pack_frames_if_smaller(self, chunks: list[zlframe.Bytes], *, long: bool = False
                               ) -> list[tuple[bytes, ...] | None]:
        """:meth:`frames_if_smaller` of packed blobs: zstd with ``PACK_HASH_LOG`` and
        ``PACK_CHAIN_LOG`` (``long``: of directory packs, with ``LONG_WINDOW_LOG`` and
        long-distance matching) in OpenZL's zstd frame shape (without the fast path: the
        binding's frames, which are valid too)."""
        enc = self._pack
        if long and enc is not None:
            if self._long is None:
                self._long = zlframe.FastEncoder(self.level, window_log=LONG_WINDOW_LOG)
            enc = self._long
        if enc is not None and all(len(c) <= zlframe.MAX_FAST for c in chunks):
            return enc.frames_if_smaller(chunks)  # type: ignore[return-value]
        return self.frames_if_smaller(chunks)

    def encode(self, chunk: bytes | memoryview) -> bytes:
        """The OpenZL binding's frame (holds the GIL)."""
        return self._binding_encode(chunk)

    def _binding_encode(self, chunk: zlframe.Bytes) -> bytes:
        data = chunk if isinstance(chunk, bytes) else bytes(chunk)
        return self._cctx.compress([zl.Input(zl.Type.Serial, data)])

    def frame_if_smaller(self, chunk: zlframe.Bytes) -> bytes | None:
        """The chunk's frame when it is smaller than the chunk, else None (store it raw).
        Through ``zstandard`` without the GIL when the self-check passed: the same bytes."""
        if self._fast is not None and len(chunk) <= zlframe.MAX_FAST:
            return self._fast.frame_if_smaller(chunk)
        frame = self._binding_encode(chunk)
        return frame if len(frame) < len(chunk) else None

    def frames_if_smaller(self, chunks: list[zlframe.Bytes]) -> list[tuple[bytes, ...] | None]:
        """:meth:`frame_if_smaller` of each chunk, as buffers to write back to back; one
        GIL-free call for all of them on the fast path."""
        if self._fast is not None and all(len(c) <= zlframe.MAX_FAST for c in chunks):
            return self._fast.frames_if_smaller(chunks)  # type: ignore[return-value]
        out: list[tuple[bytes, ...] | None] = []
        for chunk in chunks:
            frame = self.frame_if_smaller(chunk)
            out.append(None if frame is None else (frame,))
        return out


class Decoder:
    """Decodes any valid OpenZL frame with one serial output."""

    def __init__(self) -> None:
        self._dctx = zl.DCtx()
        self._fast = zlframe.FastDecoder()

    def decode(self, frame: bytes | memoryview, expected_size: int, *, where: str = "") -> bytes:
        """The chunk's bytes (a copy; :meth:`decode_view` avoids it)."""
        out = self._fast.decode(frame, expected_size)
        if out is not None:
            return bytes(out)
        return self._output(frame, expected_size, where).as_bytes()

    def decode_view(self, frame: bytes | memoryview, expected_size: int, *,
                    where: str = "") -> memoryview:
        """The chunk's bytes as a read-only view, without a copy: of a new buffer, or, for a
        stored frame, of ``frame`` itself. It stays valid after further decodes."""
        out = self._fast.decode(frame, expected_size)
        if out is not None:
            return memoryview(out).toreadonly()
        return memoryview(self._output(frame, expected_size, where).as_bytes()).toreadonly()

    def decode_views(self, frames: list[tuple[bytes | memoryview, int]]
                     ) -> list[memoryview | None]:
        """Read-only views of many ``(frame, expected size)`` decoded at once without the GIL
        where the frames allow it; None for a frame to decode with :meth:`decode_view`."""
        return [None if v is None else v.toreadonly() for v in self._fast.decode_many(frames)]

    def decode_prefix(self, frame: bytes | memoryview, expected_size: int, upto: int
                      ) -> memoryview | None:
        """The first ``upto`` (< ``expected_size``) bytes of the chunk, decoded no further, as
        a read-only view; None for a frame that is not one of our writer's two shapes (the
        caller decodes it whole). The rest of the frame is not checked here: a slice's BLAKE3
        is, and ``verify`` decodes every blob whole."""
        shape = zlframe.parse(frame, expected_size)
        if shape is None:
            return None
        kind, body = shape
        if kind == "stored":
            return body[:upto].toreadonly()
        try:
            return memoryview(zlframe.zstd_prefix(body, upto)).toreadonly()
        except ValueError:
            return None  # the binding decodes it whole and says what is wrong

    def decode_pieces(self, frame: bytes | memoryview, expected_size: int, *, where: str = ""
                      ) -> Iterator[bytes | memoryview]:
        """The chunk's bytes in pieces of at most ``PIECE_BYTES``, for a chunk too big to hold
        (streamed to a file or a socket): the two frame shapes of our writer
        (:func:`zlframe.parse`) are decoded piece by piece (memory: a piece plus the zstd
        window); any other frame is decoded whole by the binding (at most the chunk cap)."""
        piece = PIECE_BYTES
        shape = zlframe.parse(frame, expected_size)
        if shape is None:
            yield self.decode_view(frame, expected_size, where=where)
            return
        kind, body = shape
        if kind == "stored":
            for start in range(0, len(body), piece):
                yield body[start : start + piece].toreadonly()
            return
        try:
            yield from zlframe.stream_zstd(body, expected_size, piece)
        except ValueError as exc:
            raise CodecError(f"{where}{exc}") from None

    def _output(self, frame: bytes | memoryview, expected_size: int, where: str) -> Any:
        raw = frame if isinstance(frame, bytes) else bytes(frame)  # openzl takes bytes only
        version = frame_format_version(raw)
        if version is not None and not MIN_READ_VERSION <= version <= MAX_READ_VERSION:
            # openzl calls such a frame corrupt; say what it is instead
            raise CodecError(f"{where}OpenZL frame of format version {version}; the installed "
                             f"openzl {OPENZL_VERSION} decodes format versions "
                             f"{MIN_READ_VERSION}..{MAX_READ_VERSION}"
                             + (" (a newer openzl is needed)" if version > MAX_READ_VERSION
                                else ""))
        try:
            info = zl.FrameInfo(raw)
            if info.num_outputs != 1:
                raise CodecError(f"{where}frame has {info.num_outputs} outputs, expected 1")
            size = info.output_content_size(0)
            if size != expected_size:
                raise CodecError(f"{where}frame holds {size} bytes, index says {expected_size}")
            outs = self._dctx.decompress(raw)
        except CodecError:
            raise
        except Exception as exc:  # openzl raises RuntimeError/ValueError on bad frames
            first = next((ln for ln in str(exc).splitlines() if "error string" in ln), str(exc))
            raise CodecError(f"{where}not a valid OpenZL frame ({first.strip()[:200]})") from None
        content = outs[0].content
        if content.content_size != expected_size:
            raise CodecError(f"{where}decoded {content.content_size} bytes, index says "
                             f"{expected_size}")
        return content


def content_size(frame: bytes | memoryview, *, where: str = "") -> int:
    """The size a frame declares for its one output, read from its header (nothing is
    decoded): a packed blob's decoded length (FORMAT §3). Untrusted: callers bound it."""
    view = memoryview(frame)
    if view.format != "B":
        view = view.cast("B")
    if len(view) >= 8 and bytes(view[:4]) == zlframe.MAGIC_V8:
        n = int.from_bytes(view[4:8], "little")  # bytes [4..8): the size of our two shapes
        if zlframe.parse(view, n) is not None:
            return n
    try:
        info = zl.FrameInfo(bytes(view))
        if info.num_outputs != 1:
            raise CodecError(f"{where}frame has {info.num_outputs} outputs, expected 1")
        return int(info.output_content_size(0))
    except CodecError:
        raise
    except Exception as exc:  # openzl raises RuntimeError/ValueError on bad frames
        raise CodecError(f"{where}not a valid OpenZL frame ({str(exc)[:200]})") from None


#: An OpenZL frame starts with this u32 LE plus its format version
#: (``ZL_getFormatVersionFromFrame``).
FRAME_MAGIC_BASE = 0xD7B1A5C0
#: Format versions the installed openzl decodes, and its own version (for error messages).
MIN_READ_VERSION = int(zl.MIN_FORMAT_VERSION)
MAX_READ_VERSION = int(zl.MAX_FORMAT_VERSION)
OPENZL_VERSION = (f"{zl.LIBRARY_VERSION_MAJOR}.{zl.LIBRARY_VERSION_MINOR}."
                  f"{zl.LIBRARY_VERSION_PATCH}")


def frame_format_version(frame: bytes | memoryview) -> int | None:
    """The format version an OpenZL frame's magic declares, or None when its first 4 bytes
    are no OpenZL magic (versions up to 255 are recognised, supported or not)."""
    if len(frame) < 4:
        return None
    version = int.from_bytes(frame[:4], "little") - FRAME_MAGIC_BASE  # bytes [0..4): magic
    return version if 0 <= version < 256 else None


_LOCAL = threading.local()  # contexts are not thread-safe: one set per thread


def encoder(level: int = DEFAULT_LEVEL) -> Encoder:
    """This thread's encoder for ``level``."""
    encoders = getattr(_LOCAL, "encoders", None)
    if encoders is None:
        encoders = _LOCAL.encoders = {}
    enc = encoders.get(level)
    if enc is None:
        enc = encoders[level] = Encoder(level)
    return enc


def decoder() -> Decoder:
    """This thread's decoder."""
    dec = getattr(_LOCAL, "decoder", None)
    if dec is None:
        dec = _LOCAL.decoder = Decoder()
    return dec
