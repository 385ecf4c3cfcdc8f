"""Our ``append`` to archives the real Rust binaries wrote, read back by them (``make interop``,
docs/interop.md): their ``compress`` (the ``generic``, ``rust`` and ``python`` plugins, signed)
and their own ``append --meta``, then ``znippy-sql append``, then their ``verify``,
``decompress`` (the tree byte for byte, its modes and directories), ``list``, ``get`` and
``meta``; and this project's reader. The binaries are found as in ``test_interop_real.py``;
without any, every test here is skipped, saying so. The same appends to the committed
goldens, checked without the binaries: ``tests/test_rust_append.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

import interop_corpus as corpus
from test_interop_real import BINARIES, modes, real, tree, version
from test_rust_append import more_files, package_files
from znippy_sql import open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register

pytestmark = pytest.mark.skipif(not BINARIES, reason="no real znippy binary: set "
                                "ZNIPPY_RUST_BINS or install one under /opt (docs/interop.md)")


#: the first release whose layout these tests append to: typed meta, fsmeta, ``--format
#: generic`` (docs/interop.md, "Layouts"); ``znippy`` 0.9.12 pins ``znippy-common`` 0.9.18
FIRST = (0, 9, 12)


def release(binary: Path) -> tuple[int, ...] | None:
    """The release of ``binary``: from its install folder (``/opt/znippy-0.9.5``), else its
    ``--version`` (which 0.9.5 has not); None when neither says."""
    found = re.search(r"znippy-(\d+)\.(\d+)\.(\d+)", str(binary))
    if found is None:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
        found = re.search(r"v(\d+)\.(\d+)\.(\d+)", done.stdout)
    return tuple(map(int, found.groups())) if found else None


@pytest.fixture(params=BINARIES, ids=[b.parent.parent.name for b in BINARIES])
def binary(request: pytest.FixtureRequest) -> Path:
    found = release(Path(request.param))
    if found is not None and found < FIRST:
        pytest.skip(f"{request.param} is {'.'.join(map(str, found))}: its layout predates "
                    "the typed meta and fsmeta these appends keep (0.9.12 and later)")
    return Path(request.param)


def whole_tree(tmp_path: Path, more: Path) -> Path:
    """The corpus with ``more`` copied over it (modes too): what a decompress must give."""
    both = corpus.write(tmp_path / "both")
    shutil.copytree(more, both, dirs_exist_ok=True)
    return both


def get(binary: Path, archive: Path, path: str) -> bytes:
    done = subprocess.run([str(binary), "get", "-i", str(archive), "-p", path],
                          capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def they_read(binary: Path, archive: Path, want: dict[str, bytes], shape: Path,
              out: Path) -> None:
    """Their ``verify``, ``decompress`` (bytes, modes, directories), ``list``, ``get``; and
    this project's reader, its ``extract --preserve`` and its DuckDB views."""
    done = real(binary, "verify", "-i", archive)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", archive, "-o", out)
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(out) == want
    assert modes(out) == modes(shape)
    assert (out / "empty-dir").is_dir()
    listed = real(binary, "list", "-i", archive)
    assert listed.returncode == 0, listed.stderr
    assert {line.split("\t")[0] for line in listed.stdout.splitlines()} == set(want)
    for path in ("later/l.txt", "hello.txt", "docs/readme.md"):
        assert get(binary, archive, path) == want[path]
    with open_archive(archive) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok
        assert a.not_understood() == {}
        a.extract(out.parent / "ours", preserve=True)
    assert tree(out.parent / "ours") == want and modes(out.parent / "ours") == modes(shape)
    con = duckdb.connect()
    register(con, archive, "r")
    got = con.execute("SELECT relative_path, size FROM r_files").fetchall()
    assert sorted(got) == sorted((p, len(d)) for p, d in want.items())
    assert con.execute("SELECT content FROM znippy_cat('r', 'later/l.txt')").fetchall() == \
        [(want["later/l.txt"],)]


@pytest.mark.parametrize("fmt", ["generic", "rust", "python"])
def test_they_compress_we_append_they_read(binary: Path, fmt: str, tmp_path: Path) -> None:
    """``znippy-sql append`` wrote this project's layout before, which their ``verify`` and
    ``decompress`` do not read: now it keeps theirs, the replaced and new files included."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / f"{fmt}.znippy"
    done = real(binary, "compress", "-i", src, "-o", out, "--format", fmt)
    assert done.returncode == 0, done.stderr
    more, want = more_files(tmp_path)
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 0
    they_read(binary, out, want, whole_tree(tmp_path, more), tmp_path / "x")
    found = real(binary, "meta", "-i", out, "-k", "team")
    assert found.returncode == 0 and '"interop"' in found.stdout, found.stdout + found.stderr


def test_we_append_new_files_they_read(binary: Path, tmp_path: Path) -> None:
    """The plainest case: new files only, no option. Before, the result was in this
    project's layout and their ``verify`` and ``decompress`` failed on it ("IPC: message
    metadata is not a valid flatbuffer")."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "generic.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", "generic").returncode == 0
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "x.txt").write_bytes(b"x\n")
    assert main(["append", str(out), str(tmp_path / "only")]) == 0
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == {**corpus.files(), "x.txt": b"x\n"}


