"""Helpers for the query-layer tests: a small mixed corpus, and expectations computed from the
archive's bytes with pyarrow, struct and blake3 alone (no znippy_sql reader code)."""

from __future__ import annotations

import struct
from collections import defaultdict
from pathlib import Path
from typing import Any

import blake3
import pyarrow as pa

from conftest import text_bytes
from znippy_sql import Entry

BASE = ["relative_path", "chunk_seq", "fdata_offset", "compressed", "uncompressed_size",
        "blob_offset", "blob_size", "checksum"]
NAMES = {0: "raw", 1: "maven", 4: "pypi"}


def text(n: int, seed: int) -> bytes:
    return text_bytes(n, seed)


def corpus() -> list[Entry]:
    """Two repos, three package types (untyped, maven, pypi), single- and multi-chunk files."""
    return [
        Entry("org/acme/lib/1.0/lib-1.0.pom", data=text(900, 1), repo="central", pkg_type=1),
        Entry("org/acme/lib/1.0/lib-1.0.jar", data=bytes(range(256)) * 3, repo="central",
              pkg_type=1),
        Entry("org/acme/app/2.1/app-2.1-sources.jar", data=text(300, 2), repo="central",
              pkg_type=1),
        Entry("docs/readme.txt", data=text(120, 3), repo="central"),
        Entry("docs/empty.txt", data=b"", repo="central"),
        Entry("packages/demo-1.0-py3-none-any.whl", data=text(700, 4), repo="local",
              pkg_type="pypi"),
        Entry("packages/demo-1.0.tar.gz", data=text(200, 5), repo="local", pkg_type="pypi"),
        Entry("notes/a.txt", data=text(1000, 6), repo="local"),
        Entry("notes/b.md", data=text(40, 7), repo="local"),
        Entry("notes/sub/c.txt", data=text(513, 8), repo="local"),
    ]


def contents() -> dict[str, bytes]:
    return {e.relative_path: e.data for e in corpus()}  # type: ignore[misc]


class RawView:
    """The archive's manifest, sub-indexes and sections read with pyarrow alone."""

    def __init__(self, path: Path) -> None:
        self.data = Path(path).read_bytes()
        assert self.data[-16:-8] == b"ZNPYMIDX"
        (moff,) = struct.unpack("<Q", self.data[-8:])
        self.manifest = pa.ipc.open_stream(self.data[moff:-16]).read_all()
        self.rows = self.manifest.to_pylist()

    def stream(self, row: dict[str, Any]) -> pa.Table:
        off, n = row["index_offset"], row["index_len"]
        return pa.ipc.open_stream(self.data[off:off + n]).read_all()

    def raw(self, name: str) -> bytes:
        row = next(r for r in self.rows if r["module_name"] == name and r["pkg_type"] == -1)
        return self.data[row["index_offset"]:row["index_offset"] + row["index_len"]]

    def section(self, name: str) -> pa.Table:
        return pa.ipc.open_stream(self.raw(name)).read_all()

    def groups(self) -> list[tuple[dict[str, Any], pa.Table]]:
        data = [r for r in self.rows if r["pkg_type"] != -1]
        data.sort(key=lambda r: (r["pkg_type"], r["repo"], r["module_name"]))
        return [(r, self.stream(r)) for r in data]

    def chunks(self) -> list[dict[str, Any]]:
        out = []
        for row, table in self.groups():
            for r in table.to_pylist():
                r.pop("pkg_type", None)
                r.update(repo=row["repo"], pkg_type=row["pkg_type"],
                         pkg_type_name=NAMES.get(row["pkg_type"], str(row["pkg_type"])),
                         module_name=row["module_name"])
                out.append(r)
        return out

    def module_columns(self) -> list[str]:
        cols: list[str] = []
        for _, table in self.groups():
            for name in table.schema.names:
                if name not in BASE and name not in ("pkg_type", "inner_offset") \
                        and name not in cols:
                    cols.append(name)
        return cols

    def shares(self) -> dict[tuple[str, int], int]:
        """(relative_path, chunk_seq) -> the row's share of its blob (docs/format.md,
        "Stored sizes"), computed row by row in plain Python."""
        blobs: dict[tuple[int, int, bool], dict[tuple[int, int], list[tuple[bytes, int]]]]
        blobs = defaultdict(lambda: defaultdict(list))
        for r in self.chunks():
            blob = (r["blob_offset"], r["blob_size"], r["compressed"])
            piece = (r.get("inner_offset") or 0, r["uncompressed_size"])
            blobs[blob][piece].append((r["relative_path"].encode(), r["chunk_seq"]))
        out: dict[tuple[str, int], int] = {}
        for (_, size, _), pieces in blobs.items():
            order = sorted(pieces)
            weights = [u for _, u in order]
            if not sum(weights):
                weights = [1] * len(order)
            total, running = sum(weights), 0
            for piece, w in zip(order, weights):
                share = size * (running + w) // total - size * running // total
                running += w
                rows = sorted(pieces[piece])
                for i, (path, seq) in enumerate(rows):
                    out[(path.decode(), seq)] = share if i == 0 else 0
        return out

    def files(self) -> list[dict[str, Any]]:
        """One dict per file, sorted by path bytes, every module column (None if absent)."""
        extra = self.module_columns()
        shares = self.shares()
        by_path: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self.chunks():
            by_path[r["relative_path"]].append(r)
        out = []
        for path, rows in by_path.items():
            rows.sort(key=lambda r: r["chunk_seq"])
            assert [r["chunk_seq"] for r in rows] == list(range(len(rows)))
            h = blake3.blake3(b"znippy-file-v1\0" + path.encode() + b"\0"
                              + struct.pack("<I", len(rows)))
            for r in rows:
                h.update(struct.pack("<I", r["chunk_seq"]) + r["checksum"])
            first = rows[0]
            rec = {
                "relative_path": path, "repo": first["repo"], "pkg_type": first["pkg_type"],
                "pkg_type_name": first["pkg_type_name"], "module_name": first["module_name"],
                "size": sum(r["uncompressed_size"] for r in rows),
                "stored_size": sum(shares[(path, r["chunk_seq"])] for r in rows),
                "blob_size": sum(r["blob_size"] for r in rows),
                "chunks": len(rows), "compressed": any(r["compressed"] for r in rows),
                "digest": h.digest(),
            }
            rec.update({c: first.get(c) for c in extra})
            out.append(rec)
        return sorted(out, key=lambda r: r["relative_path"].encode())


def by_path(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: (r["relative_path"].encode(), r.get("chunk_seq", 0)))
