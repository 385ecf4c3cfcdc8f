"""``__meta__``: searchable facts about the archive and its files (FORMAT §4).

One row per fact: ``relative_path`` (null for an archive-level fact), ``key``, ``value``. The
writer only writes the section when asked (``meta=``): no ``meta`` → no section → the archive
says "no metadata" (:func:`read_meta` returns ``None``); ``Meta(provenance=False)`` with no facts
→ an empty section → "metadata, none recorded".

Provenance facts (``created_at``, ``created_by``, ``source``) are archive-level facts added unless
``provenance=False``. ``created_at`` honours ``SOURCE_DATE_EPOCH`` (reproducible builds).

Rows are written in a canonical order (archive facts first, then by path bytes; by key inside;
values of one key in the order given), so the same facts always give the same bytes.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Union

import pyarrow as pa

from ..errors import ZnippyError
from ..format import build
from ..format.paths import check_relative_path
from ..format.schema import META, META_SCHEMA
from ..read.metasection import read_meta
from ..format.sections import ReservedSection

if TYPE_CHECKING:
    from ..read.reader import Archive

#: A per-file fact given as a row.
Fact = tuple[Union[str, None], str, str]
PROVENANCE_KEYS = ("created_at", "created_by", "source")


@dataclass(frozen=True)
class Meta:
    """What ``write_archive(..., meta=...)`` records.

    ``facts``: archive-level ``key → value`` (a value may be a list: several facts, one key).
    ``files``: per-file facts, as ``{path: {key: value}}`` or ``(path, key, value)`` rows
    (``path=None`` is an archive-level fact). ``provenance``: add ``created_at``,
    ``created_by`` and ``source`` (when known). ``created_at``/``created_by`` override the
    defaults (``SOURCE_DATE_EPOCH`` or now; ``znippy-sql <version>``).
    """

    facts: Mapping[str, Any] = field(default_factory=dict)
    files: Mapping[str, Mapping[str, Any]] | Iterable[Fact] = ()
    provenance: bool = True
    source: str | None = None
    created_at: str | None = None
    created_by: str | None = None


def created_at(now: float | None = None) -> str:
    """ISO 8601 UTC, seconds: ``SOURCE_DATE_EPOCH`` when set, else ``now`` (or the clock)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip():
        try:
            now = int(epoch.strip())
        except ValueError:
            raise ZnippyError(f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds") \
                from None
    stamp = _dt.datetime.fromtimestamp(
        _dt.datetime.now(_dt.timezone.utc).timestamp() if now is None else now,
        _dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def created_by() -> str:
    from ..version import __version__

    return f"znippy-sql {__version__}"


def meta_table(meta: Any) -> pa.Table:
    """The ``__meta__`` rows for ``meta`` (a :class:`Meta`, a ``{key: value}`` mapping of
    archive facts, ``True`` for provenance only, or a table with ``key``/``value`` columns)."""
    if isinstance(meta, pa.Table):
        return _from_table(meta)
    if meta is True:
        meta = Meta()
    elif isinstance(meta, Mapping):
        meta = Meta(facts=meta)
    elif not isinstance(meta, Meta):
        raise TypeError(f"meta= takes a Meta, a mapping, True or a pa.Table, not {meta!r}")
    rows: list[Fact] = []
    if meta.provenance:  # a fact the caller gives under the same key wins
        auto = {"created_at": meta.created_at or created_at(),
                "created_by": meta.created_by or created_by(),
                "source": None if meta.source is None else os.fspath(meta.source)}
        rows.extend((None, k, v) for k, v in auto.items() if v is not None and k not in meta.facts)
    for key, value in meta.facts.items():
        rows.extend((None, key, v) for v in _values(value))
    rows.extend(_file_facts(meta.files))
    return _canonical(rows)


def with_source(meta: Any, source: str | os.PathLike[str]) -> Any:
    """``meta`` with ``source`` filled in where it has none (what ``write_archive`` knows)."""
    if meta is True:
        return Meta(source=os.fspath(source))
    if isinstance(meta, Mapping):
        return Meta(facts=meta, source=os.fspath(source))
    if isinstance(meta, Meta) and meta.source is None:
        return replace(meta, source=os.fspath(source))
    return meta


def meta_section(meta: Any) -> ReservedSection:
    """The ``__meta__`` section the writer adds for ``write_archive(..., meta=meta)``."""
    return ReservedSection(META, meta_table(meta))


def facts(archive: "Archive", relative_path: str | None = None) -> dict[str, list[str]] | None:
    """``{key: [values]}`` of one file (or of the archive, ``relative_path=None``)."""
    table = read_meta(archive)
    if table is None:
        return None
    out: dict[str, list[str]] = {}
    for row in table.to_pylist():
        if row["relative_path"] == relative_path:
            out.setdefault(row["key"], []).append(row["value"])
    return out


#: per-file facts that describe a file's bytes on disk (issue 16 item 8): a file written
#: again takes its new ones, never keeps the old
POSIX_PREFIX = "posix."


def merge_meta(old: pa.Table | None, new: pa.Table | None, *,
               rewritten: Iterable[str] = ()) -> pa.Table | None:
    """The ``__meta__`` of an archive grown by an append: ``old`` kept and ``new`` merged in.

    A new archive-level fact replaces the old facts of its key; a new per-file fact replaces
    the old facts of its (path, key); the ``posix.*`` facts of every ``rewritten`` path (added
    or replaced by the append) go, since they described the old file. Everything else of
    ``old`` stays. ``None`` when neither has a section.
    """
    if old is None and new is None:
        return None
    if old is None:
        return new
    gone = set(rewritten)
    replaced: set[tuple[str | None, str]] = set()
    new_rows: list[Fact] = []
    if new is not None:
        new_rows = list(zip(new.column("relative_path").to_pylist(),
                            new.column("key").to_pylist(), new.column("value").to_pylist()))
        replaced = {(p, k) for p, k, _ in new_rows}
    kept = [(p, k, v) for p, k, v in zip(old.column("relative_path").to_pylist(),
                                         old.column("key").to_pylist(),
                                         old.column("value").to_pylist())
            if (p, k) not in replaced and not (p in gone and k.startswith(POSIX_PREFIX))]
    return _canonical([*kept, *new_rows])


def read_facts_file(path: str | os.PathLike[str]) -> list[Fact]:
    """Per-file facts from a JSON Lines file (docs/signing.md, "Metadata").

    Each line is an object: ``{"path": P, "key": K, "value": V}`` or ``{"path": P, K1: V1, ...}``
    (``relative_path`` may stand for ``path``; a missing or null path is an archive fact).
    """
    rows: list[Fact] = []
    where = os.fspath(path)
    try:
        fh = open(where, encoding="utf-8")
    except OSError as exc:
        raise ZnippyError(f"cannot read facts file: {exc.strerror}", path=where) from None
    with fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ZnippyError(f"line {n}: not JSON: {exc.msg}", path=where) from None
            if not isinstance(obj, dict):
                raise ZnippyError(f"line {n}: expected a JSON object", path=where)
            obj = dict(obj)
            p = obj.pop("path", None) if "path" in obj else obj.pop("relative_path", None)
            if p is not None and not isinstance(p, str):
                raise ZnippyError(f"line {n}: path must be a string", path=where)
            if set(obj) == {"key", "value"}:
                obj = {obj["key"]: obj["value"]}
            if not obj:
                raise ZnippyError(f"line {n}: no facts on this line", path=where)
            try:
                for key, value in obj.items():
                    rows.extend(_check((p, key, v)) for v in _values(value))
            except ZnippyError as exc:
                raise ZnippyError(f"line {n}: {exc.problem}", path=where) from None
    return rows


def parse_assignment(text: str) -> tuple[str, str]:
    """``key=value`` (``--meta``) → ``(key, value)``."""
    key, eq, value = text.partition("=")
    if not eq or not key.strip():
        raise ValueError(f"expected key=value, got {text!r}")
    return key.strip(), value


# -- helpers ------------------------------------------------------------------------------------
def _values(value: Any) -> Iterator[str]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _values(v)
    elif isinstance(value, str):
        yield value
    elif value is None:
        raise ZnippyError("a fact's value may not be null")
    else:
        yield json.dumps(value, ensure_ascii=False, sort_keys=True)


def _file_facts(files: Mapping[str, Mapping[str, Any]] | Iterable[Fact]) -> Iterator[Fact]:
    if isinstance(files, Mapping):
        for path, kv in files.items():
            for key, value in kv.items():
                yield from ((path, key, v) for v in _values(value))
    else:
        for row in files:
            path, key, value = row
            yield from ((path, key, v) for v in _values(value))


def _check(row: Fact) -> Fact:
    path, key, value = row
    if not isinstance(key, str) or not key:
        raise ZnippyError(f"fact key {key!r} must be a non-empty string")
    if not isinstance(value, str):
        raise ZnippyError(f"fact {key!r}: value {value!r} is not a string")
    if path is not None:
        check_relative_path(path)
    return path, key, value


def _canonical(rows: Iterable[Fact]) -> pa.Table:
    checked = [_check(r) for r in rows]
    checked.sort(key=lambda r: (r[0] is not None, (r[0] or "").encode("utf-8"), r[1]))
    return build.table({"relative_path": [r[0] for r in checked],
                        "key": [r[1] for r in checked], "value": [r[2] for r in checked]},
                       META_SCHEMA)


def _from_table(table: pa.Table) -> pa.Table:
    names = set(table.schema.names)
    if not {"key", "value"} <= names or not names <= {"relative_path", "key", "value"}:
        raise ZnippyError(f"a meta table has columns relative_path?, key, value; got "
                          f"{table.schema.names}")
    paths = table.column("relative_path").to_pylist() if "relative_path" in names \
        else [None] * table.num_rows
    return _canonical(zip(paths, table.column("key").to_pylist(),
                          table.column("value").to_pylist()))
