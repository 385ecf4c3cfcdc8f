"""The Rust-layout archives the tests read: their source files and how they were written.

Content is made to compress fast at the Rust writer's level 19 (a random 64 KiB block repeated
with a counter between copies), so multi-chunk files stay cheap to write.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import rust_layout as rl


def noise(n: int, seed: str) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"noise:{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def blocks(n: int, seed: str) -> bytes:
    """``n`` bytes that zstd 19 compresses fast: a 64 KiB noise block, repeated, numbered."""
    block = noise(65536, seed)
    out = bytearray()
    i = 0
    while len(out) < n:
        out += b"%08d" % i + block
        i += 1
    return bytes(out[:n])


def text(n: int, seed: str) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < n:
        out += f"{seed} line {i:06d}: alpha beta gamma delta\n".encode()
        i += 1
    return bytes(out[:n])


#: cores of the CLI cases: 200 cores → 180 workers → slices of 1,165,084 bytes (200 MiB / 180)
CLI_CORES = 200
SLICE = rl.cli_slice_size(CLI_CORES)


def cli_files() -> dict[str, bytes]:
    """The CLI case's files, in walk order."""
    return {
        "docs/readme.txt": text(3000, "readme"),
        "org/acme/lib/1.0/lib-1.0.jar": noise(2000, "jar"),  # skip-listed: raw
        "org/acme/lib/1.0/lib-1.0.pom": text(500, "pom"),  # Maven's own, compressed
        "empty.txt": b"",  # an empty file: a frame of 0 bytes, compressed = true
        "empty.jar": b"",  # empty and skip-listed: 0 raw bytes
        "random.bin": noise(3000, "random"),  # incompressible: the frame is larger
        "big/multi.bin": blocks(3 * SLICE + 12345, "multi"),  # 4 chunks
        "big/exact.bin": blocks(SLICE, "exact"),  # exactly one slice: a small file
        "big/over.bin": blocks(SLICE + 1, "over"),  # one byte over: 2 chunks
        "ünï/名前.txt": text(200, "uni"),
        "a/b/c/deep.log": text(40_000, "deep"),
    }


def stream_entries() -> list[rl.StreamEntry]:
    """The stream case's entries, in the order sent: three groups."""
    e = rl.StreamEntry
    return [
        e("r/README.md", text(1000, "r")),
        e("pkgs/a-1.0.jar", noise(1500, "a"), pkg_type=1, repo="central"),
        e("pkgs/a-1.0.pom", text(700, "apom"), pkg_type=1, repo="central"),
        e("big.bin", blocks(rl.STREAM_SLICE * 2 + 777, "big")),  # 3 chunks of 8 MiB rounds
        e("edge.bin", blocks(rl.STREAM_SLICE, "edge")),  # exactly 8 MiB: whole
        e("empty", b"", repo="local"),
        e("noise.dat", noise(5000, "n"), repo="local"),
        e("ünï.txt", text(300, "u"), repo="local"),
    ]


@dataclass
class Case:
    """One Rust-layout archive: ``files`` path → bytes, ``groups`` path → (pkg_type, repo)."""

    name: str
    write: Callable[[Path], rl.Written]
    files: dict[str, bytes]
    groups: dict[str, tuple[int, str]] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)


def cases() -> dict[str, Case]:
    files = cli_files()
    entries = stream_entries()
    wasm = {p: {"group_id": "org.acme", "artifact_id": "lib", "version": "1.0"}
            for p in files if p.startswith("org/")}
    return {
        "cli": Case("cli", lambda p: rl.write_cli(p, files, cores=CLI_CORES, seed=7), files,
                    {p: (rl.MAVEN, "") for p in files}, rl.rust_metadata(CLI_CORES)),
        "cli-wasm-plugin": Case(
            "cli-wasm-plugin",
            lambda p: rl.write_cli(p, files, cores=CLI_CORES, seed=11, repo="mirror",
                                   ext_fields=("group_id", "artifact_id", "version"), ext=wasm),
            files, {p: (rl.MAVEN, "mirror") for p in files}, rl.rust_metadata(CLI_CORES)),
        "stream": Case("stream", lambda p: rl.write_stream(p, entries, seed=5),
                       {e.relative_path: e.data for e in entries},
                       {e.relative_path: (e.pkg_type or 0, e.repo or "") for e in entries},
                       rl.rust_metadata(2)),
        "cli-zero": Case("cli-zero", lambda p: rl.write_cli(p, {}), {}),
        "stream-zero": Case("stream-zero", lambda p: rl.write_stream(p, []), {}),
    }


def newer_entries() -> list[rl.StreamEntry]:
    """The entries of the archives laid out as releases after 0.8 might (two groups)."""
    e = rl.StreamEntry
    return [
        e("docs/readme.txt", text(1200, "n-readme")),
        e("lib/a.jar", noise(900, "n-jar"), pkg_type=1, repo="central"),
        e("lib/a.pom", text(400, "n-pom"), pkg_type=1, repo="central"),
        e("big.bin", blocks(rl.STREAM_SLICE + 999, "n-big")),  # two chunks
        e("empty", b""),
        e("ünï.txt", text(150, "n-uni")),
    ]


def newer_cases() -> dict[str, Case]:
    """Archives of releases after 0.8, as far as the public pages describe them (stand-ins
    where they do not: tests/rust_layout.py says which)."""
    entries = newer_entries()
    files = {x.relative_path: x.data for x in entries}
    groups = {x.relative_path: (x.pkg_type or 0, x.repo or "") for x in entries}
    meta = {**rl.rust_metadata(2), "znippy_format_version": rl.NEWER_FORMAT_VERSION}
    paths = [x.relative_path for x in entries]

    def case(name: str, **kw: object) -> Case:
        return Case(name, lambda p: rl.write_newer(p, entries, seed=3, **kw),  # type: ignore[arg-type]
                    files, groups, meta)

    return {
        "newer-columns": case("newer-columns", extra=tuple(rl.EXTRA_COLUMNS)),
        "newer-lookup": case("newer-lookup", sections={
            "__lookup__": rl.foreign_lookup, "__trie__": lambda rows: (rl.foreign_trie(), 0)}),
        "newer-base-lookup": case("newer-base-lookup", sections={
            "__lookup__": rl.base_lookup, "__trie__": lambda rows: (rl.fst_trie(rows), 0)}),
        "newer-meta": case("newer-meta", sections={"__meta__": lambda rows: rl.typed_meta(paths)}),
        "newer-unknown": case("newer-unknown", sections={
            "__generations__": lambda rows: rl.unknown_arrow_section(),
            "__zz_raw__": lambda rows: (b"\x00raw bytes of a future section", 0)}),
        "newer-all": case("newer-all", extra=("units", "origin"), sections={
            "__lookup__": rl.foreign_lookup, "__trie__": lambda rows: (rl.foreign_trie(), 0),
            "__generations__": lambda rows: rl.unknown_arrow_section(),
            "__meta__": lambda rows: rl.typed_meta(paths)}),
    }
