"""Archives of Rust releases after 0.8 (docs/format.md §10, "Archives from releases after 0.8"):
reserved sections this reader does not understand are skipped and reported, extra columns of
any Arrow type are kept and shown, an unsealed (hot) archive is named as such, and a newer
writer's version is shown by ``info`` and named by every read failure. The layouts come from
the independent writer in tests/rust_layout.py (stand-ins where the public pages give no
bytes; that module says which)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import rust_layout as rl
from rust_cases import Case, newer_cases, newer_entries
from znippy_sql import ChecksumError, FormatError, ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql import UnsealedArchiveError
from znippy_sql.polars import read_files, scan
from znippy_sql.format.validate import _portable_type as portable_type

CASES = newer_cases()
NAMES = list(CASES)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("newer")
    return {name: case.write(root / f"{name}.znippy").path for name, case in CASES.items()}


@pytest.fixture(params=NAMES)
def case(request: pytest.FixtureRequest, written: dict[str, Path]) -> tuple[Case, Path]:
    return CASES[request.param], written[request.param]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


#: reserved sections each case holds that this reader must report as not understood
NOT_UNDERSTOOD = {
    "newer-columns": set(),
    "newer-lookup": {"__lookup__", "__trie__"},
    "newer-base-lookup": set(),  # the base columns and an fst: read as this project's own
    "newer-meta": {"__meta__"},
    "newer-unknown": {"__generations__", "__zz_raw__"},
    "newer-all": {"__lookup__", "__trie__", "__generations__", "__meta__"},
}


def test_api_reads_every_file(case: tuple[Case, Path]) -> None:
    c, path = case
    with open_archive(path) as a:
        assert set(a.not_understood()) == NOT_UNDERSTOOD[c.name]
        assert a.lookup_in_memory == (c.name != "newer-base-lookup")
        for p, data in c.files.items():
            assert a.read(p) == data, p
        assert a.select() == sorted(c.files)
        assert a.meta is None  # a __meta__ of another shape gives no facts
        report = a.verify()
        assert report.ok, report.problems
        for name in NOT_UNDERSTOOD[c.name]:
            assert any(n.startswith(f"{name}: not") for n in report.notes), report.notes


def test_cli_ls_cat_extract(case: tuple[Case, Path], tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    c, path = case
    code, out, err = run(["ls", "--json", str(path)], capsys)
    assert code == 0, err
    assert [f["relative_path"] for f in json.loads(out)] == sorted(c.files)
    code, out, err = run(["ls", "-l", str(path)], capsys)
    assert code == 0, err
    code, out, err = run(["extract", str(path), "-o", str(tmp_path / "x")], capsys)
    assert code == 0, err
    assert tree(tmp_path / "x") == c.files
    code, _, err = run(["extract", "--preserve", str(path), "-o", str(tmp_path / "p")], capsys)
    assert code == 0, err
    assert tree(tmp_path / "p") == c.files
    code = main(["cat", str(path), "ünï.txt"])
    assert code == 0


def test_info_and_verify_report_what_is_not_understood(
        case: tuple[Case, Path], capsys: pytest.CaptureFixture[str]) -> None:
    c, path = case
    code, out, err = run(["info", "--json", str(path)], capsys)
    assert code == 0, err
    info = json.loads(out)
    assert set(info["not_understood"]) == NOT_UNDERSTOOD[c.name]
    assert all(v.startswith("not ") for v in info["not_understood"].values())
    assert info["writer"] == {"key": "znippy_format_version", "version": "5", "newer": True}
    code, out, err = run(["info", str(path)], capsys)
    assert code == 0, err
    assert "writer    znippy_format_version=5, newer than 3" in out
    for name in NOT_UNDERSTOOD[c.name]:
        assert f"  {name}: not " in out
    if "__generations__" in NOT_UNDERSTOOD[c.name]:
        assert "not understood (schema generation:uint32, parents:list<item: uint32>)" in out
    code, out, err = run(["verify", str(path)], capsys)
    assert code == 0, out + err
    for name in NOT_UNDERSTOOD[c.name]:
        assert f"NOTE: {name}: not " in out


def test_extra_columns_are_kept_and_shown(written: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = written["newer-columns"]
    with open_archive(path) as a:
        idx = a.index()
        for name, (typ, _) in rl.EXTRA_COLUMNS.items():  # a dictionary reads as its values
            assert idx.schema.field(name).type == (portable_type(typ) or typ)
        row = idx.filter(pa.compute.equal(idx.column("relative_path"), "lib/a.pom")).to_pylist()[0]
        assert row["units"] == [row["blob_offset"], row["blob_size"]]
        assert row["origin"] == {"generation": 0, "tool": "znippy"}
        assert row["kind"] == "pom"
    code, out, err = run(["ls", "--json", str(path)], capsys)
    assert code == 0, err
    pom = next(f for f in json.loads(out) if f["relative_path"] == "lib/a.pom")
    assert pom["kind"] == "pom" and pom["origin"] == {"generation": 0, "tool": "znippy"}
    assert len(pom["units"]) == 2 and pom["labels"] == [["path", "lib/a.pom"]]


def test_extra_columns_in_duckdb_and_polars(written: dict[str, Path]) -> None:
    path = written["newer-all"]
    con = duckdb.connect()
    register(con, path, "n")
    rows = con.execute("SELECT relative_path, units, origin.tool FROM n_files "
                       "WHERE relative_path = 'lib/a.pom'").fetchall()
    assert rows[0][0] == "lib/a.pom" and len(rows[0][1]) == 2 and rows[0][2] == "znippy"
    assert con.execute("SELECT count(*) FROM n_chunks").fetchone() == (7,)
    got = con.execute("SELECT content FROM znippy_cat('n', 'docs/readme.txt')").fetchall()
    assert got == [(CASES["newer-all"].files["docs/readme.txt"],)]
    files = scan(path).filter(pl.col("relative_path") == "lib/a.pom").collect()
    assert files.get_column("origin").to_list() == [{"generation": 0, "tool": "znippy"}]
    assert files.get_column("units").to_list()[0] is not None
    assert scan(path, "lookup").collect().height == 7
    assert scan(path, "chunks").collect().height == 7
    got_files = read_files(path, ["big.bin", "empty"])
    assert dict(zip(got_files.get_column("relative_path"), got_files.get_column("content"))) \
        == {"big.bin": CASES["newer-all"].files["big.bin"], "empty": b""}


def test_a_base_lookup_and_fst_are_used(written: dict[str, Path]) -> None:
    """A release's __lookup__ of exactly the base columns and an fst trie are read as ours."""
    with open_archive(written["newer-base-lookup"]) as a:
        assert not a.lookup_in_memory and a.not_understood() == {}
        assert a.find("big.bin") is not None and len(a.find("big.bin").chunks) == 2


