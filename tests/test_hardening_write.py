"""Hardening of what writes next to a damaged archive (append, one-shot writes, staging) and
of the smaller findings of issue 17; the section digests of issue 16 item 2."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from _splice import rebuild, sections, stream
from conftest import RawArchive, text_bytes

from znippy_sql import Entry, append_archive, write_archive
from znippy_sql.errors import FormatError, OptionError, ZnippyError
from znippy_sql.read.reader import open_archive
from znippy_sql.write.staging import stale_siblings

FILES = {"a.txt": b"alpha" * 50, "b/c.txt": text_bytes(5000, 1), "d.bin": bytes(300)}


@pytest.fixture
def good(tmp_path: Path) -> bytes:
    out = tmp_path / "good.znippy"
    write_archive(out, [Entry(p, data=d, repo="r") for p, d in FILES.items()], block_size=2048,
                  workers=1, fsync=False, meta={"k": "v"})
    return out.read_bytes()


def _table(data: bytes, name: str) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(sections(data)[name])).read_all()


# -- append over a damaged archive -------------------------------------------------------------
def _trie_garbage(data: bytes) -> bytes:
    return rebuild(data, {"__trie__": b"\x03" + bytes(63)})


def _block_size_zero(data: bytes) -> bytes:
    sub = _table(data, "0/r/").replace_schema_metadata({b"znippy.block_size": b"0"})
    return rebuild(data, {"0/r/": stream(sub)})


def _second_relative_path(data: bytes) -> bytes:
    sub = _table(data, "0/r/")
    sub = sub.append_column("relative_path", pa.array(["x"] * sub.num_rows))
    return rebuild(data, {"0/r/": stream(sub)})


def _path_in_two_groups(data: bytes) -> bytes:
    """The same file in a second group (7, "r", "") too: the lookup, rebuilt honestly from
    both groups, holds its rows twice."""
    sub = _table(data, "0/r/")
    lk = _table(data, "__lookup__")
    rows = sorted(lk.to_pylist() + [r for r in lk.to_pylist() if r["relative_path"] == "a.txt"],
                  key=lambda r: (r["relative_path"].encode(), r["chunk_seq"]))
    lookup = pa.Table.from_pylist(rows, schema=lk.schema)
    once = sub.filter(pa.array([p == "a.txt" for p in sub.column("relative_path").to_pylist()]))

    def add_group(manifest_rows: list[dict[str, object]]) -> None:
        manifest_rows.insert(1, dict(manifest_rows[0], pkg_type=7, index_offset=extra[0],
                                     index_len=extra[1], row_count=once.num_rows))

    body = rebuild(data, {"__lookup__": stream(lookup)}, digests="drop")
    # append the extra group's stream right before the manifest: lay out again by hand
    tail = min(r["index_offset"] for r in _manifest_rows(body))
    moff = int.from_bytes(body[-8:], "little")
    head = bytearray(body[:moff])
    head += bytes(-len(head) % 64)
    extra = (len(head), len(stream(once)))
    head += stream(once)
    del tail
    rows = _manifest_rows(body)
    add_group(rows)
    head += bytes(-len(head) % 64)
    new_moff = len(head)
    from _splice import manifest

    head += stream(pa.Table.from_pylist(rows, schema=manifest(body).schema))
    head += b"ZNPYMIDX" + new_moff.to_bytes(8, "little")
    return bytes(head)


def _manifest_rows(data: bytes) -> list[dict[str, object]]:
    from _splice import manifest

    return manifest(data).to_pylist()


@pytest.mark.parametrize("damage", [_trie_garbage, _block_size_zero, _second_relative_path,
                                    _path_in_two_groups])
def test_append_refuses_a_damaged_archive_before_writing(good: bytes, tmp_path: Path,
                                                         damage: object) -> None:
    bad = damage(good)  # type: ignore[operator]
    path = tmp_path / "damaged.znippy"
    path.write_bytes(bad)
    with pytest.raises(ZnippyError, match="damaged.znippy"):
        append_archive(path, [Entry("new.txt", data=b"new")])
    assert path.read_bytes() == bad
    assert not Path(str(path) + ".znippy-journal").exists()
    from znippy_sql.cli import main

    assert main(["append", str(path), str(tmp_path)]) == 2
    assert path.read_bytes() == bad


def test_duplicate_path_is_a_verify_finding(good: bytes, tmp_path: Path) -> None:
    path = tmp_path / "dup.znippy"
    path.write_bytes(_path_in_two_groups(good))
    with open_archive(path) as a:
        problems = a.verify().problems
        assert any("'a.txt' is in the archive more than once" in p for p in problems)
        with pytest.raises(FormatError, match="dup.znippy"):
            a.read("a.txt")


# -- one-shot writes -------------------------------------------------------------------------
@pytest.mark.parametrize("pkg_type", ["nonsense", 200, -3, True])
def test_unknown_pkg_type_is_an_option_error(tmp_path: Path, pkg_type: object) -> None:
    out = tmp_path / "x.znippy"
    with pytest.raises(OptionError, match="pkg_type"):
        write_archive(out, [Entry("a.txt", data=b"a")], pkg_type=pkg_type)  # type: ignore[arg-type]
    with pytest.raises(ZnippyError, match="pkg_type"):  # per entry too
        write_archive(out, [Entry("a.txt", data=b"a", pkg_type=pkg_type)])  # type: ignore[arg-type]
    assert os.listdir(tmp_path) == []


_SLOW_WRITER = """
import sys, os
from znippy_sql import write_archive, Entry
def entries():
    for i in range(100000):
        yield Entry(f"f{i}.bin", data=os.urandom(1 << 16))
