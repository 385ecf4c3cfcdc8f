"""The CLI's fast path (issue 33, item 6; ``znippy_sql/cli/fast.py``, ``native/src/cat.rs``):
``cat`` of a local archive answered by the compiled core gives what the Python path gives —
stdout, stderr, exit code — on every layout this project writes, and on damaged archives;
anything it does not read falls through; and it does not import pyarrow."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from znippy_sql import open_archive, write_archive
from znippy_sql.cli import fast, main
from znippy_sql.write.source import Entry

DATA = Path(__file__).parent / "data"
GOLDENS = sorted(DATA.glob("golden-v*.znippy"))
HEAVY = ("pyarrow", "numpy", "duckdb", "polars", "pandas", "openzl", "zstandard",
         # each 2-11 ms of CPU at start-up: kept off the way for the 3x target (issue 33)
         "typing", "argparse", "re", "contextlib")


def text(n: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"def", b"return", b"import", b"class", b"\n", b"    "]
    out = bytearray()
    while len(out) < n:
        out += rnd.choice(words) + b" "
    return bytes(out[:n])


def entries() -> list[Entry]:
    out = [Entry(f"src/a/f{i:02d}.py", data=text(300 + 97 * i, i)) for i in range(12)]
    out += [Entry("src/b/empty.txt", data=b""),
            Entry("src/b/big.txt", data=text(70_000, 7)),
            Entry("src/b/logo.png", data=text(3000, 8)),
            Entry("src/b/noise.bin", data=random.Random(3).randbytes(5000)),
            Entry("src/b/it's.txt", data=b"a quote in the name\n"),
            Entry("src/b/caf\u00e9.txt", data=b"utf-8 name\n"),
            # a directory pack (zstd with a long window, docs/format.md §6)
            Entry("org/acme/lib/1.0/lib-1.0.jar", data=text(40_000, 11)),
            Entry("org/acme/lib/1.1/lib-1.1.jar", data=text(40_000, 11) + b"more")]
    return sorted(out, key=lambda e: e.relative_path.encode())


#: freshly written layouts: (name, write_archive keywords)
LAYOUTS = [
    ("packed", {}),
    ("unpacked", {"pack": False, "index_compression": False}),
    ("multichunk", {"block_size": 4096, "pack": False}),
    ("nodedup", {"dedup": False, "block_size": 8192}),
]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fast")
    out = {p.name: p for p in GOLDENS}
    for name, kw in LAYOUTS:
        path = base / f"{name}.znippy"
        write_archive(path, entries(), workers=1, **kw)  # type: ignore[arg-type]
        out[name] = path
    maven = base / "maven.znippy"  # a group with module columns (pkg_type, maven_*)
    write_archive(maven, DATA / "maven", pkg_type="auto", workers=1)
    out["maven"] = maven
    return out


def run(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch, *, slow: bool) -> tuple[int, bytes, bytes]:
    with monkeypatch.context() as m:
        if slow:
            m.setattr(fast, "COMMANDS", ())
        code = main(argv)
    sys.stdout.flush()
    got = capsysbinary.readouterr()
    return code, got.out, got.err


def same(argv: list[str], capsysbinary: pytest.CaptureFixture[bytes],
         monkeypatch: pytest.MonkeyPatch) -> tuple[int, bytes, bytes]:
    want = run(argv, capsysbinary, monkeypatch, slow=True)
    got = run(argv, capsysbinary, monkeypatch, slow=False)
    assert got == want, argv
    return got


def test_cat_of_every_file_equals_the_python_path(
        archives: dict[str, Path], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name, path in archives.items():
        with open_archive(path) as a:
            paths = a.first_paths()
        for p in paths:
            code, out, _ = same(["cat", str(path), p], capsysbinary, monkeypatch)
            assert code == 0
        same(["cat", str(path), *paths], capsysbinary, monkeypatch)  # all at once, in order


def test_the_core_answers_without_the_python_reader(
        archives: dict[str, Path], monkeypatch: pytest.MonkeyPatch,
        capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    """Not a fall-through in disguise: every layout above is planned by the core."""
    from znippy_sql import corelib

    for name, path in archives.items():
        with open_archive(path) as a:
            paths = a.first_paths()
        assert corelib.cat_plan(str(path), paths) is not None, name
        assert fast.run(["cat", str(path), paths[0]]) == 0
    capsysbinary.readouterr()


def test_missing_member_and_other_shapes_fall_through(
        archives: dict[str, Path], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    golden = str(archives["golden-v6-default.znippy"])
    code, _, err = same(["cat", golden, "README.txt", "nope"], capsysbinary, monkeypatch)
    assert code == 2 and b"no file 'nope' in the archive" in err
    assert fast.run(["cat", golden, "nope"]) is None
    rust = str(DATA / "rust-0.8-cli.znippy")  # no __lookup__: the Python reader's
    with open_archive(rust) as a:
        first = a.first_paths()[0]
    assert fast.run(["cat", rust, first]) is None
    same(["cat", rust, first], capsysbinary, monkeypatch)
    for argv in (["cat", golden], ["cat", "--help"], ["cat", golden, "-x"],
                 ["cat", f"file://{golden}", "README.txt"], ["info", golden]):
        assert fast.run(argv) is None, argv
    from znippy_sql.format.rollback import JOURNAL_SUFFIX

    assert fast.JOURNAL_SUFFIX == JOURNAL_SUFFIX  # an interrupted append: rolled back first
    copy = tmp_path / "copy.znippy"
    copy.write_bytes(Path(golden).read_bytes())
    Path(str(copy) + JOURNAL_SUFFIX).write_bytes(b"torn")  # the Python opener drops it
    assert fast.run(["cat", str(copy), "README.txt"]) is None
    same(["cat", str(copy), "README.txt"], capsysbinary, monkeypatch)
    not_archive = tmp_path / "x.znippy"
    not_archive.write_bytes(b"hello" * 10)
    same(["cat", str(not_archive), "a"], capsysbinary, monkeypatch)
    same(["cat", str(tmp_path / "absent.znippy"), "a"], capsysbinary, monkeypatch)


def test_symbolic_links_are_skipped_as_before(
        tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("a\n")
    os.symlink("a.txt", src / "link")
    arc = tmp_path / "links.znippy"
    write_archive(arc, src, posix=True, workers=1)
    code, out, _ = same(["cat", str(arc), "link", "a.txt"], capsysbinary, monkeypatch)
    assert (code, out) == (0, b"a\n")
    from znippy_sql import corelib

    assert corelib.cat_plan(str(arc), ["link", "a.txt"]) is not None


def test_lookup_in_many_record_batches(
        tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup cut into record batches: the core decodes the batch (and its neighbours)
    holding the file, as ``reader._Batches`` does."""
    import znippy_sql.write.tail as tail

    monkeypatch.setattr(tail, "LOOKUP_BATCH_ROWS", 3)
    arc = tmp_path / "batches.znippy"
    write_archive(arc, entries(), workers=1, block_size=4096, pack=False)
    monkeypatch.undo()
    with open_archive(arc) as a:
        paths = a.first_paths()
        assert a.lookup_batches is not None  # several batches
    from znippy_sql import corelib

    assert corelib.cat_plan(str(arc), paths) is not None
    for p in paths:
        same(["cat", str(arc), p], capsysbinary, monkeypatch)
    # many paths: after 16 batch decodes the whole lookup serves the rest (_Batches.PROMOTE)
    assert len(paths) > 16
    same(["cat", str(arc), *paths], capsysbinary, monkeypatch)