def test_they_append_meta_we_append_they_read(binary: Path, tmp_path: Path) -> None:
    """After their own ``append --meta`` (two sub-indexes of group ``(0, "", "")``, typed
    facts): ours appends again, and their ``meta`` still shows every fact with its kind (an
    integer, a float, a boolean, bytes), ours a string beside them."""
    src = corpus.write(tmp_path / "in")
    add = corpus.write(tmp_path / "add", corpus.APPENDED)
    out = tmp_path / "meta.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", "generic").returncode == 0
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\xfe")
    done = real(binary, "append", "-i", out, "-a", add, "--meta", "added/new.txt=build=7",
                "--meta", "added/new.txt=ratio=0.25", "--meta", "added/new.txt=ok=true",
                "--meta", f"added/new.txt=raw=@{tmp_path / 'blob.bin'}", "--meta-archive",
                "release=r1")
    assert done.returncode == 0, done.stderr
    more, want = more_files(tmp_path)
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 0
    they_read(binary, out, want, whole_tree(tmp_path, more), tmp_path / "x")
    found = real(binary, "meta", "-i", out)
    assert found.returncode == 0, found.stdout + found.stderr
    shown = {" ".join(line.split()) for line in found.stdout.splitlines()}
    assert {"added/new.txt build = 7", "added/new.txt ratio = 0.25", "added/new.txt ok = true",
            "added/new.txt raw = <3 bytes>", '<archive> release = "r1"',
            '<archive> team = "interop"'} <= shown, found.stdout


def test_they_sign_we_append_they_verify(binary: Path, tmp_path: Path) -> None:
    """A signed archive of theirs: our append refuses to leave their signatures over files
    they no longer cover (exit 2, the archive as it was); ``--sign-key``/``--sign-cert``
    re-signs, and their ``verify --signed`` takes it; ``--drop-signatures`` drops them, and
    their ``verify`` still reads it while ``verify --signed`` finds no signature."""
    src = corpus.write(tmp_path / "in")
    key, cert = corpus.signer(tmp_path / "keys")
    ca = cert.parent / "ca.cert.der"
    out = tmp_path / "signed.znippy"
    done = real(binary, "compress", "-i", src, "-o", out, "--sign", key, "--sign-cert", cert)
    if "not compiled" in done.stderr or "feature" in done.stderr and done.returncode:
        pytest.skip(f"{version(binary)} was built without the sign feature")
    assert done.returncode == 0, done.stderr
    dropped = tmp_path / "dropped.znippy"
    shutil.copy(out, dropped)
    before = out.read_bytes()
    more, want = more_files(tmp_path)
    assert main(["append", str(out), str(more)]) == 2
    assert out.read_bytes() == before
    assert main(["append", str(out), str(more), "--sign-key", str(key), "--sign-cert",
                 str(cert)]) == 0
    checked = real(binary, "verify", "-i", out, "--signed", "--root", ca)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(want)}" in checked.stdout.split("artefakter:")[-1], checked.stdout
    they_read(binary, out, want, whole_tree(tmp_path, more), tmp_path / "x")
    assert main(["append", str(dropped), str(more), "--drop-signatures"]) == 0
    assert real(binary, "verify", "-i", dropped).returncode == 0
    refused = real(binary, "verify", "-i", dropped, "--signed", "--root", ca)
    assert refused.returncode != 0 and "no provenance signatures" in refused.stderr


