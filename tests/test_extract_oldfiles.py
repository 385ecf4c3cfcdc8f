"""Files already at the destination, selections that match nothing, skipped links named
(issue 35, items 9 and 11).

tar replaces existing files by default; ``--keep-old-files`` makes one an error (exit 2, and
here nothing is written at all), ``--skip-old-files`` keeps it and says so. A glob or a named
member that matches nothing is "Not found in archive", exit 2, as tar says it.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from znippy_sql import write_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.errors import OptionError, OutputError
from znippy_sql.read.reader import open_archive


@pytest.fixture(scope="module")
def arc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("old")
    src = root / "src"
    (src / "pom").mkdir(parents=True)
    (src / "pom" / "a.pom").write_text("<project>archived</project>\n")
    (src / "pom" / "b.pom").write_text("<project>b</project>\n")
    (src / "c.txt").write_text("c\n")
    os.symlink("c.txt", src / "link")
    os.symlink("../../../x", src / "pom" / "escape")
    out = root / "o.znippy"
    write_archive(out, src, posix=True, fsync=False)
    return out


def _edited(dest: Path) -> Path:
    """A destination where pom/a.pom was extracted and then edited by hand."""
    (dest / "pom").mkdir(parents=True)
    edited = dest / "pom" / "a.pom"
    edited.write_text("<project>edited locally</project>\n")
    return edited


def test_default_replaces_existing_files(arc: Path, tmp_path: Path) -> None:
    edited = _edited(tmp_path / "d")
    assert main(["extract", str(arc), "-o", str(tmp_path / "d")]) == 0
    assert edited.read_text() == "<project>archived</project>\n"


def test_keep_old_files_is_an_error_and_writes_nothing(arc: Path, tmp_path: Path,
                                                       capsys) -> None:
    dest = tmp_path / "d"
    edited = _edited(dest)
    assert main(["extract", str(arc), "-o", str(dest), "--keep-old-files"]) == 2
    err = capsys.readouterr().err
    assert "'pom/a.pom'" in err and "nothing was extracted" in err and "Traceback" not in err
    assert edited.read_text() == "<project>edited locally</project>\n"
    assert sorted(os.listdir(dest / "pom")) == ["a.pom"] and not (dest / "c.txt").exists()
    # no file in the way: extracted as usual
    assert main(["extract", str(arc), "-o", str(tmp_path / "new"), "-k"]) == 0
    assert (tmp_path / "new" / "pom" / "a.pom").read_text() == "<project>archived</project>\n"
    # a link's name taken counts too
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "link").write_text("mine")
    assert main(["extract", str(arc), "-o", str(tmp_path / "l"), "-k", "--symlinks"]) == 2
    assert "'link'" in capsys.readouterr().err


def test_skip_old_files_keeps_and_reports_them(arc: Path, tmp_path: Path, capsys) -> None:
    dest = tmp_path / "d"
    edited = _edited(dest)
    assert main(["extract", str(arc), "-o", str(dest), "--skip-old-files"]) == 0
    out = capsys.readouterr().out
    assert "skipped 'pom/a.pom': exists already, kept (--skip-old-files)" in out
    assert edited.read_text() == "<project>edited locally</project>\n"
    assert (dest / "pom" / "b.pom").read_text() == "<project>b</project>\n"
    assert (dest / "c.txt").read_text() == "c\n"
    with pytest.raises(SystemExit) as exc:  # one or the other
        main(["extract", str(arc), "-o", str(dest), "--skip-old-files", "--keep-old-files"])
    assert exc.value.code == 2
    assert "not allowed with" in capsys.readouterr().err


def test_python_option_and_macro(arc: Path, tmp_path: Path) -> None:
    dest = tmp_path / "d"
    edited = _edited(dest)
    with open_archive(arc) as a:
        with pytest.raises(OutputError, match="pom/a.pom"):
            a.extract(dest, existing="error")
        assert sorted(os.listdir(dest)) == ["pom"]
        report = a.extract(dest, existing="skip")
        assert report.skipped["pom/a.pom"] == "exists already, kept (--skip-old-files)"
        assert report.files == 2 and "pom/a.pom" not in report.written
        with pytest.raises(OptionError, match="existing='keep'"):
            a.extract(dest, existing="keep")  # type: ignore[arg-type]
    assert edited.read_text() == "<project>edited locally</project>\n"
    con = duckdb.connect()
    register(con, arc, "o")
    d2 = tmp_path / "sql"
    _edited(d2)
    with pytest.raises(duckdb.Error, match="nothing was extracted"):
        con.execute("SELECT * FROM znippy_extract('o', ?, existing := 'error')", [str(d2)])
    got = con.execute("SELECT relative_path, status FROM znippy_extract('o', ?, "
                      "existing := 'skip') WHERE status <> 'extracted'", [str(d2)]).fetchall()
    assert ("pom/a.pom", "skipped") in got
    assert (d2 / "pom" / "a.pom").read_text() == "<project>edited locally</project>\n"


def test_a_file_appearing_meanwhile_is_not_replaced(tmp_path: Path) -> None:
    """The final rename of a no-replace extract is a hard link: a name taken between the
    check and the rename stays as it is."""
    from znippy_sql.read.partfile import Sink, create

    target = str(tmp_path / "f")
    fd, tmp = create(target)
    os.write(fd, b"new")
    os.close(fd)
    Path(target).write_bytes(b"theirs")
    with pytest.raises(FileExistsError):
        Sink("", replace=False).publish(tmp, target, "f")
    assert Path(target).read_bytes() == b"theirs" and os.listdir(tmp_path) == ["f"]


def test_nothing_matched_is_not_found_in_archive(arc: Path, tmp_path: Path, capsys) -> None:
    assert main(["extract", str(arc), "-o", str(tmp_path / "g"), "--glob", "*.nomatch"]) == 2
    err = capsys.readouterr().err
    assert "'*.nomatch': Not found in archive" in err
    assert not (tmp_path / "g").exists()
    # one glob of two matching nothing: named, nothing written
    assert main(["extract", str(arc), "-o", str(tmp_path / "g"), "--glob", "*.pom",
                 "--glob", "*.jar"]) == 2
    assert "'*.jar': Not found in archive" in capsys.readouterr().err
    assert main(["extract", str(arc), "pom/a.pom", "nosuch", "-o", str(tmp_path / "m")]) == 2
    assert "'nosuch': Not found in archive" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    assert main(["extract", str(arc), "-o", "-", "--glob", "*.nomatch"]) == 2
    assert "Not found in archive" in capsys.readouterr().err


def test_skipped_links_are_named(arc: Path, tmp_path: Path, capsys) -> None:
    assert main(["extract", str(arc), "-o", str(tmp_path / "s"), "--symlinks"]) == 0
    out = capsys.readouterr().out
    assert ("skipped 'pom/escape': symlink to '../../../x' resolves outside the destination"
            in out)
    assert main(["extract", str(arc), "-o", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out
    assert ("skipped 2 paths: symbolic link, not made (give --symlinks): 'link', 'pom/escape'"
            in out)


def test_many_skipped_paths_are_one_line_unless_verbose(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("f")
    for i in range(6):
        os.symlink("f", src / f"l{i}")
    arc = tmp_path / "many.znippy"
    write_archive(arc, src, posix=True, fsync=False)
    assert main(["extract", str(arc), "-o", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert ("skipped 6 paths: symbolic link, not made (give --symlinks): 'l0', 'l1', 'l2', "
            "... (every one with -v)") in out
    assert main(["extract", str(arc), "-o", str(tmp_path / "b"), "-v"]) == 0
    out = capsys.readouterr().out
    assert all(f"skipped 'l{i}': symbolic link, not made (give --symlinks)" in out
               for i in range(6))
