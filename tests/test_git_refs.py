"""Names and refs of a git archive answered as git answers them: what ``git rev-parse`` takes
(full id, abbreviation, branch, tag, ``HEAD``) for ``git_log``, ``git_reachable``, ``git_cat``
and ``git cat-file``; the refs stored at import (``__gunnar_refs__``), the ``_git_refs`` view
and ``git show-ref``, checked against the real git on repositories with branches, lightweight
and annotated tags and a shallow clone. Also: ``git import -o URL`` and ``ls -l`` of packs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_git import Repo, build

from znippy_sql.cli import main
from znippy_sql.git.importer import import_repository


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return build(tmp_path_factory.mktemp("refs") / "repo")


@pytest.fixture(scope="module")
def archive(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arc") / "repo.znippy"
    import_repository(repo.path, out)
    return out


def test_import_to_a_url_is_refused_in_one_line(repo: Repo, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for url in ("s3://bucket/x.znippy", "http://127.0.0.1:1/x.znippy", "gs://b/x.znippy"):
        assert main(["git", "import", str(repo.path), "-o", url]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "git import writes local files only" in err, err
        assert "staging" not in err
    assert not os.listdir(tmp_path)
    local = tmp_path / "x.znippy"
    assert main(["git", "import", str(repo.path), "-o", local.as_uri()]) == 0  # file:// is local
    assert local.exists()


def test_ls_long_shows_packs_read_only(archive: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "-l", str(archive)]) == 0
    lines = capsys.readouterr().out.splitlines()
    packs = [ln for ln in lines if "objects.pack." in ln]
    assert len(packs) == 4
    assert all(ln.startswith("-r--r--r-- ") for ln in packs), packs