def _flip(path: Path, at: int, out: Path) -> Path:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x40
    out.write_bytes(bytes(data))
    return out


@pytest.mark.parametrize("where", ["footer", "manifest", "trie", "lookup", "meta", "blob",
                                   "second-chunk"])
def test_damage_gives_the_same_line_and_exit_code(
        where: str, archives: dict[str, Path], tmp_path: Path,
        capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    name = "multichunk" if where == "second-chunk" else "golden-v6-default.znippy"
    src = archives[name]
    with open_archive(src) as a:
        rows = {r.key.module_name: r for r in a.manifest_rows}
        target = "src/b/big.txt" if where == "second-chunk" else "README.txt"
        info = a.find(target)
        assert info is not None
        at = {"footer": a.source.size - 12,
              "manifest": a.source.size - 16 - 120,  # in the batch's body
              "trie": rows["__trie__"].index_offset + rows["__trie__"].index_len // 2,
              "lookup": rows["__lookup__"].index_offset + rows["__lookup__"].index_len // 2,
              "meta": rows.get("__meta__", rows["__trie__"]).index_offset + 30,
              "blob": info.chunks[0].blob_offset + info.chunks[0].blob_size // 2,
              "second-chunk": info.chunks[-1].blob_offset + info.chunks[-1].blob_size // 2,
              }[where]
    bad = _flip(src, at, tmp_path / "bad.znippy")
    want = run(["cat", str(bad), target], capsysbinary, monkeypatch, slow=True)
    got = run(["cat", str(bad), target], capsysbinary, monkeypatch, slow=False)
    assert got[0] == want[0]
    assert got[1] == want[1]  # the chunks before the damaged one, checked
    if want[0] == 0:  # bytes no reader uses (or a flip the format cannot see)
        assert got[2] == want[2]
        return
    # one line; the same one, except a zstd frame's damage, worded by each decoder
    assert got[2].count(b"\n") == 1
    head = lambda e: e.split(b"chunk")[0]  # noqa: E731
    assert head(got[2]) == head(want[2])


def test_cat_does_not_import_pyarrow(tmp_path: Path) -> None:
    golden = DATA / "golden-v6-default.znippy"
    code = ("import sys\nfrom znippy_sql.cli import main\nrc = main(['cat', sys.argv[1], "
            "'README.txt'])\nsys.stdout.flush()\nheavy = sorted({m.split('.')[0] for m in "
            f"sys.modules}} & set({HEAVY!r}))\nprint('HEAVY', heavy, file=sys.stderr)\n"
            "sys.exit(rc)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-c", code, str(golden)], capture_output=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    with open_archive(golden) as a:
        assert done.stdout == a.read("README.txt")
    assert done.stderr.decode().strip() == "HEAVY []"


def test_a_trie_that_panics_the_fst_code_says_what_the_python_path_says(
        tmp_path: Path) -> None:
    """A ``__trie__`` whose CRC32C (and section digest) were forged over nonsense: the fst
    code panics on it; the core catches it silently and leaves the words to the Python
    path, so stderr is today's, byte for byte (the process's own panic output included)."""
    from _splice import rebuild, sections
    from test_native_guard import damaged_trie

    path = tmp_path / "a.znippy"
    write_archive(path, [Entry(f"dir/file{i:03d}.txt", data=b"x" * i) for i in range(40)],
                  workers=1, fsync=False)
    data = path.read_bytes()
    path.write_bytes(rebuild(data, {"__trie__": damaged_trie(sections(data)["__trie__"], 0)}))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    argv = ["cat", str(path), "dir/file001.txt"]
    runs = [subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, env=env,
                           timeout=60)
            for code in ("import sys\nfrom znippy_sql.cli import main\n"
                         "sys.exit(main(sys.argv[1:]))",
                         "import sys\nfrom znippy_sql.cli import fast, main\nfast.COMMANDS = ()"
                         "\nsys.exit(main(sys.argv[1:]))")]
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[0].stderr == runs[1].stderr
    assert runs[0].stderr.endswith(b"\n") and b"__trie__" in runs[0].stderr


