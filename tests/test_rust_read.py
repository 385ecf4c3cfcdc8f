"""Every read path on archives laid out as the Rust tool v0.8 writes them (tests/rust_layout.py),
checked against the source files: unaligned streams, no __lookup__/__trie__, rows in write
order in two batches, level-19 frames of format version 24 with checksums, compressed empty
and incompressible chunks, the Maven pkg_type on every file, 8 MiB stream rounds."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import rust_layout as rl
from rust_cases import Case, cases
from znippy_sql import NotFoundError, append_archive, open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.polars import read_files, scan

CLI = Path(sys.executable).parent / "znippy-sql"
CASES = cases()
NAMES = list(CASES)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, rl.Written]:
    root = tmp_path_factory.mktemp("rust")
    return {name: case.write(root / f"{name}.znippy") for name, case in CASES.items()}


@pytest.fixture(params=NAMES)
def case(request: pytest.FixtureRequest, written: dict[str, rl.Written]) -> tuple[Case, Path]:
    return CASES[request.param], written[request.param].path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_the_layout_is_the_rust_one(written: dict[str, rl.Written]) -> None:
    """What the fixtures must hold for the tests below to mean anything."""
    cli = written["cli"]
    assert cli.blob_end % 8, "the first stream should start misaligned"
    schema, batches = rl.read_multi_index(cli.path)
    rows = batches[0].to_pylist()
    by = {(r["relative_path"], r["chunk_seq"]): r for r in rows}
    assert by[("empty.txt", 0)]["compressed"] and by[("empty.txt", 0)]["blob_size"] > 0
    assert not by[("empty.jar", 0)]["compressed"] and by[("empty.jar", 0)]["blob_size"] == 0
    noisy = by[("random.bin", 0)]
    assert noisy["compressed"] and noisy["blob_size"] > noisy["uncompressed_size"]
    assert max(r["chunk_seq"] for r in rows if r["relative_path"] == "big/multi.bin") == 3
    order = [(r["relative_path"], r["chunk_seq"]) for r in rows]
    assert order != sorted(order)  # write order, not path order
    frame = Path(cli.path).read_bytes()[by[("docs/readme.txt", 0)]["blob_offset"]:][:4]
    assert int.from_bytes(frame, "little") - 0xD7B1A5C0 == rl.FORMAT_VERSION
    meta = {k.decode(): v.decode() for k, v in schema.metadata.items()}
    assert meta["compression_level"] == "19" and meta["znippy_format_version"] == "3"
    raw = pa.ipc.open_stream(Path(cli.path).read_bytes()[cli.blob_end:]).read_all()
    assert raw.to_batches()[0].num_rows + raw.to_batches()[1].num_rows == len(rows)  # 2 batches


def test_open_find_read(case: tuple[Case, Path]) -> None:
    c, path = case
    with open_archive(path) as a:
        assert a.lookup_in_memory and a.sections == []
        # (a CLI archive of no files still has its one, empty, group)
        assert {c.groups[p] for p in c.files} <= {(k.pkg_type, k.repo) for k in a.groups}
        for p, data in c.files.items():
            assert a.read(p) == data, p
            info = a.find(p)
            assert info is not None and info.size == len(data)
            with a.open(p) as fh:
                assert fh.read() == data
                if len(data) > 10:
                    fh.seek(len(data) // 2)
                    assert fh.read(7) == data[len(data) // 2 : len(data) // 2 + 7]
        assert a.find("no/such") is None
        with pytest.raises(NotFoundError):
            a.read("no/such")
        assert a.select() == sorted(c.files)
        lk = a.lookup
        keys = list(zip(lk.column("relative_path").to_pylist(), lk.column("chunk_seq").to_pylist()))
        assert keys == sorted(keys, key=lambda k: (k[0].encode(), k[1]))
        assert len(a.trie) == len(c.files)
        assert a.blob_end == min((r.index_offset for r in a.manifest_rows), default=0)


def test_ls_cat_info_verify(case: tuple[Case, Path], capsys: pytest.CaptureFixture[str]) -> None:
    c, path = case
    code, out, _ = run(["ls", "--json", str(path)], capsys)
    assert code == 0
    listed = json.loads(out)
    assert [f["relative_path"] for f in listed] == sorted(c.files)
    for f in listed:
        assert (f["pkg_type"], f["repo"]) == c.groups[f["relative_path"]]
        assert f["size"] == len(c.files[f["relative_path"]])
    code, out, _ = run(["info", "--json", str(path)], capsys)
    info = json.loads(out)
    assert code == 0 and info["lookup"] == "in memory" and info["sections"] == []
    assert info["files"] == len(c.files)
    if c.files:
        assert info["codec"] == c.metadata  # the Rust writer's keys, as written
        code, out, _ = run(["info", str(path)], capsys)
        assert "compression_level=19" in out and "znippy_format_version=3" in out
    code, out, _ = run(["verify", str(path)], capsys)
    assert code == 0, out
    assert "NOTE: no __lookup__ or __trie__" in out and "PROBLEM" not in out
    code, out, _ = run(["verify", "--json", str(path)], capsys)
    report = json.loads(out)
    assert report["ok"] and report["files"] == len(c.files) and report["notes"]


def test_cat_writes_the_bytes(written: dict[str, rl.Written]) -> None:
    c = CASES["cli"]
    for p in ("big/multi.bin", "empty.txt", "ünï/名前.txt"):
        got = subprocess.run([str(CLI), "cat", str(written["cli"].path), p],
                             capture_output=True, check=True)
        assert got.stdout == c.files[p]


def test_extract_with_every_filter(case: tuple[Case, Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    c, path = case
    code, out, err = run(["extract", str(path), "-o", str(tmp_path / "all")], capsys)
    assert code == 0, err
    assert tree(tmp_path / "all") == c.files
    with open_archive(path) as a:
        for repo in sorted({r for _, r in c.groups.values()}):
            report = a.extract(tmp_path / f"repo-{repo or 'none'}", repo=repo)
            want = {p: d for p, d in c.files.items() if c.groups[p][1] == repo}
            assert report.ok and tree(tmp_path / f"repo-{repo or 'none'}") == want
        for pkg in sorted({t for t, _ in c.groups.values()}):
            a.extract(tmp_path / f"type-{pkg}", pkg_type=pkg)
            want = {p: d for p, d in c.files.items() if c.groups[p][0] == pkg}
            assert tree(tmp_path / f"type-{pkg}") == want
        a.extract(tmp_path / "glob", glob="*.txt")
        assert tree(tmp_path / "glob") == {p: d for p, d in c.files.items()
                                           if fnmatch.fnmatch(p, "*.txt")}
        some = sorted(c.files)[:3]
        a.extract(tmp_path / "some", paths=some)
        assert tree(tmp_path / "some") == {p: c.files[p] for p in some}
        if c.files:
            report = a.extract(tmp_path / "threads", workers=3)
            assert report.ok and tree(tmp_path / "threads") == c.files


def test_duckdb_views_and_macros(case: tuple[Case, Path], tmp_path: Path) -> None:
    c, path = case
    con = duckdb.connect()
    register(con, path, "r")
    files = con.execute("SELECT relative_path, size, pkg_type, repo FROM r_files "
                    "ORDER BY relative_path").fetchall()
    assert files == sorted((p, len(d), *c.groups[p]) for p, d in c.files.items())
    lookup = con.execute("SELECT relative_path, chunk_seq FROM r_lookup").fetchall()
    with open_archive(path) as a:
        lk = a.lookup
        assert lookup == list(zip(lk.column("relative_path").to_pylist(),
                                  lk.column("chunk_seq").to_pylist()))
        chunks = a.lookup.num_rows
    assert con.execute("SELECT count(*) FROM r_chunks").fetchone() == (chunks,)
    assert con.execute("SELECT count(*) FROM r_manifest").fetchone() == (len(a.manifest_rows),)
    ls = con.execute("SELECT relative_path FROM znippy_ls('r')").fetchall()
    assert [p for (p,) in ls] == sorted(c.files)
    for p in list(c.files)[:3]:
        got = con.execute(f"SELECT content FROM znippy_cat('r', '{p}')").fetchall()
        assert got == [(c.files[p],)]
    dest = tmp_path / "sql"
    got = con.execute(f"SELECT relative_path, checksum_ok FROM znippy_extract('r', '{dest}')"
                  ).fetchall()
    assert sorted(p for p, _ in got) == sorted(c.files) and all(ok for _, ok in got)
    assert tree(dest) == c.files


def test_polars_scan_and_read_files(case: tuple[Case, Path]) -> None:
    c, path = case
    files = scan(path).select("relative_path", "size", "pkg_type").sort("relative_path").collect()
    assert files.rows() == sorted((p, len(d), c.groups[p][0]) for p, d in c.files.items())
    chunks = scan(path, "chunks").collect()
    lookup = scan(path, "lookup").collect()
    assert chunks.height == lookup.height
    assert lookup.get_column("relative_path").to_list() == sorted(
        lookup.get_column("relative_path").to_list(), key=str.encode)
    got = read_files(path, sorted(c.files))
    assert dict(zip(got.get_column("relative_path"), got.get_column("content"))) == c.files
    if c.files:
        txt = read_files(path, scan(path).filter(pl.col("relative_path").str.ends_with(".txt")))
        assert txt.height == sum(p.endswith(".txt") for p in c.files)


def test_module_columns_of_a_wasm_plugin(written: dict[str, rl.Written]) -> None:
    """A plugin with columns: base + pkg_type (null where the plugin saw nothing) + its own,
    shown as the archive has them."""
    with open_archive(written["cli-wasm-plugin"].path) as a:
        (key,) = a.groups
        t = a.group_table(key)
        assert t.schema.names[8:] == ["pkg_type", "group_id", "artifact_id", "version"]
        rows = {(r["relative_path"], r["chunk_seq"]): r for r in t.to_pylist()}
        assert rows[("org/acme/lib/1.0/lib-1.0.pom", 0)]["group_id"] == "org.acme"
        assert rows[("docs/readme.txt", 0)]["group_id"] is None
    files = scan(written["cli-wasm-plugin"].path).collect()
    pom = files.filter(pl.col("relative_path") == "org/acme/lib/1.0/lib-1.0.pom")
    assert pom.get_column("group_id").to_list() == ["org.acme"]
    assert set(files.get_column("pkg_type").to_list()) == {1}  # the group's, on every file


def test_append_keeps_the_old_bytes(written: dict[str, rl.Written], tmp_path: Path) -> None:
    """Appending to a Rust 0.8 archive: new blobs at its blob end, the old bytes before it
    untouched, the result in the Rust 0.8 layout it had (data sub-indexes of one schema and
    the manifest, no lookup: write/rustappend.py) with every file readable."""
    for name in ("cli", "stream", "cli-zero"):
        c, src = CASES[name], written[name]
        path = tmp_path / f"{name}.znippy"
        shutil.copyfile(src.path, path)
        before = path.read_bytes()
        new = tmp_path / f"new-{name}"
        (new / "added").mkdir(parents=True)
        (new / "added" / "one.txt").write_bytes(b"one\n" * 100)
        replaced = next(iter(c.files), None)
        if replaced is not None:
            (new / replaced).parent.mkdir(parents=True, exist_ok=True)
            (new / replaced).write_bytes(b"replaced")
        # the Rust keys record no level of ours: any level may be asked for; a file given no
        # package type joins an archive's one group, but "stream" has several: it may move
        report = append_archive(path, new, move=True,
                                **({"level": 19} if name == "stream" else {}))
        after = path.read_bytes()
        assert report.old_blob_end == src.blob_end
        assert after[: src.blob_end] == before[: src.blob_end]
        want = dict(c.files)
        want["added/one.txt"] = b"one\n" * 100
        if replaced is not None:
            want[replaced] = b"replaced"
        with open_archive(path) as a:
            assert a.lookup_in_memory and a.sections == []
            assert {p: a.read(p) for p in a.select()} == want
            assert a.verify().ok


def test_golden_rust_archive() -> None:
    """tests/data/rust-0.8-cli.znippy (made by tests/data/make_rust_golden.py) still reads."""
    spec = importlib.util.spec_from_file_location(
        "make_rust_golden", Path(__file__).parent / "data" / "make_rust_golden.py")
    assert spec is not None and spec.loader is not None
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    files, path = golden.golden_files(), golden.GOLDEN
    with open_archive(path) as a:
        assert a.lookup_in_memory and a.groups[0].pkg_type == rl.MAVEN
        assert {p: a.read(p) for p in a.select()} == files
        assert a.verify().ok
    assert rl.decompress_archive(path) == files


@pytest.mark.slow
def test_chunks_of_200_mib_over_cores(tmp_path: Path) -> None:
    """The CLI's real chunk size on two cores: 200 MiB / 2 workers = 100 MiB chunks."""
    from rust_cases import blocks

    size = rl.cli_slice_size(2)
    assert size == 100 * 1024 * 1024
    files = {"huge.bin": blocks(size + 1, "huge"), "small.txt": b"small\n"}
    w = rl.write_cli(tmp_path / "huge.znippy", files, cores=2)
    del files["huge.bin"]
    with open_archive(w.path) as a:
        info = a.find("huge.bin")
        assert info is not None and [c.uncompressed_size for c in info.chunks] == [size, 1]
        report = a.extract(tmp_path / "out")
        assert report.ok and a.verify().ok
    assert (tmp_path / "out" / "huge.bin").read_bytes() == blocks(size + 1, "huge")
    assert (tmp_path / "out" / "small.txt").read_bytes() == b"small\n"
