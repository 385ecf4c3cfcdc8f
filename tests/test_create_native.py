"""The native part of create (``native/src/create/``, issue 33 item 2): the walk, the read
ahead of the files packed whole with their BLAKE3, and the routing rule.

What it must keep: the walk's entries and order (depth first, each directory sorted by name
bytes with ``/`` after directory names), the bytes and digests the writer packs, the archive
byte for byte, one routing rule, and a Ctrl-C that stops a create with nothing under the
final name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _calls import python_calls
from conftest import text_bytes

from znippy_sql import corelib, write_archive
from znippy_sql.format import b3, codec
from znippy_sql.write import zipcut
from znippy_sql.write.ingest import Ingest, WriteOptions
from znippy_sql.write.source import Walk


def _odd_tree(root: Path) -> None:
    """Small and big files, an empty one, a skip-listed name, repeated content, a symbolic
    link, an empty directory, a FIFO and a name that is not UTF-8."""
    for i in range(60):
        d = root / f"d{i % 4}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}.txt").write_bytes(text_bytes(500 + 97 * i, seed=i))
    (root / "empty.txt").write_bytes(b"")
    (root / "big.txt").write_bytes(text_bytes(600_000, seed=99))
    (root / "d0" / "again.txt").write_bytes(text_bytes(500, seed=0))
    (root / "pic.png").write_bytes(bytes(range(256)) * 40)
    (root / "a.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    (root / "link").symlink_to("d0/again.txt")
    (root / "hollow").mkdir()
    os.mkfifo(root / "pipe")
    os.makedirs(os.fsencode(root) + b"/raw\xff", exist_ok=True)
    with open(os.fsencode(root) + b"/raw\xff/x\xfe.txt", "wb") as fh:
        fh.write(text_bytes(3000, seed=5))


def _reference(root: Path, posix: bool) -> list[str]:
    """The walk's order, from ``os.walk`` and a sort of component keys (directories ``/``)."""
    out = []
    for dirpath, dirs, files in os.walk(os.fsencode(root)):
        rel = os.path.relpath(dirpath, os.fsencode(root))
        for name in files:
            full = os.path.join(dirpath, name)
            if os.path.islink(full) and not posix:
                continue
            if not (os.path.islink(full) or os.path.isfile(full)):
                continue
            out.append(name if rel == b"." else rel + b"/" + name)
    def key(path: bytes) -> tuple[bytes, ...]:
        parts = path.split(b"/")
        return tuple(p + b"/" for p in parts[:-1]) + (parts[-1],)
    return [os.fsdecode(p) for p in sorted(out, key=key)]


@pytest.mark.parametrize("posix", [False, True])
def test_walk_order_and_facts(tmp_path: Path, posix: bool) -> None:
    src = tmp_path / "src"
    _odd_tree(src)
    walk = Walk(src, posix=posix)
    got = list(walk)
    assert [e.relative_path for e in got] == _reference(src, posix)
    for e in got:
        full = os.path.join(src, e.relative_path)
        st = os.lstat(full)
        if e.link is not None:
            assert e.data == os.fsencode(os.readlink(full)) and e.mode == st.st_mode
        else:
            assert e.known_size == st.st_size and e.file == full
            assert (e.mode, e.mtime_ns) == ((st.st_mode, st.st_mtime_ns) if posix else
                                            (None, None))
    assert walk.special_left_out == ["pipe"]
    assert walk.links_left_out == (0 if posix else 1)
    if posix:
        dirs = [d for d, _, _ in walk.directories]
        assert "hollow" in dirs and "d0/s0" in dirs and dirs.index("d0") < dirs.index("d0/s0")


def test_read_ahead_gives_the_files_bytes_and_digests(tmp_path: Path) -> None:
    """Every file the rule packs whole (a small pack or a directory pack) comes with its bytes
    and BLAKE3, no other file does; every file comes with the rule's route for it."""
    src = tmp_path / "src"
    _odd_tree(src)
    ingest = Ingest(os.open(tmp_path / "x", os.O_CREAT | os.O_RDWR), 0, WriteOptions())
    walk = ingest.read_ahead(Walk(src))
    assert walk is not None
    taken = 0
    for e in walk:
        if e.file is None:
            continue
        route = corelib.route(ingest._rule, e.relative_path, e.known_size or 0)
        assert e.route == route, e.relative_path
        assert (e.ahead is not None) == (route in (0, 2)), e.relative_path
        if e.ahead is not None:
            data, digest = e.ahead
            taken += 1
            assert data == Path(e.file).read_bytes()
            assert digest == b3.blake3(data).digest()
    assert taken > 60
    ingest.abort()


