"""Damaged and hostile archives through every read path: a ZnippyError naming the archive,
never a traceback, a crash, a short file or an allocation sized by the file (issue 17).

Each test builds its archive from real bytes (this project's writer, or the independent
``RawArchive`` builder of conftest) and asserts the exception type and that the message names
the archive.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from _readpaths import PATHS, Outcome, bad, every_read_path
from _splice import rebuild, sections, stream
from conftest import text_bytes

from znippy_sql import Entry, ReservedSection, write_archive
from znippy_sql.errors import FormatError, ZnippyError
from znippy_sql.read.reader import open_archive

DATA = Path(__file__).parent / "data"
CLI = [sys.executable, "-c", "import sys; from znippy_sql.cli import main; sys.exit(main())"]


def cli(*args: str | os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def assert_clean_failure(proc: subprocess.CompletedProcess[str], name: str) -> None:
    """Exit 1 or 2 (never a signal: 139 is a SIGSEGV), one message naming the archive."""
    assert proc.returncode in (1, 2), (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "Error:" not in proc.stdout
    assert name in proc.stderr + proc.stdout


# -- the SIGSEGV ---------------------------------------------------------------------------
def test_damaged_sign_artifacts_do_not_crash(tmp_path: Path) -> None:
    """``segv-sign-artifacts.bin`` is the ``__sign_artifacts__`` stream of a one-file archive
    signed by this project, with bit 7 of its byte 398 flipped (an offset of the ``cms``
    column): the signature reader used to build the table without validating it, and
    ``znippy-sql verify`` died of a SIGSEGV (exit 139) reading past the buffer; a flip of
    bit 0 of byte 399 gave ``SystemError: Negative size passed to PyBytes_FromStringAndSize``.
    Now the stream is validated in full before a value is read."""
    damaged = (DATA / "segv-sign-artifacts.bin").read_bytes()
    out = tmp_path / "segv.znippy"
    write_archive(out, [Entry("a.txt", data=b"hello world\n" * 10)], fsync=False,
                  reserved_sections=[ReservedSection("__sign_artifacts__", damaged),
                                     ReservedSection("__sign_archive__", b"\x30\x03\x02\x01\x00")])
    from znippy_sql.provenance.sign import signatures_table, verify_signatures

    with open_archive(out) as a:
        with pytest.raises(FormatError, match="segv.znippy.*__sign_artifacts__"):
            verify_signatures(a, None)
        with pytest.raises(FormatError, match="segv.znippy"):
            signatures_table(a)
    for args in (("verify", out), ("verify", "--signatures-only", out), ("info", out)):
        proc = cli(*args)
        if "unrecognized arguments" in proc.stderr:
            continue  # --signatures-only belongs to the users' issue; not every build has it
        assert proc.returncode != -11 and proc.returncode != 139
        if proc.returncode:
            assert_clean_failure(proc, "segv.znippy")
    from znippy_sql.duckdb import register

    con = duckdb.connect()
    with pytest.raises(ZnippyError, match="segv.znippy"):
        register(con, out)
    from znippy_sql.polars import scan

    with pytest.raises(ZnippyError, match="segv.znippy"):
        scan(out, "signatures").collect()


# -- a base archive ------------------------------------------------------------------------
ORIGINALS = {f"src/f{i}.txt": text_bytes(300 + 97 * i, i) for i in range(4)}
ORIGINALS["big.txt"] = text_bytes(20000, 7)  # three chunks of 8192 bytes at most
ORIGINALS["other/b.bin"] = bytes(range(256)) * 3


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    out = tmp_path_factory.mktemp("base") / "base.znippy"
    entries = [Entry(p, data=d, repo="r2" if p.startswith("other") else "r1")
               for p, d in ORIGINALS.items()]
    write_archive(out, entries, block_size=8192, workers=1, fsync=False, meta={"k": "v"})
    return out.read_bytes()


def _put(tmp: Path, data: bytes, name: str = "hostile.znippy") -> Path:
    path = tmp / name
    path.write_bytes(data)
    return path


def _table(data: bytes, name: str) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(sections(data)[name])).read_all()


def _no_bad(path: Path, tmp: Path, paths: tuple[str, ...] = PATHS) -> list[Outcome]:
    out = every_read_path(path, ORIGINALS, tmp / "work", paths=paths)
    assert not bad(out), bad(out)[:5]
    return out


def _refused(out: list[Outcome], where: str, match: str) -> None:
    got = [o for o in out if o.where == where]
    assert got and all(o.kind == "refused" for o in got), got
    assert any(re.search(match, o.detail) for o in got), got


R1 = "0/r1/"  # key_name of the group (0, "r1", "")


# -- the closed set of sub-index schemas ---------------------------------------------------
def _with_column(t: pa.Table, name: str, arr: pa.Array) -> pa.Table:
    return t.append_column(pa.field(name, arr.type), arr)


def _nested(depth: int, n: int) -> pa.Array:
    arr: pa.Array = pa.array(range(n), pa.int64())
    for _ in range(depth):
        arr = pa.StructArray.from_arrays([arr], names=["x"])
    return arr


UNUSUAL: dict[str, Callable[[pa.Table], pa.Table]] = {
    "repo": lambda t: _with_column(t, "repo", pa.array(["x"] * t.num_rows)),
    "size": lambda t: _with_column(t, "size", pa.array([1] * t.num_rows, pa.uint64())),
    "digest": lambda t: _with_column(t, "digest", pa.array(["d"] * t.num_rows)),
    "module": lambda t: _with_column(t, "module", pa.array(["m"] * t.num_rows)),
    "archive": lambda t: _with_column(t, "archive", pa.array(["a"] * t.num_rows)),
    "Stored_Size": lambda t: _with_column(t, "Stored_Size", pa.array([1] * t.num_rows)),
    "second relative_path": lambda t: _with_column(t, "relative_path",
                                                   pa.array(["p"] * t.num_rows)),
    "pkg_type int32": lambda t: _with_column(t, "pkg_type", pa.array([0] * t.num_rows,
                                                                     pa.int32())),
    "twice": lambda t: _with_column(_with_column(t, "x_a", pa.array(["1"] * t.num_rows)),
                                    "X_A", pa.array(["2"] * t.num_rows)),
    "30-deep struct": lambda t: _with_column(t, "x_deep", _nested(30, t.num_rows)),
    "5000 columns": lambda t: pa.Table.from_arrays(
        [*t.columns, *(pa.array(["v"] * t.num_rows) for _ in range(5000))],
        names=[*t.column_names, *(f"x_c{i}" for i in range(5000))]),
    "non-ASCII name": lambda t: _with_column(t, "maven_é", pa.array(["a"] * t.num_rows)),
    "bad metadata": lambda t: t.replace_schema_metadata({b"znippy.block_size": b"\xff\xfe"}),
    "block size 0": lambda t: t.replace_schema_metadata({b"znippy.block_size": b"0"}),
}


#: Columns of types this project's modules never write (another writer's, docs/format.md
#: §11): once refused, now kept and shown by every read path.
EXTRA: dict[str, Callable[[pa.Table], pa.Table]] = {
    "dictionary": lambda t: _with_column(t, "x_dict", pa.array(["a"] * t.num_rows)
                                         .dictionary_encode()),
    "string_view": lambda t: _with_column(t, "x_view", pa.array(["a"] * t.num_rows,
                                                                pa.string_view())),
    "map": lambda t: _with_column(t, "x_map", pa.array([[("k", "v")]] * t.num_rows,
                                                       pa.map_(pa.utf8(), pa.utf8()))),
    "null": lambda t: _with_column(t, "x_null", pa.nulls(t.num_rows)),
    "large_list": lambda t: _with_column(t, "x_list", pa.array([[1]] * t.num_rows,
                                                               pa.large_list(pa.int64()))),
    "decimal256": lambda t: _with_column(t, "x_dec", pa.array([1] * t.num_rows,
                                                              pa.decimal256(40, 2))),
    "timestamp ns": lambda t: _with_column(t, "x_ts", pa.array([0] * t.num_rows,
                                                               pa.timestamp("ns"))),
    "unknown time zone": lambda t: _with_column(t, "x_tz", pa.array(
        [0] * t.num_rows, pa.timestamp("s", tz="Mars/Phobos"))),
}


@pytest.mark.parametrize("case", list(EXTRA))
def test_extra_columns_of_any_type_are_kept(base: bytes, tmp_path: Path, case: str) -> None:
    """Valid Arrow, a column after the base ones of any type: every read path takes it."""
    sub = EXTRA[case](_table(base, R1))
    path = _put(tmp_path, rebuild(base, {R1: stream(sub)}))
    out = _no_bad(path, tmp_path)
    assert {o.kind for o in out} == {"ok"}, [o for o in out if o.kind != "ok"]
    with open_archive(path) as a:
        assert a.verify().ok
        assert sub.schema.field(sub.num_columns - 1).name in a.index().column_names


@pytest.mark.parametrize("case", list(UNUSUAL))
def test_unusual_subindex_schemas_are_refused(base: bytes, tmp_path: Path, case: str) -> None:
    """Valid Arrow, a schema outside the closed set: a FormatError naming the archive and the
    sub-index at the first touch of that group, through every read path; the files of other
    groups and every point read (lookup + trie) keep working."""
    sub = UNUSUAL[case](_table(base, R1))
    path = _put(tmp_path, rebuild(base, {R1: stream(sub)}))
    out = _no_bad(path, tmp_path)
    for where in ("api.index", "duckdb.register", "polars.files", "polars.chunks"):
        _refused(out, where, r"sub-index 0/'r1'/''")
    assert {o.kind for o in out if o.where == "api.read"} == {"ok"}
    with open_archive(path) as a:
        assert any("sub-index 0/'r1'/''" in p for p in a.verify().problems)


def test_module_columns_of_the_closed_set_are_read(base: bytes, tmp_path: Path) -> None:
    sub = _table(base, R1)
    n = sub.num_rows
    sub = _with_column(sub, "pkg_type", pa.array([0] * n, pa.int8()))
    for name, arr in (("x_text", pa.array(["a"] * n)), ("x_n", pa.array([1] * n, pa.uint64())),
                      ("x_when", pa.array([0] * n, pa.timestamp("us", tz="UTC"))),
                      ("x_day", pa.array([0] * n, pa.date32()))):
        sub = _with_column(sub, name, arr)
    path = _put(tmp_path, rebuild(base, {R1: stream(sub)}))
    out = _no_bad(path, tmp_path)
    assert {o.kind for o in out} == {"ok"}, [o for o in out if o.kind != "ok"]
    con = duckdb.connect()
    from znippy_sql.duckdb import register

    register(con, path, "m")
    assert con.sql("SELECT count(x_text) FROM m_files").fetchall() == [(5,)]


def test_columns_of_one_name_but_two_types_are_refused(base: bytes, tmp_path: Path) -> None:
    r1, r2 = _table(base, R1), _table(base, "0/r2/")
    r1 = _with_column(r1, "x_v", pa.array(["a"] * r1.num_rows))
    r2 = _with_column(r2, "x_v", pa.array([1] * r2.num_rows, pa.int64()))
    path = _put(tmp_path, rebuild(base, {R1: stream(r1), "0/r2/": stream(r2)}))
    out = _no_bad(path, tmp_path)
    for where in ("duckdb.register", "polars.files"):
        _refused(out, where, "module column 'x_v'")
    with open_archive(path) as a, pytest.raises(FormatError, match="hostile.znippy"):
        a.index()


# -- IPC body compression ------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["zstd", "lz4"])
@pytest.mark.parametrize("name", ["__lookup__", "__meta__", R1])
def test_compressed_ipc_bodies_read_by_every_reader(base: bytes, tmp_path: Path,
                                                    codec: str, name: str) -> None:
    """One rule for all readers (FORMAT §1, compressed index streams): an honest compressed
    body is bounded, then read, by the API, DuckDB and Polars alike."""
    packed = stream(_table(base, name), compression=codec)
    path = _put(tmp_path, rebuild(base, {name: packed}))
    out = _no_bad(path, tmp_path)
    wheres = {"__lookup__": ["api.read", "duckdb.register", "polars.lookup"],
              "__meta__": ["api.meta", "duckdb.register", "polars.meta"],
              R1: ["api.index", "duckdb.register", "polars.files"]}[name]
    for where in wheres:
        got = [o for o in out if o.where == where]
        assert got and all(o.kind == "ok" for o in got), got


def test_decompression_bomb_allocates_nothing(base: bytes, tmp_path: Path) -> None:
    """A __meta__ stream whose zstd body inflates to 256 MiB: refused before anything is
    allocated for it, through the API, DuckDB and Polars."""
    bomb = pa.table({"relative_path": pa.array([None], pa.utf8()), "key": ["k"],
                     "value": ["a" * (256 << 20)]})
    packed = stream(bomb, compression="zstd")
    del bomb
    assert len(packed) < 1 << 20
    path = _put(tmp_path, rebuild(base, {"__meta__": packed}))
    before = pa.total_allocated_bytes()
    out = every_read_path(path, ORIGINALS, tmp_path / "work", paths=("api", "duckdb", "polars"))
    assert not bad(out)
    _refused(out, "api.meta", "compressed (record batch|buffer) declaring")
    assert pa.total_allocated_bytes() - before < 16 << 20


def test_buffer_outside_its_body_refused(base: bytes, tmp_path: Path) -> None:
    """A record batch whose buffer list points past its body: refused by the message walk
    before pyarrow builds the batch."""
    data = bytearray(sections(base)["__lookup__"])
    table = _table(base, "__lookup__")
    reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(bytes(data)))
    reader.read_next_message()  # schema
    batch = reader.read_next_message()
    meta = batch.metadata.to_pybytes()
    body_len = batch.body.size
    # the last buffer's (offset, length) pair: find it by value in the flatbuffer
    last_off, last_len = _last_buffer(table)
    pair = last_off.to_bytes(8, "little", signed=True) + last_len.to_bytes(8, "little",
                                                                           signed=True)
    at = meta.rfind(pair)
    assert at > 0
    start = bytes(data).find(meta)
    bigger = (body_len + 4096).to_bytes(8, "little", signed=True)
    data[start + at + 8 : start + at + 16] = bigger
    path = _put(tmp_path, rebuild(base, {"__lookup__": bytes(data)}))
    out = _no_bad(path, tmp_path, ("api", "duckdb", "polars"))
    _refused(out, "api.read", "outside its record batch body")


def _last_buffer(table: pa.Table) -> tuple[int, int]:
    """(offset, length) of the last buffer of the lookup's single batch, as the writer laid
    it out: every buffer padded to 8 bytes, in column order."""
    offset, last = 0, (0, 0)
    for column in table.columns:
        for buf in column.chunk(0).buffers():
            size = 0 if buf is None else buf.size
            last = (offset, size)
            offset += (size + 7) // 8 * 8
    return last


# -- values that lie -----------------------------------------------------------------------
def _edit_rows(t: pa.Table, edit: Callable[[list[dict[str, object]]], None]) -> pa.Table:
    rows = t.to_pylist()
    edit(rows)
    return pa.Table.from_pylist(rows, schema=t.schema)


@pytest.mark.parametrize("field,value", [("uncompressed_size", 2**64 - 1),
                                         ("blob_size", 2**64 - 1),
                                         ("blob_offset", 2**63),
                                         ("fdata_offset", 2**64 - 1)])
def test_unsigned_values_out_of_range(base: bytes, tmp_path: Path, field: str,
                                      value: int) -> None:
    def lie(rows: list[dict[str, object]]) -> None:
        for r in rows:
            if r["relative_path"] == "src/f0.txt":
                r[field] = value

    sub = _edit_rows(_table(base, R1), lie)
    lk = _edit_rows(_table(base, "__lookup__"), lie)
    path = _put(tmp_path, rebuild(base, {R1: stream(sub), "__lookup__": stream(lk)}))
    out = _no_bad(path, tmp_path)
    for where in ("duckdb.files", "duckdb.chunks", "polars.files", "api.index"):
        assert {o.kind for o in out if o.where == where} <= {"refused"}, where


def test_data_group_pkg_type_out_of_range(base: bytes, tmp_path: Path) -> None:
    def lie(rows: list[dict[str, object]]) -> None:
        rows[0]["pkg_type"] = -128

    path = _put(tmp_path, rebuild(base, rows_edit=lie))
    out = _no_bad(path, tmp_path)
    _refused(out, "api.open", "pkg_type -128 of a data group is not in 0..127")
    _refused(out, "duckdb.register", "0..127")


def test_invalid_utf8_in_a_subindex(base: bytes, tmp_path: Path) -> None:
    """Offsets in order, bytes not UTF-8: the cheap check at register cannot see it; the
    first scan validates in full and refuses it, naming the archive and the sub-index."""
    raw = bytearray(sections(base)[R1])
    at = bytes(raw).find(b"src/f1.txt")
    raw[at + 4] = 0xFF
    path = _put(tmp_path, rebuild(base, {R1: bytes(raw)}))
    out = _no_bad(path, tmp_path)
    for where in ("duckdb.files", "duckdb.chunks", "polars.files", "api.index"):
        _refused(out, where, r"(?i)utf-?8")
    _refused(out, "duckdb.files", r"sub-index")
    proc = cli("sql", path, "SELECT relative_path FROM hostile_files")
    assert_clean_failure(proc, "hostile.znippy")
    assert "UTF8" in proc.stderr or "UTF-8" in proc.stderr


# -- chunk order ---------------------------------------------------------------------------
def _reverse_big(base: bytes) -> bytes:
    """``big.txt``'s three lookup rows in reverse order, the trie rebuilt to point at its
    ``chunk_seq = 0`` row (now the last of the three): what a point read used to answer with
    the first 8,192 of the file's 20,000 bytes."""
    import ducer

    lk = _table(base, "__lookup__").to_pylist()
    rows = [i for i, r in enumerate(lk) if r["relative_path"] == "big.txt"]
    assert len(rows) == 3
    lk[rows[0] : rows[-1] + 1] = lk[rows[0] : rows[-1] + 1][::-1]
    table = pa.Table.from_pylist(lk, schema=_table(base, "__lookup__").schema)
    trie = [(r["relative_path"].encode(), i) for i, r in enumerate(lk) if r["chunk_seq"] == 0]
    return rebuild(base, {"__lookup__": stream(table),
                          "__trie__": bytes(ducer.Map.build(":memory:", trie))})


def test_chunks_in_reverse_order_never_give_a_short_file(base: bytes, tmp_path: Path) -> None:
    path = _put(tmp_path, _reverse_big(base))
    out = _no_bad(path, tmp_path)
    assert not [o for o in out if o.kind == "wrong"]
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="hostile.znippy"):
            a.read("big.txt")
        with pytest.raises(FormatError):
            a.open("big.txt")
        with pytest.raises(FormatError):
            a.extract(tmp_path / "x")
    proc = cli("cat", path, "big.txt")
    assert_clean_failure(proc, "hostile.znippy")
    assert proc.stdout == ""


def test_chunk_checks_of_one_file_without_the_lookup_checks(base: bytes, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """The per-file checks of ``file_at`` and ``one_chunk_views`` stand on their own: with
    the whole-lookup check switched off, reversed rows are still a FormatError."""
    import znippy_sql.read.tail as tail

    monkeypatch.setattr(tail, "lookup_problem", lambda table: None)
    path = _put(tmp_path, _reverse_big(base))
    with open_archive(path) as a:
        with pytest.raises(FormatError, match="out of order"):
            a.read("big.txt")
        first = a.trie.get(b"big.txt")
        assert a.one_chunk_views([("big.txt", first)]) == [None]
