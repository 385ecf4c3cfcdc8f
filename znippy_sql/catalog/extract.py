"""The files of a query result, read from the archives that hold them.

Before anything is written: the result's paths are checked as ``extract`` checks them, and the
layout is checked for clashes (two archives with one stem; with ``flat``, one path in two
archives). Then per archive, opened once: each file's digest from the archive's own index is
compared with the catalog's (a file changed since ``add`` is not extracted), and the archive's
:meth:`~znippy_sql.read.reader.Archive.extract` reads the blobs by byte range, verifies every
chunk's BLAKE3 and writes under ``dest/<stem>/`` (or ``dest/``).
"""

from __future__ import annotations

import os
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..errors import CatalogError, ZnippyError
from ..format.files import file_digest
from ..format.paths import check_relative_path
from ..read.reader import open_archive
from .opened import OpenCatalog
from .schema import FILES



@dataclass
class CatalogExtractReport:
    dest: str
    archives: int = 0
    files: int = 0
    bytes_written: int = 0
    seconds: float = 0.0
    #: written files, relative to ``dest`` (``<stem>/<relative_path>`` or the path)
    written: list[str] = field(default_factory=list)
    #: ``<archive_uri>:<relative_path>`` → why it was not written
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def stem(uri: str) -> str:
    """An archive's directory name in an extract: its file name without ``.znippy``."""
    name = posixpath.basename(uri.split("?", 1)[0].rstrip("/")) if "://" in uri \
        else os.path.basename(uri)
    return name[: -len(".znippy")] if name.endswith(".znippy") and len(name) > 7 else name


def as_table(result: Any) -> pa.Table:
    """A query result as Arrow: a ``pa.Table``, or anything exporting an Arrow stream
    (a DuckDB relation, a Polars frame, a record batch reader)."""
    if isinstance(result, pa.Table):
        return result
    try:
        if hasattr(result, "__arrow_c_stream__"):
            return pa.table(result)
        for attr in ("to_arrow_table", "to_arrow", "arrow"):
            fn = getattr(result, attr, None)
            if callable(fn):
                got = fn()
                return got if isinstance(got, pa.Table) else pa.table(got)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise CatalogError(f"cannot read a query result from {type(result).__name__}: "
                           f"{exc}") from None
    raise CatalogError(f"a {type(result).__name__} is not a query result (give a pyarrow "
                       "Table, a DuckDB relation or a Polars frame)")


def extract_result(cat: OpenCatalog, result: Any, dest: str, *, flat: bool = False,
                   workers: int | None = None,
                   open_options: Mapping[str, Any] | None = None) -> CatalogExtractReport:
    t0 = time.perf_counter()
    table = as_table(result)
    for col in ("archive_uri", "relative_path"):
        if col not in table.column_names:
            raise CatalogError(f"the query result has no {col!r} column (has "
                               f"{', '.join(table.column_names) or 'none'})", path=dest)
    wanted = _wanted(cat, table)
    _check_layout(wanted, flat=flat)
    report = CatalogExtractReport(dest=dest)
    for uri in sorted(wanted):
        files = wanted[uri]
        where = dest if flat else os.path.join(dest, stem(uri))
        prefix = "" if flat else stem(uri) + "/"
        report.archives += 1
        try:
            archive = open_archive(uri, **dict(open_options or {}))
        except (ZnippyError, OSError) as exc:
            why = exc.problem if isinstance(exc, ZnippyError) else str(exc)
            report.failed.update({f"{uri}:{p}": f"cannot open the archive: {why}"
                                  for p in files})
            continue
        with archive:
            ok = []
            for path, digest in files.items():
                info = archive.find(path)
                if info is None:
                    report.failed[f"{uri}:{path}"] = "not in the archive (changed since add?)"
                elif digest is not None and file_digest(
                        path, [c.checksum for c in info.chunks]) != digest:
                    report.failed[f"{uri}:{path}"] = "changed in the archive since add"
                else:
                    ok.append(path)
            if not ok:
                continue
            got = archive.extract(where, paths=ok, workers=workers)
        report.files += got.files
        report.bytes_written += got.bytes_written
        report.written.extend(prefix + p for p in got.written)
        report.failed.update({f"{uri}:{p}": why for p, why in got.failed.items()})
    report.seconds = time.perf_counter() - t0
    return report


def _wanted(cat: OpenCatalog, table: pa.Table) -> dict[str, dict[str, bytes | None]]:
    """``archive_uri`` → {relative_path: catalog digest}, each pair once, every path checked.
    Digests the result does not carry are read from ``files``."""
    uris = table.column("archive_uri").to_pylist()
    paths = table.column("relative_path").to_pylist()
    digests = (table.column("digest").to_pylist() if "digest" in table.column_names
               else [None] * len(paths))
    out: dict[str, dict[str, bytes | None]] = {}
    for uri, path, digest in zip(uris, paths, digests):
        if uri is None or path is None:
            raise CatalogError("the query result has a NULL archive_uri or relative_path")
        check_relative_path(path, archive=uri)
        out.setdefault(uri, {})[path] = bytes(digest) if digest is not None else None
    if "digest" not in table.column_names and out:
        _fill_digests(cat, out)
    return out


def _fill_digests(cat: OpenCatalog, wanted: Mapping[str, dict[str, bytes | None]]) -> None:
    from znippy_sql.catalog.pushdown import is_in  # pyiceberg's In, typed

    rows = cat.table(FILES).scan(row_filter=is_in("archive_uri", sorted(wanted)),
                                 selected_fields=("archive_uri", "relative_path", "digest")
                                 ).to_arrow()
    for uri, path, digest in zip(*(rows.column(c).to_pylist() for c in (
            "archive_uri", "relative_path", "digest"))):
        files = wanted.get(uri)
        if files is not None and path in files:
            files[path] = digest


def _check_layout(wanted: Mapping[str, Mapping[str, Any]], *, flat: bool) -> None:
    """Refuse, before anything is written, two archives writing to one place."""
    if flat:
        owner: dict[str, str] = {}
        for uri in sorted(wanted):
            for path in wanted[uri]:
                if path in owner:
                    raise CatalogError(f"--flat: {path!r} is in both {owner[path]} and {uri}",
                                       path=uri)
                owner[path] = uri
        return
    stems: dict[str, str] = {}
    for uri in sorted(wanted):
        s = stem(uri)
        try:
            check_relative_path(s, archive=uri)
        except ZnippyError:
            raise CatalogError(f"archive name {s!r} cannot be a directory name", path=uri) \
                from None
        if "/" in s:
            raise CatalogError(f"archive name {s!r} cannot be a directory name", path=uri)
        if s in stems:
            raise CatalogError(f"{stems[s]} and {uri} would both extract into {s}/ "
                               "(narrow the query, or use --flat)", path=uri)
        stems[s] = uri
