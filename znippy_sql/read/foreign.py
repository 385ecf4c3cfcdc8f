"""Archives of another writer's newer releases: what is understood, what is skipped, and who
wrote them (docs/format.md §10, "Archives from releases after 0.8").

An archive this project wrote records a BLAKE3 of every manifest row (``znippy.section_
blake3``); its reserved sections have the shapes this project writes, and anything else in
them is damage (a ``FormatError`` where it is read), as in any archive that does not name its
writer. An archive of the Rust tool has no such digests and names its writer in the schema
metadata of its data sub-indexes (``znippy_format_version``): there a reserved section of a
name this reader does not know, or of a known name with a shape it does not expect (the Rust
tool's own ``__lookup__``, ``__trie__`` or ``__meta__`` of a release after 0.8), is **not
understood**. It is skipped for reading files — without a
usable ``__lookup__`` and ``__trie__`` the lookup is built in memory from the data
sub-indexes, as for a Rust 0.8 archive (:mod:`.memlookup`) — and ``info`` and ``verify``
report it as "not understood (schema …)".

The writer: the Rust tool records ``znippy_format_version`` in every data sub-index's schema
metadata (3 in 0.7/0.8, ``build_arrow_metadata_for_config``). A larger value is a release this
reader was not written against: ``info`` says so, and every read failure on such an archive
(:func:`with_writer`) names the version that made it.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import pyarrow as pa

from ..errors import NotFoundError, ZnippyError
from ..format.ipc import describe, read_schema
from ..format.manifest import ManifestRow
from ..format.rangeio import RangeSource
from ..format.schema import (ARROW_SECTIONS, GIT_GRAPH, GIT_OID, GIT_REACH, GIT_REFS,
                             GIT_SECRETS, LOOKUP,
                             META, META_SCHEMA, RAW_SECTIONS, RESERVED_PKG_TYPE,
                             SIGN_ARCHIVE, SIGN_ARTIFACTS, TRIE, GroupKey)
from ..format.validate import lookup_schema_problem
from ..interop.layouts import DELTA, FSMETA
from ..interop.meta import is_typed


class Manifested(Protocol):
    """What this module reads of an archive: its manifest and the ranges it points at (a
    :class:`~.tail.Tail`, or the ``Archive`` over one), and where it keeps what it found."""

    @property
    def path(self) -> str: ...
    @property
    def source(self) -> RangeSource: ...
    @property
    def manifest_rows(self) -> list[ManifestRow]: ...
    @property
    def memo(self) -> dict[str, Any]: ...
    @property
    def groups(self) -> list[GroupKey]: ...
    @property
    def sections(self) -> list[str]: ...
    def manifest_row(self, key: GroupKey) -> ManifestRow: ...
    def range_bytes(self, key: GroupKey, what: str) -> pa.Buffer: ...
    def has_section(self, name: str) -> bool: ...
    def fetch_paths(self) -> None: ...

#: The newest ``znippy_format_version`` this reader was written against (Rust 0.7/0.8 write 3).
KNOWN_RUST_FORMAT_VERSION = 3
RUST_VERSION_KEY = "znippy_format_version"
#: Reserved names this reader knows (any other reserved name is not understood).
KNOWN_SECTIONS = frozenset({LOOKUP, TRIE, META, GIT_OID, GIT_GRAPH, GIT_REACH, GIT_REFS,
                            GIT_SECRETS,
                            SIGN_ARTIFACTS, SIGN_ARCHIVE, DELTA, FSMETA})  # the last two: interop/
#: fst format versions the Rust ``fst`` crate 0.4 (and ``ducer``) reads: the header's first u64
_FST_VERSIONS = range(1, 4)
_ARROW_MARK = b"\xff\xff\xff\xff"

_F = TypeVar("_F", bound=Callable[..., Any])


def own_writer(archive: Manifested) -> bool:
    """Written by this project: its manifest records the sections' BLAKE3s."""
    return any(r.blake3 is not None for r in archive.manifest_rows)


def rust_writer(archive: Manifested) -> bool:
    """Written by the Rust tool: no section digests, and its data sub-indexes carry the Rust
    writer's ``znippy_format_version`` (every release that is public writes it). Only such an
    archive's unexpected sections are "not understood"; in any other archive they are damage.
    Decided once per archive (one read of a schema message, for an archive without digests)."""
    known = archive.memo.get("rust_writer")
    if known is None:
        try:
            known = not own_writer(archive) and writer(archive) is not None
        except ZnippyError:
            known = False
        archive.memo["rust_writer"] = known
    return bool(known)


