"""Seeded, time-bounded fuzzing of every read path (issue 17).

Each example is a mutation of a real archive (``tests/_fuzz.py``: byte flips with the section
digests kept, dropped or forged, truncation, lying rows, added columns, spliced sections) run
through the API, the CLI, DuckDB, Polars and append (``tests/_readpaths.py``). Whatever the
bytes, every outcome must be a success that returned the original bytes or a ZnippyError
naming the archive. Hypothesis is derandomized (the same examples every run) and the whole
module stops drawing new ones after ``ZNIPPY_FUZZ_SECONDS`` (default 60) seconds; the long
campaign with crash isolation is ``bench/fuzz.py``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from _fuzz import MUTATIONS, Base, base_archives, mutate
from _readpaths import bad, every_read_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

BUDGET = float(os.environ.get("ZNIPPY_FUZZ_SECONDS", "60"))
_STARTED: list[float] = []
_COUNT: dict[str, int] = {}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> list[Base]:
    return base_archives(tmp_path_factory.mktemp("fuzz-bases"))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-cases")


def _over_budget(share: float) -> bool:
    if not _STARTED:
        _STARTED.append(time.monotonic())
    return time.monotonic() - _STARTED[0] > BUDGET * share


def _case(bases: list[Base], scratch: Path, which: int, kind: str, seed: int) -> None:
    base = bases[which % len(bases)]
    data, text = mutate(base.data, kind, random.Random(seed))
    n = _COUNT[kind] = _COUNT.get(kind, 0) + 1
    folder = scratch / f"{kind}-{n}"
    folder.mkdir()
    path = folder / "fuzz.znippy"
    path.write_bytes(data)
    out = every_read_path(path, base.originals, folder / "w")
    assert not bad(out), f"{base.name} {text}: {bad(out)[:3]}"


_SETTINGS = settings(max_examples=400, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


@_SETTINGS
@given(which=st.integers(0, 3), kind=st.sampled_from(MUTATIONS), seed=st.integers(0, 2**32))
def test_fuzz_every_read_path(bases: list[Base], scratch: Path, which: int, kind: str,
                              seed: int) -> None:
    if _over_budget(0.7):
        return
    _case(bases, scratch, which, kind, seed)


@_SETTINGS
@given(which=st.integers(0, 3), seed=st.integers(0, 2**32))
def test_fuzz_structured_lies(bases: list[Base], scratch: Path, which: int, seed: int) -> None:
    """Lying rows and added columns with the digests recomputed: only the reader's own checks
    stand between them and DuckDB or Polars."""
    if _over_budget(1.0):
        return
    _case(bases, scratch, which, "rows" if seed % 2 else "schema", seed)


def test_fuzz_ran(bases: list[Base]) -> None:
    """The campaign ran cases of every mutation (a budget too small to reach them all is a
    mistake, not a pass)."""
    if not _COUNT:
        pytest.skip("the fuzz tests were not selected in this run")
    assert set(_COUNT) == set(MUTATIONS), _COUNT


def test_fuzz_report() -> None:
    """How many cases of each mutation this run drew (shown with ``-rP``)."""
    print(f"fuzz cases by mutation: {dict(sorted(_COUNT.items()))}")


# -- beyond archive tails: git archives and packs, the push journal, catalog metadata ---------
@pytest.fixture(scope="module")
def more(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from _fuzz_more import make_bases

    return make_bases(tmp_path_factory.mktemp("fuzz-more"))


@pytest.mark.parametrize("family", ["git", "journal", "catalog"])
def test_fuzz_more_families(more, tmp_path: Path, family: str) -> None:  # type: ignore[no-untyped-def]
    """Seeded cases of each family for a share of the budget: every outcome ok or refused."""
    from _fuzz_more import run_case

    started, seed, seen = time.monotonic(), 0, set()
    while seed < 8 or time.monotonic() - started < BUDGET / 6:
        text, out = run_case(more, family, seed, tmp_path / str(seed))
        assert out.kind in ("ok", "refused"), f"{family} seed {seed}: {text}: {out}"
        seen.add(out.kind)
        seed += 1
        if seed >= 400:
            break
    assert "refused" in seen  # the mutations reach the checks


@pytest.mark.parametrize("seed", [36, 67, 71, 77])
def test_journal_findings_stay_fixed(more, tmp_path: Path, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Journal cases the fuzzer found: overlapping extents sealed into an archive that fails
    verify (36, 71, 77), a flipped validity bit giving a null offset (67, a TypeError)."""
    from _fuzz_more import run_case

    text, out = run_case(more, "journal", seed, tmp_path / "c")
    assert out.kind == "refused", (text, out)


def test_a_journal_with_overlapping_packs_is_refused(more, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from znippy_sql.errors import FormatError
    from znippy_sql.git import seal_generation_zero
    from znippy_sql.git.journal import encode_row

    blobs = tmp_path / "objects.pack"
    blobs.write_bytes(more.blobs)
    journal = tmp_path / "objects.pack.journal"
    journal.write_bytes(more.journal + encode_row(5, 40))
    with pytest.raises(FormatError, match="overlaps the pack before it") as err:
        seal_generation_zero(blobs, journal, tmp_path / "s.znippy", git=False)
    assert err.value.path == str(journal) and not (tmp_path / "s.znippy").exists()


def test_damaged_catalog_metadata_is_one_line(more, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """pyiceberg's ValidationError, UnicodeDecodeError, AttributeError... on damaged metadata
    were tracebacks (fuzz family ``catalog``)."""
    import shutil

    from znippy_sql.catalog import open_catalog
    from znippy_sql.cli import main
    from znippy_sql.errors import CatalogError

    wh = more.warehouse
    keep = tmp_path / "keep"
    shutil.copytree(wh, keep)
    try:
        current = max((p for p in wh.rglob("*.metadata.json") if "files" in p.parts),
                      key=lambda p: p.name)
        current.write_bytes(current.read_bytes()[:300])
        with pytest.raises(CatalogError, match="cannot read the catalog's Iceberg metadata"):
            open_catalog(wh)
        assert main(["catalog", "sql", str(wh), "SELECT count(*) FROM files"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Iceberg metadata" in err
    finally:
        shutil.rmtree(wh)
        shutil.copytree(keep, wh)


def test_git_finding_stays_fixed(more, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Fuzz family git: a type code flipped in the forged __gunnar_oid__ made
    ``git cat-file -t`` raise KeyError (found as seed 1024; the base archive gained
    ``__gunnar_refs__`` and the version-2 ``order`` array since, and seed 5282 is now the case
    that flips a type code: offset 1826 of 1833, in the ``type`` array)."""
    from _fuzz_more import run_case

    text, out = run_case(more, "git", 5282, tmp_path / "c")
    assert "__gunnar_oid__" in text and out.kind == "refused", (text, out)
