"""create: its own output is never an input; POSIX facts; unsafe names (issue 16, 5, 8, 9)."""

from __future__ import annotations

from pathlib import Path

from znippy_sql import open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.write.append import append_archive


def test_the_output_and_its_staging_files_are_never_inputs(tmp_path: Path, capsys) -> None:
    src = tmp_path / "selfsrc"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("a = 1\n")
    (src / ".self.znippy.znippy-staging-999-dead").write_bytes(b"left by a crashed run")
    out = src / "self.znippy"
    for _ in range(2):  # the second run finds the first run's archive in SRC
        assert main(["create", str(src), "-o", str(out), "--no-posix"]) == 0
        with open_archive(out) as a:
            assert a.select() == ["pkg/a.py"]
    # the same through a path that is not the walk's own spelling of it
    out2 = src / "pkg" / ".." / "self.znippy"
    assert main(["create", str(src), "-o", str(out2), "--no-posix"]) == 0
    with open_archive(out) as a:
        assert a.select() == ["pkg/a.py"]
    capsys.readouterr()
    # append: the archive and its journal are not appended into themselves
    (src / "pkg" / "b.py").write_text("b = 2\n")
    report = append_archive(out, src)
    assert report.files_added == 1
    with open_archive(out) as a:
        assert a.select() == ["pkg/a.py", "pkg/b.py"]
    # and an output outside the source is not touched by any exclusion
    other = tmp_path / "other.znippy"
    write_archive(other, src)
    with open_archive(other) as a:
        assert sorted(a.select()) == [".self.znippy.znippy-staging-999-dead", "pkg/a.py",
                                      "pkg/b.py", "self.znippy"]