def section_status(archive: Manifested, name: str) -> str | None:
    """None when this reader understands the reserved section ``name`` of a foreign
    archive, else ``"not understood (schema …)"`` (``(raw bytes, N bytes)`` for a raw one)."""
    key = GroupKey(RESERVED_PKG_TYPE, "", name)
    row = archive.manifest_row(key)
    buf = archive.range_bytes(key, name)
    head = buf.slice(0, min(buf.size, 16)).to_pybytes()
    is_arrow = head[:4] == _ARROW_MARK
    if name == TRIE:
        if len(head) == 16 and struct.unpack("<Q", head[:8])[0] in _FST_VERSIONS:
            return None
        return f"not understood (not an fst of a version this reader knows, {row.index_len} " \
               "bytes)"
    if name in RAW_SECTIONS or (name not in ARROW_SECTIONS and not is_arrow):
        return None if name in KNOWN_SECTIONS else \
            f"not understood (raw bytes, {row.index_len} bytes)"
    try:
        schema = read_schema(buf, name, archive.path)
    except ZnippyError:
        return f"not understood (no readable Arrow schema, {row.index_len} bytes)"
    if name not in KNOWN_SECTIONS or not _expected(name, schema):
        return f"not understood (schema {describe(schema)})"
    return None


def _expected(name: str, schema: pa.Schema) -> bool:
    if name == LOOKUP:  # the base columns, and inner_offset with packed blobs (FORMAT §3)
        return lookup_schema_problem(schema) is None
    if name == META:  # names and types; nullability as meta_problem takes it
        return [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in META_SCHEMA] \
            or is_typed(schema)  # the Rust 0.9.13+ typed layout (interop/meta.py)
    return True  # the git sections: their readers check them (git-sections.md)


def not_understood(archive: Manifested) -> dict[str, str]:
    """Each reserved section of a foreign archive that this reader does not understand, with
    why (empty for any other writer's archive: there a wrong shape is damage)."""
    if not rust_writer(archive):
        return {}
    out = {}
    for name in archive.sections:
        try:
            status = section_status(archive, name)
        except ZnippyError as exc:
            status = f"not understood ({exc.problem})"
        if status is not None:
            out[name] = status
    if LOOKUP in out and archive.has_section(TRIE) and TRIE not in out:
        out[TRIE] = f"not used (it maps paths to rows of the {LOOKUP} not understood)"
    for name, other in ((LOOKUP, TRIE), (TRIE, LOOKUP)):
        if archive.has_section(name) and not archive.has_section(other) and name not in out:
            out[name] = f"not used (no {other} beside it)"
    return out


def lookup_usable(archive: Manifested) -> bool:
    """A foreign archive's ``__lookup__`` and ``__trie__`` are both there and understood."""
    if not (archive.has_section(LOOKUP) and archive.has_section(TRIE)):
        return False
    if getattr(archive.source, "fetches", False):
        archive.fetch_paths()  # one request for both, as reading them would
    return all(section_status(archive, name) is None for name in (LOOKUP, TRIE))


def writer(archive: Manifested) -> dict[str, Any] | None:
    """Who wrote a foreign archive, from its first data sub-index's schema metadata:
    ``{"key", "version", "newer"}`` (None when it names no version)."""
    for key in archive.groups:
        meta = _schema_message(archive, key).metadata or {}
        value = meta.get(RUST_VERSION_KEY.encode())
        if value is None:
            return None
        text = value.decode("utf-8", "backslashreplace")
        newer = text.isdigit() and int(text) > KNOWN_RUST_FORMAT_VERSION
        return {"key": RUST_VERSION_KEY, "version": text, "newer": newer}
    return None


def _schema_message(archive: Manifested, key: GroupKey) -> pa.Schema:
    """The schema of a stream, reading its first message only (continuation marker, metadata
    length, metadata: the whole range of a big sub-index is not fetched for it)."""
    row = archive.manifest_row(key)
    head = archive.source.read(row.index_offset, min(row.index_len, 8), "sub-index")
    data = head.to_pybytes()
    size = row.index_len
    if len(data) == 8:
        marked = data[:4] == _ARROW_MARK
        n = struct.unpack("<I", data[4:8] if marked else data[:4])[0]
        size = min(row.index_len, n + (8 if marked else 4))
    buf = archive.source.read(row.index_offset, size, "sub-index")
    return read_schema(buf, "sub-index", archive.path)


