"""Every subcommand's ``--help`` works, every argument has a help string, positional names
are the README's, and figures are shown only where they mean something."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from znippy_sql import Entry, write_archive
from znippy_sql.cli import build_parser, main

README = Path(__file__).resolve().parent.parent / "README.md"


def _commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*words, name))


def _all(argv0: str | None = None) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    return list(_commands(build_parser(argv0)))


#: the built-in package-type modules' commands (``znippy-sql MODULE ARCHIVE COMMAND``)
MODULES = ("maven", "pypi", "cargo", "npm")
COMMANDS = [words for words, _ in _all()] + [words for m in MODULES for words, _ in _all(m)
                                              if words[:1] == (m,)]


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "(top)")
def test_help_works(words: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    argv = list(words)
    if words[:1] in [(m,) for m in MODULES] and len(words) > 1:
        argv = [words[0], "A.znippy", *words[1:]]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: znippy-sql")


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "(top)")
def test_every_argument_has_help(words: tuple[str, ...]) -> None:
    parser = dict(_all(words[0] if words else None))[words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        if not action.option_strings and len(words) > 1 and words[0] in MODULES:
            continue  # a module's own positional: its metavar (G:A:V, NAME==VERSION) says it
        assert action.help, f"{' '.join(words)} {name}: no help"
        assert action.help is argparse.SUPPRESS or len(action.help) > 8, name
        if not action.option_strings:  # positionals are named as in the README: upper case
            shown = action.metavar or action.dest
            assert isinstance(shown, str) and shown.upper() == shown, (words, shown)


def test_positional_names_are_the_readmes() -> None:
    """Each core command's usage line in the README names its positionals as --help does."""
    text = README.read_text()
    for words, parser in _all():
        if len(words) != 1 or f"znippy-sql {words[0]} " not in text:
            continue
        names = [a.metavar or a.dest for a in parser._get_positional_actions()
                 if not isinstance(a, argparse._SubParsersAction)]
        line = next(ln for ln in text.splitlines() if ln.startswith(f"znippy-sql {words[0]} "))
        for name in names:
            assert name.split("|")[0].split(".")[0] in line, (words, name, line)


def test_help_words(capsys: pytest.CaptureFixture[str]) -> None:
    def helptext(*argv: str) -> str:
        with pytest.raises(SystemExit):
            main([*argv, "--help"])
        return " ".join(capsys.readouterr().out.split())

    assert "to extract" not in helptext("ls")
    assert "one DuckDB query" not in helptext("sql")
    for local in (["modules"], ["git", "import"], ["append"], ["compact"]):  # no archive URL
        assert "--storage-option" not in helptext(*local), local
    assert "--storage-option" in helptext("ls")


def test_strip_components_says_zero_or_more(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["extract", "a.znippy", "-o", str(tmp_path), "--strip-components", "-1"])
    err = capsys.readouterr().err
    assert "0 or more" in err and "positive" not in err


def test_info_of_a_git_archive_has_no_per_row_figure(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    from znippy_sql.git.importer import import_repository

    repo = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "one"], check=True, env=env)
    git_archive = tmp_path / "g.znippy"
    import_repository(str(repo), str(git_archive))
    assert main(["info", str(git_archive)]) == 0
    out = capsys.readouterr().out
    assert "a chunk row" not in out and re.search(r"^git ", out, re.M), out
    assert main(["info", "--json", str(git_archive)]) == 0
    assert json.loads(capsys.readouterr().out)["index_bytes_per_row"] is None
    plain = tmp_path / "p.znippy"
    write_archive(plain, [Entry("a.txt", b"a\n")])
    assert main(["info", str(plain)]) == 0
    assert "bytes a chunk row" in capsys.readouterr().out
