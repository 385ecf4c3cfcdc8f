"""Regenerate the golden archives in this directory: ``.venv/bin/python tests/data/make_golden.py``.

Only do this on purpose, when the format changes (and say so in docs/format.md): the golden
test asserts that today's writer still produces these exact bytes from ``golden_entries()``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden-v3.znippy"
GOLDEN_DEDUP = HERE / "golden-v3-dedup.znippy"
GOLDEN_PACKED = HERE / "golden-v4-packed.znippy"  # read only: the writer's rule moved on
GOLDEN_DEFAULT_V5 = HERE / "golden-v5-default.znippy"  # read only: directory packs since
GOLDEN_DEFAULT = HERE / "golden-v6-default.znippy"
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


def stored_zip(members: list[tuple[str, bytes]]) -> bytes:
    """A zip of stored (uncompressed) members with fixed time stamps and attributes: the same
    bytes on every machine (deflate output depends on the zlib build, so none here)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            info.create_system = 3
            info.external_attr = 0o644 << 16
            z.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    return buf.getvalue()


def golden_dedup_files() -> dict[tuple[str, int, str], bytes]:
    """Two versions of a jar sharing most entries, a jar of stored text, a file twice."""
    shared = [(f"com/x/C{i}.class", noise(600 + 40 * i, f"c{i}")) for i in range(6)]
    big = ("com/x/Big.class", noise(5000, "big"))
    v1 = stored_zip([*shared, big, ("META-INF/MANIFEST.MF", b"Version: 1.0\n")])
    v2 = stored_zip([*shared[:3], ("com/x/New.class", noise(900, "new")), *shared[3:], big,
                     ("META-INF/MANIFEST.MF", b"Version: 1.1\n")])
    text = stored_zip([(f"doc/{i}.txt", words(1500, f"doc{i}")) for i in range(4)])
    return {
        ("", 0, "lib/x-1.0.jar"): v1,
        ("", 0, "lib/x-1.1.jar"): v2,
        ("", 0, "lib/docs.jar"): text,
        ("", 0, "LICENSE"): words(2000, "license"),
        ("", 0, "sub/LICENSE"): words(2000, "license"),
        ("", 0, "notes.gz"): words(700, "gz"),  # skip-listed name, text inside: probed
        ("", 0, "empty"): b"",
    }


def write_golden(out: Path, *, dedup: bool = False) -> None:
    """golden-v3: the layout without dedup; with ``dedup``, golden-v3-dedup (v1 and v2-dedup:
    the same inputs before the manifest recorded section digests)."""
    from znippy_sql import Entry, ReservedSection, write_archive

    files = golden_dedup_files() if dedup else golden_files()
    entries = [Entry(p, data=d, repo=r, pkg_type=t) for (r, t, p), d in files.items()]
    sections = [] if dedup else [ReservedSection("__meta__", golden_meta())]
    write_archive(out, entries, block_size=BLOCK_SIZE, workers=1, reserved_sections=sections,
                  dedup=dedup, pack=False, index_compression=False)  # the layout of v3


def golden_packed_files() -> dict[tuple[str, int, str], bytes]:
    """The v3 inputs and 60 small text files: packed blobs and compressed index streams."""
    files = golden_files()
    files.update({("", 0, f"src/m{i:02d}.txt"): words(300 + 13 * i, f"m{i}") for i in range(60)})
    files[("", 0, "src/copy.txt")] = files[("", 0, "src/m07.txt")]
    return files


def golden_default_files() -> dict[tuple[str, int, str], bytes]:
    """The v4/v5 inputs and an artifact directory of two versions of a jar (stored members,
    most shared) and a copy of one: directory packs (docs/format.md §6)."""
    files = golden_packed_files()
    shared = [(f"com/x/C{i}.class", noise(300 + 40 * i, f"c{i}")) for i in range(5)]
    v1 = stored_zip([*shared, ("META-INF/MANIFEST.MF", b"Version: 1.0\n")])
    v2 = stored_zip([*shared[:2], ("com/x/New.class", noise(200, "new")), *shared[2:],
                     ("META-INF/MANIFEST.MF", b"Version: 1.1\n")])
    assert max(len(v1), len(v2)) <= BLOCK_SIZE  # whole members of one directory pack
    files[("", 0, "repo/org/x/1.0/x-1.0.jar")] = v1
    files[("", 0, "repo/org/x/1.0/x-1.0.pom")] = words(400, "pom1")
    files[("", 0, "repo/org/x/1.1/x-1.1.jar")] = v2
    files[("", 0, "repo/org/x/1.1/x-1.1.pom")] = words(420, "pom2")
    files[("", 0, "repo/org/y/2.0/y-2.0.jar")] = v1
    return files


def write_golden_default(out: Path, files: dict[tuple[str, int, str], bytes] | None = None
                         ) -> None:
    """golden-v6-default: :func:`golden_default_files` with the writer's defaults (packed
    blobs, directory packs and compressed index streams, docs/format.md §2, §6); with
    ``files`` = :func:`golden_packed_files` it wrote golden-v5-default before directory
    packs."""
    from znippy_sql import Entry, ReservedSection, write_archive

    files = golden_default_files() if files is None else files
    entries = [Entry(p, data=d, repo=r, pkg_type=t)
               for (r, t, p), d in sorted(files.items(), key=lambda kv: kv[0][2])]
    write_archive(out, entries, block_size=BLOCK_SIZE, workers=1,
                  reserved_sections=[ReservedSection("__meta__", golden_meta())])


if __name__ == "__main__":
    which = sys.argv[1:] or ["v3", "v3-dedup", "v6-default"]
    for name, path, dedup in (("v3", GOLDEN, False), ("v3-dedup", GOLDEN_DEDUP, True)):
        if name in which:
            write_golden(path, dedup=dedup)
            print(f"wrote {path} ({path.stat().st_size} bytes)", file=sys.stderr)
    if "v6-default" in which:
        write_golden_default(GOLDEN_DEFAULT)
        print(f"wrote {GOLDEN_DEFAULT} ({GOLDEN_DEFAULT.stat().st_size} bytes)", file=sys.stderr)