def writer_text(info: dict[str, Any]) -> str:
    """``znippy_format_version=5, newer than 3, the newest this reader knows``."""
    text = f"{info['key']}={info['version']}"
    if info["newer"]:
        text += f", newer than {KNOWN_RUST_FORMAT_VERSION}, the newest this reader knows"
    return text


def newer_writer_note(archive: Manifested) -> str | None:
    """What a read failure adds on an archive of a newer writer (None otherwise); computed
    once, and never itself a failure."""
    cached = archive.memo.get("newer_note", False)
    if cached is not False:
        return cached
    note = None
    try:
        if not own_writer(archive):
            info = writer(archive)
            if info is not None and info["newer"]:
                note = f"written by a newer znippy: {writer_text(info)}"
    except (ZnippyError, ValueError):
        note = None
    archive.memo["newer_note"] = note
    return note


def with_writer(fn: _F) -> _F:
    """An :class:`~.reader.Archive` method whose read failures name a newer writer."""
    @functools.wraps(fn)
    def wrapper(self: Manifested, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except ZnippyError as exc:
            raise noted(self, exc) from None
    return wrapper  # type: ignore[return-value]  # wraps(fn): fn's signature


def noted(archive: Manifested, exc: ZnippyError) -> ZnippyError:
    """``exc``, or the same error saying which newer writer made the archive."""
    if getattr(exc, "writer_noted", False) or isinstance(exc, NotFoundError) \
            or exc.path != archive.path:
        return exc
    note = newer_writer_note(archive)
    if note is None:
        exc.writer_noted = True  # type: ignore[attr-defined]  # a mark on this instance
        return exc
    new = type(exc)(f"{exc.problem} ({note})", path=exc.path)
    new.writer_noted = True  # type: ignore[attr-defined]  # a mark on this instance
    return new


# -- unsealed (hot) archives --------------------------------------------------------------------
#: The columns that make an Arrow stream an index journal: a hot archive's index rows (FORMAT
#: §3), or the git push path's acked pack extents (git/journal.py).
_JOURNAL_COLUMNS = (("relative_path", "blob_offset"), ("blob_offset", "blob_size"))
#: This project's own siblings of an archive (the append journal, staging copies).
_OWN_SIBLINGS = (".znippy-journal", ".znippy-staging")
UNSEALED = "this is an unsealed archive: seal it with the tool that wrote it"


def unsealed_problem(src: Any, path: str) -> str | None:
    """Why a file without a footer is an unsealed archive (None: its bytes do not say so).

    Recognised: (1) the file is an index journal — an Arrow IPC stream whose schema has
    ``relative_path`` and ``blob_offset`` (a hot archive's index rows) or ``blob_offset`` and
    ``blob_size`` (a git push's extents); (2) such a journal lies beside it (a sibling
    ``<name>.*``). A file of blobs alone is told by :mod:`.nofooter`."""
    head = src.read(0, min(src.size, 1 << 16), "file start") if src.size else None
    data = b"" if head is None else head.slice(0, min(head.size, 8)).to_pybytes()
    if data[:4] == _ARROW_MARK and head is not None and _is_index(head, path):
        return f"{UNSEALED} (this file is the index journal of an archive in its hot phase, " \
               "an Arrow IPC stream of index rows)"
    journal = _journal_beside(path)
    if journal is not None:
        return f"{UNSEALED} (no footer yet; its index rows are in the journal {journal} " \
               "beside it)"
    return None


def _is_index(buf: pa.Buffer, path: str) -> bool:
    try:
        names = read_schema(buf, "journal", path).names
    except (ZnippyError, UnicodeDecodeError):
        return False
    return any(all(n in names for n in columns) for columns in _JOURNAL_COLUMNS)


def _journal_beside(path: str) -> str | None:
    """A sibling ``<name>.<suffix>`` (a file, or a directory's files) that is an index
    journal; None for a URL or when there is none."""
    import os

    if "://" in path:
        return None
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = sorted(e for e in os.listdir(folder) if e.startswith(name + ".")
                         and not any(e == name + own or e.startswith(name + own)
                                     for own in _OWN_SIBLINGS))
    except OSError:
        return None
    for entry in entries[:16]:
        full = os.path.join(folder, entry)
        files = [full]
        if os.path.isdir(full):
            try:
                files = [os.path.join(full, f) for f in sorted(os.listdir(full))[:16]]
            except OSError:
                continue
        for f in files:
            try:
                with open(f, "rb") as fh:
                    head = fh.read(1 << 16)
            except OSError:
                continue
            if head[:4] == _ARROW_MARK and _is_index(pa.py_buffer(head), f):
                return f
    return None
