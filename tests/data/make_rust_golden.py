"""Regenerate the Rust-layout golden archive: ``.venv/bin/python tests/data/make_rust_golden.py``.

``rust-0.8-cli.znippy`` is laid out as ``znippy compress`` (Rust v0.8, the CLI path) writes it,
by the tests' independent writer ``tests/rust_layout.py``: one group (1, "", "") (the Maven
plugin the CLI always registers), one sub-index of two batches (big and empty files, then
small files) in a blob order a two-worker run could produce, level-19 OpenZL frames of format
version 24 with checksums, no ``__lookup__`` or ``__trie__``. Only regenerate it on purpose:
the test reads the stored bytes, not a fresh write.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "rust-0.8-cli.znippy"
CORES = 2  # 2 workers, slices of 100 MiB: every file here is a small file but the empty ones


def golden_files() -> dict[str, bytes]:
    """The source tree, in the walk order the archive was written from."""
    def text(n: int, seed: str) -> bytes:
        return b"".join(f"{seed} {i:05d} alpha beta gamma\n".encode() for i in range(n))

    noise = b"".join(hashlib.sha256(f"golden:{i}".encode()).digest() for i in range(40))
    return {
        "README.md": text(40, "readme"),
        "org/acme/lib/1.0/lib-1.0.pom": text(12, "pom"),
        "org/acme/lib/1.0/lib-1.0.jar": noise[:700],  # skip-listed: stored raw
        "bin/noise.dat": noise,  # incompressible: a frame larger than the data
        "empty.txt": b"",  # an empty file: a frame, compressed = true
        "ünï/名前.txt": text(3, "uni"),
    }


def main() -> None:
    sys.path.insert(0, str(HERE.parent))
    import rust_layout

    written = rust_layout.write_cli(GOLDEN, golden_files(), cores=CORES, seed=1,
                                    memory=16 << 30)
    data = GOLDEN.read_bytes()
    print(f"{GOLDEN.name}: {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}, "
          f"blob end {written.blob_end}, sub-index {written.sub_indexes}, "
          f"manifest at {written.manifest_offset}")


if __name__ == "__main__":
    main()
