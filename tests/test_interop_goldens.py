"""Archives the real Rust znippy wrote (``tests/data/rust-<version>/``, docs/interop.md), read
through every path and compared byte for byte with the corpus they were made from
(``tests/interop_corpus.py``).

Each folder's ``goldens.json`` lists its archives: the file, what it holds (``kind``: see
``interop_corpus.expected``), the features it exercises, the command that wrote it, and what
a test checks beyond the files (``meta``: the facts; ``signed``: the signatures verify against
the committed certificate; ``hot``: the name of its sealed twin; ``dirs``: recorded
directories).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import interop_corpus as corpus
from znippy_sql import NotFoundError, ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.polars import read_files, scan

DATA = Path(__file__).parent / "data"
CLI = Path(sys.executable).parent / "znippy-sql"


def _goldens() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for spec in sorted(DATA.glob("rust-*/goldens.json")):
        for entry in json.loads(spec.read_text()):
            out.append((f"{spec.parent.name}/{entry['file']}", entry))
    return out


#: the archives tests/rust10_layout.py writes from the 0.10.6 sources: what the binaries
#: cannot be made to write (a multi-chunk file, delta payloads, a hot archive, every section
#: at once)
GENERATED = ["gen-all.znippy", "gen-big.znippy", "gen-delta.znippy", "gen-hot.znippy"]
GOLDENS = _goldens() + [(f"gen/{name}", {"file": name}) for name in GENERATED]
IDS = [name for name, _ in GOLDENS]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    import rust10_layout

    root = tmp_path_factory.mktemp("gen")
    return root, {e["file"]: e for e in rust10_layout.generated(root)}


@pytest.fixture(params=GOLDENS, ids=IDS)
def golden(request: pytest.FixtureRequest, tmp_path: Path,
           generated: tuple[Path, dict[str, dict[str, Any]]]) -> tuple[Path, dict[str, Any]]:
    """A copy of the golden (and its journal segments) in a temporary folder: nothing a test
    does can touch the committed bytes."""
    name, entry = request.param
    src = DATA / name
    if name.startswith("gen/"):
        src = generated[0] / entry["file"]
        entry = generated[1][entry["file"]]
    for f in [*src.parent.glob(src.name + "*"),
              *([src.parent / entry["sealed"]] if "sealed" in entry else [])]:
        shutil.copy2(f, tmp_path / f.name)
    return tmp_path / src.name, entry


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


def test_there_are_goldens() -> None:
    assert len(GOLDENS) > len(GENERATED), IDS


def test_open_find_read_read_many(golden: tuple[Path, dict[str, Any]]) -> None:
    path, entry = golden
    want = corpus.expected(entry["kind"])
    with open_archive(path) as a:
        assert a.select() == sorted(want, key=str.encode)
        for p, data in want.items():
            assert a.read(p) == data, p
            info = a.find(p)
            assert info is not None and info.size == len(data)
            with a.open(p) as fh:
                assert fh.read() == data
        assert dict(a.read_many(want)) == want
        assert a.find("no/such") is None
        with pytest.raises(NotFoundError):
            a.read("no/such")
        assert a.not_understood() == {}, a.not_understood()


def test_extract_and_verify(golden: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, entry = golden
    want = corpus.expected(entry["kind"])
    with open_archive(path) as a:
        report = a.verify()
        assert report.ok, report.problems
        out = tmp_path / "api"
        assert a.extract(out).ok
        assert tree(out) == want
        for d in entry.get("dirs", []):
            assert (out / d).is_dir(), d
        if entry.get("modes"):
            a.extract(tmp_path / "preserved", preserve=True)
            for p, mode in entry["modes"].items():
                assert (tmp_path / "preserved" / p).stat().st_mode & 0o7777 == int(mode, 8), p


def test_cli_ls_cat_verify_extract(golden: tuple[Path, dict[str, Any]], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path, entry = golden
    want = corpus.expected(entry["kind"])
    code, out, err = run(["ls", "--json", str(path)], capsys)
    assert code == 0, err
    listed = {f["relative_path"]: f["size"] for f in json.loads(out)}
    assert listed == {p: len(d) for p, d in want.items()}
    code, out, err = run(["verify", str(path)], capsys)
    assert code == 0 and "PROBLEM" not in out, out + err
    code, out, err = run(["extract", str(path), "-o", str(tmp_path / "cli")], capsys)
    assert code == 0, err
    assert tree(tmp_path / "cli") == want
    code, out, err = run(["cat", str(path), "docs/readme.md"], capsys)
    assert code == 0, err
    code, out, err = run(["info", "--json", str(path)], capsys)
    assert code == 0, err
    laid = json.loads(out)["read_as"]
    assert (laid is not None) == (entry["kind"] in ("hot", "delta", "appended") and
                                  "sealed" not in
                                  entry.get("file", "")), laid


def test_duckdb_views_and_macros(golden: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    path, entry = golden
    want = corpus.expected(entry["kind"])
    con = duckdb.connect()
    register(con, path, "r")
    got = con.execute("SELECT relative_path, size FROM r_files").fetchall()
    assert sorted(got) == sorted((p, len(d)) for p, d in want.items())
    for p in ("hello.txt", "docs/readme.md", "random.bin"):
        rows = con.execute(f"SELECT content FROM znippy_cat('r', '{p}')").fetchall()
        assert rows == [(want[p],)], p
    dest = tmp_path / "sql"
    done = con.execute(f"SELECT relative_path, checksum_ok FROM znippy_extract('r', '{dest}')"
                       ).fetchall()
    assert sorted(p for p, _ in done) == sorted(want) and all(ok for _, ok in done)
    assert tree(dest) == want


def test_polars_scan_and_read_files(golden: tuple[Path, dict[str, Any]]) -> None:
    path, entry = golden
    want = corpus.expected(entry["kind"])
    files = scan(path).select("relative_path", "size").collect()
    assert sorted(files.rows()) == sorted((p, len(d)) for p, d in want.items())
    got = read_files(path, sorted(want))
    assert dict(zip(got.get_column("relative_path"), got.get_column("content"))) == want


def test_meta_facts(golden: tuple[Path, dict[str, Any]]) -> None:
    path, entry = golden
    if "meta" not in entry:
        pytest.skip("this golden records no __znippy_meta__")
    with open_archive(path) as a:
        meta = a.meta
        assert meta is not None
        rows = sorted((r["relative_path"] or "", r["key"], r["value"]) for r in meta.to_pylist())
    assert rows == sorted(tuple(r) for r in entry["meta"])


def test_signatures_verify(golden: tuple[Path, dict[str, Any]]) -> None:
    path, entry = golden
    if "signed" not in entry:
        pytest.skip("this golden is not signed")
    from znippy_sql.provenance.sign import signatures_table, verify_signatures

    cert = DATA / entry["signed"]  # (an absolute path for a generated golden)
    with open_archive(path) as a:
        assert verify_signatures(a, cert) == []
        table = signatures_table(a, cert)
        assert table.num_rows == len(corpus.expected(entry["kind"])) + 1
        assert all(table.column("valid").to_pylist())


def test_hot_reads_as_its_seal(golden: tuple[Path, dict[str, Any]]) -> None:
    path, entry = golden
    if "sealed" not in entry:
        pytest.skip("not a hot archive with a sealed twin")
    twin = path.parent / entry["sealed"]
    with open_archive(path) as hot, open_archive(twin) as sealed:
        assert hot.source.size != path.stat().st_size  # read with its journal's rows
        assert hot.index().select(["relative_path", "chunk_seq", "blob_offset", "blob_size",
                                   "checksum"]).equals(
            sealed.index().select(["relative_path", "chunk_seq", "blob_offset", "blob_size",
                                   "checksum"]))
        blob_end = sealed.tail_offset
    # the seal keeps the blob bytes where the hot archive has them
    assert path.read_bytes()[:blob_end] == twin.read_bytes()[:blob_end]


def test_compat_rust10_names_the_rust_sections(tmp_path: Path) -> None:
    """``--compat rust-0.10``: the data sub-indexes of rust-0.8 with the Rust format version,
    and the lookup and trie under the Rust names with pkg_type -128, read here like a Rust
    archive's (the Rust binaries read them in tests/test_interop_real.py)."""
    import pyarrow as pa

    from znippy_sql import Entry, write_archive

    src = corpus.write(tmp_path / "in")
    out = tmp_path / "ours.znippy"
    code = main(["create", str(src), "-o", str(out), "--compat", "rust-0.10"])
    assert code == 0
    with open_archive(out) as a:
        raw = a.manifest.to_pydict()
        assert sorted(zip(raw["pkg_type"], raw["module_name"])) == [
            (-128, "__znippy_lookup__"), (-128, "__znippy_meta__"), (-128, "__znippy_trie__"),
            (0, "")]  # (the CLI records its provenance facts in __znippy_meta__)
        meta = a.group_table(a.groups[0]).schema.metadata
        assert meta[b"znippy_format_version"] == b"3" and meta[b"znippy.compat"] == b"rust-0.10"
        row = a.manifest_row(next(r.key for r in a.manifest_rows if r.key.module_name ==
                                  "__lookup__"))
        lookup = pa.ipc.open_stream(out.read_bytes()[row.index_offset:][:row.index_len]
                                    ).read_all()
        assert lookup.schema.names == list(pa.schema(corpus_base()).names)
        assert not a.lookup_in_memory
        want = corpus.files()
        assert dict(a.read_many(want)) == want
    # facts go into the Rust typed __znippy_meta__; signatures are still refused
    write_archive(tmp_path / "m.znippy", [Entry("a", b"x")], compat="rust-0.10", meta={"k": "v"})
    with open_archive(tmp_path / "m.znippy") as a:
        assert "__znippy_meta__" in a.manifest.column("module_name").to_pylist()
        assert ("k", "v") in [(r["key"], r["value"]) for r in a.meta.to_pylist()]
    code = main(["create", str(src), "-o", str(tmp_path / "s.znippy"), "--compat", "rust-0.10",
                 "--sign-key", "k", "--sign-cert", "c"])
    assert code == 2