def test_bad_base_columns_are_still_refused(tmp_path: Path) -> None:
    """Widening the extra columns keeps the base ones closed: a base column of another type
    is refused, extra columns or not."""
    entries = newer_entries()[:2]
    w = rl.write_newer(tmp_path / "ok.znippy", entries, extra=("units",))
    data = bytearray(w.path.read_bytes())
    # the sub-index's schema spells chunk_seq's type as Int(32, unsigned): make it signed
    at = w.sub_indexes[0][1]
    sub = bytes(data[at : at + w.sub_indexes[0][2]])
    schema = pa.ipc.read_schema(pa.py_buffer(sub))
    fields = [pa.field(f.name, pa.int32(), nullable=False) if f.name == "chunk_seq" else f
              for f in schema]
    bad = pa.schema(fields, metadata=schema.metadata)
    table = pa.ipc.open_stream(sub).read_all()
    table = table.set_column(1, bad.field(1), table.column(1).cast(pa.int32()))
    rebuilt = rl._stream(bad, table.cast(bad).to_batches())
    path = tmp_path / "bad.znippy"
    out = rl._Out(path)
    out.write(bytes(data[: w.blob_end]))
    rl._finish(out, rl.Written(path, w.blob_end), [(w.sub_indexes[0][0], rebuilt,
                                                    table.num_rows)])
    with open_archive(path) as a, pytest.raises(FormatError, match="base columns"):
        a.read("docs/readme.txt")


