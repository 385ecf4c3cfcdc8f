"""create: its own output is never an input; POSIX facts; unsafe names (issue 16, 5, 8, 9)."""

from __future__ import annotations

import os
from pathlib import Path

from znippy_sql import open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.write.append import append_archive


def test_the_output_and_its_staging_files_are_never_inputs(tmp_path: Path, capsys) -> None:
    src = tmp_path / "selfsrc"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("a = 1\n")
    # a sibling of a live process (this one): a dead one's is removed by the next write to
    # the name (test_hardening_write), a live one's is left alone, and never read as input
    staged = f".self.znippy.znippy-staging-{os.getpid()}-dead"
    (src / staged).write_bytes(b"another writer's work in progress")
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
        assert sorted(a.select()) == [staged, "pkg/a.py", "pkg/b.py", "self.znippy"]


# -- POSIX facts (item 8) ---------------------------------------------------------------------
import io
import os
import pty
import stat
import subprocess
import sys

from znippy_sql import Entry
from znippy_sql.cli.common import Progress
from znippy_sql.provenance.meta import Meta, facts

CLI = Path(sys.executable).parent / "znippy-sql"
MTIME = 1_600_000_000_123_456_789


def _posix_tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "empty" / "deeper").mkdir(parents=True)
    (root / "bin" / "run").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "bin" / "run", 0o755)
    (root / "bin" / "suid").write_text("x\n")
    os.chmod(root / "bin" / "suid", 0o4755)
    (root / "lib" / "a.txt").write_text("data\n")
    os.utime(root / "lib" / "a.txt", ns=(MTIME, MTIME))
    os.symlink("../lib/a.txt", root / "bin" / "link")
    os.symlink("/etc/passwd", root / "bin" / "abs")
    os.symlink("../../outside", root / "bin" / "escape")
    os.utime(root / "empty" / "deeper", ns=(MTIME, MTIME))
    return root


def test_create_records_modes_mtimes_links_and_directories(tmp_path: Path, capsys) -> None:
    src = _posix_tree(tmp_path / "src")
    arc = tmp_path / "p.znippy"
    assert main(["create", str(src), "-o", str(arc)]) == 0
    out = capsys.readouterr().out
    assert "recorded 4 directories and 3 symbolic links with modes and mtimes" in out
    with open_archive(arc) as a:
        assert a.read("bin/link") == b"../lib/a.txt"  # a link: a file holding its target
        assert facts(a, "bin/link") == {"posix.mode": ["120777"],
                                        "posix.mtime": facts(a, "bin/link")["posix.mtime"],
                                        "posix.symlink": ["../lib/a.txt"]}
        assert facts(a, "bin/run")["posix.mode"] == ["100755"]
        assert facts(a, "bin/suid")["posix.mode"] == ["104755"]
        assert facts(a, "lib/a.txt")["posix.mtime"] == ["1600000000.123456789"]
        deeper = facts(a, "empty/deeper")
        assert deeper["posix.mode"] == [f"{os.stat(src / 'empty' / 'deeper').st_mode:o}"]
        assert deeper["posix.mode"][0].startswith("40")  # a directory
        assert deeper["posix.mtime"] == ["1600000000.123456789"]
        assert a.verify().ok
    plain = tmp_path / "plain.znippy"
    assert main(["create", str(src), "-o", str(plain), "--no-posix"]) == 0
    with open_archive(plain) as a:
        assert "bin/link" not in a.select()  # as before: links left out, no facts
        assert not any(k.startswith("posix.") for k in a.section("__meta__").column("key")
                       .to_pylist())


def test_extract_preserve_and_symlinks(tmp_path: Path, capsys) -> None:
    src = _posix_tree(tmp_path / "src")
    arc = tmp_path / "p.znippy"
    assert main(["create", str(src), "-o", str(arc)]) == 0
    plain = tmp_path / "plain"
    assert main(["extract", str(arc), "-o", str(plain)]) == 0
    out = capsys.readouterr().out
    assert "skipped 3 paths: symbolic link, not made (give --symlinks)" in out
    assert not (plain / "bin" / "link").exists() and (plain / "empty" / "deeper").is_dir()
    assert (plain / "bin" / "run").stat().st_mode & 0o111 == 0  # no --preserve: defaults
    full = tmp_path / "full"
    assert main(["extract", str(arc), "-o", str(full), "--preserve", "--symlinks"]) == 0
    out = capsys.readouterr().out
    assert "1 symbolic link" in out
    assert "symlink to '/etc/passwd': absolute targets are refused" in out
    assert "symlink to '../../outside' resolves outside the destination" in out
    assert os.readlink(full / "bin" / "link") == "../lib/a.txt"
    assert (full / "bin" / "link").read_text() == "data\n"
    assert not (full / "bin" / "abs").exists() and not os.path.lexists(full / "bin" / "escape")
    assert stat.S_IMODE((full / "bin" / "run").stat().st_mode) == 0o755
    assert stat.S_IMODE((full / "bin" / "suid").stat().st_mode) == 0o755  # never setuid
    assert (full / "lib" / "a.txt").stat().st_mtime_ns == MTIME
    assert (full / "empty" / "deeper").stat().st_mtime_ns == MTIME  # set after its contents


