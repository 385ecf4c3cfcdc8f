"""Seeded benchmark corpora: ``src_tree``, ``mixed_repo``, ``big_text``, ``random``; and
``maven_repo`` (asked for by name: ``--only maven_repo``), a stand-in for a local Maven
repository where none exists (see :func:`gen_maven_repo`).

Usage::

    .venv/bin/python bench/corpora.py [--out bench/out/corpora] [--scale 1.0] [--only NAME ...]

Text is a sequence of 1-40 KB "documents": common tokens (line breaks, punctuation, keywords)
mixed with 20-120 identifiers local to each document, all Zipf-weighted, gathered with numpy (so
hundreds of MB take seconds). A file therefore compresses on its own about as well as real
source does (``bench/run.py`` calibrates this against the ``.venv``'s site-packages). Files are
cut from one 64 MB seeded pool at random offsets, so no two files repeat each other within a
compressor's window. Already-compressed files are real: ``.gz`` is gzip, ``.jar``/``.whl`` are
zip archives of deflated members, ``.png`` is a valid PNG of a noisy image. A corpus directory
``NAME@SCALE`` has a sibling ``NAME@SCALE.done`` marker with its parameters and is regenerated
only when they change. ``--scale`` shrinks every corpus proportionally (file counts for
``src_tree`` and ``mixed_repo``, file sizes for ``big_text`` and ``random``).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import shutil
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MB = 1 << 20
KB = 1 << 10
SEED = 20260601
KEYWORDS = (
    "def class return if else elif for while import from as with try except finally raise "
    "public private static final void int long String boolean new this null true false "
    "package fn let mut impl struct enum match pub use crate self const async await yield "
    "function var typeof interface extends implements throws catch switch case break continue"
).split()
PUNCT = ["(", ")", "{", "}", "[", "]", ";", ",", ".", ":", "=", "==", "+", "-", "*", "/",
         "->", "=>", "&&", "||", "<", ">", "!", "\"", "'", "#", "//", "@"]
NEWLINES = ["\n", "\n    ", "\n        ", "\n            ", "\n\n", "\n    // ", "\n  "]


# -- text ------------------------------------------------------------------------------------
class Vocabulary:
    """Tokens (each with its trailing separator) concatenated into one byte buffer."""

    def __init__(self, rng: np.random.Generator, identifiers: int = 4000) -> None:
        letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
        words = [bytes(letters[rng.integers(0, 26, rng.integers(2, 9))]) for _ in range(2000)]
        idents = []
        for _ in range(identifiers):
            parts = [words[i] for i in rng.integers(0, len(words), rng.integers(1, 4))]
            style = rng.integers(0, 3)
            if style == 0:
                name = parts[0] + b"".join(p.capitalize() for p in parts[1:])
            elif style == 1:
                name = b"_".join(parts)
            else:
                name = b"".join(p.capitalize() for p in parts)
            idents.append(name)
        numbers = [str(int(x)).encode() for x in rng.integers(0, 100000, 500)]
        # Rank order of the common tokens: line breaks and punctuation, then keywords.
        marks = [n.encode() for n in NEWLINES] + [p.encode() for p in PUNCT]
        fixed = [marks[i] for i in rng.permutation(len(marks))]
        fixed += [k.encode() + b" " for k in KEYWORDS]
        tokens = fixed + [i + b" " for i in idents] + [n + b" " for n in numbers]
        self.fixed = len(fixed)
        # Zipf-like weights over the common tokens, and over the identifiers and numbers.
        self.p_fixed = _zipf(self.fixed)
        self.p_ident = _zipf(len(tokens) - self.fixed)[rng.permutation(len(tokens) - self.fixed)]
        self.lens = np.array([len(t) for t in tokens], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lens)[:-1]])
        self.buf = np.frombuffer(b"".join(tokens), dtype=np.uint8)

    def document(self, rng: np.random.Generator, tokens: int) -> np.ndarray:
        """Token ids of one source file: common tokens, plus identifiers local to the file.

        Real source repeats its own identifiers (a file works on a few names), which is what
        makes a file compress well on its own; a file picks 20-120 names (popular ones more
        often) and uses them with Zipf weights.
        """
        names = rng.choice(len(self.p_ident), size=int(rng.integers(20, 120)), p=self.p_ident)
        local = names[rng.choice(len(names), size=tokens, p=_zipf(len(names)))] + self.fixed
        common = rng.choice(self.fixed, size=tokens, p=self.p_fixed)
        return np.where(rng.random(tokens) < 0.55, common, local)

    def text(self, rng: np.random.Generator, size: int) -> bytes:
        """Exactly ``size`` bytes: documents of 1-40 KB back to back."""
        mean = float(self.lens.mean())
        out = bytearray()
        while len(out) < size:
            docs = []
            batch = 0
            while batch < 4 * MB and len(out) + batch < size:
                n = int(np.exp(rng.uniform(np.log(KB), np.log(40 * KB))) / mean) + 8
                docs.append(self.document(rng, n))
                batch += int(n * mean)
            idx = np.concatenate(docs)
            lens = self.lens[idx]
            ends = np.cumsum(lens)
            base = np.repeat(self.starts[idx] - (ends - lens), lens)
            out += self.buf[base + np.arange(int(ends[-1]))].tobytes()
        return bytes(out[:size])


def _zipf(n: int) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** 1.05
    return w / w.sum()


class TextPool:
    """One big seeded block of text; files are slices of it at random offsets."""

    def __init__(self, rng: np.random.Generator, size: int) -> None:
        self.rng = rng
        self.data = Vocabulary(rng).text(rng, size)

    def take(self, size: int) -> bytes:
        if size >= len(self.data):
            reps = size // len(self.data) + 1
            return (self.data * reps)[:size]
        start = int(self.rng.integers(0, len(self.data) - size))
        return self.data[start : start + size]


# -- compressed file kinds -------------------------------------------------------------------
def gz_file(pool: TextPool, rng: np.random.Generator, size: int) -> bytes:
    return _sized(lambda n: gzip.compress(pool.take(n), compresslevel=1, mtime=0), size)


def zip_file(pool: TextPool, rng: np.random.Generator, size: int) -> bytes:
    def build(n: int) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as z:
            left, i = n, 0
            while left > 0:
                part = min(left, int(rng.integers(4 * KB, 256 * KB)))
                info = zipfile.ZipInfo(f"pkg/m{i}/C{i}.class", date_time=(2024, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, pool.take(part))
                left -= part
                i += 1
        return buf.getvalue()

    return _sized(build, size)


def png_file(pool: TextPool, rng: np.random.Generator, size: int) -> bytes:
    def build(n: int) -> bytes:
        width = 512
        height = max(1, n // (width * 3))
        y = np.arange(height, dtype=np.int32)[:, None, None]
        x = np.arange(width, dtype=np.int32)[None, :, None]
        c = np.arange(3, dtype=np.int32)[None, None, :]
        img = (x * (c + 1) + y * 2 + rng.integers(0, 48, (height, width, 3))) & 0xFF
        rows = np.concatenate([np.zeros((height, 1), np.uint8),
                               img.astype(np.uint8).reshape(height, width * 3)], axis=1)
        idat = zlib.compress(rows.tobytes(), 6)

        def chunk(tag: bytes, body: bytes) -> bytes:
            return (struct.pack(">I", len(body)) + tag + body
                    + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF))

        ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(
            b"IEND", b"")

    return _sized(build, size)


def _sized(build: Callable[[int], bytes], size: int) -> bytes:
    """Build with an input size guessed so the output is near ``size`` (one correction)."""
    guess = max(256, size * 2)
    out = build(guess)
    if len(out) and abs(len(out) - size) > size // 5:
        out = build(max(256, int(guess * size / len(out))))
    return out


COMPRESSED = {"gz": gz_file, "jar": zip_file, "whl": zip_file, "png": png_file}


# -- corpora ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    name: str
    describe: str


SPECS = {
    "src_tree": Spec("src_tree", "20,000 source-like files of 1-40 KB (log-uniform), ~200 MB"),
    "mixed_repo": Spec("mixed_repo", "~400 MB: 60% text files 1 KB-8 MB, 40% already-compressed "
                                     ".jar/.gz/.whl/.png"),
    "big_text": Spec("big_text", "1 GiB of text in 4 files of 256 MiB"),
    "random": Spec("random", "512 MiB of random bytes in 8 files of 64 MiB"),
}
#: corpora made only when asked for by name (not part of the core benchmark)
MORE_SPECS = {
    "maven_repo": Spec("maven_repo", "~450 MB like a local Maven repository: 180 artifacts in "
                                     "2-7 versions each (jar + POM), each version changing "
                                     "half the classes of the last"),
}
EXTS = ["java", "py", "rs", "js", "ts", "c", "h", "go", "kt", "md"]


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def _dirs(rng: np.random.Generator, n: int) -> list[str]:
    names = ["src", "main", "java", "org", "core", "util", "impl", "api", "test", "lib", "net",
             "io", "model", "service", "web", "db", "cli", "tools", "internal", "common"]
    out = []
    for _ in range(n):
        depth = int(rng.integers(1, 5))
        out.append("/".join(names[i] for i in rng.integers(0, len(names), depth)))
    return out


def gen_src_tree(root: str, scale: float, pool: TextPool, rng: np.random.Generator) -> None:
    count = max(1, int(20000 * scale))
    sizes = np.exp(rng.uniform(np.log(1 * KB), np.log(40 * KB), count)).astype(np.int64)
    dirs = _dirs(rng, max(1, count // 25))
    for i, size in enumerate(sizes):
        d = dirs[int(rng.integers(0, len(dirs)))]
        ext = EXTS[int(rng.integers(0, len(EXTS)))]
        _write(os.path.join(root, d, f"file{i:05d}.{ext}"), pool.take(int(size)))


def gen_mixed_repo(root: str, scale: float, pool: TextPool, rng: np.random.Generator) -> None:
    total = int(400 * MB * scale)
    budget = {"text": int(total * 0.6), "compressed": total - int(total * 0.6)}
    dirs = _dirs(rng, 200)
    i = 0
    for kind, left in budget.items():
        while left > 0:
            size = int(np.exp(rng.uniform(np.log(1 * KB), np.log(8 * MB))))
            size = min(size, left) if left > KB else left
            d = dirs[int(rng.integers(0, len(dirs)))]
            if kind == "text":
                ext = EXTS[int(rng.integers(0, len(EXTS)))]
                data = pool.take(size)
            else:
                ext = list(COMPRESSED)[int(rng.integers(0, len(COMPRESSED)))]
                data = COMPRESSED[ext](pool, rng, size)
            _write(os.path.join(root, d, f"f{i:05d}.{ext}"), data)
            left -= len(data)
            i += 1


def gen_big_text(root: str, scale: float, pool: TextPool, rng: np.random.Generator) -> None:
    each = int(256 * MB * scale)
    piece = 4 * MB
    for f in range(4):
        with open(os.path.join(root, f"dump{f}.txt"), "wb") as fh:
            left = each
            while left > 0:
                n = min(piece, left)
                fh.write(pool.take(n))
                left -= n


def gen_random(root: str, scale: float, pool: TextPool, rng: np.random.Generator) -> None:
    each = int(64 * MB * scale)
    for f in range(8):
        with open(os.path.join(root, f"blob{f}.bin"), "wb") as fh:
            left = each
            while left > 0:
                n = min(16 * MB, left)
                fh.write(rng.bytes(n))
                left -= n


# -- a Maven repository ----------------------------------------------------------------------
def _zip(members: list[tuple[str, bytes, int, int, int]], stamp: int) -> bytes:
    """A jar as Maven's archiver writes one: deflated members, each with a data descriptor
    (flags 0x0808), one DOS time stamp for all. ``members``: (name, deflated bytes, crc,
    size, method)."""
    out = bytearray()
    central = bytearray()
    for name, data, crc, size, method in members:
        raw = name.encode()
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x0808, method, stamp & 0xFFFF,
                           stamp >> 16, 0, 0, 0, len(raw), 0) + raw + data
        out += struct.pack("<IIII", 0x08074B50, crc, len(data), size)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0x0808, method,
                               stamp & 0xFFFF, stamp >> 16, crc, len(data), size, len(raw),
                               0, 0, 0, 0, 0o644 << 16, offset) + raw
    out += central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members),
                                 len(central), len(out), 0)
    return bytes(out)


def _member(pool: TextPool, rng: np.random.Generator,
            name: str) -> tuple[str, bytes, int, int, int]:
    """A class-like member: text with binary noise mixed in (deflates ~2.5x), deflated."""
    size = int(min(400 * KB, 64 + np.exp(rng.normal(np.log(1.8 * KB), 1.1))))
    text = bytearray(pool.take(size))
    noise = rng.integers(0, 256, size // 6, dtype=np.uint8).tobytes()
    at = rng.integers(0, size, len(noise))
    text_np = np.frombuffer(text, dtype=np.uint8).copy()
    text_np[at] = np.frombuffer(noise, dtype=np.uint8)
    data = text_np.tobytes()
    comp = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = comp.compress(data) + comp.flush()
    return name, deflated, zlib.crc32(data), len(data), 8


def gen_maven_repo(root: str, scale: float, pool: TextPool, rng: np.random.Generator) -> None:
    """Artifacts in several versions, as ``~/.m2/repository`` holds them: each version keeps
    half the classes of the last byte for byte (the others change) and adds a few; a jar's
    time stamp
    is its build time (a fresh one per version for 60 % of the artifacts, a fixed one for the
    reproducible rest), and every version has a POM that differs little from the last."""
    artifacts = max(1, int(180 * scale))
    groups = ["org/apache/commons", "com/fasterxml/jackson/core", "org/springframework",
              "io/netty", "org/slf4j", "com/google/guava", "org/codehaus/plexus",
              "org/eclipse/jetty", "net/bytebuddy", "org/junit"]
    for a in range(artifacts):
        group = groups[a % len(groups)]
        name = f"lib{a:03d}-{pool.take(6).decode('ascii', 'replace').strip().replace(' ', '')}"
        name = "".join(ch for ch in name if ch.isalnum() or ch == "-") or f"lib{a:03d}"
        classes = max(4, int(np.exp(rng.normal(np.log(150), 1.1))))
        packages = [f"{group}/{name.split('-')[0]}/p{i}" for i in range(max(1, classes // 20))]
        members = [_member(pool, rng, f"{packages[int(rng.integers(0, len(packages)))]}/C{i}"
                                      ".class") for i in range(classes)]
        pom = pool.take(int(rng.integers(2 * KB, 20 * KB)))
        reproducible = rng.random() < 0.4
        for v in range(int(rng.integers(2, 8))):
            version = f"1.{v}.{int(rng.integers(0, 5))}"
            stamp = (((2018 + v - 1980) << 25) | (1 << 21) | (1 << 16)
                     | (int(rng.integers(0, 24)) << 11) if not reproducible
                     else ((2010 - 1980) << 25) | (1 << 21) | (1 << 16))
            if v:
                for i in rng.choice(len(members), max(1, len(members) // 2), replace=False):
                    members[i] = _member(pool, rng, members[i][0])  # changed classes
                for _ in range(int(rng.integers(0, 4))):  # new ones
                    members.append(_member(pool, rng, f"{packages[0]}/N{v}_{len(members)}.class"))
            manifest = _member(pool, rng, "META-INF/MANIFEST.MF")
            data = _zip([manifest, *members], stamp)
            base = os.path.join(root, group, name, version)
            _write(os.path.join(base, f"{name}-{version}.jar"), data)
            pom = pom.replace(b"1.", b"1.", 1) + b"\n<!-- " + version.encode() + b" -->\n"
            _write(os.path.join(base, f"{name}-{version}.pom"), pom)


GENERATORS = {"src_tree": gen_src_tree, "mixed_repo": gen_mixed_repo,
              "big_text": gen_big_text, "random": gen_random}
MORE = {"maven_repo": gen_maven_repo}  # made only when named in ``only``


def generate(out: str, *, scale: float = 1.0, only: list[str] | None = None,
             log: Callable[[str], None] = print) -> dict[str, str]:
    """Generate (or reuse) the corpora under ``out``; returns name → directory."""
    names = only or list(GENERATORS)
    every = {**GENERATORS, **MORE}
    result = {}
    pool: TextPool | None = None
    for idx, name in enumerate(names):
        root = os.path.join(out, f"{name}@{scale:g}")
        marker = f"{root}.done"
        params = {"name": name, "scale": scale, "seed": SEED,
                  "version": 2 if name in MORE else 1}
        if os.path.exists(marker):
            with open(marker) as fh:
                if json.load(fh) == params:
                    result[name] = root
                    continue
        if os.path.exists(marker):
            os.unlink(marker)
        if os.path.exists(root):
            shutil.rmtree(root)
        os.makedirs(root)
        if pool is None:
            pool = TextPool(np.random.default_rng(SEED), 64 * MB)
        rng = np.random.default_rng(SEED + 1 + list(every).index(name))
        pool.rng = rng
        every[name](root, scale, pool, rng)
        with open(marker, "w") as fh:
            json.dump(params, fh)
        result[name] = root
        log(f"generated {name} at scale {scale:g}: {du(root) / MB:.1f} MB in {root}")
    return result


def du(root: str) -> int:
    total = 0
    for dirpath, _dirs_, files in os.walk(root):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out", "corpora"))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", nargs="*", choices=[*GENERATORS, *MORE])
    args = ap.parse_args()
    generate(args.out, scale=args.scale, only=args.only)


if __name__ == "__main__":
    main()
