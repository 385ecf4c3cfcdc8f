"""The Rust tool's Iceberg-backed archive (``znippy`` 0.10.1 built with ``--features iceberg``):
its tables read with pyiceberg, its seal written here byte for byte (docs/interop.md,
"Iceberg-backed archives").

Goldens (``tests/data/rust-0.10.1/``, tests/data/README.md): in ``iceberg/``, the sidecars
``ice_generic`` and ``ice_maven`` of one warehouse ``ice-wh/`` (its redb catalog committed
gzip'd); beside the other goldens, the real seal ``ice_generic-sealed.znippy`` (the golden
reads of tests/test_interop_goldens.py read it through every path). The warehouse was written at ``/tmp/znippy-iceberg-golden/ice-wh``: read
here from a copy elsewhere, which the files' absolute locations do not name. The live tests run
``/opt/znippy-0.10.1-iceberg/bin/znippy`` (or ``$ZNIPPY_ICEBERG_BIN``) when it is there.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

import interop_corpus as corpus
from znippy_sql import ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.format.schema import RESERVED_PKG_TYPE, GroupKey
from znippy_sql.interop.icebergrs import namespace_of, rust_iceberg_rows, rust_tables
from znippy_sql.write.rusticeberg import seal_rust_iceberg

DATA = Path(__file__).parent / "data" / "rust-0.10.1"
SEALED = DATA / "ice_generic-sealed.znippy"
BIN = Path(os.environ.get("ZNIPPY_ICEBERG_BIN", "/opt/znippy-0.10.1-iceberg/bin/znippy"))
live = pytest.mark.skipif(not BIN.is_file(), reason=f"no znippy built with --features iceberg "
                          f"at {BIN} (docs/interop.md, 'Building the real tools')")


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A copy of the goldens in a temporary folder, the catalog unpacked."""
    wh = tmp_path / "wh"
    shutil.copytree(DATA / "iceberg" / "ice-wh", wh)
    gz = wh / "catalog.redb.gz"
    (wh / "catalog.redb").write_bytes(gzip.decompress(gz.read_bytes()))
    gz.unlink()
    for name in ("ice_generic.znippy", "ice_maven.znippy"):
        shutil.copy2(DATA / "iceberg" / name, tmp_path / name)
    return tmp_path


def _checksums() -> dict[str, bytes]:
    return {p: blake3(d).digest() for p, d in corpus.files().items()}


def test_pyiceberg_reads_their_tables(golden: Path) -> None:
    tables = {t.name: t for t in rust_tables(golden / "wh", "ice_maven")}
    assert sorted(tables) == ["idx_003_0", "idx_128_znippy_fsmeta_1"]
    data = tables["idx_003_0"].read()
    # stored widened: uint32 as int, uint64 as long, the checksum as binary
    assert str(data.schema.field("chunk_seq").type) == "int32"
    assert str(data.schema.field("checksum").type) == "large_binary"
    rows = data.to_pylist()
    assert {r["relative_path"]: r["checksum"] for r in rows} == _checksums()
    assert {r["uncompressed_size"] for r in rows if r["relative_path"] == "hello.txt"} == {14}
    claimed = {r["relative_path"]: (r["pkg_type"], r["group_id"], r["artifact_id"],
                                    r["version"], r["packaging"]) for r in rows
               if r["pkg_type"] is not None}  # the maven plugin reads the pom
    assert claimed == {"maven/org/example/demo/1.2.3/demo-1.2.3.pom": (
        3, "org.example", "demo", "1.2.3", "jar")}
    fsmeta = {r["relative_path"]: (r["kind"], r["mode"])
              for r in tables["idx_128_znippy_fsmeta_1"].read().to_pylist()}
    assert fsmeta["empty-dir"][0] == 0 and fsmeta["bin/run.sh"] == (1, 0o755)
    # the base rows the seal takes: unsigned again, the checksum 32 bytes
    base = rust_iceberg_rows(golden / "wh", "ice_generic")
    assert str(base.schema.field("blob_offset").type) == "uint64"
    assert dict(zip(base.column("relative_path").to_pylist(),
                    base.column("checksum").to_pylist())) == _checksums()


