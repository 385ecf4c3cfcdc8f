"""verify: ``--trust`` adds checks and removes none; ``--signatures-only`` says what it skipped;
repeated findings are grouped (issue 16, items 1 and 7)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from znippy_sql import Entry, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.cli.findings import grouped

from _users import make_cert


@pytest.fixture
def signed(tmp_path: Path) -> dict[str, Path]:
    key, cert = make_cert(tmp_path, "signer")
    _, other = make_cert(tmp_path, "other")
    out = tmp_path / "s.znippy"
    entries = [Entry(f"pkg/m{i:02}.py", data=(b"x = %d\n" % i) * 50) for i in range(12)]
    # stored raw: a skip-listed name, and bytes the probe finds incompressible
    entries.append(Entry("raw.zip", data=random.Random(4).randbytes(1024)))
    write_archive(out, entries, workers=1, signer=(key, cert))
    return {"archive": out, "cert": cert, "other": other}


def _flip(src: Path, dst: Path, path: str, n: int = 4) -> None:
    shutil.copyfile(src, dst)
    with open_archive(src) as a:
        chunk = a.find(path).chunks[0]
    with open(dst, "r+b") as fh:
        for i in range(n):
            fh.seek(chunk.blob_offset + 10 + i)
            b = fh.read(1)
            fh.seek(chunk.blob_offset + 10 + i)
            fh.write(bytes([b[0] ^ 0xFF]))


def test_trust_checks_everything_verify_checks(signed, tmp_path: Path, capsys) -> None:
    bad = tmp_path / "flipped.znippy"
    _flip(signed["archive"], bad, "raw.zip")
    assert main(["verify", str(bad)]) == 1
    plain = capsys.readouterr().out
    assert "BLAKE3 mismatch" in plain
    # the issue: --trust printed "OK: 0 files, 0 chunks, 0 B checked" and exited 0
    assert main(["verify", str(bad), "--trust", str(signed["cert"])]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: 'raw.zip'" in out and "BLAKE3 mismatch" in out
    assert "13 files" in out and "0 B checked" not in out
    # the fast mode is explicit and says what it did not check
    assert main(["verify", str(bad), "--trust", str(signed["cert"]), "--signatures-only"]) == 0
    out = capsys.readouterr().out
    assert "OK (signatures only)" in out and "blob content NOT checked" in out
    assert "13 files" in out
    report = json.loads(_run_json(capsys, ["verify", str(bad), "--trust", str(signed["cert"]),
                                           "--signatures-only", "--json"], 0))
    assert report["not_checked"] == ["content"] and report["files"] == 13
    assert main(["verify", str(bad), "--trust", str(signed["cert"]), "--signatures-only",
                 "--deep"]) == 1
    capsys.readouterr()


def _run_json(capsys, argv: list[str], rc: int) -> str:
    assert main(argv) == rc
    return capsys.readouterr().out


def test_a_good_signed_archive_passes_every_mode(signed, capsys) -> None:
    a, cert = str(signed["archive"]), str(signed["cert"])
    for extra in ([], ["--trust", cert], ["--trust", cert, "--signatures-only"]):
        assert main(["verify", a, *extra]) == 0, extra
    capsys.readouterr()
    report = json.loads(_run_json(capsys, ["verify", a, "--trust", cert, "--json"], 0))
    assert report["checked"] == ["structure", "content", "meta", "signatures"]
    assert report["not_checked"] == [] and report["bytes_checked"] > 0


def test_signatures_only_on_an_unsigned_archive_is_a_finding(tmp_path: Path, capsys) -> None:
    out = tmp_path / "u.znippy"
    write_archive(out, [Entry("a", data=b"a")])
    assert main(["verify", str(out), "--signatures-only"]) == 1
    assert "archive is not signed" in capsys.readouterr().out


def test_wrong_trust_prints_one_grouped_line(signed, capsys) -> None:
    a, other = str(signed["archive"]), str(signed["other"])
    assert main(["verify", a, "--trust", other]) == 1
    lines = capsys.readouterr().out.splitlines()
    problems = [line for line in lines if line.startswith("PROBLEM:")]
    assert problems[0].startswith("PROBLEM: 13 files: signer CN=signer is not trusted")
    assert "(first: 'pkg/m00.py', 'pkg/m01.py', 'pkg/m02.py', ...)" in problems[0]
    assert any(p.startswith("PROBLEM: archive root: ") for p in problems)
    assert len(problems) == 2
    assert "(14 in all; every one with -v or --json)" in "\n".join(lines)
    assert main(["verify", a, "--trust", other, "-v"]) == 1
    every = [x for x in capsys.readouterr().out.splitlines() if x.startswith("PROBLEM:")]
    assert len(every) == 14
    report = json.loads(_run_json(capsys, ["verify", a, "--trust", other, "--json"], 1))
    assert len(report["problems"]) == 14


def test_grouping_keeps_few_and_distinct_findings_apart() -> None:
    few = ["'a': broken", "'b': broken", "'c' chunk 2: BLAKE3 mismatch", "manifest: bad"]
    assert grouped(few) == few
    many = [f"'f{i}' chunk 0: BLAKE3 mismatch" for i in range(5)] + ["'g': other"]
    assert grouped(many) == ["5 files: BLAKE3 mismatch (first: 'f0', 'f1', 'f2', ...)",
                             "'g': other"]
