"""``Catalog.verify``: every archive's tail re-read and compared with the catalog's rows.

Per archive of ``archives``: ``missing`` (cannot be opened), ``changed`` (size or ETag/mtime
differ), ``root`` (its root digest now differs from the recorded one), ``rows`` (its file
count, the recorded count and its rows in ``files`` disagree), ``digests`` (the root over the
catalog's own ``files`` rows, or a row's digest recomputed from its ``chunks``, differs from the
record), ``index`` (its rows in the path index ``paths`` are not its ``files`` rows: count,
paths or digests; ``Catalog.reindex`` rebuilds it). ``orphans``: ``files`` rows of an archive
with no ``archives`` row (or ``paths`` rows: kind ``index``).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any

from ..format import b3 as blake3
import pyarrow as pa

from ..errors import ZnippyError
from ..format.files import FILE_DIGEST_PREFIX
from ..provenance.sign import archive_root
from .rows import local_identity, read_rows
from .index import PATHS
from .opened import OpenCatalog
from .schema import FILES


_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class Drift:
    archive_uri: str
    kind: str      # missing | changed | root | rows | digests | index | orphans
    detail: str


@dataclass
class CatalogVerifyReport:
    archives: int = 0
    rows: int = 0
    seconds: float = 0.0
    drift: list[Drift] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.drift


def verify_catalog(cat: OpenCatalog, *, open_options: Mapping[str, Any] | None = None
                   ) -> CatalogVerifyReport:
    t0 = time.perf_counter()
    report = CatalogVerifyReport()
    records = cat.archives()
    rows = cat.table(FILES).scan(selected_fields=(
        "archive_uri", "relative_path", "digest", "chunks")).to_arrow()
    report.archives, report.rows = records.num_rows, rows.num_rows
    by_uri = _split(rows)
    index = _split(cat.table(PATHS).scan(selected_fields=(
        "archive_uri", "relative_path", "digest")).to_arrow()) if cat.has_index else None
    for rec in records.to_pylist():
        uri = rec["archive_uri"]
        mine = by_uri.pop(uri, None)
        report.drift.extend(_check(uri, rec, mine, dict(open_options or {})))
        if index is not None:
            report.drift.extend(_check_index(uri, mine, index.pop(uri, None)))
    for uri, t in sorted(by_uri.items()):
        report.drift.append(Drift(uri, "orphans", f"{t.num_rows} files rows, no archives row"))
    for uri, t in sorted((index or {}).items()):
        if uri not in by_uri:  # with files orphans: the same crash, the same next add heals
            report.drift.append(Drift(uri, "index", f"{t.num_rows} paths rows, no archives "
                                      "row"))
    report.seconds = time.perf_counter() - t0
    return report


def _check(uri: str, rec: dict, mine: pa.Table | None, open_options: dict[str, Any]
           ) -> list[Drift]:
    out: list[Drift] = []
    count = 0 if mine is None else mine.num_rows
    if count != rec["files"]:
        out.append(Drift(uri, "rows", f"{count} files rows, recorded {rec['files']}"))
    if mine is not None:
        paths = mine.column("relative_path").to_pylist()
        digests = mine.column("digest").to_pylist()
        if archive_root(paths, digests) != rec["root_digest"]:
            out.append(Drift(uri, "digests", "the root over its files rows is not the "
                             "recorded root"))
        bad = _chunk_mismatches(mine)
        if bad:
            out.append(Drift(uri, "digests", f"{len(bad)} rows whose chunks do not give their "
                             f"digest (first: {bad[0]!r})"))
    try:
        ident = local_identity(uri)
        now = read_rows(uri, identity=ident, open_options=open_options)
    except ZnippyError as exc:
        return [*out, Drift(uri, "missing", exc.problem)]
    if (now.size, now.etag_or_mtime) != (rec["size"], rec["etag_or_mtime"]):
        out.append(Drift(uri, "changed", f"now {now.size} bytes, {now.etag_or_mtime}; "
                         f"recorded {rec['size']} bytes, {rec['etag_or_mtime']}"))
    if now.root_digest != rec["root_digest"]:
        out.append(Drift(uri, "root", f"root {now.root_digest.hex()[:16]}…, recorded "
                         f"{rec['root_digest'].hex()[:16]}…"))
    if now.files.num_rows != rec["files"] or now.chunk_rows != rec["chunk_rows"]:
        out.append(Drift(uri, "rows", f"the archive has {now.files.num_rows} files and "
                         f"{now.chunk_rows} chunks, recorded {rec['files']} and "
                         f"{rec['chunk_rows']}"))
    return out


def _check_index(uri: str, mine: pa.Table | None, indexed: pa.Table | None) -> list[Drift]:
    """The archive's ``paths`` rows against its ``files`` rows (both sorted by path)."""
    want = 0 if mine is None else mine.num_rows
    got = 0 if indexed is None else indexed.num_rows
    if got != want:
        return [Drift(uri, "index", f"{got} paths rows, {want} files rows")]
    if mine is not None and indexed is not None and not all(
            mine.column(c).equals(indexed.column(c)) for c in ("relative_path", "digest")):
        return [Drift(uri, "index", "its paths rows differ from its files rows")]
    return []


def _split(rows: pa.Table) -> dict[str, pa.Table]:
    """``files`` rows per archive, each sorted by path."""
    if rows.num_rows == 0:
        return {}
    rows = rows.sort_by([("archive_uri", "ascending"), ("relative_path", "ascending")])
    uris = rows.column("archive_uri").to_pylist()
    cuts = [0] + [i for i in range(1, len(uris)) if uris[i] != uris[i - 1]] + [len(uris)]
    return {uris[a]: rows.slice(a, b - a) for a, b in zip(cuts, cuts[1:])}


def _chunk_mismatches(rows: pa.Table) -> list[str]:
    """Paths whose FORMAT §4 file digest, recomputed from their ``chunks``' checksums,
    is not their ``digest``."""
    chunks = rows.column("chunks").combine_chunks()
    offsets = chunks.offsets.to_numpy()
    sums = chunks.flatten().field("checksum")
    flat = b"".join(sums.to_pylist()) if len(sums) else b""
    paths = rows.column("relative_path").to_pylist()
    digests = rows.column("digest").to_pylist()
    bad = []
    base = int(offsets[0]) if len(offsets) else 0
    for i, (path, digest) in enumerate(zip(paths, digests)):
        a, b = int(offsets[i]) - base, int(offsets[i + 1]) - base
        h = blake3.blake3(FILE_DIGEST_PREFIX)
        h.update(path.encode("utf-8") + b"\0" + _U32.pack(b - a))
        for seq, k in enumerate(range(a, b)):
            h.update(_U32.pack(seq) + flat[k * 32:(k + 1) * 32])
        if h.digest() != digest:
            bad.append(path)
    return bad


__all__ = ["CatalogVerifyReport", "Drift", "verify_catalog"]
