"""The catalog's ``add`` reads an archive's rows in bulk (issue 33, item 5): the file digests and
the root digest are made by the compiled core (``native/src/digests.rs``) in one call, so the
Python function calls of ``read_rows`` and of ``Catalog.add`` do not grow with the number of
files. Counted, not timed (``sys.setprofile`` + ``threading.setprofile``): a count cannot be
noisy. ``Catalog.add`` itself costs ~110,000 calls an archive, whatever its size: pyiceberg's
commits of the three tables."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _calls import python_calls

from znippy_sql import Entry, write_archive
from znippy_sql.catalog import open_catalog
from znippy_sql.catalog.rows import read_rows
from znippy_sql.format.files import file_digest, file_digests, root_digest

SIZES = (1_000, 10_000)


def _entries(n: int) -> list[Entry]:
    """``n`` small files in three groups (two repos, two pkg_types)."""
    return [Entry(f"d{i % 100:02d}/f{i:05d}.txt", data=b"file %d\n" % i * (1 + i % 7),
                  repo="r" if i % 3 else "", pkg_type=7 if i % 3 == 2 else None)
            for i in range(n)]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    base = tmp_path_factory.mktemp("catnative")
    out = {}
    for n in (5, *SIZES):
        out[n] = base / f"a{n}.znippy"
        write_archive(out[n], _entries(n), workers=1, fsync=False)
    return out


def _calls(fn: Callable[[], Any], events: tuple[str, ...] = ("call",)) -> int:
    return sum(python_calls(fn, events)[1].values())


def test_read_rows_makes_at_most_half_a_python_call_a_file(archives: dict[int, Path]) -> None:
    read_rows(str(archives[5]))  # every module imported before the count
    counts = {n: _calls(lambda n=n: read_rows(str(archives[n]))) for n in SIZES}
    assert counts[10_000] / 10_000 <= 0.5, counts
    # and nothing a file, builtins included (a loop hashing each file's message made two
    # a file): ten times the files, (almost) the same calls
    both = {n: _calls(lambda n=n: read_rows(str(archives[n])), ("call", "c_call"))
            for n in SIZES}
    assert both[10_000] - both[1_000] <= 0.01 * 9_000, both


def test_catalog_add_makes_no_python_call_a_file(archives: dict[int, Path],
                                                 tmp_path: Path) -> None:
    counts = {}
    for n in SIZES:
        catalog = open_catalog(tmp_path / f"wh{n}", create=True)
        catalog.add([archives[5]])  # the tables made and every module imported
        counts[n] = _calls(lambda: catalog.add([archives[n]]))  # noqa: B023
        got = catalog.sql(f"SELECT count(*) n FROM files WHERE archive_uri LIKE '%a{n}.znippy'")
        assert got.column("n").to_pylist() == [n]
    # calls a file, over the 9,000 files the second archive has more than the first
    assert (counts[10_000] - counts[1_000]) / 9_000 <= 0.5, counts


@pytest.mark.parametrize("large", [False, True])
def test_the_core_hashes_what_file_digest_hashes(large: bool) -> None:
    """Sliced, chunked and large-offset columns, multi-chunk files, empty paths and files,
    rows before the first file, given ``chunk_seq``s: the core's digests are FORMAT §4's."""
    rnd = random.Random(7 + large)
    for _ in range(30):
        nfiles = rnd.randrange(0, 12)
        counts = [rnd.choice([1, 1, 2, 5]) for _ in range(nfiles)]
        paths = ["".join(rnd.choice("ab/é.") for _ in range(rnd.randrange(0, 9)))
                 for _ in range(nfiles)]
        skip = rnd.choice([0, 0, 2])
        sums = [rnd.randbytes(32) for _ in range(skip + sum(counts))]
        starts, at = [], skip
        for c in counts:
            starts.append(at)
            at += c
        pad = rnd.randrange(0, 3)  # the arrays are slices of bigger ones
        ptype = pa.large_utf8() if large else pa.utf8()
        parr = pa.array(["x"] * pad + paths, ptype).slice(pad)
        sarr = pa.array([b"\1" * 32] * pad + sums, pa.binary(32)).slice(pad)
        chunked = pa.chunked_array([sarr]) if rnd.random() < 0.5 else sarr
        got = file_digests(parr, chunked, starts).to_pylist()
        want = [file_digest(p, sums[s:s + c]) for p, s, c in zip(paths, starts, counts)]
        assert got == want
        if nfiles:  # given chunk_seqs, as a damaged index may hold them
            seqs = [rnd.randrange(5) for _ in sums]
            other = file_digests(parr, sarr, starts, seqs).to_pylist()
            assert (other == want) == all(seqs[s + k] == k for s, c in zip(starts, counts)
                                          for k in range(c))
        import blake3

        root = blake3.blake3(b"tag")
        for p, d in zip(paths, want):
            root.update(p.encode() + b"\0" + d)
        assert root_digest(b"tag", parr, pa.array(want, pa.binary(32))) == root.digest()
