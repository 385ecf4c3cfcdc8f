"""Reproducible archives as the README says: ``SOURCE_DATE_EPOCH`` fixes the provenance time,
``--no-provenance`` leaves provenance out; the same tree then gives the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from znippy_sql.cli import main


def _tree(root: Path) -> Path:
    for i in range(5):
        p = root / f"d{i % 2}" / f"f{i}.txt"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x%d\n" % i * 100)
        os.utime(p, ns=(1_700_000_000_000_000_000,) * 2)
    return root


def test_source_date_epoch_and_no_provenance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    src = _tree(tmp_path / "src")

    def create(name: str, *extra: str) -> bytes:
        assert main(["create", str(src), "-o", str(tmp_path / name), *extra]) == 0
        return (tmp_path / name).read_bytes()

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    a, b = create("a.znippy"), create("b.znippy")
    assert a == b
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000001")
    assert create("c.znippy") != a  # the time is recorded: it is what made them equal
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert create("d.znippy", "--no-provenance") == create("e.znippy", "--no-provenance")
    capsys.readouterr()
