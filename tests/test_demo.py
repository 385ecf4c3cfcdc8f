"""``python -m znippy_sql.demo``: it builds an archive that verifies, from a deterministic corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from znippy_sql import demo, open_archive


def test_demo_builds_an_archive_that_verifies(tmp_path: Path, capsys) -> None:
    result = demo.run(str(tmp_path / "out"))
    text = capsys.readouterr().out
    archive_path = Path(result["archive"])
    assert archive_path.is_file() and result["verified"] is True
    assert "Done in" in text and "7. verify: OK" in text
    # the DuckDB query's rows (repo, type, files, bytes, stored): the stored bytes add up to
    # at most the archive (issue 35: a packed file was charged its whole frame)
    import ast

    rows = [ast.literal_eval(ln.strip()) for ln in text.splitlines()
            if ln.startswith("    (")]
    assert len(rows) == 2 and all(stored <= size for *_, size, stored in rows)
    assert 0 < sum(r[-1] for r in rows) <= archive_path.stat().st_size

    files = demo.corpus()
    assert 200 <= len(files) <= 1000  # "a few hundred"
    assert {(f.repo, f.pkg_type) for f in files} == {(demo.MAVEN_REPO, "maven"),
                                                     (demo.PYPI_REPO, "pypi")}
    suffixes = {f.relative_path.rsplit(".", 1)[-1] for f in files}
    assert {"jar", "whl", "gz", "pom", "html", "txt"} <= suffixes

    with open_archive(archive_path) as archive:
        report = archive.verify()
        assert report.ok and report.files == len(files)
        assert sorted({(g.pkg_type, g.repo) for g in archive.groups}) == [
            (1, demo.MAVEN_REPO), (4, demo.PYPI_REPO)]
        for f in files[:: max(1, len(files) // 25)]:
            assert archive.read(f.relative_path) == f.data
        lookup = archive.lookup
        compressed = lookup.column("compressed").to_pylist()
        assert any(compressed) and not all(compressed)  # text frames and raw .jar/.whl/.gz
        big = archive.find("io/znippy/handbook/1.0/handbook-1.0-manual.txt")
        assert big is not None and len(big.chunks) > 1

    extracted = Path(result["extracted"])
    pypi = {f.relative_path: f.data for f in files if f.repo == demo.PYPI_REPO}
    got = {p.relative_to(extracted).as_posix(): p.read_bytes()
           for p in extracted.rglob("*") if p.is_file()}
    assert got == pypi


def test_demo_is_deterministic_and_runs_as_a_module(tmp_path: Path) -> None:
    assert demo.corpus() == demo.corpus()
    done = subprocess.run([sys.executable, "-m", "znippy_sql.demo", str(tmp_path / "a")],
                          capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "identical to the corpus: True" in done.stdout
    demo.run(str(tmp_path / "b"))
    first = (tmp_path / "a" / "demo.znippy").read_bytes()
    assert first == (tmp_path / "b" / "demo.znippy").read_bytes()
    # a second run into the same directory replaces its outputs cleanly
    demo.run(str(tmp_path / "a"))
    assert (tmp_path / "a" / "demo.znippy").read_bytes() == first
