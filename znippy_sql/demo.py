"""``python -m znippy_sql.demo OUTDIR``: a guided tour on a small generated corpus.

Generates a deterministic corpus (two repos, two package types: a Maven 2 tree and a PyPI tree,
with already-compressed ``.jar``/``.whl``/``.tar.gz`` files beside text files), writes one
archive, lists it, reads one file, queries it (DuckDB and Polars),
extracts one repo, verifies, and says what it did.
Only ``OUTDIR/corpus``, ``OUTDIR/extracted`` and ``OUTDIR/demo.znippy`` are (re)written.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import random
import shutil
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


from . import Entry, open_archive, write_archive

SEED = 20240611
BLOCK_SIZE = 64 * 1024  # small, so the one big text file shows several chunks
MAVEN_REPO = "central"
PYPI_REPO = "pypi-local"
_ZIP_TIME = (2024, 1, 1, 0, 0, 0)
_WORDS = (
    "archive index chunk blob manifest footer offset length checksum stream reader writer "
    "group repo module package version artifact wheel source build test config value return "
    "import class def public static final void string int long bytes buffer table column row "
    "query select filter where order limit schema field type name path file data"
).split()


@dataclass(frozen=True)
class CorpusFile:
    relative_path: str  # inside its repo, and inside the archive
    repo: str
    pkg_type: str
    data: bytes


# -- corpus -----------------------------------------------------------------------------------
def _text(rng: random.Random, lines: int) -> str:
    out = []
    for _ in range(lines):
        indent = "    " * rng.randint(0, 3)
        out.append(indent + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12))))
    return "\n".join(out) + "\n"


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return buf.getvalue()


def _tar_gz(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for name, data in members.items():
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                tar.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _maven(rng: random.Random) -> Iterator[CorpusFile]:
    def put(path: str, data: bytes) -> CorpusFile:
        return CorpusFile(path, MAVEN_REPO, "maven", data)

    for group in ("com/acme", "org/example/tools", "io/znippy"):
        for a in range(10):
            artifact = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}-{a}"
            versions = [f"1.{a}.{v}" for v in range(2)]
            base = f"{group}/{artifact}"
            meta = "".join(f"<version>{v}</version>" for v in versions)
            yield put(f"{base}/maven-metadata.xml",
                      f"<metadata><artifactId>{artifact}</artifactId><versions>{meta}"
                      "</versions></metadata>\n".encode())
            for version in versions:
                stem = f"{base}/{version}/{artifact}-{version}"
                pom = (f"<project><groupId>{group.replace('/', '.')}</groupId>"
                       f"<artifactId>{artifact}</artifactId><version>{version}</version>\n"
                       f"<description>\n{_text(rng, rng.randint(5, 40))}</description>"
                       "</project>\n").encode()
                classes = {f"{group}/{rng.choice(_WORDS).title()}{i}.class":
                           rng.randbytes(rng.randint(200, 3000)) for i in range(rng.randint(2, 8))}
                classes["META-INF/MANIFEST.MF"] = b"Manifest-Version: 1.0\n"
                jar = _zip(classes)
                yield put(f"{stem}.pom", pom)
                yield put(f"{stem}.pom.sha1", hashlib.sha1(pom).hexdigest().encode())
                yield put(f"{stem}.jar", jar)
                yield put(f"{stem}.jar.sha1", hashlib.sha1(jar).hexdigest().encode())
    # one large text file: several chunks at BLOCK_SIZE
    yield put("io/znippy/handbook/1.0/handbook-1.0-manual.txt",
              _text(rng, 4000).encode())


def _pypi(rng: random.Random) -> Iterator[CorpusFile]:
    def put(path: str, data: bytes) -> CorpusFile:
        return CorpusFile(path, PYPI_REPO, "pypi", data)

    for p in range(25):
        name = f"{rng.choice(_WORDS)}-{rng.choice(_WORDS)}{p}"
        module = name.replace("-", "_")
        links = []
        for version in (f"0.{p}.0", f"0.{p}.1"):
            src = {f"{module}/__init__.py": _text(rng, rng.randint(10, 80)).encode(),
                   f"{module}/core.py": _text(rng, rng.randint(20, 160)).encode()}
            metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
            wheel = f"{module}-{version}-py3-none-any.whl"
            sdist = f"{module}-{version}.tar.gz"
            yield put(f"packages/{name}/{wheel}",
                      _zip({**src, f"{module}-{version}.dist-info/METADATA": metadata}))
            yield put(f"packages/{name}/{sdist}",
                      _tar_gz({f"{module}-{version}/{k}": v for k, v in
                               {**src, "PKG-INFO": metadata}.items()}))
            links += [wheel, sdist]
        body = "".join(f'<a href="../../packages/{name}/{f}">{f}</a><br>\n' for f in links)
        yield put(f"simple/{name}/index.html",
                  f"<!DOCTYPE html><html><body>\n{body}</body></html>\n".encode())
    yield put("simple/index.html", b"<!DOCTYPE html><html><body>simple index</body></html>\n")


def corpus(seed: int = SEED) -> list[CorpusFile]:
    """The demo corpus: the same bytes for the same seed, on every machine."""
    rng = random.Random(seed)
    return [*_maven(rng), *_pypi(rng)]


def write_corpus(files: Sequence[CorpusFile], root: str) -> list[Entry]:
    """Write the corpus under ``root/<repo>/...``; the entries that archive it."""
    entries = []
    for f in files:
        target = os.path.join(root, f.repo, *f.relative_path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(f.data)
        entries.append(Entry(f.relative_path, file=target, repo=f.repo, pkg_type=f.pkg_type))
    return entries


def _read_file(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


# -- the tour ---------------------------------------------------------------------------------
def _say(text: str = "") -> None:
    print(text, flush=True)


def _query(archive_path: str) -> list[str]:
    """Sizes by repo and package type with DuckDB and Polars."""
    import duckdb
    import polars as pl

    import znippy_sql.duckdb as zduck
    import znippy_sql.polars as zpl

    con = duckdb.connect()
    name = zduck.register(con, archive_path, name="demo")
    sql = (f"SELECT repo, pkg_type_name, count(*) AS files, sum(size) AS bytes, "
           f"sum(stored_size) AS stored FROM {name}_files GROUP BY ALL ORDER BY ALL")
    _say(f"  DuckDB: {sql}")
    for row in con.sql(sql).fetchall():
        _say(f"    {row}")
    con.close()
    frame = (zpl.scan(archive_path, section="files")
             .filter(pl.col("repo") == PYPI_REPO)
             .select(pl.len().alias("files"), pl.col("size").sum().alias("bytes"))
             .collect())
    _say(f"  Polars: scan(..., 'files').filter(repo == {PYPI_REPO!r}) ->"
         f" {frame.row(0, named=True)}")
    return ["queried it with DuckDB", "queried it with Polars"]


def run(outdir: str, *, seed: int = SEED) -> dict[str, object]:
    """Run the whole tour into ``outdir``; returns what was made (paths and counts)."""
    started = time.perf_counter()
    os.makedirs(outdir, exist_ok=True)
    src = os.path.join(outdir, "corpus")
    dest = os.path.join(outdir, "extracted")
    archive_path = os.path.join(outdir, "demo.znippy")
    for stale in (src, dest):
        shutil.rmtree(stale, ignore_errors=True)
    did: list[str] = []

    files = corpus(seed)
    entries = write_corpus(files, src)
    total = sum(len(f.data) for f in files)
    _say(f"1. corpus: {len(files)} files, {total:,} bytes under {src}")
    for repo in (MAVEN_REPO, PYPI_REPO):
        n = sum(1 for f in files if f.repo == repo)
        _say(f"     {repo}: {n} files")
    did.append(f"generated {len(files)} files in two repos ({MAVEN_REPO}: maven, "
               f"{PYPI_REPO}: pypi)")

    report = write_archive(archive_path, entries, block_size=BLOCK_SIZE)
    _say(f"2. write_archive -> {archive_path}: {report.files} files, {report.chunks} chunks "
         f"({report.compressed_chunks} OpenZL frames, {report.raw_chunks} stored raw), "
         f"{report.bytes_in:,} -> {report.archive_bytes:,} bytes (ratio {report.ratio:.2f})")
    did.append(f"wrote {archive_path} ({report.archive_bytes:,} bytes, {report.groups} groups)")

    with open_archive(archive_path) as archive:
        _say(f"3. open_archive: groups {[tuple(g) for g in archive.groups]}, "
             f"sections {archive.sections}")
        for key in archive.groups:
            paths = archive.select(repo=key.repo, pkg_type=key.pkg_type)
            _say(f"     {key.repo} (pkg_type {key.pkg_type}): {len(paths)} files, e.g. {paths[0]}")
        did.append("listed it")

        pom = next(f for f in files if f.relative_path.endswith(".pom"))
        found = archive.find(pom.relative_path)  # through the fst trie, no scan
        assert found is not None
        before = archive.source.bytes_read
        data = archive.read(pom.relative_path)
        touched = archive.source.bytes_read - before
        if data != pom.data:
            raise RuntimeError(f"{pom.relative_path}: read back different bytes")
        head = data.decode().splitlines()[0]
        _say(f"4. read {pom.relative_path!r}: {len(data)} bytes from {len(found.chunks)} chunk(s);"
             f" blob bytes touched: {touched}; first line: {head[:60]}")
        did.append(f"read one file ({pom.relative_path})")

        _say("5. query")
        did.extend(_query(archive_path))

        ex = archive.extract(dest, repo=PYPI_REPO)
        same = all(_read_file(os.path.join(dest, *f.relative_path.split("/"))) == f.data
                   for f in files if f.repo == PYPI_REPO)
        _say(f"6. extract(repo={PYPI_REPO!r}) -> {dest}: {ex.files} files, "
             f"{ex.bytes_written:,} bytes, identical to the corpus: {same}")
        did.append(f"extracted repo {PYPI_REPO!r} ({ex.files} files)")

        check = archive.verify()
        _say(f"7. verify: {'OK' if check.ok else check.problems}: {check.files} files, "
             f"{check.chunks} chunks decoded and checked")
        did.append("verified every chunk" if check.ok else "verify found problems")

    seconds = time.perf_counter() - started
    _say()
    _say(f"Done in {seconds:.1f} s: " + "; ".join(did) + ".")
    _say("Next, on the command line:")
    for cmd in (f"info {archive_path}", f"ls {archive_path} --repo {MAVEN_REPO} --glob '*.pom'",
                f"cat {archive_path} {pom.relative_path}", f"verify {archive_path}"):
        _say(f"  .venv/bin/znippy-sql {cmd}")
    return {"archive": archive_path, "corpus": src, "extracted": dest, "files": len(files),
            "extracted_files": ex.files, "verified": check.ok, "steps": did}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m znippy_sql.demo", description=__doc__)
    parser.add_argument("outdir", nargs="?", default="demo-out")
    parser.add_argument("--seed", type=int, default=SEED, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    result = run(args.outdir, seed=args.seed)
    return 0 if result["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