def test_a_link_through_another_link_is_refused(tmp_path: Path, capsys) -> None:
    """x/y/b -> ../../p stays inside; x/y/a -> b/../.. looks inside written down (x) but goes
    through b to p, then two levels up: outside. Checked on the links as made."""
    links = {"x/y/b": "../../p", "x/y/a": "b/../.."}
    arc = tmp_path / "l.znippy"
    write_archive(arc, [Entry(p, data=t.encode()) for p, t in links.items()]
                  + [Entry("p/file", data=b"p")],
                  meta=Meta(provenance=False, files={p: {"posix.mode": "120777",
                                                         "posix.symlink": t}
                                                     for p, t in links.items()}))
    dest = tmp_path / "jail" / "d"
    assert main(["extract", str(arc), "-o", str(dest), "--symlinks"]) == 0
    out = capsys.readouterr().out
    assert "symlink to 'b/../..' resolves outside the destination" in out
    assert os.readlink(dest / "x" / "y" / "b") == "../../p"
    assert not os.path.lexists(dest / "x" / "y" / "a")


def test_ls_long_is_like_tar_tv(tmp_path: Path, capsys) -> None:
    src = _posix_tree(tmp_path / "src")
    arc = tmp_path / "p.znippy"
    assert main(["create", str(src), "-o", str(arc), "--repo", "r"]) == 0
    capsys.readouterr()
    assert main(["ls", "-l", str(arc)]) == 0
    lines = capsys.readouterr().out.splitlines()
    run = next(line for line in lines if line.endswith(" bin/run"))
    assert run.split()[:3] == ["-rwxr-xr-x", "r", "18"]
    link = next(line for line in lines if " bin/link" in line)
    assert link.startswith("lrwxrwxrwx") and link.endswith("bin/link -> ../lib/a.txt")
    stamp = __import__("time").strftime("%Y-%m-%d %H:%M", __import__("time").localtime(
        MTIME / 1e9))
    assert stamp in next(line for line in lines if line.endswith(" lib/a.txt"))
    assert lines[-1].startswith("total: 6 files, 61 bytes")
    rows = __import__("json").loads(_out(capsys, ["ls", str(arc), "--json"]))
    by_path = {r["relative_path"]: r for r in rows}
    assert by_path["bin/run"]["mode"] == "100755" and by_path["bin/link"]["symlink"]


def _out(capsys, argv: list[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


# -- unsafe names (item 9) ---------------------------------------------------------------------
def test_skip_unsafe(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("good\n")
    (src / "bad\nname.txt").write_text("bad\n")
    arc = tmp_path / "u.znippy"
    assert main(["create", str(src), "-o", str(arc)]) == 2
    err = capsys.readouterr().err
    assert "NUL or control character" in err and "--skip-unsafe" in err
    assert not arc.exists()
    assert main(["create", str(src), "-o", str(arc), "--skip-unsafe"]) == 1
    out = capsys.readouterr().out
    assert "skipped 1 file with a name the format refuses (--skip-unsafe):" in out
    assert "bad\\nname.txt" in out
    with open_archive(arc) as a:
        assert a.select() == ["good.txt"]


# -- progress (item 12) ------------------------------------------------------------------------
def test_progress_shows_percentage_and_eta_by_bytes() -> None:
    stream = io.StringIO()
    bar = Progress("create", total=10, total_bytes=1000, stream=stream)
    bar(2, 200)
    assert "ETA --:--" in bar.line()  # no rate known yet: no ETA (the first frame's is noise)
    bar.started -= 2.0  # two seconds in, the first bytes as long ago
    bar._first = (bar._first[0] - 2.0, 200)  # type: ignore[index]  # (the clock, not an API)
    bar(5, 400)  # 200 more bytes in 2 s: 100 B/s, 600 B left
    line = bar.line()
    assert "[#########" in line and " 40%" in line and "5/10 files" in line
    assert "400 B/1000 B" in line and "ETA 0:06" in line


def _tty_stderr(argv: list[str]) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(CLI), *argv], stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode()


def test_create_and_extract_bars_have_totals(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(30):
        (src / f"f{i:02}.txt").write_bytes(b"%d\n" % i * 3000)
    arc = tmp_path / "t.znippy"
    tty = _tty_stderr(["create", str(src), "-o", str(arc)])
    assert "100%" in tty and "30/30 files" in tty and "ETA" in tty
    tty = _tty_stderr(["extract", str(arc), "-o", str(tmp_path / "out")])
    last = tty.strip().split("\r")[-1]
    assert "100%" in last and "30/30 files" in last
    total = sum((src / f"f{i:02}.txt").stat().st_size for i in range(30))
    assert f"/{total / 1024:.1f} KiB" in last  # the bar counts bytes


def test_what_create_leaves_out_is_said(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    os.symlink("a.txt", src / "link")
    os.mkfifo(src / "pipe")
    assert main(["create", str(src), "-o", str(tmp_path / "n.znippy"), "--no-posix"]) == 0
    out = capsys.readouterr().out
    assert "left out 1 symbolic link (--no-posix)" in out
    assert "left out 1 special file (FIFO, socket or device: an archive holds files): 'pipe'" \
        in out
    assert main(["create", str(src), "-o", str(tmp_path / "p.znippy")]) == 0
    out = capsys.readouterr().out
    assert "symbolic link (--no-posix)" not in out and "1 special file" in out
