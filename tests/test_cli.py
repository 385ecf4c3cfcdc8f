"""The ``znippy-sql`` core subcommands: outputs, JSON, exit codes (0 ok, 1 problems, 2 bad input)."""

from __future__ import annotations

import gzip
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.cli.core import Progress, size_arg

BLOCK = 1024
CLI = Path(sys.executable).parent / "znippy-sql"


def _tree(root: Path) -> dict[str, bytes]:
    files = {
        "README.txt": b"hello archive\n" * 20,
        "empty": b"",
        "src/main.py": b"def main():\n    return 42\n" * 200,  # several chunks at BLOCK
        "src/exact.bin": bytes(range(256)) * (BLOCK // 256),  # exactly one block
        "data/blob.gz": gzip.compress(b"x" * 5000, mtime=0),  # skip list: stored raw
        "docs/\u00e9t\u00e9/na\u00efve.md": "caf\u00e9 \u2615\n".encode() * 30,
    }
    for rel, data in files.items():
        target = root.joinpath(*rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return files


@pytest.fixture()
def made(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    files = _tree(tmp_path / "src")
    out = tmp_path / "a.znippy"
    rc = main(["create", str(tmp_path / "src"), "-o", str(out), "--repo", "r1",
               "--pkg-type", "maven", "--block-size", "1K", "--workers", "1"])
    assert rc == 0
    return out, files


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], rc: int = 0) -> object:
    assert main(argv) == rc
    return json.loads(capsys.readouterr().out)


def test_create_prints_a_summary(tmp_path: Path, capsys) -> None:
    files = _tree(tmp_path / "src")
    out = tmp_path / "c.znippy"
    assert main(["create", str(tmp_path / "src"), "-o", str(out), "--pkg-type", "pypi"]) == 0
    captured = capsys.readouterr()
    assert f"{len(files)} files in 1 group," in captured.out and "ratio" in captured.out
    assert captured.err == ""  # not a terminal: no progress bar
    with open_archive(out) as archive:
        assert [g[:2] for g in archive.groups] == [(4, "")]
        assert {p: archive.read(p) for p in archive.select()} == files


def test_summaries_say_one_file_not_one_files(tmp_path: Path, capsys) -> None:
    src = tmp_path / "one"
    src.mkdir()
    (src / "only.txt").write_bytes(b"just one line\n")
    out = tmp_path / "one.znippy"
    assert main(["create", str(src), "-o", str(out)]) == 0
    assert ": 1 file in 1 group, 1 chunk (" in capsys.readouterr().out
    assert main(["extract", str(out), "-o", str(tmp_path / "x")]) == 0
    assert ": 1 file, 14 B extracted" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert ": OK: 1 file, 1 chunk, " in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    assert "content   1 file, 1 chunk, 14 B" in capsys.readouterr().out


def test_create_then_ls(made, capsys) -> None:
    out, files = made
    assert main(["ls", str(out)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed == sorted(files, key=lambda p: p.encode())

    rows = _json(capsys, ["ls", str(out), "--json"])
    by_path = {r["relative_path"]: r for r in rows}
    assert set(by_path) == set(files)
    for path, data in files.items():
        row = by_path[path]
        assert row["size"] == len(data)
        assert row["repo"] == "r1" and row["pkg_type"] == 1 and row["pkg_type_name"] == "maven"
        assert row["chunks"] == max(1, -(-len(data) // BLOCK))
    assert by_path["data/blob.gz"]["compressed"] is False
    assert by_path["data/blob.gz"]["stored_size"] == len(files["data/blob.gz"])
    assert by_path["src/main.py"]["compressed"] is True
    assert by_path["src/main.py"]["stored_size"] < len(files["src/main.py"])

    assert main(["ls", str(out), "--long", "--glob", "src/*"]) == 0
    long = capsys.readouterr().out.splitlines()
    assert [ln.split()[-1] for ln in long[:-1]] == ["src/exact.bin", "src/main.py"]
    assert long[1].split()[2] == str(len(files["src/main.py"]))  # mode, repo, size, mtime
    assert long[1].split()[0].startswith("-rw")
    assert long[-1].startswith("total: 2 files, ")

    assert _json(capsys, ["ls", str(out), "--json", "--repo", "other"]) == []
    assert _json(capsys, ["ls", str(out), "--json", "--pkg-type", "pypi"]) == []
    assert len(_json(capsys, ["ls", str(out), "--json", "--pkg-type", "1"])) == len(files)


POM = "org/acme/lib/1.0/lib-1.0.pom"
WHEEL = "packages/acme/acme-1.0-py3-none-any.whl"


def test_ls_filters_across_groups(tmp_path: Path, capsys) -> None:
    out = tmp_path / "multi.znippy"
    write_archive(out, [
        Entry(POM, data=b"<project><groupId>org.acme</groupId><artifactId>lib</artifactId>"
              b"<version>1.0</version></project>", repo="central", pkg_type="maven"),
        Entry(WHEEL, data=b"PK\x03\x04", repo="pypi-local", pkg_type="pypi"),
        Entry("z.txt", data=b"zzz", repo="central", pkg_type=0),
    ], fsync=False)
    assert main(["ls", str(out), "--repo", "central"]) == 0
    assert capsys.readouterr().out.split() == [POM, "z.txt"]
    assert main(["ls", str(out), "--pkg-type", "pypi"]) == 0
    assert capsys.readouterr().out.split() == [WHEEL]
    assert main(["ls", str(out), "--repo", "central", "--pkg-type", "raw"]) == 0
    assert capsys.readouterr().out.split() == ["z.txt"]

    core = {"relative_path", "repo", "pkg_type", "pkg_type_name", "module_name", "size",
            "stored_size", "blob_size", "chunks", "compressed"}
    for row in _json(capsys, ["ls", str(out), "--json"]):
        assert core <= set(row)
        for key in set(row) - core:  # a module's own columns, only its own, never null
            assert key.startswith(row["module_name"] + "_") and row[key] is not None

    info = _json(capsys, ["info", str(out), "--json"])
    assert [(g["pkg_type"], g["repo"], g["files"]) for g in info["groups"]] == [
        (0, "central", 1), (1, "central", 1), (4, "pypi-local", 1)]
    assert info["files"] == 3


def test_cat_streams_bytes(made, capsysbinary) -> None:
    out, files = made
    capsysbinary.readouterr()
    for path in ("src/main.py", "empty", "docs/\u00e9t\u00e9/na\u00efve.md", "data/blob.gz"):
        assert main(["cat", str(out), path]) == 0
        assert capsysbinary.readouterr().out == files[path]


def test_cat_missing_path_is_bad_input(made, capsys) -> None:
    out, _ = made
    assert main(["cat", str(out), "no/such/file"]) == 2
    assert "no file 'no/such/file'" in capsys.readouterr().err


def test_extract_all_and_selection(made, tmp_path: Path, capsys) -> None:
    out, files = made
    dest = tmp_path / "all"
    assert main(["extract", str(out), "-o", str(dest)]) == 0
    assert f"{len(files)} files" in capsys.readouterr().out
    got = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert got == files

    some = tmp_path / "some"
    assert main(["extract", str(out), "-o", str(some), "--glob", "*.py"]) == 0
    assert sorted(p.relative_to(some).as_posix() for p in some.rglob("*") if p.is_file()) == [
        "src/main.py"]
    none = tmp_path / "none"
    assert main(["extract", str(out), "-o", str(none), "--repo", "elsewhere"]) == 0
    assert not any(none.rglob("*"))


def test_verify_ok(made, capsys) -> None:
    out, files = made
    assert main(["verify", str(out)]) == 0
    assert ": OK:" in capsys.readouterr().out
    report = _json(capsys, ["verify", str(out), "--json"])
    assert report["ok"] is True and report["problems"] == []
    assert report["files"] == len(files)
    assert report["bytes_checked"] == sum(map(len, files.values()))


def _corrupt_one_blob(path: Path, victim: str) -> None:
    with open_archive(path) as archive:
        chunk = archive.find(victim).chunks[1]
    with open(path, "r+b") as fh:
        fh.seek(chunk.blob_offset + chunk.blob_size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0x5A]))


def test_corrupted_archive_reports_problems(made, tmp_path: Path, capsys) -> None:
    out, files = made
    _corrupt_one_blob(out, "src/main.py")

    report = _json(capsys, ["verify", str(out), "--json"], rc=1)
    assert report["ok"] is False
    assert any("src/main.py" in p and "chunk 1" in p for p in report["problems"])
    assert main(["verify", str(out)]) == 1
    assert "PROBLEM:" in capsys.readouterr().out

    dest = tmp_path / "x"
    assert main(["extract", str(out), "-o", str(dest)]) == 1
    err = capsys.readouterr().err
    assert "src/main.py" in err
    assert not (dest / "src" / "main.py").exists()  # no partial file under the name
    assert (dest / "README.txt").read_bytes() == files["README.txt"]


def test_cat_of_a_corrupted_chunk_exits_1(made, capsysbinary) -> None:
    out, files = made
    _corrupt_one_blob(out, "src/main.py")
    capsysbinary.readouterr()
    assert main(["cat", str(out), "src/main.py"]) == 1
    captured = capsysbinary.readouterr()
    assert files["src/main.py"].startswith(captured.out)  # chunk 0 was good, then it stopped
    assert b"src/main.py" in captured.err


def test_unreadable_input_exits_2(tmp_path: Path, capsys) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not an archive at all" * 10)
    for cmd in ("verify", "info", "ls"):
        assert main([cmd, str(junk)]) == 2
        assert "ZNPYMIDX" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "missing.znippy")]) == 2
    assert "missing.znippy" in capsys.readouterr().err
    assert main(["create", str(tmp_path / "no-dir"), "-o", str(tmp_path / "o.znippy")]) == 2
    assert "no-dir: source not found" in capsys.readouterr().err
    assert not (tmp_path / "o.znippy").exists()


