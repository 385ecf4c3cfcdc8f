"""No panic of a native library reaches a caller (issue 27): every call into one goes through
its one wrapper module and :func:`znippy_sql.native.guard`; a damaged ``__trie__`` whose fst
checksum passes is a ``FormatError`` naming the section, in ``append`` as in a read."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import google_crc32c
import pytest

from _splice import rebuild, sections
from znippy_sql import Entry, FormatError, write_archive
from znippy_sql.cli import main
from znippy_sql.native import guard, is_panic
from znippy_sql.write.append import append_archive


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def damaged_trie(good: bytes, seed: int) -> bytes:
    """``good``'s header and length, random bytes after the header, the CRC32C recomputed:
    the frame check passes, the fst code meets nonsense (a root address past the end)."""
    rnd = random.Random(seed)
    body = bytearray(good)
    body[16:-4] = bytes(rnd.randrange(256) for _ in range(len(body) - 20))
    body[-4:] = struct.pack("<I", _masked(google_crc32c.value(bytes(body[:-4]))))
    return bytes(body)


@pytest.fixture
def trie_damaged(tmp_path: Path) -> Path:
    path = tmp_path / "a.znippy"
    write_archive(path, [Entry(f"dir/file{i:03d}.txt", data=b"x" * i) for i in range(40)],
                  workers=1, fsync=False)
    data = path.read_bytes()
    path.write_bytes(rebuild(data, {"__trie__": damaged_trie(sections(data)["__trie__"], 0)}))
    return path


def test_the_damaged_trie_panics_in_the_fst_code(trie_damaged: Path) -> None:
    """The fixture is what the issue met: ducer itself panics on these bytes."""
    import ducer

    trie = damaged_trie(sections(rebuild(trie_damaged.read_bytes()))["__trie__"], 0)
    with pytest.raises(BaseException) as err:
        ducer.Map(trie).get(b"dir/file001.txt")
    assert is_panic(err.value)


def test_append_on_a_damaged_trie_is_a_format_error(trie_damaged: Path) -> None:
    with pytest.raises(FormatError) as err:
        append_archive(trie_damaged, [Entry("dir/file001.txt", data=b"x"),
                                      Entry("new.txt", data=b"new")], workers=1)
    assert "__trie__" in str(err.value) and str(trie_damaged) in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_reads_of_a_damaged_trie_exit_2(trie_damaged: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "dir").mkdir()
    (tmp_path / "in" / "dir" / "file001.txt").write_bytes(b"y")
    for argv in (["cat", str(trie_damaged), "dir/file001.txt"],
                 ["append", str(trie_damaged), str(tmp_path / "in")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "__trie__" in err and "Panic" not in err, err


def test_guard_turns_a_real_panic_into_the_named_error() -> None:
    import ducer

    trie = damaged_trie(bytes(ducer.Map.build(":memory:", [(b"a", 0), (b"b", 1)])), 3)
    with pytest.raises(FormatError) as err:
        with guard(FormatError, "__trie__ cannot be searched", path="x.znippy"):
            ducer.Map(trie).get(b"a")
    assert str(err.value).startswith("x.znippy: __trie__ cannot be searched: the native "
                                     "library panicked")


def test_guard_lets_interrupts_through() -> None:
    with pytest.raises(KeyboardInterrupt):
        with guard(FormatError, "x"):
            raise KeyboardInterrupt


# -- every native library behind its wrapper ---------------------------------------------------
PKG = Path(__file__).resolve().parent.parent / "znippy_sql"
#: library -> the modules (or packages, ending in ".") allowed to import it: each guards its
#: calls (docs/design.md, "Native boundaries")
WRAPPERS = {
    "ducer": {"format.trie"},
    "google_crc32c": {"format.trie"},
    "blake3": {"format.b3"},
    "openzl": {"format.codec"},
    "zstandard": {"format.codec", "format.zlframe"},
    "obstore": {"remote.client"},
    "fsspec": {"remote.client"},
    "pyroaring": {"git.roaring"},
    "pyiceberg": {"catalog.", "store.", "engines.catalog", "interop.icebergrs"},
    "duckdb": {"query.duckdb", "cli.query", "catalog.query", "store.views", "demo"},
    "polars": {"query.polars", "store.views", "demo"},
}


def _native_imports(path: Path) -> set[str]:
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found & set(WRAPPERS)


def test_native_libraries_are_imported_by_their_wrappers_only() -> None:
    """A new call site of a native library must go through its wrapper (or be added here
    with its guard, and to the list in docs/design.md)."""
    bypass = []
    for path in sorted(PKG.rglob("*.py")):
        me = ".".join(path.relative_to(PKG).with_suffix("").parts)
        for lib in _native_imports(path):
            if not any(me == w or (w.endswith(".") and me.startswith(w)) for w in WRAPPERS[lib]):
                bypass.append(f"{me} imports {lib}")
    assert bypass == []


def test_design_lists_every_wrapper() -> None:
    text = (PKG.parent / "docs" / "design.md").read_text()
    section = text.split("## Native boundaries", 1)[1]
    for lib, mods in WRAPPERS.items():
        assert f"`{lib}`" in section, lib
        for m in mods:
            assert m.rstrip(".").replace(".", "/") in section, (lib, m)


def test_a_damaged_stored_bitmap_is_a_format_error() -> None:
    from znippy_sql.git.roaring import deserialize

    for junk in (b"", b"abc", bytes(range(64))):
        with pytest.raises(FormatError) as err:
            deserialize(junk, path="g.znippy")
        assert str(err.value).startswith("g.znippy: __gunnar_reach__: a stored bitmap")


def test_blake3_wrapper_gives_the_same_digest_and_a_named_error() -> None:
    import blake3 as lib

    from znippy_sql.errors import ChecksumError
    from znippy_sql.format import b3

    data = bytes(range(256)) * 1000
    assert b3.blake3(data, max_threads=b3.blake3.AUTO).digest() == lib.blake3(data).digest()
    with pytest.raises(ChecksumError):
        b3.blake3("not bytes")  # type: ignore[arg-type]


def test_the_cli_last_net_knows_native_failures() -> None:
    """What ``main`` turns into one line and exit 2 when no guard caught it: a real panic
    (ducer on damaged bytes), a DuckDB or pyarrow error; never a bug of ours or Ctrl-C."""
    import duckdb
    import ducer
    import pyarrow as pa

    from znippy_sql.native import is_native

    trie = damaged_trie(bytes(ducer.Map.build(":memory:", [(b"a", 0), (b"b", 1)])), 3)
    caught: list[BaseException] = []
    for fn in (lambda: ducer.Map(trie).get(b"a"), lambda: duckdb.sql("SELECT nope"),
               lambda: pa.array([1]).cast(pa.string()).cast(pa.int8()).cast(pa.date32()),
               lambda: {}["x"]):
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001
            caught.append(exc)
    assert [is_native(e) for e in caught] == [True, True, True, False]
    assert not is_native(KeyboardInterrupt())
