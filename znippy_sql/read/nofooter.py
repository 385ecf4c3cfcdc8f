"""Why a file has no ``ZNPYMIDX`` footer, as far as its bytes tell (docs/format.md §10).

In this order:

1. **Unsealed**: the file is an index journal, or one lies beside it (a hot archive of the
   Rust tool, a git push's blob file): ``UnsealedArchiveError``, "seal it with the tool that
   wrote it" (:func:`.foreign.unsealed_problem`).
2. **Truncated**: its last bytes are the start of a footer, or an archive's index streams
   (an Arrow IPC schema message with an index's columns) lie in its last bytes: the archive
   was cut short (an interrupted copy or download) or is damaged: ``FormatError``.
3. **Blobs only**: it starts with an OpenZL frame and nothing else tells: an archive cut
   inside its blobs, or the blob region of an unsealed archive or an Iceberg sidecar whose
   index lives elsewhere; the message says both (``UnsealedArchiveError``).
4. Anything else: too short, or not a znippy archive (``FormatError``).
"""

from __future__ import annotations

import struct

import pyarrow as pa

from ..errors import FormatError, UnsealedArchiveError, ZnippyError
from ..format.footer import FOOTER_LEN, footer_left
from ..format.ipc import read_schema
from ..format.rangeio import RangeSource
from .foreign import unsealed_problem

#: An OpenZL frame starts with this u32 (LE) plus its format version (docs/format.md §6).
_OPENZL_MAGIC = 0xD7B1A5C0
_OPENZL_VERSIONS = range(1, 64)
#: An Arrow IPC message starts with this continuation marker, then its metadata length (i32).
_MARK = b"\xff\xff\xff\xff"
#: The columns that make a schema an archive's index stream: a data sub-index (or the lookup),
#: or the manifest.
_INDEX_COLUMNS = (("relative_path", "blob_offset"), ("pkg_type", "index_offset"))
#: Words of an index's schema message: its writer's metadata keys (``znippy.codec``, the Rust
#: tool's ``znippy_format_version``), its column names (a message cut before its end).
_INDEX_WORDS = (b"znippy", b"relative_path", b"index_offset")
#: How far back from the end index streams are looked for: a local file is mapped, a remote
#: one costs a request per step; markers tried at most (raw blobs may hold many).
_SCAN_LOCAL, _SCAN_REMOTE, _STEP, _TRIES = 64 << 20, 8 << 20, 8 << 20, 4096
_MAX_SCHEMA = 1 << 20

BLOBS_ONLY = ("truncated or damaged, or unsealed: no ZNPYMIDX footer and no index, and it "
              "starts with an OpenZL frame: an archive cut short inside its blobs, or the "
              "blob region of an unsealed archive or an Iceberg sidecar whose index lives "
              "elsewhere (then seal it with the tool that wrote it; a Rust Iceberg sidecar "
              "opens with its warehouse: open_archive(path, warehouse=DIR), or seals with "
              "`znippy-sql store seal --sidecar PATH --warehouse DIR`)")


#: nothing in the bytes tells a Rust Iceberg sidecar whose first blob is stored raw from any
#: other file: the line says where such a sidecar's index is
NOT_AN_ARCHIVE = ("no ZNPYMIDX footer: not a znippy archive (v0.7+), or the blob sidecar of "
                  "an Iceberg-backed archive: open that with its warehouse "
                  "(open_archive(path, warehouse=DIR))")


def no_footer(src: RangeSource, path: str) -> FormatError:
    """The error for ``src``, which has no footer (see the module's docstring)."""
    unsealed = unsealed_problem(src, path)
    if unsealed is not None:
        return UnsealedArchiveError(unsealed, path=path)
    cut = cut_short(src, path)
    if cut is not None:
        return FormatError(cut, path=path)
    if _starts_with_frame(src):
        return UnsealedArchiveError(BLOBS_ONLY, path=path)
    if src.size < FOOTER_LEN:
        return FormatError(f"file is {src.size} bytes, too short for a footer", path=path)
    return FormatError(NOT_AN_ARCHIVE, path=path)


def cut_short(src: RangeSource, path: str) -> str | None:
    """What shows that ``src`` is an archive cut short, or None."""
    n = min(src.size, FOOTER_LEN - 1)
    left = footer_left(src.read(src.size - n, n, "file end").to_pybytes())
    if left:
        return f"truncated or damaged: the file ends {left} bytes into its {FOOTER_LEN}-byte " \
               "ZNPYMIDX footer (cut short: copy or download it again)"
    at = index_stream(src, path)
    if at is not None:
        return f"truncated or damaged: no ZNPYMIDX footer, but an archive's index streams " \
               f"start at offset {at} of its {src.size} bytes (cut short inside its tail: " \
               "copy or download it again)"
    return None


def index_stream(src: RangeSource, path: str) -> int | None:
    """The offset of an index stream's schema message among the last bytes of ``src``."""
    low = max(0, src.size - (_SCAN_REMOTE if "://" in path else _SCAN_LOCAL))
    end, tries = src.size, 0
    while end > low and tries < _TRIES:
        start = max(low, end - _STEP)
        data = src.read(start, end - start, "file end").to_pybytes()
        hit = len(data)
        while tries < _TRIES:
            hit = data.rfind(_MARK, 0, hit + len(_MARK) - 1)
            if hit < 0:
                break
            tries += 1
            if _is_index_schema(src, start + hit, data, hit, path):
                return start + hit
        end = start + len(_MARK) - 1 if start > low else low  # a marker across the step
    return None


def _is_index_schema(src: RangeSource, at: int, data: bytes, hit: int, path: str) -> bool:
    if at + 8 > src.size:
        return False
    head = data[hit : hit + 8] if hit + 8 <= len(data) else \
        src.read(at, 8, "file end").to_pybytes()
    length = struct.unpack("<i", head[4:8])[0]
    if not 8 <= length <= _MAX_SCHEMA:
        return False
    if at + 8 + length > src.size:  # cut inside this message: an index's words in what is left
        rest = data[hit + 8 : hit + 8 + length]
        return any(word in rest for word in _INDEX_WORDS)
    message = pa.py_buffer(data[hit : hit + 8 + length]) if hit + 8 + length <= len(data) \
        else src.read(at, 8 + length, "file end")
    try:
        names = set(read_schema(message, "index", path).names)
    except (ZnippyError, UnicodeDecodeError):
        return False
    return any(names.issuperset(columns) for columns in _INDEX_COLUMNS)


def _starts_with_frame(src: RangeSource) -> bool:
    if src.size < 4:
        return False
    magic = struct.unpack("<I", src.read(0, 4, "file start").to_pybytes())[0]
    return magic - _OPENZL_MAGIC in _OPENZL_VERSIONS
