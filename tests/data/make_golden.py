"""Regenerate the golden archives in this directory: ``.venv/bin/python tests/data/make_golden.py``.

Only do this on purpose, when the format changes (and say so in docs/format.md): the golden
test asserts that today's writer still produces these exact bytes from ``golden_entries()``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden-v1.znippy"
BLOCK_SIZE = 4096
WORDS = b"alpha beta gamma delta import class def return index chunk archive footer".split()


def words(n: int, seed: str) -> bytes:
    """``n`` bytes of compressible text derived from SHA-256 (stable across Python versions)."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        digest = hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        out += b" ".join(WORDS[b % len(WORDS)] for b in digest[:10]) + b"\n"
        counter += 1
    return bytes(out[:n])


def noise(n: int, seed: str) -> bytes:
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"noise:{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def golden_files() -> dict[tuple[str, int, str], bytes]:
    """(repo, pkg_type, relative_path) → bytes."""
    return {
        ("", 0, "README.txt"): words(3000, "readme"),
        ("", 0, "src/main.py"): words(10_000, "main"),       # 3 chunks at 4096
        ("", 0, "data/random.bin"): noise(1000, "r"),        # incompressible: raw
        ("", 0, "lib/x.jar"): words(800, "jar"),             # skip list: raw
        ("", 0, "empty"): b"",
        ("", 0, "ünï/名前.txt"): words(200, "uni"),
        ("second", 7, "charts/chart.yaml"): words(600, "chart"),
    }


def golden_meta():  # type: ignore[no-untyped-def]
    import pyarrow as pa

    return pa.table({"relative_path": pa.array([None, "README.txt"], pa.utf8()),
                     "key": ["made_by", "kind"], "value": ["tests/data/make_golden.py", "doc"]})


def write_golden(out: Path) -> None:
    from znippy_sql import Entry, ReservedSection, write_archive

    entries = [Entry(p, data=d, repo=r, pkg_type=t) for (r, t, p), d in golden_files().items()]
    write_archive(out, entries, block_size=BLOCK_SIZE, workers=1,
                  reserved_sections=[ReservedSection("__meta__", golden_meta())])


if __name__ == "__main__":
    write_golden(GOLDEN)
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)", file=sys.stderr)