def test_ls_equals_the_python_path(
        archives: dict[str, Path], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql import corelib

    for name, path in archives.items():
        with open_archive(path) as a:
            paths = a.first_paths()
        top = paths[-1].split("/")[0]
        for members in ([], [top], [f"{top}/"], [paths[0]], [paths[0], top], ["nope"],
                        [paths[0], "nope/"]):
            code, out, err = same(["ls", str(path), *members], capsysbinary, monkeypatch)
            assert (code == 2) == any(m.startswith("nope") for m in members), (name, members)
        assert corelib.ls_text(str(path), []) is not None, name  # the core answered
    rust = str(DATA / "rust-0.8-cli.znippy")
    assert fast.run(["ls", rust]) is None
    same(["ls", rust], capsysbinary, monkeypatch)
    for argv in (["ls", rust, "-l"], ["ls", rust, "--json"], ["ls", rust, "--glob", "*"]):
        assert fast.run(argv) is None


@pytest.mark.parametrize("where", ["group", "manifest", "footer"])
def test_ls_of_a_damaged_archive_says_what_the_python_path_says(
        where: str, archives: dict[str, Path], tmp_path: Path,
        capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    src = archives["golden-v6-default.znippy"]
    with open_archive(src) as a:
        first = a.manifest_rows[0]
        at = {"group": first.index_offset + first.index_len // 2,
              "manifest": a.source.size - 16 - 120, "footer": a.source.size - 3}[where]
    bad = _flip(src, at, tmp_path / "bad.znippy")
    code, _, err = same(["ls", str(bad)], capsysbinary, monkeypatch)
    assert code == 2 and err.count(b"\n") == 1


def _seconds(err_out: bytes) -> bytes:
    """A verify line without its time (two runs never take the same)."""
    import re

    return re.sub(rb" in \d+\.\d\d s\n", b" in - s\n", err_out)


def test_verify_of_a_sound_archive_equals_the_python_path(
        archives: dict[str, Path], capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from znippy_sql import _native

    for name, path in archives.items():
        why = _native._verify_left_because(str(path))
        # the core answered, except where the manifest records no section digests
        assert why == ("no section digests" if name in ("golden-v1.znippy",
                                                         "golden-v2-dedup.znippy") else None)
        want = run(["verify", str(path)], capsysbinary, monkeypatch, slow=True)
        got = run(["verify", str(path)], capsysbinary, monkeypatch, slow=False)
        assert (got[0], _seconds(got[1]), got[2]) == (want[0], _seconds(want[1]), want[2])
        assert got[0] == 0 and b": OK: " in got[1]
    for argv in (["verify", str(path), "--json"], ["verify", str(path), "-v"],
                 ["verify", str(path), "x"], ["verify", str(DATA / "rust-0.8-cli.znippy")]):
        assert fast.run(argv) is None, argv


@pytest.mark.parametrize("name", ["golden-v6-default.znippy",
                                  "golden-v2-dedup.znippy"])  # (no section digests)
def test_verify_never_says_ok_where_the_python_path_finds_something(
        name: str, archives: dict[str, Path], tmp_path: Path,
        capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """One flipped bit at offsets all over the archive (blobs, sub-indexes, lookup, trie,
    meta, manifest, footer): wherever the Python verify reports anything (a problem, a note)
    or fails, the core leaves the archive to it, so the output is the same."""
    src = archives[name]
    size = src.stat().st_size
    with open_archive(src) as a:
        padding = a.blob_end  # zeros before the tail: no reader looks at them
        assert padding < a.tail_offset
    handled = 0
    for at in [padding, *range(0, size, 173 if name.startswith("golden-v6") else 61)]:
        bad = _flip(src, at, tmp_path / "bad.znippy")
        want = run(["verify", str(bad)], capsysbinary, monkeypatch, slow=True)
        got = run(["verify", str(bad)], capsysbinary, monkeypatch, slow=False)
        assert (got[0], _seconds(got[1]), _seconds(got[2])) == \
            (want[0], _seconds(want[1]), _seconds(want[2])), at
        handled += want[0] == 0
    assert handled >= 1  # the padding: the core said OK, as the Python verify does


def test_verify_notes_and_signatures_are_left_to_the_python_path(
        tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An append that replaced a packed file leaves bytes no slice covers: a note, which the
    Python verify words."""
    from znippy_sql import _native
    from znippy_sql.write.append import append_archive

    arc = tmp_path / "a.znippy"
    write_archive(arc, entries(), workers=1)
    append_archive(arc, [Entry("src/a/f03.py", data=b"replaced\n")], workers=1)
    assert _native._verify_left_because(str(arc)) is not None
    code, out, _ = run(["verify", str(arc)], capsysbinary, monkeypatch, slow=False)
    assert code == 0 and out.startswith(b"NOTE: packed blobs hold")


@pytest.mark.parametrize("name", ["golden-v6-default.znippy", "golden-v2-dedup.znippy"])
def test_cat_and_ls_of_a_flipped_bit_anywhere_equal_the_python_path(
        name: str, archives: dict[str, Path], tmp_path: Path,
        capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """The damage sweep of the verify test, for ``cat`` of every file and ``ls``."""
    src = archives[name]
    with open_archive(src) as a:
        paths = a.first_paths()
    for at in range(5, src.stat().st_size, 67):
        bad = str(_flip(src, at, tmp_path / "bad.znippy"))
        for argv in (["cat", bad, *paths], ["ls", bad]):
            want = run(argv, capsysbinary, monkeypatch, slow=True)
            got = run(argv, capsysbinary, monkeypatch, slow=False)
            assert got[:2] == want[:2], (at, argv[0], got[2], want[2])
            # the same line, except a zstd frame's damage, worded by each decoder
            assert got[2].split(b"chunk")[0] == want[2].split(b"chunk")[0], (at, argv[0])