def test_we_append_packages_they_list(binary: Path, tmp_path: Path) -> None:
    """``--pkg-type auto`` on their ``--format rust`` archive: the new crate joins their cargo
    group, the pom makes the Maven plugin's group; their ``list`` prints the pom's
    coordinates from the plugin's columns, ``verify``, ``decompress`` and ``get`` read all."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "rust.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", "rust").returncode == 0
    more = package_files(tmp_path)
    assert main(["append", str(out), str(more), "--pkg-type", "auto"]) == 0
    want = {**corpus.files(), **tree(more)}
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == want
    listed = real(binary, "list", "-i", out)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2:] for line in listed.stdout.splitlines()}
    assert rows["maven/org/acme/lib/1.0/lib-1.0.pom"] == ["org.acme:lib:1.0"]
    assert set(rows) == set(want)
    assert get(binary, out, "crates/extra-2.0.0.crate") == want["crates/extra-2.0.0.crate"]


def test_we_append_to_a_rust_08_archive_they_read(binary: Path, tmp_path: Path) -> None:
    """The 0.8 layout (``tests/data/rust-0.8-cli.znippy``: no lookup, no reserved row) stays
    in it through our append: their ``verify``, ``decompress`` and ``list`` read the result
    (their ``get`` wants the lookup the 0.8 layout has not)."""
    out = tmp_path / "r08.znippy"
    shutil.copy(Path(__file__).parent / "data" / "rust-0.8-cli.znippy", out)
    with open_archive(out) as a:  # its files (test_rust_read.py checks them)
        old = dict(a.read_many(a.first_paths()))
    (tmp_path / "only" / "added").mkdir(parents=True)
    (tmp_path / "only" / "added" / "one.txt").write_bytes(b"one\n")
    assert main(["append", str(out), str(tmp_path / "only")]) == 0
    want = {**old, "added/one.txt": b"one\n"}
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == want
    listed = real(binary, "list", "-i", out)
    assert {line.split("\t")[0] for line in listed.stdout.splitlines()} == set(want)


#: binaries before 0.9.12, whose ``znippy-common`` (0.9.11 for 0.9.5) writes no fsmeta
EARLY = [b for b in BINARIES if (release(b) or FIRST) < FIRST]


@pytest.mark.skipif(not EARLY, reason="no real znippy before 0.9.12 installed (e.g. "
                    "/opt/znippy-0.9.5, docs/interop.md)")
@pytest.mark.parametrize("early", EARLY, ids=[b.parent.parent.name for b in EARLY])
def test_we_append_to_a_pre_fsmeta_archive_they_read(early: Path, tmp_path: Path) -> None:
    """An archive of a release before 0.9.15 (the Rust-named lookup and trie, no
    ``__znippy_fsmeta__``): its readers take a section they do not know for data (0.9.5's
    ``verify`` fails "concat sub-indexes" on an fsmeta), so our append adds none: ``--meta``
    is refused (exit 2, the archive as it was), a plain append is read by that release and
    by every later one installed."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "early.znippy"
    done = real(early, "compress", "-i", src, "-o", out)
    assert done.returncode == 0, done.stderr
    with open_archive(out) as a:
        if "__lookup__" not in a.sections or "__znippy_fsmeta__" in a.sections:
            pytest.skip(f"{early} writes {a.sections}: not the 0.9.1 ... 0.9.14 layout")
    more, _ = more_files(tmp_path)
    before = out.read_bytes()
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 2
    assert out.read_bytes() == before
    assert main(["append", str(out), str(more)]) == 0
    again = tmp_path / "again"  # a second append of ours writes no fsmeta either
    (again / "later").mkdir(parents=True)
    (again / "later" / "x.txt").write_bytes(b"later\n")
    assert main(["append", str(out), str(again)]) == 0
    want = {**corpus.files(), **tree(more), **tree(again)}
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok
        assert "__znippy_fsmeta__" not in a.sections and a.meta is None
    for binary in [early, *(b for b in BINARIES if (release(b) or FIRST) >= FIRST)]:
        done = real(binary, "verify", "-i", out)
        assert done.returncode == 0, f"{binary}: {done.stdout}{done.stderr}"
        done = real(binary, "decompress", "-i", out, "-o", tmp_path / binary.parent.parent.name)
        assert done.returncode == 0, f"{binary}: {done.stdout}{done.stderr}"
        assert tree(tmp_path / binary.parent.parent.name) == want


#: binaries before 0.9.12 that write and read the typed ``__znippy_meta__`` (0.9.9)
EARLY_META = [b for b in EARLY if (release(b) or FIRST) >= (0, 9, 9)]


@pytest.mark.skipif(not EARLY_META, reason="no real znippy 0.9.9 installed (docs/interop.md)")
@pytest.mark.parametrize("early", EARLY_META, ids=[b.parent.parent.name for b in EARLY_META])
def test_we_append_facts_to_their_pre_fsmeta_meta_they_read(early: Path, tmp_path: Path) -> None:
    """Their ``append --meta`` (0.9.9: typed meta, no fsmeta), then two appends of ours with
    facts: still no fsmeta; their ``verify``, ``decompress`` and ``meta`` take it, the old
    facts' kinds kept (``build`` an integer)."""
    src = corpus.write(tmp_path / "in")
    add = corpus.write(tmp_path / "add", corpus.APPENDED)
    out = tmp_path / "theirs.znippy"
    assert real(early, "compress", "-i", src, "-o", out, "--format", "maven").returncode == 0
    done = real(early, "append", "-i", out, "-a", add, "--meta", "added/new.txt=build=7")
    assert done.returncode == 0, done.stderr
    more, _ = more_files(tmp_path)
    assert main(["append", str(out), str(more), "--meta", "team=interop"]) == 0
    assert main(["append", str(out), str(more), "--meta", "stage=two"]) == 0
    want = {**corpus.expected("appended"), **tree(more)}
    with open_archive(out) as a:
        assert "__znippy_fsmeta__" not in a.sections
        assert dict(a.read_many(want)) == want and a.verify().ok
    done = real(early, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(early, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == want
    for key, shown in (("team", '"interop"'), ("stage", '"two"'), ("build", "= 7")):
        found = real(early, "meta", "-i", out, "-k", key)
        assert found.returncode == 0 and shown in found.stdout, found.stdout + found.stderr
