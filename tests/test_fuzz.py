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