def test_a_pom_read_ahead_is_not_read_again_for_its_columns(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The Maven module's columns of a walked POM come from the bytes read ahead: the file is
    opened once (and the rows are those of a write that reads it again)."""
    from znippy_sql import open_archive
    from znippy_sql.write import ingest

    src = tmp_path / "src"
    pom = src / "org" / "ex" / "lib" / "1.0" / "lib-1.0.pom"
    pom.parent.mkdir(parents=True)
    pom.write_bytes(b"<project><groupId>org.ex</groupId><artifactId>lib</artifactId>"
                    b"<version>1.0</version><packaging>jar</packaging></project>")
    want = tmp_path / "want.znippy"
    write_archive(want, [ingest.Entry("org/ex/lib/1.0/lib-1.0.pom", file=str(pom))],
                  pkg_type="auto", fsync=False)

    def no(file: object) -> bytes:
        raise AssertionError("read again")

    monkeypatch.setattr(ingest, "_read_file", no)
    got = tmp_path / "got.znippy"
    write_archive(got, src, pkg_type="auto", fsync=False)
    rows = [open_archive(p).index().to_pylist() for p in (want, got)]
    assert rows[0] == rows[1] and rows[1][0]["maven_packaging"] == "jar"


def _python_rule(path: str, size: int, *, pack: bool, dedup: bool, pack_max: int,
                 dir_max: int) -> int:
    """docs/format.md §6, written out once more in Python (the test's own reading)."""
    zip_family = zipcut.is_zip_family(path)
    if pack and 0 < size <= dir_max and zip_family:
        return 0
    if dedup and size and zip_family:
        return 1
    if pack and 0 < size <= pack_max and not codec.is_skipped(path):
        return 2
    return 3


@pytest.mark.parametrize("pack,dedup", [(True, True), (False, True), (True, False),
                                        (False, False)])
def test_the_routing_rule(pack: bool, dedup: bool) -> None:
    rule = corelib.router(codec.SKIP_SUFFIXES, zipcut.ZIP_SUFFIXES, packing=pack,
                          dedup=dedup, pack_max=256 << 10, dir_max=32 << 20)
    names = ["a.txt", "a/b.JAR", "x.jar", ".gz", "d/.zip", "a.b/c", "a.tar.gz", "noext",
             "w.whl", "p.PNG", "q.", "k.mKv", "é.Zip", "s.\udcff"]
    for name in names:
        for size in (0, 1, 256 << 10, (256 << 10) + 1, 32 << 20, (32 << 20) + 1):
            want = _python_rule(name, size, pack=pack, dedup=dedup, pack_max=256 << 10,
                                dir_max=32 << 20)
            assert corelib.route(rule, name, size) == want, (name, size)


@pytest.mark.parametrize("workers", [1, 2])
def test_archive_is_the_same_whatever_the_workers(tmp_path: Path, workers: int) -> None:
    src = tmp_path / "src"
    _odd_tree(src)
    os.unlink(src / "pipe")
    outs = []
    for w in (1, workers):
        out = tmp_path / f"w{w}-{len(outs)}.znippy"
        write_archive(out, src, posix=True, skip_unsafe=True, fsync=False, workers=w)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("level", [1, 3, 7, 12, 19])
def test_native_frames_are_zlframes_byte_for_byte(level: int) -> None:
    """``corelib.frames`` (the zstd crate) writes the frames ``format/zlframe.py`` writes
    (python-zstandard), for chunks, packed blobs and directory packs; None where they do."""
    import random

    from znippy_sql.format import zlframe
    from znippy_sql.write.pipeline import DIR_PACK, PACK, encode

    rng = random.Random(level)
    chunks: list[bytes | memoryview] = [
        text_bytes(n, seed=n) for n in (1, 17, 200, 4096, 65_536, 300_000)]
    chunks += [rng.randbytes(5000), b"a" * 100_000, bytes(7), memoryview(b"xyz" * 999)[5:]]
    shapes = {codec.COMPRESS: zlframe.FastEncoder(level),
              PACK: zlframe.FastEncoder(level, hash_log=codec.PACK_HASH_LOG,
                                        chain_log=codec.PACK_CHAIN_LOG),
              DIR_PACK: zlframe.FastEncoder(level, window_log=codec.LONG_WINDOW_LOG)}
    for mode, fast in shapes.items():
        got = encode(level, chunks, mode)
        for chunk, frame in zip(chunks, got):
            want = fast.frame_if_smaller(chunk)
            assert (None if frame is None else b"".join(frame)) == want, (mode, len(chunk))
    assert all(len(c) > 0 for c in chunks)


def test_unreadable_root_is_named(tmp_path: Path) -> None:
    from znippy_sql.errors import ZnippyError

    with pytest.raises(ZnippyError) as err:
        list(Walk(tmp_path / "nothing"))
    assert err.value.path == str(tmp_path / "nothing")


_SIGINT = """
import os, signal, sys, threading, time
from znippy_sql.cli import main
def stop():  # once the staging file exists: the walk and the writes are under way
    here = os.path.dirname(sys.argv[2])
    while len(os.listdir(here)) < 2:
        time.sleep(0.005)
    time.sleep(float(sys.argv[3]))
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=stop, daemon=True).start()
sys.exit(main(["create", sys.argv[1], "-o", sys.argv[2]]))
"""


def test_ctrl_c_stops_a_create_with_nothing_under_the_final_name(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for i in range(3000):
        d = src / f"d{i % 50:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_bytes(text_bytes(2000 + i, seed=i))
    out = tmp_path / "a.znippy"
    got = subprocess.run([sys.executable, "-c", _SIGINT, str(src), str(out), "0.05"],
                         capture_output=True, text=True, timeout=60)
    if got.returncode == 0:
        pytest.skip("the create finished before the SIGINT")  # a very fast machine
    assert got.returncode == 130, got.stderr
    assert "interrupted" in got.stderr and "Traceback" not in got.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


_FIRST_PYARROW = """
import sys
class Watch:  # when pyarrow is first imported: is a walk of the source under way?
    def find_spec(self, name, path=None, target=None):
        if name == "pyarrow":
            sys.meta_path.remove(self)
            source = sys.modules.get("znippy_sql.write.source")
            print("walking" if source is not None and source._STARTED else "idle",
                  file=sys.stderr)
sys.meta_path.insert(0, Watch())
from znippy_sql.cli import main
sys.exit(main(["create", sys.argv[1], "-o", sys.argv[2], "--pkg-type", "auto",
              "--skip-unsafe", "--no-provenance"]))
"""


def test_the_cli_create_walks_before_pyarrow_is_imported(tmp_path: Path) -> None:
    """``znippy-sql create`` starts the native walk (and its read-ahead) before it imports
    pyarrow and numpy (~0.25 s), which then overlap it (``write/early.py``); the writer
    takes that walk."""
    src = tmp_path / "src"
    _odd_tree(src)
    out = tmp_path / "cli.znippy"
    got = subprocess.run([sys.executable, "-c", _FIRST_PYARROW, str(src), str(out)],
                         capture_output=True, text=True, errors="replace", timeout=120)
    assert got.returncode == 1, got.stderr  # the name that is not UTF-8: skipped
    assert got.stderr.splitlines()[0] == "walking", got.stderr
    from znippy_sql import open_archive

    assert open_archive(out).verify().ok
    # (byte for byte the archive of a create without the early walk: bench's cmp, see
    # bench/results-create-native.md)


def test_a_started_walk_is_taken_only_by_an_equal_one(tmp_path: Path) -> None:
    from znippy_sql.write import early, source

    _odd_tree(tmp_path / "src")
    options = WriteOptions()
    early.start(str(tmp_path / "src"), str(tmp_path / "a.znippy"), options)
    assert len(source._STARTED) == 1
    other = [e.relative_path for e in Walk(tmp_path / "src", posix=True)]  # no rule: not it
    assert len(source._STARTED) == 1
    early.discard()
    assert not source._STARTED
    assert other == [e.relative_path for e in Walk(tmp_path / "src", posix=True)]


@pytest.mark.parametrize(("pkg_type", "bound", "more"), [(0, 2.2, 0.1), ("auto", 2.2, 0.1)])
def test_python_calls_per_file_are_counted(tmp_path: Path, pkg_type: int | str,
                                           bound: float, more: float) -> None:
    """Python function calls of ``write_archive`` per file of a 2,000-file tree in 40
    directories (``bound``: the write's fixed calls and ~80 a pack included), and what each
    file adds to a tree of the same 40 directories with one file each (``more``). Issue 33's target is 0.5 a file; with the walk, read and BLAKE3 native it
    was ~31 (35 before), ~26 with the dedup index native too, ~16 with each file's route and
    read-ahead bytes in its walk entry, ~12 with the trie and the packs' turns native, ~8
    with pack assembly native, ~6 with the walk's batches taken in one loop, ~5 once
    ``Entry`` validates in its own ``__init__``, ~2 (0.43 on 10,000 files: the write's
    ~3,800 fixed calls dominate; 0.48 with ``auto``) once the walk's batch comes as columns that ``Ingest``
    takes in one call, the path check in the core (``walk::plain``) and no ``Entry``
    made. With ``pkg_type="auto"`` every path is offered to the package-type modules (~40
    before the module list was taken once a write and a group kept per claiming module,
    ~17, ~13 once the pypi, cargo and npm modules reject a path by its suffix before
    parsing it, ~10 once ``modules.claim`` asks them only for paths with one of their
    ``claim_suffixes``, ~9 with ``Entry``'s one call, ~2 once ``modules.claim_all`` claims
    a batch and maven is asked only about paths its ``claim_pattern`` matches)."""
    def tree(src: Path, n: int) -> Path:
        for i in range(n):
            d = src / f"d{i % 40:02d}"
            d.mkdir(parents=True, exist_ok=True)
            (d / f"f{i:05d}.txt").write_bytes(text_bytes(300 + i, seed=i))
        return src

    def count(src: Path) -> int:
        write_archive(tmp_path / "warm.znippy", src, fsync=False,  # imports done first
                      pkg_type=pkg_type)
        _, calls = python_calls(lambda: write_archive(tmp_path / "a.znippy", src,
                                                      fsync=False, pkg_type=pkg_type))
        return sum(calls.values())

    # the same 40 directories (one small pack each) with one file each: what a file adds
    many, few = count(tree(tmp_path / "src", 2000)), count(tree(tmp_path / "few", 40))
    per_file, added = many / 2000, (many - few) / 1960
    print(f"{per_file:.2f} Python calls a file, {added:.3f} more a file")
    assert per_file < bound and added < more


@pytest.mark.parametrize("keys", [[], [b"a"], [b"a/b.txt", b"a/c", b"b", "é/ü".encode()],
                                  [b"%05d/x" % i for i in range(3000)]])
def test_the_trie_built_by_the_core_is_ducers_byte_for_byte(keys: list[bytes]) -> None:
    """``__trie__`` (``native/src/create/tail.rs``) has the bytes ``ducer.Map.build`` gave,
    for every row a key (here every other row starts a file)."""
    import ducer
    import numpy as np

    from znippy_sql.format import trie

    data = b"".join(k for k in keys for _ in range(2))
    offsets = np.cumsum([0] + [len(k) for k in keys for _ in range(2)]).astype("<i4")
    rows = np.arange(0, 2 * len(keys), 2, dtype="<u8")
    want = bytes(ducer.Map.build(":memory:", [(k, 2 * i) for i, k in enumerate(keys)]))
    assert trie.build(data, offsets.tobytes(), rows.tobytes()) == want


def test_a_trie_of_unsorted_keys_is_a_format_error() -> None:
    import numpy as np

    from znippy_sql.errors import FormatError
    from znippy_sql.format import trie

    offsets = np.array([0, 1, 2], dtype="<i4").tobytes()
    with pytest.raises(FormatError, match="building __trie__ failed"):
        trie.build(b"ba", offsets, np.array([0, 1], dtype="<u8").tobytes(), path="x.znippy")


@pytest.mark.parametrize("nth", [0, 1, 3, 40, 300])
def test_a_panic_in_a_per_file_call_is_a_znippy_error(tmp_path: Path, nth: int) -> None:
    """Every per-file method of create (the walk, the routing rule, the turns, pack
    assembly, the dedup index, the frames) catches a panic and raises a ``ZnippyError``
    (not pyo3's ``PanicException``, a ``BaseException``): the ``nth`` such call from now
    is made to panic, and the write stops with nothing under its name."""
    import znippy_sql._native as native
    from znippy_sql.errors import ZnippyError

    src = tmp_path / "src"
    for i in range(400):
        d = src / f"d{i % 8}" / f"s{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:04d}.txt").write_bytes(text_bytes(200 + 13 * i, seed=i))
    out = tmp_path / "a.znippy"
    native._create_panic_for_test(nth)
    try:
        with pytest.raises(ZnippyError, match="the native core panicked"):
            write_archive(out, src, fsync=False, workers=1)
    finally:
        native._create_panic_for_test(-1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_a_module_is_asked_only_for_paths_with_its_claim_suffixes() -> None:
    """``modules.claim`` calls ``claims`` of a module with ``claim_suffixes`` only for paths
    that end with one of them (the built-in cargo, npm and pypi modules declare theirs)."""
    from znippy_sql import modules

    asked: list[str] = []

    class Picky:
        name, pkg_type, fields = "picky", 100, ()
        claim_suffixes = (".pk",)

        def claims(self, relative_path: str) -> bool:
            asked.append(relative_path)
            return True

        def columns(self, relative_path: str, read: object) -> dict[str, object]:
            return {}

    picky = Picky()
    assert modules.claim("a/b.txt", [picky]) is None
    assert modules.claim("a/b.pk", [picky]) is picky
    assert asked == ["a/b.pk"]
    for m in modules.all_modules():
        if m.name in ("cargo", "npm", "pypi"):
            assert getattr(m, "claim_suffixes", None)


def test_the_walk_marks_the_paths_check_relative_path_has_to_check(tmp_path: Path) -> None:
    """A walk's batch names (``unplain``) exactly the paths outside ``check_relative_path``'s
    fast path (``format/paths.py`` ``plain_paths``: the same rules, in numpy): the core's
    ``walk::plain``; only those are checked one by one."""
    import numpy as np

    from znippy_sql.format.paths import plain_paths

    src = tmp_path / "src"
    long_dir = src / ("d" * 200)
    long_dir.mkdir(parents=True)
    names = ["a.txt", ".hidden", "x:y", "ok:", "back\\slash", "é.txt", "ctl\x01", "sp ace",
             "~tilde", "x..y"]
    for name in names:
        (src / name).write_bytes(b"x")
    (long_dir / ("f" * 60)).write_bytes(b"x")  # 261 bytes: past the fast path's 255
    (long_dir / "short").write_bytes(b"x")
    batches = list(Walk(src).batches())
    rels = [rel for b in batches for rel in b.rels]
    unplain = [rels.index(b.rels[i]) for b in batches for i in b.unplain]
    encoded = [os.fsencode(r) for r in rels]
    ends = np.cumsum([len(e) for e in encoded])
    starts = ends - [len(e) for e in encoded]
    want = plain_paths(np.frombuffer(b"".join(encoded), dtype=np.uint8), starts, ends)
    assert unplain == [i for i, ok in enumerate(want) if not ok]
    assert len(unplain) == 6  # .hidden, x:y, back\slash, é.txt, ctl\x01, the long one


def test_a_batch_is_claimed_as_each_path_would_be() -> None:
    """``modules.claim_all`` (a writer's batch, with ``pkg_type="auto"``) gives each path the
    first module whose ``claims`` says yes, as asking every module about every path would;
    maven's ``claim_pattern`` matches every path maven claims."""
    from znippy_sql import modules

    paths = ["org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.jar",
             "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9-sources.jar",
             "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.jar.sha1",
             "org/ex/lib/1.0/lib-1.0-bin.tar.gz", "org/ex/lib/1.0/lib-1.0.pom.asc.md5",
             "org/ex/lib/1.0-SNAPSHOT/lib-1.0-20240101.120000-3.jar",
             "org/ex/lib/maven-metadata.xml", "org/ex/lib/1.0/maven-metadata-local.xml.sha1",
             "org/ex/maven-metadata.xml", "maven-metadata.xml", "lib/1.0/lib-1.0.jar",
             "a/lib/1.0/other-1.0.jar", "src/main/java/Foo.java", "README.md",
             "crates/serde-1.0.0.crate", "serde-1.0.0.crate", "pkgs/left-pad-1.3.0.tgz",
             "@scope/name/-/name-1.0.0.tgz", "wheels/requests-2.31.0-py3-none-any.whl",
             "sdist/requests-2.31.0.tar.gz", "x/y/z/z-notaversion", "a/b/c/c-", "a/b/c/d-1"]
    among = modules.all_modules()
    maven = modules.by_name("maven")
    assert maven is not None
    claimed = [p for p in paths if maven.claims(p)]
    assert len(claimed) >= 9
    assert all(maven.claim_pattern.search(p) for p in claimed)  # type: ignore[attr-defined]
    want = [next((m for m in among if m.claims(p)), None) for p in paths]
    assert modules.claim_all(paths, among) == want
    assert [modules.claim(p, among) for p in paths] == want
    assert {m.name for m in want if m is not None} == {"maven", "cargo", "npm", "pypi"}


@pytest.mark.parametrize("posix", [False, True])
def test_a_walks_count_is_its_entries(tmp_path: Path, posix: bool) -> None:
    """``Walk.count`` (a progress bar's total), from the batches' columns, is what the
    walk's entries hold: files and links, and their sizes (a link's: its target)."""
    _odd_tree(tmp_path)
    entries = list(Walk(tmp_path, posix=posix))
    want = (len(entries), sum(e.size() for e in entries))
    assert Walk(tmp_path, posix=posix).count() == want
