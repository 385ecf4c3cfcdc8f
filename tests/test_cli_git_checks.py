"""Every ``git`` subcommand given an archive without git sections says so (exit 2, one line
naming the archive); ``git import`` of a directory that is not a repository says that."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.cli import build_parser, main

#: each git subcommand, run on a plain archive ({a}) or a plain directory ({d})
RUNS = {
    "cat-file": (["git", "cat-file", "-t", "{a}", "HEAD"], "{a}: no git sections"),
    "show-ref": (["git", "show-ref", "{a}"], "{a}: no git sections"),
    "import": (["git", "import", "{d}", "-o", "{d}/g.znippy"], "{d}: not a git repository"),
}


def test_every_git_subcommand_is_checked() -> None:
    """A new git subcommand must be added to RUNS (and so to this check)."""
    git = build_parser()._subparsers._group_actions[0].choices["git"]  # type: ignore[union-attr]
    actions = [a for a in git._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(actions[0].choices) == set(RUNS)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_git_sections(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "plain.znippy"
    write_archive(archive, [Entry("a.txt", b"a\n")])
    plain = tmp_path / "plain"
    plain.mkdir()
    argv, said = RUNS[name]
    names = {"a": str(archive), "d": str(plain)}
    code = main([x.format(**names) for x in argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", err
    assert said.format(**names) in err and err.count("\n") == 1, err
    assert not (plain / "g.znippy").exists()