write_archive(sys.argv[1], entries(), workers=1)
"""


def test_staging_sibling_of_a_killed_writer_is_removed_by_the_next_write(tmp_path: Path
                                                                          ) -> None:
    """A writer SIGKILLed before its rename leaves its staging sibling; the next write to the
    same name removes it (a sibling of a live writer is left alone)."""
    out = tmp_path / "x.znippy"
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(out)])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            staged = [n for n in os.listdir(tmp_path) if "znippy-staging" in n]
            if staged and os.path.getsize(tmp_path / staged[0]) > 1 << 20:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the writer never started")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not out.exists() and stale_siblings(str(out)) == [str(tmp_path / staged[0])]
    live = tmp_path / f".x.znippy.znippy-staging-{os.getpid()}-ab"  # this process: alive
    live.write_bytes(b"busy")
    write_archive(out, [Entry("a.txt", data=b"a")], fsync=False)
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, "x.znippy"])


# -- smaller findings ------------------------------------------------------------------------
def test_verify_reads_meta_and_checks_raw_row_counts(good: bytes, tmp_path: Path) -> None:
    wrong_meta = pa.table({"relative_path": ["a.txt"], "key": ["k"], "v": ["x"]})

    def lie(rows: list[dict[str, object]]) -> None:
        for r in rows:
            if r["module_name"] == "__trie__":
                r["row_count"] = 7

    path = tmp_path / "m.znippy"
    path.write_bytes(rebuild(good, {"__meta__": stream(wrong_meta)}, rows_edit=lie))
    with open_archive(path) as a:
        problems = a.verify().problems
    assert any(p.startswith("__meta__ has schema") for p in problems), problems
    assert any("__trie__: a raw section with row_count 7" in p for p in problems), problems


def test_znippy_extract_reports_sizes_after_a_failed_file(tmp_path: Path) -> None:
    arc = RawArchive([("a.txt", b"aaaa"), ("b.txt", b"bbbbbbbb"), ("c.txt", b"cc")])
    arc.rows[0]["checksum"] = bytes(32)  # a.txt fails its BLAKE3
    path = arc.write(tmp_path / "x.znippy")
    from znippy_sql.duckdb import register

    con = duckdb.connect()
    register(con, path)
    got = con.execute("SELECT relative_path, bytes_written, checksum_ok "
                      "FROM znippy_extract('x', ?) ORDER BY 1",
                      [str(tmp_path / "out")]).fetchall()
    assert got == [("a.txt", 0, False), ("b.txt", 8, True), ("c.txt", 2, True)]


# -- section digests (issue 16, item 2) -----------------------------------------------------
def test_zeroed_subindex_bytes_are_caught_on_read(good: bytes, tmp_path: Path) -> None:
    """8 zero bytes inside a group's sub-index: every reader refuses it the first time it
    reads that range (the manifest records its BLAKE3), naming the archive and the range."""
    from _splice import manifest

    row = next(r for r in manifest(good).to_pylist() if r["pkg_type"] == 0)
    bad = bytearray(good)
    at = good.find(b"b/c.txt", row["index_offset"])  # in the paths: valid UTF-8, with NULs
    assert row["index_offset"] < at < row["index_offset"] + row["index_len"]
    bad[at : at + 8] = bytes(8)
    path = tmp_path / "zeroed.znippy"
    path.write_bytes(bytes(bad))
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="zeroed.znippy: sub-index 0/'r'/'': .*BLAKE3"):
            a.index()
        assert any("BLAKE3" in p for p in a.verify().problems)
    proc = subprocess.run([str(Path(sys.executable).parent / "znippy-sql"), "sql", str(path),
                           "SELECT relative_path FROM zeroed_files"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "zeroed.znippy" in proc.stderr and "BLAKE3" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    from znippy_sql.polars import scan

    with pytest.raises(FormatError, match="BLAKE3"):
        scan(path).collect()
    # the opt-out: a caller who verified already reads without the digest check
    with open_archive(path, verify_sections=False) as a:
        try:
            a.index()
        except FormatError as exc:
            assert "BLAKE3" not in str(exc)


def test_archives_without_digests_are_read(good: bytes, tmp_path: Path) -> None:
    path = tmp_path / "plain.znippy"
    path.write_bytes(rebuild(good, digests="drop"))
    with open_archive(path) as a:
        assert all(r.blake3 is None for r in a.manifest_rows)
        assert a.read("a.txt") == FILES["a.txt"] and a.verify().ok


def test_a_digest_list_that_does_not_fit_is_refused(good: bytes, tmp_path: Path) -> None:
    from _splice import manifest

    m = manifest(good)
    schema = m.schema.with_metadata({b"znippy.section_blake3": b"00" * 32})
    body = good[: int.from_bytes(good[-8:], "little")]
    path = tmp_path / "lie.znippy"
    path.write_bytes(body + stream(m.replace_schema_metadata(schema.metadata))
                     + b"ZNPYMIDX" + len(body).to_bytes(8, "little"))
    with pytest.raises(FormatError, match="lie.znippy: manifest: znippy.section_blake3"):
        open_archive(path)


# -- signature tampering ----------------------------------------------------------------------
def test_flipped_blob_byte_of_a_signed_archive_is_caught(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """A flipped byte in a compressed and in a raw blob of a signed archive: caught by
    ``verify``, by ``verify --trust --deep`` and by the API's deep signature check. Once
    ``verify --trust`` does everything ``verify`` does (issue 16, item 1: the build then has
    ``--signatures-only``), it must catch it too."""
    from conftest import self_signed_signer
    from cryptography.hazmat.primitives.serialization import Encoding

    from znippy_sql.cli import main
    from znippy_sql.provenance.sign import verify_signatures

    signer = self_signed_signer()
    cert = tmp_path / "cert.pem"
    cert.write_bytes(signer.cert.public_bytes(Encoding.PEM))
    out = tmp_path / "signed.znippy"
    write_archive(out, [Entry("text.txt", data=text_bytes(4000, 3)),
                        Entry("raw.bin", data=os.urandom(3000))], signer=signer, workers=1,
                  fsync=False)
    with open_archive(out) as a:
        spans = {p: a.find(p).chunks[0] for p in ("text.txt", "raw.bin")}  # type: ignore[union-attr]
    assert spans["text.txt"].compressed and not spans["raw.bin"].compressed
    has_signatures_only = "--signatures-only" in _verify_help(capsys)
    for path, chunk in spans.items():
        bad = bytearray(out.read_bytes())
        bad[chunk.blob_offset + chunk.blob_size // 2] ^= 0x01
        hurt = tmp_path / f"hurt-{path}.znippy"
        hurt.write_bytes(bytes(bad))
        with open_archive(hurt) as a:
            assert not a.verify().ok
            assert any(path in p for p in verify_signatures(a, cert, deep=True))
        assert main(["verify", str(hurt)]) == 1
        assert main(["verify", str(hurt), "--trust", str(cert), "--deep"]) == 1
        if has_signatures_only:
            assert main(["verify", str(hurt), "--trust", str(cert)]) == 1
        capsys.readouterr()


def _verify_help(capsys: pytest.CaptureFixture[str]) -> str:
    from znippy_sql.cli import main

    with pytest.raises(SystemExit):
        main(["verify", "--help"])
    return capsys.readouterr().out


def test_damaged_meta_is_refused_where_posix_facts_are_read(good: bytes, tmp_path: Path
                                                            ) -> None:
    """Found by bench/fuzz.py (seed 204620): a flipped byte of a column name in __meta__ gave
    ``KeyError: 'Field "value" does not exist'`` from extract, ls and cat, which read the
    POSIX facts there. The section's schema is checked first: a FormatError naming it."""
    meta = pa.table({"relative_path": ["a.txt"], "key": ["posix.mode"], "valuf": ["33188"]})
    path = tmp_path / "posix.znippy"
    path.write_bytes(rebuild(good, {"__meta__": stream(meta)}))
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="posix.znippy: __meta__ has schema"):
            a.extract(tmp_path / "out")
    from znippy_sql.cli import main

    for args in (["ls", "-l", str(path)], ["extract", str(path), "-o", str(tmp_path / "o")]):
        assert main(args) == 2