def test_a_foreign_meta_in_an_archive_of_ours_is_damage(tmp_path: Path) -> None:
    """This project's archives record the sections' digests: there a __meta__ of another shape
    is refused (it is damage, not another writer's), as before."""
    from znippy_sql import write_archive

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_bytes(b"hello")
    ours = tmp_path / "ours.znippy"
    write_archive(ours, src, meta={"k": "v"})
    with open_archive(ours) as a:
        assert a.not_understood() == {} and a.understands("__meta__")


def test_newer_writer_named_by_read_failures(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A delta-encoded row (stand-in: a blob that is not its chunk) of a newer writer: the
    failure names the writer version."""
    entries = newer_entries()
    w = rl.write_newer(tmp_path / "delta.znippy", entries)
    data = bytearray(w.path.read_bytes())
    with open_archive(w.path) as a:
        ch = a.find("docs/readme.txt").chunks[0]
    data[ch.blob_offset + ch.blob_size - 3] ^= 0x55  # the frame decodes to other bytes
    w.path.write_bytes(bytes(data))
    with open_archive(w.path) as a, pytest.raises(ZnippyError) as exc:
        a.read("docs/readme.txt")
    assert "(written by a newer znippy: znippy_format_version=5, newer than 3" in str(exc.value)
    code, _, err = run(["cat", str(w.path), "docs/readme.txt"], capsys)
    assert code != 0 and "znippy_format_version=5" in err
    assert "Traceback" not in err


def test_failures_of_a_known_writer_say_nothing_more(tmp_path: Path) -> None:
    w = rl.write_newer(tmp_path / "v3.znippy", newer_entries(), format_version="3")
    data = bytearray(w.path.read_bytes())
    with open_archive(w.path) as a:
        ch = a.find("docs/readme.txt").chunks[0]
    data[ch.blob_offset + ch.blob_size - 3] ^= 0x55
    w.path.write_bytes(bytes(data))
    with open_archive(w.path) as a, pytest.raises((ChecksumError, ZnippyError)) as exc:
        a.read("docs/readme.txt")
    assert "newer" not in str(exc.value)


# -- unsealed (hot) archives -------------------------------------------------------------------
def test_hot_archive_is_named_unsealed(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    path = tmp_path / "hot.znippy"
    journal = rl.write_hot(path, newer_entries())
    for target in (path, journal):
        with pytest.raises(UnsealedArchiveError, match="this is an unsealed archive: seal it "
                                                       "with the tool that wrote it"):
            open_archive(target)
        for cmd in (["ls"], ["cat"], ["info"], ["verify"], ["extract", "-o",
                                                             str(tmp_path / "o")]):
            argv = [*cmd[:1], str(target), *cmd[1:]]
            if cmd == ["cat"]:
                argv.append("empty")
            code, out, err = run(argv, capsys)
            assert code == 2, (cmd, out, err)
            assert "unsealed archive: seal it with the tool that wrote it" in err
            assert err.count("\n") == 1 and "Traceback" not in err


def test_hot_archive_without_its_journal(tmp_path: Path) -> None:
    """Blobs from offset 0 and no footer (a hot archive whose journal is elsewhere, or an
    Iceberg sidecar): the first bytes are an OpenZL frame."""
    path = tmp_path / "sidecar.znippy"
    rl.write_hot(path, newer_entries()).unlink()
    with pytest.raises(UnsealedArchiveError, match="starts with an OpenZL frame"):
        open_archive(path)


def test_other_files_without_footer_are_not_called_unsealed(tmp_path: Path) -> None:
    junk = tmp_path / "junk.znippy"
    junk.write_bytes(b"PK\x03\x04 not an archive, long enough for a footer")
    with pytest.raises(FormatError) as exc:
        open_archive(junk)
    assert not isinstance(exc.value, UnsealedArchiveError)
    arrow = tmp_path / "table.arrows"
    arrow.write_bytes(rl._stream(pa.schema([("x", pa.int64())]), []))
    with pytest.raises(FormatError) as exc:
        open_archive(arrow)
    assert not isinstance(exc.value, UnsealedArchiveError)
    frame = struct.pack("<I", 0xD7B1A5C0 + 999) + bytes(40)  # not a format version
    (tmp_path / "f.znippy").write_bytes(frame)
    with pytest.raises(FormatError) as exc:
        open_archive(tmp_path / "f.znippy")
    assert not isinstance(exc.value, UnsealedArchiveError)


@pytest.mark.parametrize("name", ["newer-lookup", "newer-meta", "newer-unknown"])
def test_append_refuses_sections_it_does_not_understand(
        name: str, written: dict[str, Path], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An append rewrites the tail: it would drop another writer's sections without a word,
    so it refuses, naming them, and the archive is left as it was."""
    from znippy_sql import append_archive

    path = tmp_path / "a.znippy"
    path.write_bytes(written[name].read_bytes())
    before = path.read_bytes()
    src = tmp_path / "src"
    src.mkdir()
    (src / "new.txt").write_bytes(b"new")
    with pytest.raises(FormatError, match="does not understand .*append with the tool that "
                                          "wrote the archive"):
        append_archive(path, src)
    code, _, err = run(["append", str(path), str(src)], capsys)
    assert code == 2 and "not understood" in err and "Traceback" not in err
    assert path.read_bytes() == before


def test_append_to_a_release_with_a_base_lookup(written: dict[str, Path], tmp_path: Path) -> None:
    from znippy_sql import append_archive

    path = tmp_path / "a.znippy"
    path.write_bytes(written["newer-base-lookup"].read_bytes())
    src = tmp_path / "src"
    src.mkdir()
    (src / "new.txt").write_bytes(b"new")
    append_archive(path, src)
    with open_archive(path) as a:
        assert a.read("new.txt") == b"new" and a.verify().ok
        for p, data in CASES["newer-base-lookup"].files.items():
            assert a.read(p) == data


def test_view_failures_name_a_newer_writer(tmp_path: Path) -> None:
    """A sub-index the views cannot load, on a newer writer's archive: DuckDB's and Polars'
    errors name the writer's version too."""
    w = rl.write_newer(tmp_path / "ok.znippy", newer_entries())
    data = w.path.read_bytes()
    path = tmp_path / "n.znippy"
    out = rl._Out(path)
    out.write(data[: w.blob_end])
    subs = [(key, data[at : at + n], count + (i == 0))  # the first one's row count lies
            for i, (key, at, n, count) in enumerate(w.sub_indexes)]
    rl._finish(out, rl.Written(path, w.blob_end), subs)
    with pytest.raises(ZnippyError, match="written by a newer znippy: znippy_format_version=5"):
        scan(path).collect()
    con = duckdb.connect()
    with pytest.raises(ZnippyError, match="written by a newer znippy: znippy_format_version=5"):
        register(con, path, "n")
        con.execute("SELECT count(*) FROM n_files").fetchall()


def test_catalog_takes_extra_columns(written: dict[str, Path], tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    cat = tmp_path / "cat"
    assert main(["catalog", "init", str(cat)]) == 0
    assert main(["catalog", "add", str(cat), str(written["newer-columns"])]) == 0
    capsys.readouterr()
    code, out, err = run(["catalog", "sql", str(cat), "SELECT relative_path, kind, units "
                          "FROM files WHERE relative_path = 'lib/a.pom'"], capsys)
    assert code == 0, err
    assert "lib/a.pom" in out and "pom" in out


def test_over_http(written: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> None:
    """The same answers for an archive behind a URL (the local test server): sections not
    understood, extra columns, and a hot archive's blob region named unsealed."""
    from remote_server import RangeServer

    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))
    srv = RangeServer()
    try:
        srv.put("all.znippy", written["newer-all"].read_bytes())
        hot = tmp_path / "hot.znippy"
        rl.write_hot(hot, newer_entries())
        srv.put("hot.znippy", hot.read_bytes())
        url = f"{srv.url}/all.znippy"
        with open_archive(url, cache=False) as a:
            assert set(a.not_understood()) == NOT_UNDERSTOOD["newer-all"]
            for p, data in CASES["newer-all"].files.items():
                assert a.read(p) == data
        code, out, err = run(["info", "--json", "--no-cache", url], capsys)
        assert code == 0, err
        assert set(json.loads(out)["not_understood"]) == NOT_UNDERSTOOD["newer-all"]
        code, out, err = run(["ls", "--json", "--no-cache", url], capsys)
        assert code == 0 and '"origin"' in out, err
        with pytest.raises(UnsealedArchiveError, match="starts with an OpenZL frame"):
            open_archive(f"{srv.url}/hot.znippy", cache=False)
    finally:
        srv.close()


def test_a_lookup_without_its_trie_is_not_used(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    w = rl.write_newer(tmp_path / "half.znippy", newer_entries(),
                       sections={"__lookup__": rl.base_lookup})
    with open_archive(w.path) as a:
        assert a.not_understood() == {"__lookup__": "not used (no __trie__ beside it)"}
        assert a.lookup_in_memory and a.read("big.bin") == CASES["newer-all"].files["big.bin"]
    code, out, _ = run(["verify", str(w.path)], capsys)
    assert code == 0 and "NOTE: __lookup__: not used (no __trie__ beside it)" in out


# -- damage to a newer archive: still a ZnippyError, a verify finding, or the right bytes -------
def _exercise(path: Path, files: dict[str, bytes], tmp: Path) -> str:
    """Every read path on ``path``: "error" when one refused (a ZnippyError, the only
    exception allowed) or verify found something, else "ok" with every file read back right."""
    from znippy_sql.cli.core import archive_info, file_table

    def refused(fn: object) -> bool:
        try:
            fn()  # type: ignore[operator]
        except ZnippyError:
            return True
        return False

    try:
        archive = open_archive(path)
    except ZnippyError:
        return "error"
    bad = False
    wrong = []
    with archive:
        for p, want in files.items():
            try:
                if archive.read(p) != want:
                    wrong.append(p)
            except ZnippyError:
                bad = True
        try:
            report = archive.verify()
            bad |= not report.ok
            assert not wrong or not report.ok, f"{wrong} read back wrong, verify saw nothing"
        except ZnippyError:
            bad = True
        for fn in (lambda: file_table(archive), lambda: archive_info(archive),
                   lambda: archive.extract(tmp / "x", workers=2)):
            bad |= refused(fn)
    bad |= refused(lambda: register(duckdb.connect(), path, "d"))
    bad |= refused(lambda: scan(path).collect())
    bad |= refused(lambda: scan(path, "lookup").collect())
    return "error" if bad else "ok"


@pytest.mark.slow
def test_flips_and_cuts_in_a_newer_tail(written: dict[str, Path], tmp_path: Path) -> None:
    """Flipped bytes across the tail of an archive with extra columns (lists, structs,
    dictionaries, maps) and sections not understood, and cuts of it: each is refused, found
    by verify, or harmless."""
    c = CASES["newer-all"]
    data = written["newer-all"].read_bytes()
    with open_archive(written["newer-all"]) as a:
        tail = a.blob_end
    bad_path = tmp_path / "bad.znippy"
    outcomes = set()
    for n, i in enumerate(range(tail, len(data), 131)):
        flipped = bytearray(data)
        flipped[i] ^= (0x01, 0x80, 0xFF)[n % 3]
        bad_path.write_bytes(bytes(flipped))
        outcomes.add(_exercise(bad_path, c.files, tmp_path))
    assert "error" in outcomes
    for cut in range(tail, len(data), 509):
        bad_path.write_bytes(data[:cut])
        assert _exercise(bad_path, c.files, tmp_path) == "error", cut
