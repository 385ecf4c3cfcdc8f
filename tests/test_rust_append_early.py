"""Appends of ours, one after another, to an archive the real Rust tool wrote before 0.9.15
(no ``__znippy_fsmeta__``; ``tests/data/rust-0.9.5/``, ``rust-0.9.9/``): its readers take a
section they do not know for data (0.9.5 and 0.9.9 panic "concat sub-indexes" on an fsmeta),
so every append keeps the archive free of one, the second as the first (docs/interop.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import interop_corpus as corpus
from znippy_sql import open_archive
from znippy_sql.cli import main

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("golden", ["rust-0.9.5/cli-maven.znippy", "rust-0.9.9/cli-maven.znippy"])
def test_every_append_keeps_a_pre_fsmeta_archive_so(golden: str, tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    shutil.copy(DATA / golden, out)
    want = dict(corpus.files())
    for n in range(3):
        more = tmp_path / f"more{n}"
        (more / "sub").mkdir(parents=True)
        (more / "sub" / f"f{n}.txt").write_bytes(b"x" * (n + 1))
        (more / "sub" / f"f{n}.txt").chmod(0o600)
        want[f"sub/f{n}.txt"] = b"x" * (n + 1)
        assert main(["append", str(out), str(more)]) == 0
        with open_archive(out) as a:
            assert "__znippy_fsmeta__" not in a.sections, (n, a.sections)
            assert dict(a.read_many(want)) == want and a.verify().ok
    before = out.read_bytes()
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 2
    assert out.read_bytes() == before


def test_meta_joins_a_pre_fsmeta_archive_that_has_typed_meta(tmp_path: Path) -> None:
    """0.9.9 (``znippy-common`` 0.9.13) writes and reads the typed ``__znippy_meta__`` but no
    fsmeta: facts may join one that has its meta already, old kinds kept, still no fsmeta."""
    out = tmp_path / "m.znippy"
    shutil.copy(DATA / "rust-0.9.9" / "cli-append-meta.znippy", out)
    more = tmp_path / "more"
    more.mkdir()
    (more / "late.txt").write_bytes(b"late\n")
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 0
    with open_archive(out) as a:
        assert "__znippy_fsmeta__" not in a.sections
        facts = {(r["relative_path"] or "", r["key"]): r["value"] for r in a.meta.to_pylist()}
        assert a.read("late.txt") == b"late\n" and a.verify().ok
    assert facts[("", "team")] == "interop" and facts[("added/new.txt", "build")] == "7"
    assert facts[("", "release")] == "r1"
