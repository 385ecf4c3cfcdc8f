"""An archive cut short is called truncated (or damaged), not unsealed: its last bytes are
the start of a footer, or its tail's index streams. An unsealed archive — a git push's blob
file with its journal, the Rust tool's hot archive (tests/test_rust_forward.py) — keeps
"seal it with the tool that wrote it"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import random_bytes, text_bytes

from znippy_sql import Entry, FormatError, UnsealedArchiveError, open_archive, write_archive
from znippy_sql.cli import main


@pytest.fixture(scope="module", params=["compressed-first", "raw-first"])
def whole(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> tuple[bytes, dict[str, int]]:
    """An archive's bytes and where its parts start: the first sub-index, the manifest and
    the footer."""
    first = random_bytes(3000, 1) if request.param == "raw-first" else text_bytes(3000, 1)
    path = tmp_path_factory.mktemp("whole") / "a.znippy"
    write_archive(path, [Entry("a/first.bin", first),
                         *(Entry(f"b/{i}.txt", text_bytes(20_000, i)) for i in range(8))])
    with open_archive(path) as a:
        marks = {"tail": a.tail_offset, "manifest": a.manifest_offset,
                 "footer": path.stat().st_size - 16}
    return path.read_bytes(), marks


def _cut(data: bytes, at: int, tmp_path: Path) -> Path:
    out = tmp_path / f"cut-{at}.znippy"
    out.write_bytes(data[:at])
    return out


@pytest.mark.parametrize("where", ["tail+200", "tail+2000", "manifest+40", "manifest+300",
                                   "footer+0", "footer+2", "footer+5", "footer+8", "footer+15"])
def test_cut_in_the_tail_or_footer_is_truncated(whole: tuple[bytes, dict[str, int]], where: str,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data, marks = whole
    part, plus = where.split("+")
    at = marks[part] + int(plus)
    assert at < len(data)
    path = _cut(data, at, tmp_path)
    with pytest.raises(FormatError, match="truncated or damaged") as exc:
        open_archive(path)
    assert not isinstance(exc.value, UnsealedArchiveError)
    assert exc.value.path == str(path) and "seal it" not in str(exc.value)
    assert main(["ls", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: truncated or damaged" in err and err.count("\n") == 1


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_cut_in_the_blobs_says_truncated_too(whole: tuple[bytes, dict[str, int]],
                                             fraction: float, tmp_path: Path) -> None:
    """Blobs alone could be an archive cut short or the blob region of an unsealed one: the
    message says both, truncated first (a first blob stored raw: not an archive at all)."""
    data, marks = whole
    path = _cut(data, int(marks["tail"] * fraction), tmp_path)
    with pytest.raises(FormatError) as exc:
        open_archive(path)
    text = str(exc.value)
    assert text.startswith(f"{path}: ")
    assert "truncated or damaged" in text or "not a znippy archive" in text


def test_git_push_blob_file_is_unsealed(tmp_path: Path) -> None:
    from znippy_sql.git.push import Receiver

    repo = tmp_path / "repo"
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for argv in (["init", "-q", str(repo)], ["-C", str(repo), "commit", "-q", "--allow-empty",
                                               "-m", "one"], ["-C", str(repo), "repack", "-qad"]):
        subprocess.run(["git", *argv], check=True, env=env)
    blobs = tmp_path / "push.blobs"
    with Receiver(blobs) as rx:
        for pack in (repo / ".git" / "objects" / "pack").glob("*.pack"):
            rx.push(pack.read_bytes())
    for target in (blobs, Path(str(blobs) + ".journal")):
        with pytest.raises(UnsealedArchiveError, match="this is an unsealed archive: seal it "
                                                       "with the tool that wrote it"):
            open_archive(target)


def test_cut_archive_over_http(whole: tuple[bytes, dict[str, int]]) -> None:
    from remote_server import RangeServer

    data, marks = whole
    srv = RangeServer()
    try:
        srv.put("cut.znippy", data[: marks["manifest"] + 100])
        url = f"{srv.url}/cut.znippy"
        with pytest.raises(FormatError, match="truncated or damaged") as exc:
            open_archive(url, cache=False)
        assert exc.value.path == url
    finally:
        srv.close()