def test_we_seal_into_their_seal(golden: Path, capsys: pytest.CaptureFixture[str]) -> None:
    want = SEALED.read_bytes()
    for name in ("ice_generic", "ice_maven"):  # the seal drops the plugin columns
        out = golden / f"{name}-ours.znippy"
        assert seal_rust_iceberg(golden / f"{name}.znippy", golden / "wh", out) == len(want)
        assert out.read_bytes() == want, name
    out = golden / "cli.znippy"
    code = main(["store", "seal", "--sidecar", str(golden / "ice_generic.znippy"),
                 "--warehouse", str(golden / "wh"), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert out.read_bytes() == want
    with open_archive(out) as a:
        assert dict(a.read_many(corpus.files())) == corpus.files()
        assert a.groups[0] == (0, "", "")
        assert a.group_table(a.groups[0]).schema.metadata is None  # no format version


def test_namespace_with_a_hyphen(golden: Path) -> None:
    """The Rust compress names the namespace by the stem made alphanumeric; the Rust seal's
    default is the stem as it is (it finds no table for ``ice-generic``: live test below),
    ours the compress's name; a namespace given is taken as it is."""
    side = golden / "ice-generic.znippy"
    shutil.copy2(golden / "ice_generic.znippy", side)
    assert namespace_of(side) == "ice_generic"
    assert namespace_of("/x/_é-b_.v1.znippy") == "b__v1"  # (Rust trims the '_' at the ends)
    seal_rust_iceberg(side, golden / "wh", golden / "x.znippy")
    assert (golden / "x.znippy").read_bytes() == SEALED.read_bytes()
    with pytest.raises(ZnippyError, match=r"no table of namespace 'ice-generic'.*ice_generic"):
        seal_rust_iceberg(side, golden / "wh", golden / "y.znippy", namespace="ice-generic")
    assert not (golden / "y.znippy").exists()


def test_open_archive_with_the_warehouse(golden: Path, tmp_path: Path) -> None:
    """``open_archive(sidecar, warehouse=W)``: the archive the inline sink would have
    written, its tables as sub-indexes (the plugin columns kept) and ``__znippy_fsmeta__``."""
    want = corpus.files()
    for name, pkg_type in (("ice_generic", 26), ("ice_maven", 3)):
        with open_archive(golden / f"{name}.znippy", warehouse=golden / "wh") as a:
            assert a.groups == [(pkg_type, "", "")]
            assert a.sections == ["__znippy_fsmeta__"] and a.not_understood() == {}
            assert a.select() == sorted(want, key=str.encode)
            assert dict(a.read_many(want)) == want
            for p, data in want.items():
                assert a.read(p) == data
            assert a.verify().ok
            out = tmp_path / name
            assert a.extract(out, preserve=True).ok
            assert (out / "empty-dir").is_dir()
            assert (out / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755
            table = a.group_table(a.groups[0])
            if name == "ice_maven":
                assert table.schema.field("pkg_type").type == "int8"
                got = [r for r in table.to_pylist() if r["pkg_type"] is not None]
                assert [(r["relative_path"], r["artifact_id"]) for r in got] == [
                    ("maven/org/example/demo/1.2.3/demo-1.2.3.pom", "demo")]
    # the default namespace is the compress's; another one is taken as given
    side = golden / "ice-maven.znippy"
    shutil.copy2(golden / "ice_maven.znippy", side)
    with open_archive(side, warehouse=golden / "wh") as a:
        assert a.groups == [(3, "", "")]
    with open_archive(side, warehouse=golden / "wh", namespace="ice_generic") as a:
        assert a.groups == [(26, "", "")]
    (golden / "short.znippy").write_bytes(b"x" * 100)
    with pytest.raises(ZnippyError, match="point past the sidecar's end"):
        open_archive(golden / "short.znippy", warehouse=golden / "wh", namespace="ice_maven")


def test_an_uncommitted_metadata_file_is_not_read(golden: Path) -> None:
    """A metadata file no catalog commit names (a writer that died before its commit) is
    passed over for the one the catalog points at."""
    folder = golden / "wh" / "warehouse" / "ice_generic" / "idx_026_0" / "metadata"
    current = sorted(folder.glob("*.metadata.json"))[-1]
    meta = json.loads(current.read_text())
    meta["snapshots"], meta["current-snapshot-id"] = [], None
    (folder / "00002-orphan.metadata.json").write_text(json.dumps(meta))
    (table,) = [t for t in rust_tables(golden / "wh", "ice_generic") if not t.reserved]
    assert Path(table.metadata) == current
    seal_rust_iceberg(golden / "ice_generic.znippy", golden / "wh", golden / "s.znippy")
    assert (golden / "s.znippy").read_bytes() == SEALED.read_bytes()


def test_damaged_tables_are_refused(golden: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cut data file or a metadata file that is no JSON: one line naming the file (exit 2
    from the CLI), nothing written."""
    table = golden / "wh" / "warehouse" / "ice_generic" / "idx_026_0"
    (data,) = (table / "data").glob("*.parquet")
    data.write_bytes(data.read_bytes()[:-100])
    with pytest.raises(ZnippyError, match="data file"):
        open_archive(golden / "ice_generic.znippy", warehouse=golden / "wh")
    out = golden / "o.znippy"
    code = main(["store", "seal", "--sidecar", str(golden / "ice_generic.znippy"),
                 "--warehouse", str(golden / "wh"), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()
    current = sorted((table / "metadata").glob("*.metadata.json"))[-1]
    current.write_text("{not json")
    with pytest.raises(ZnippyError, match="not an Iceberg table metadata file"):
        seal_rust_iceberg(golden / "ice_generic.znippy", golden / "wh", out)


def test_refusals(golden: Path, capsys: pytest.CaptureFixture[str]) -> None:
    side = str(golden / "ice_generic.znippy")
    (golden / "wh" / "catalog.redb").unlink()
    with pytest.raises(ZnippyError, match="not a skade warehouse"):
        seal_rust_iceberg(side, golden / "wh", golden / "o.znippy")
    shutil.copy2(golden / "ice_maven.znippy", golden / "o.znippy")
    code = main(["store", "seal", "--sidecar", side, "--warehouse", str(golden / "nowhere"),
                 "-o", str(golden / "o.znippy")])  # not a skade warehouse: our store's path
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err


def _fsmeta(archive: Any) -> list[dict[str, Any]]:
    import pyarrow as pa

    key = GroupKey(RESERVED_PKG_TYPE, "", "__znippy_fsmeta__")
    data = archive.range_bytes(key, "__znippy_fsmeta__")
    return list(pa.ipc.open_stream(data).read_all().to_pylist())


# --- live, against the binary built with --features iceberg ------------------------------


def real(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True,
                          timeout=600)


@live
def test_they_compress_to_iceberg_we_read_and_seal(tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    wh = tmp_path / "wh"
    for fmt in ("generic", "maven"):
        done = real("compress", "-i", src, "-o", tmp_path / f"live_{fmt}.znippy", "--format",
                    fmt, "--meta-format", "iceberg", "--warehouse", wh)
        assert done.returncode == 0, done.stderr
    # a copy of the warehouse elsewhere: our reader relocates it, theirs is left where it is
    moved = tmp_path / "moved"
    shutil.copytree(wh, moved)
    want = corpus.files()
    for fmt in ("generic", "maven"):
        side = tmp_path / f"live_{fmt}.znippy"
        rows = rust_iceberg_rows(moved, f"live_{fmt}")
        assert dict(zip(rows.column("relative_path").to_pylist(),
                        rows.column("checksum").to_pylist())) == _checksums()
        theirs = tmp_path / f"theirs_{fmt}.znippy"
        done = real("seal", "--input", side, "--warehouse", wh, "-o", theirs)
        assert done.returncode == 0, done.stderr
        ours = tmp_path / f"ours_{fmt}.znippy"
        seal_rust_iceberg(side, moved, ours)
        assert hashlib.sha256(ours.read_bytes()).hexdigest() == hashlib.sha256(
            theirs.read_bytes()).hexdigest(), fmt
        with open_archive(theirs) as a:
            assert dict(a.read_many(want)) == want
            assert a.verify().ok
        done = real("verify", "-i", ours)
        assert done.returncode == 0 and "Korrupta bytes:    0" in done.stdout, done.stdout
        # read as it stands: the sub-index the inline compress writes, row for row
        inline = tmp_path / f"inline_{fmt}.znippy"
        done = real("compress", "-i", src, "-o", inline, "--format", fmt)
        assert done.returncode == 0, done.stderr
        with open_archive(side, warehouse=moved) as dyn, open_archive(inline) as a:
            assert dyn.groups == a.groups
            assert dyn.group_table(dyn.groups[0]).equals(
                a.group_table(a.groups[0]).replace_schema_metadata(None))
            assert dict(dyn.read_many(want)) == want
            assert _fsmeta(dyn) == _fsmeta(a)
    # their seal's default namespace is the stem as it is: a '-' in it finds no table
    shutil.copy2(tmp_path / "live_generic.znippy", tmp_path / "live-generic.znippy")
    done = real("seal", "--input", tmp_path / "live-generic.znippy", "--warehouse", wh, "-o",
                tmp_path / "h.znippy")
    assert done.returncode != 0 and "no metadata tables found" in done.stderr, done.stderr


@live
def test_their_iceberg_backend_refuses_list_columns(tmp_path: Path) -> None:
    """The rust and python plugins' ``List<Utf8>`` columns (``deps``, ``requires_dist``) have
    no Iceberg type in skade: the compress fails after writing the sidecar, no table."""
    src = corpus.write(tmp_path / "in")
    for fmt, column in (("rust", "deps"), ("python", "requires_dist")):
        done = real("compress", "-i", src, "-o", tmp_path / f"l_{fmt}.znippy", "--format", fmt,
                    "--meta-format", "iceberg", "--warehouse", tmp_path / "wh")
        assert done.returncode != 0 and column in done.stderr, done.stderr
        with pytest.raises(ZnippyError, match="no table of namespace"):
            rust_iceberg_rows(tmp_path / "wh", f"l_{fmt}")


@live
def test_a_second_compress_into_the_same_name(tmp_path: Path) -> None:
    """A second ``compress`` to the same name and warehouse appends its rows to the first
    one's tables: their seal writes every path twice (their ``verify`` passes, counting each
    twice); read or sealed here, it is refused in one line."""
    src = corpus.write(tmp_path / "in")
    side, wh = tmp_path / "twice.znippy", tmp_path / "wh"
    for _ in range(2):
        done = real("compress", "-i", src, "-o", side, "--format", "generic",
                    "--meta-format", "iceberg", "--warehouse", wh)
        assert done.returncode == 0, done.stderr
    done = real("seal", "--input", side, "--warehouse", wh, "-o", tmp_path / "s.znippy")
    assert done.returncode == 0, done.stderr
    with pytest.raises(ZnippyError, match="more than once.*twice"):
        open_archive(side, warehouse=wh)
    with pytest.raises(ZnippyError, match="more than once"):
        seal_rust_iceberg(side, wh, tmp_path / "o.znippy")
    assert not (tmp_path / "o.znippy").exists()


@live
def test_two_data_files_seal_as_two_batches(tmp_path: Path) -> None:
    """Two ``compress`` runs of different trees to one name leave a table of two data files:
    the seal writes one record batch per decoded batch, data files in path order, and ours
    the same bytes (the first run's rows point into a sidecar the second one overwrote: the
    seal copies bytes, it does not look)."""
    first, second = corpus.write(tmp_path / "in"), tmp_path / "b"
    (second / "sub").mkdir(parents=True)
    (second / "x.txt").write_bytes(b"one\n")
    (second / "sub" / "y.txt").write_bytes(b"two\n")
    side, wh = tmp_path / "two.znippy", tmp_path / "wh"
    for src in (first, second):
        done = real("compress", "-i", src, "-o", side, "--format", "generic",
                    "--meta-format", "iceberg", "--warehouse", wh)
        assert done.returncode == 0, done.stderr
    assert sorted(b.num_rows for b in rust_iceberg_rows(wh, "two").to_batches()) == [2, 11]
    done = real("seal", "--input", side, "--warehouse", wh, "-o", tmp_path / "theirs.znippy")
    assert done.returncode == 0, done.stderr
    seal_rust_iceberg(side, wh, tmp_path / "ours.znippy")
    assert (tmp_path / "ours.znippy").read_bytes() == (tmp_path / "theirs.znippy").read_bytes()


@live
def test_their_namespace_is_ours(tmp_path: Path) -> None:
    """The namespace their compress makes of an awkward stem is :func:`namespace_of`'s."""
    src = tmp_path / "b"
    src.mkdir()
    (src / "x.txt").write_bytes(b"one\n")
    for name in ("_\u00e9-b_.v1.znippy", "plain.znippy", "a b.znippy"):
        wh = tmp_path / f"wh{len(name)}"
        done = real("compress", "-i", src, "-o", tmp_path / name, "--format", "generic",
                    "--meta-format", "iceberg", "--warehouse", wh)
        assert done.returncode == 0, done.stderr
        assert os.listdir(wh / "warehouse") == [namespace_of(name)], name
        with open_archive(tmp_path / name, warehouse=wh) as a:
            assert a.read("x.txt") == b"one\n"


def test_a_sidecar_opened_alone_says_how_to_open_it(golden: Path) -> None:
    """Without its warehouse, a sidecar is blobs only: the one line names the warehouse."""
    side = golden / "ice_generic.znippy"
    with pytest.raises(ZnippyError) as err:
        open_archive(side)
    assert "warehouse=" in str(err.value) and str(side) in str(err.value)
    assert main(["ls", str(side)]) == 2