def corpus_base() -> list[Any]:
    from znippy_sql.format.schema import BASE_FIELDS

    return list(BASE_FIELDS)


def test_catalog_add_query_extract(generated: tuple[Path, dict[str, dict[str, Any]]],
                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The catalog indexes Rust archives (a hot one and one with deltas among them) and
    extracts their files through their archives, byte for byte."""
    root, entries = generated
    names = [n for n in GENERATED if n != "gen-big.znippy"]
    for n in names:
        for f in root.glob(n + "*"):
            shutil.copy2(f, tmp_path / f.name)
    wh = str(tmp_path / "wh")
    assert run(["catalog", "init", wh], capsys)[0] == 0
    code, out, err = run(["catalog", "add", wh, *(str(tmp_path / n) for n in names)], capsys)
    assert code == 0 and "3 archives added" in out, out + err
    code, out, err = run(["catalog", "extract", wh, "--where", "relative_path LIKE 'docs/%'",
                          "-o", str(tmp_path / "out")], capsys)
    assert code == 0, err
    for n in names:
        want = {p: d for p, d in corpus.expected(entries[n]["kind"]).items()
                if p.startswith("docs/")}
        assert tree(tmp_path / "out" / n.removesuffix(".znippy")) == want, n
    code, out, err = run(["catalog", "verify", wh], capsys)
    assert code == 0 and "no drift" in out, out + err


def test_delta_archive_keeps_its_sections(tmp_path: Path) -> None:
    """Laid anew, a delta archive keeps its other sections as written: its Rust signatures
    verify (by the Rust digests) and its typed facts read."""
    import rust10_layout as g
    from znippy_sql.provenance.sign import verify_signatures

    key, cert = corpus.signer(tmp_path / "keys")
    want = corpus.expected("delta")
    path = g.write(tmp_path / "ds.znippy", g.Spec(
        files=want, deltas={"docs/readme-v1.md": "docs/readme.md"},
        meta=[("hello.txt", "n", 1)], signer=(key.read_bytes(), cert.read_bytes())))
    with open_archive(path) as a:
        names = set(a.manifest.column("module_name").to_pylist())
        assert {"__znippy_sign_archive__", "__znippy_meta__", "__znippy_delta__"} <= names
        assert verify_signatures(a, cert.parent / "ca.cert.der") == []
        assert [(r["key"], r["value"]) for r in a.meta.to_pylist()] == [("n", "1")]
        assert dict(a.read_many(want)) == want


def test_remote_rust_archives(tmp_path: Path) -> None:
    """Over HTTP: a Rust 0.10 archive (Rust-named sections) and one with delta chunks read
    byte for byte (a hot archive's journal is a local file's sibling: a URL has none)."""
    from remote_server import RangeServer

    srv = RangeServer()
    try:
        for name in ("lib-meta.znippy", "lib-delta.znippy"):
            entry = {e["file"]: e for e in json.loads(
                (DATA / "rust-common-0.10.6" / "goldens.json").read_text())}[name]
            url = srv.put(name, (DATA / "rust-common-0.10.6" / name).read_bytes())
            want = corpus.expected(entry["kind"])
            with open_archive(url, cache=False) as a:
                assert dict(a.read_many(want)) == want, name
                assert a.verify().ok
            con = duckdb.connect()
            register(con, url, "r")
            got = con.execute("SELECT relative_path, size FROM r_files").fetchall()
            assert sorted(got) == sorted((p, len(d)) for p, d in want.items()), name
    finally:
        srv.close()