def test_usage_errors_exit_2(made, capsys) -> None:
    out, _ = made
    for argv in (["ls", str(out), "--pkg-type", "bogus"], ["create", "x"],
                 ["create", "x", "-o", "y", "--block-size", "0"], ["frobnicate"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    capsys.readouterr()
    assert main([]) == 2


def test_info(made, capsys) -> None:
    out, files = made
    info = _json(capsys, ["info", str(out), "--json"])
    assert info["files"] == len(files)
    assert info["bytes"] == sum(map(len, files.values()))
    assert info["archive_bytes"] == out.stat().st_size
    assert info["ratio"] == pytest.approx(info["bytes"] / info["archive_bytes"], abs=1e-3)
    assert info["codec"] == {"znippy.codec": "openzl", "znippy.openzl.graph": "zstd",
                             "znippy.openzl.level": "3", "znippy.openzl.format_version": "8",
                             "znippy.block_size": "1024", "znippy.pack": "1",
                             "znippy.index_compression": "zstd"}  # both on by default
    assert info["sections"][:2] == ["__lookup__", "__trie__"]
    (group,) = info["groups"]
    assert (group["pkg_type_name"], group["repo"], group["files"]) == ("maven", "r1", len(files))
    assert group["raw_chunks"] >= 1 and group["compressed_chunks"] >= 1
    assert len(info["manifest"]) == 1 + len(info["sections"])
    offsets = [m["index_offset"] for m in info["manifest"]]
    assert all(o % 64 == 0 for o in offsets) and offsets == sorted(offsets)
    assert info["tail_offset"] == offsets[0]

    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "graph=zstd level=3 format_version=8" in text and "__trie__" in text


def test_create_level_and_auto(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "notes.txt").write_bytes(b"plain notes " * 500)
    (src / POM).parent.mkdir(parents=True)
    (src / POM).write_bytes(b"<project><groupId>org.acme</groupId></project>")
    out = tmp_path / "lvl.znippy"
    assert main(["create", str(src), "-o", str(out), "--level", "9", "--pkg-type", "auto"]) == 0
    assert "2 files in 2 groups," in capsys.readouterr().out
    info = _json(capsys, ["info", str(out), "--json"])
    assert info["codec"]["znippy.openzl.level"] == "9"
    assert info["codec"]["znippy.block_size"] == str(10 * 1024 * 1024)
    # auto: the maven module claims the pom by its path, none claims notes.txt
    assert [g["pkg_type"] for g in info["groups"]] == [0, 1]


def test_size_arg() -> None:
    assert size_arg("65536") == 65536
    assert size_arg("64K") == size_arg("64KiB") == 64 * 1024
    assert size_arg("10m") == 10 << 20
    assert size_arg("1G") == 1 << 30


def test_progress_draws_a_bar(tmp_path: Path) -> None:
    import io

    stream = io.StringIO()
    bar = Progress("extract", total=4, stream=stream)
    bar(2, 2048)
    bar.close()
    text = stream.getvalue()
    assert text.startswith("\rextract [") and "4/4" not in text and "2/4 files" in text
    assert text.endswith("\n")


def test_subprocess_and_terminal_progress(made, tmp_path: Path) -> None:
    out, files = made
    assert CLI.exists(), CLI
    done = subprocess.run([str(CLI), "cat", str(out), "src/main.py"], capture_output=True,
                          check=False, timeout=60)
    assert done.returncode == 0 and done.stdout == files["src/main.py"]
    done = subprocess.run([str(CLI), "info", str(out), "--json"], capture_output=True,
                          check=False, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)["files"] == len(files)

    # stderr on a terminal: a progress bar is drawn there, stdout stays clean
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(CLI), "verify", str(out)], stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    tty = b"".join(chunks).decode()
    assert "\rverify [" in tty and "chunks" in tty
    assert b"OK" in stdout and b"\r" not in stdout


@pytest.mark.parametrize("hostile", ["../x", "/etc/x", "a/../../x", "C:\\x", "x\0y"])
def test_extract_of_a_hostile_archive_refuses(hostile: str, raw_archive, tmp_path: Path,
                                              capsys) -> None:
    evil = raw_archive([("ok.txt", b"fine"), (hostile, b"escaped")]).write(tmp_path / "e.znippy")
    dest = tmp_path / "jail" / "dest"
    assert main(["extract", str(evil), "-o", str(dest)]) == 2
    assert "unsafe" in capsys.readouterr().err
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")] == ["e.znippy"]
    assert main(["ls", str(evil)]) == 0  # listing is harmless: the paths are shown as stored
    assert hostile in capsys.readouterr().out.splitlines()
    assert main(["verify", str(evil)]) == 1  # an unsafe path is a finding
    assert "unsafe entry path" in capsys.readouterr().out
