"""Sealing a Rust hot archive here into the real seal's bytes (``write/rustseal.py``), and the
arrow-rs stream bytes it rests on (``interop/arrowrs.py``), against the archives the real
library and binaries wrote (``tests/data/rust-*``; the live run against the real library is
``tests/test_interop_real.py::test_we_seal_their_hot_archive``)."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from znippy_sql import ZnippyError, open_archive
from znippy_sql.interop.arrowrs import stream_bytes
from znippy_sql.write.rustseal import seal_rust_hot

DATA = Path(__file__).parent / "data"
LIB = DATA / "rust-common-0.10.6"
SEALED = sorted({*DATA.glob("rust-0.10.1/*.znippy"), LIB / "lib-meta.znippy",
                 LIB / "lib-delta.znippy", LIB / "lib-hot-sealed.znippy"})
#: sections that are no Arrow stream
RAW = ("__znippy_trie__", "__znippy_sign_archive__")


def streams(path: Path) -> list[tuple[str, bytes]]:
    """Every Arrow stream of an archive the Rust tool wrote: its sub-indexes and sections,
    then its manifest."""
    data = path.read_bytes()
    start = struct.unpack("<Q", data[-8:])[0]
    manifest = data[start:-16]
    out = []
    for row in pa.ipc.open_stream(manifest).read_all().to_pylist():
        if row["module_name"] not in RAW:
            at = row["index_offset"]
            out.append((row["module_name"] or f"data {row['pkg_type']}",
                        data[at:at + row["index_len"]]))
    return [*out, ("manifest", manifest)]


@pytest.mark.parametrize("path", SEALED, ids=[f"{p.parent.name}/{p.name}" for p in SEALED])
def test_arrowrs_stream_bytes_are_the_rust_tools(path: Path) -> None:
    """Every stream of every committed Rust archive (sub-indexes with nulls and the plugins'
    ``List<Utf8>`` columns, the lookup, the typed meta with its ``Float64``, fsmeta, the
    artifact signatures, the manifest), read and written again here, is the bytes arrow-rs
    wrote."""
    found = streams(path)
    assert len(found) >= 3  # (at least a data sub-index, the lookup, the manifest)
    for name, raw in found:
        assert stream_bytes(pa.ipc.open_stream(raw).read_all()) == raw, name


def test_arrowrs_refuses_a_type_it_does_not_write() -> None:
    with pytest.raises(ValueError, match="not written here"):
        stream_bytes(pa.table({"when": pa.array([1], pa.timestamp("s"))}))


def hot_copy(tmp_path: Path) -> Path:
    for part in LIB.glob("lib-hot.znippy*"):
        shutil.copy(part, tmp_path / part.name)
    return tmp_path / "lib-hot.znippy"


def test_seal_gives_the_real_seals_bytes(tmp_path: Path) -> None:
    """``lib-hot.znippy`` and its journal, sealed here: the bytes ``HotArchive::seal`` wrote
    (``lib-hot-sealed.znippy``), the journal removed."""
    hot = hot_copy(tmp_path)
    want = (LIB / "lib-hot-sealed.znippy").read_bytes()
    assert seal_rust_hot(hot) == len(want)
    assert hot.read_bytes() == want
    assert not list(tmp_path.glob("*.hot.*"))
    with open_archive(hot) as a:
        assert a.verify().ok


def test_seal_cuts_a_torn_appends_bytes(tmp_path: Path) -> None:
    """Bytes past the last live blob (a torn append's) are cut off as ``HotArchive::open``
    cuts them, so the seal is the same; the hot reader reads the archive as that seal."""
    hot = hot_copy(tmp_path)
    with open_archive(hot) as a:
        before = a.tail_offset
    with open(hot, "ab") as fh:
        fh.write(b"orphan payload of an append that never reached the journal" * 2)
    sealed = LIB / "lib-hot-sealed.znippy"
    with open_archive(hot) as a, open_archive(sealed) as b:
        assert a.tail_offset == before  # the orphan bytes are not part of the archive
        assert a.lookup.equals(b.lookup)
    seal_rust_hot(hot)
    assert hot.read_bytes() == sealed.read_bytes()


def test_seal_refuses_what_is_not_hot(tmp_path: Path) -> None:
    plain = tmp_path / "plain.znippy"
    shutil.copy(LIB / "lib-hot-sealed.znippy", plain)
    with pytest.raises(ZnippyError, match="not a hot archive"):
        seal_rust_hot(plain)
    assert plain.read_bytes() == (LIB / "lib-hot-sealed.znippy").read_bytes()


def test_seal_of_an_empty_journal(tmp_path: Path) -> None:
    """A journal with its schema and no row: the Rust seal writes no data sub-index, an
    empty lookup and trie, the manifest, the footer."""
    from znippy_sql.interop.hot import read_segment

    schema = read_segment(str(LIB / "lib-hot.znippy.hot.00000")).schema
    sink = pa.BufferOutputStream()
    pa.ipc.new_stream(sink, schema).close()
    hot = tmp_path / "empty.znippy"
    hot.write_bytes(b"")
    (tmp_path / "empty.znippy.hot.00000").write_bytes(sink.getvalue().to_pybytes())
    seal_rust_hot(hot)
    with open_archive(hot) as a:
        assert a.lookup.num_rows == 0 and a.verify().ok
        assert [r["module_name"] for r in a.manifest.to_pylist()] == [
            "__znippy_lookup__", "__znippy_trie__"]


def test_seal_refuses_rows_past_the_blobs(tmp_path: Path) -> None:
    """A journal whose rows point past the blob file (a blob file cut short): refused, the
    files left as they were."""
    hot = hot_copy(tmp_path)
    data = hot.read_bytes()
    hot.write_bytes(data[:100])
    with pytest.raises(ZnippyError, match="point past the blobs"):
        seal_rust_hot(hot)
    assert hot.read_bytes() == data[:100]
    assert list(tmp_path.glob("*.hot.*"))


def test_arrowrs_writes_a_slice_as_its_copy() -> None:
    """A sliced column is written as arrow-rs writes one (offsets and bits re-based), and any
    Arrow reader reads the stream back."""
    table = pa.table({"a": pa.array(["x", "yy", None, "zzz", "w"]),
                      "b": pa.array([1, 2, 3, None, 5], pa.uint64()),
                      "c": pa.array([True, False, None, True, True]),
                      "d": pa.array([b"\0" * 4, b"\1" * 4, None, b"\3" * 4, b"\4" * 4],
                                    pa.binary(4)),
                      "e": pa.array([["p"], [], None, ["q", "r"], ["s"]],
                                    pa.list_(pa.utf8()))})
    part = table.slice(1, 3)
    fresh = pa.Table.from_pylist(part.to_pylist(), schema=table.schema)
    assert stream_bytes(part) == stream_bytes(fresh)
    assert pa.ipc.open_stream(stream_bytes(part)).read_all().equals(fresh)


# -- the CLI: ``store seal --sidecar NAME`` of a Rust hot archive ------------------------------
def seal_cli(*args: str | Path) -> int:
    from znippy_sql.cli import main

    return main(["store", "seal", *map(str, args)])


def test_cli_seals_a_rust_hot_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    """``store seal --sidecar`` of a file with a ``.hot.NNNNN`` journal beside it seals it in
    place into the real seal's bytes, no warehouse needed."""
    hot = hot_copy(tmp_path)
    assert seal_cli("--sidecar", hot) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{hot}: sealed the Rust hot archive in place")
    assert "1 journal segment removed" in out
    assert hot.read_bytes() == (LIB / "lib-hot-sealed.znippy").read_bytes()
    assert not list(tmp_path.glob("*.hot.*"))


def test_cli_rust_seal_json_and_output_in_place(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import json

    hot = hot_copy(tmp_path)
    assert seal_cli("--sidecar", hot, "-o", hot, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    size = len((LIB / "lib-hot-sealed.znippy").read_bytes())
    assert report == {"path": str(hot), "archive_bytes": size, "journal_segments_removed": 1}


@pytest.mark.parametrize("extra", [["--warehouse", "wh", "--namespace", "k"],
                                   ["-o", "elsewhere.znippy"], ["--meta", "a=b"]])
def test_cli_rust_seal_refuses_store_options(tmp_path: Path, extra: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    hot = hot_copy(tmp_path)
    before = hot.read_bytes()
    assert seal_cli("--sidecar", hot, *extra) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert str(hot) in err and "sealed in place" in err and extra[0] in err
    assert hot.read_bytes() == before and list(tmp_path.glob("*.hot.*"))


def test_cli_rust_seal_of_a_damaged_journal_is_one_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """A journal segment that is no Arrow stream: one line naming the archive, exit 2, the
    files as they were."""
    hot = hot_copy(tmp_path)
    segment = tmp_path / "lib-hot.znippy.hot.00000"
    segment.write_bytes(b"\xff" * 64)
    before = hot.read_bytes()
    assert seal_cli("--sidecar", hot) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(hot) in err and "journal holds no readable rows" in err
    assert hot.read_bytes() == before and segment.read_bytes() == b"\xff" * 64


def test_cli_store_seal_without_a_journal_names_what_it_needs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "plain.znippy"
    shutil.copy(LIB / "lib-hot-sealed.znippy", plain)
    assert seal_cli("--sidecar", plain) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "--warehouse, --namespace, -o/--output" in err and "not a Rust hot archive" in err
