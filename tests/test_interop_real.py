"""Both directions against the real Rust binaries (``make interop``, docs/interop.md).

The binaries are found as ``$ZNIPPY_RUST_BINS`` (paths separated by ``:``) or
``/opt/znippy-*/bin/znippy`` (``cargo +nightly install znippy --version V --features sign
--locked --root /opt/znippy-V``); without any, every test here is skipped, saying so.

- they write, we read: ``znippy compress`` (the default ``rust`` plugin and ``--format
  generic``, signed with ``--sign``), ``znippy append`` with typed ``--meta`` facts; every file
  read back byte for byte, signatures and facts checked;
- we write, they read: ``znippy-sql create --compat rust-0.8`` and ``--compat rust-0.10``
  through ``znippy verify``, ``decompress``, ``list`` and ``get``, byte for byte.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import subprocess
from pathlib import Path

import pytest

import interop_corpus as corpus
from znippy_sql import open_archive
from znippy_sql.cli import main


def _binaries() -> list[Path]:
    given = os.environ.get("ZNIPPY_RUST_BINS")
    # a build of a release with extra features (``/opt/znippy-0.10.1-iceberg``) writes and
    # reads what its plain build does: its own tests are test_interop_iceberg.py
    paths = given.split(":") if given else sorted(
        p for p in glob.glob("/opt/znippy-*/bin/znippy") if "-iceberg/" not in p)
    return [Path(p) for p in paths if p and Path(p).is_file()]


BINARIES = _binaries()
pytestmark = pytest.mark.skipif(not BINARIES, reason="no real znippy binary: set "
                                "ZNIPPY_RUST_BINS or install one under /opt (docs/interop.md)")


def version(binary: Path) -> str:
    """``znippy --version`` (0.9.9+), else the install folder's name: 0.9.5's CLI has no
    ``--version``."""
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else binary.parent.parent.name


def release(binary: Path) -> tuple[int, ...]:
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", version(binary))
    assert found, version(binary)
    return tuple(int(n) for n in found.groups())


#: the first binary whose reader knows ``__znippy_meta__`` (0.9.9: ``znippy-common`` 0.9.13);
#: before it (0.9.5: ``znippy-common`` 0.9.11) the reserved names are the lookup, the trie and
#: the two signature sections only, and there is no ``append --meta``, no ``meta`` command, no
#: git handler, and ``append`` keeps a replaced file's rows (docs/interop.md)
KNOWS_META = (0, 9, 9)


def old(binary: Path) -> bool:
    return release(binary) < KNOWS_META


#: the first binary with ``__znippy_fsmeta__`` and a ``generic`` handler (0.9.12:
#: ``znippy-common`` 0.9.18); 0.9.9 (0.9.13) has neither: its reader takes an fsmeta for a data
#: sub-index and panics, as 0.9.5's does on the meta too (docs/interop.md)
KNOWS_FSMETA = (0, 9, 12)


def no_fsmeta(binary: Path) -> bool:
    return release(binary) < KNOWS_FSMETA


#: the first binary with the lookup and trie (``znippy-common`` 0.9.1); 0.9.0 writes and reads
#: the 0.8 layout only and has no ``get``, ``append`` or signing (docs/interop.md)
KNOWS_LOOKUP = (0, 9, 1)


def no_lookup(binary: Path) -> bool:
    return release(binary) < KNOWS_LOOKUP


#: the first binary with ``append`` and signing (0.9.3: ``znippy-cli`` 0.9.4, ``znippy-common``
#: 0.9.9; 0.9.3 and 0.9.4 are not built, 0.9.5 is the first measured); 0.9.2 has the lookup and
#: trie but neither, and its reader takes a signature section for data (docs/interop.md)
KNOWS_SIGN = (0, 9, 3)


def no_sign(binary: Path) -> bool:
    return release(binary) < KNOWS_SIGN


def generic(binary: Path) -> str:
    """The plugin-less ``--format``: ``generic`` (0.9.12+); 0.9.5 and 0.9.9 have none
    (``maven``)."""
    return "maven" if no_fsmeta(binary) else "generic"


def takes_rust10(binary: Path) -> None:
    """Skip for a binary that refuses every ``--compat rust-0.10`` archive (its
    ``__znippy_meta__`` before 0.9.9, its ``__znippy_fsmeta__`` before 0.9.12): measured in
    ``test_we_write_they_read[rust-0.10]``."""
    if no_fsmeta(binary):
        pytest.skip(f"{version(binary)} refuses --compat rust-0.10 archives "
                    "(test_we_write_they_read[rust-0.10])")


def real(binary: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          timeout=600)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
            if p.is_file()}


@pytest.fixture(params=BINARIES, ids=[b.parent.parent.name for b in BINARIES])
def binary(request: pytest.FixtureRequest) -> Path:
    return Path(request.param)


@pytest.mark.parametrize("fmt", ["rust", "generic", "python"])
def test_they_compress_we_read(binary: Path, fmt: str, tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    out = tmp_path / f"{fmt}.znippy"
    fmt = generic(binary) if fmt == "generic" else fmt
    done = real(binary, "compress", "-i", src, "-o", out, "--format", fmt)
    assert done.returncode == 0, done.stderr
    want = corpus.files()
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want
        assert a.verify().ok
        assert a.not_understood() == {}
        a.extract(tmp_path / "x")
    assert tree(tmp_path / "x") == want
    assert (tmp_path / "x" / "empty-dir").is_dir() != no_fsmeta(binary)  # __znippy_fsmeta__


def test_they_sign_we_verify(binary: Path, tmp_path: Path) -> None:
    from znippy_sql.provenance.sign import verify_signatures

    src = corpus.write(tmp_path / "in")
    key, cert = corpus.signer(tmp_path / "keys")
    out = tmp_path / "signed.znippy"
    done = real(binary, "compress", "-i", src, "-o", out, "--sign", key, "--sign-cert", cert)
    if no_sign(binary):
        assert done.returncode != 0 and "unexpected argument '--sign'" in done.stderr
        pytest.skip(f"{version(binary)} has no signing")
    if "not compiled" in done.stderr or "feature" in done.stderr and done.returncode:
        pytest.skip(f"{version(binary)} was built without the sign feature")
    assert done.returncode == 0, done.stderr
    ca = cert.parent / "ca.cert.der"
    checked = real(binary, "verify", "-i", out, "--signed", "--root", ca)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with open_archive(out) as a:
        assert verify_signatures(a, ca) == []


def test_they_append_we_read(binary: Path, tmp_path: Path) -> None:
    """``znippy append`` without facts. Before 0.9.9 (``znippy-cli`` 0.9.6) it carries the
    replaced ``hello.txt``'s old rows beside the new ones (the path twice in the lookup):
    its ``decompress`` writes both rows to one file (the appended 12 bytes over the old 14,
    not truncated), its ``get`` answers the old one; this reader takes the appended rows
    (``interop/delta.py``), as the later binaries keep them."""
    if no_sign(binary):
        done = real(binary, "append", "-i", tmp_path / "none.znippy", "-a", tmp_path)
        assert done.returncode == 2 and "unrecognized subcommand 'append'" in done.stderr
        pytest.skip(f"{version(binary)} has no append")
    src = corpus.write(tmp_path / "in")
    add = corpus.write(tmp_path / "add", corpus.APPENDED)
    out = tmp_path / "appended.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", generic(binary)
                ).returncode == 0
    done = real(binary, "append", "-i", out, "-a", add)
    assert done.returncode == 0, done.stderr
    want = corpus.expected("appended")
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok
        lookup = a.lookup.column("relative_path").to_pylist()
    assert lookup.count("hello.txt") == 1  # the lookup this reader uses
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    made = tree(tmp_path / "x")
    if old(binary):  # both rows written to one file, the shorter without truncating
        assert made.pop("hello.txt") == want["hello.txt"] + corpus.files()["hello.txt"][12:]
        want = {p: d for p, d in want.items() if p != "hello.txt"}
    assert made == want
    got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "hello.txt"],
                         capture_output=True, timeout=600)
    assert got.returncode == 0
    assert got.stdout == (corpus.files() if old(binary) else corpus.APPENDED)["hello.txt"]


def test_they_append_meta_we_read(binary: Path, tmp_path: Path) -> None:
    if old(binary):
        pytest.skip(f"{version(binary)} has no append --meta")
    src = corpus.write(tmp_path / "in")
    add = corpus.write(tmp_path / "add", corpus.APPENDED)
    out = tmp_path / "meta.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", generic(binary)
                ).returncode == 0
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\xfe")
    done = real(binary, "append", "-i", out, "-a", add, "--meta", "added/new.txt=owner=team-b",
                "--meta", "added/new.txt=build=7", "--meta", "added/new.txt=ratio=0.25",
                "--meta", "added/new.txt=ok=true", "--meta",
                f"added/new.txt=raw=@{tmp_path / 'blob.bin'}", "--meta-archive", "release=r1")
    assert done.returncode == 0, done.stderr
    want = corpus.expected("appended")
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want
        facts = sorted((r["relative_path"] or "", r["key"], r["value"])
                       for r in a.meta.to_pylist())
    assert facts == sorted([("added/new.txt", "owner", "team-b"), ("added/new.txt", "build", "7"),
                            ("added/new.txt", "ratio", "0.25"), ("added/new.txt", "ok", "true"),
                            ("added/new.txt", "raw", "0001fe"), ("", "release", "r1")])


@pytest.mark.parametrize("compat", ["rust-0.8", "rust-0.10"])
def test_we_write_they_read(binary: Path, compat: str, tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "ours.znippy"
    facts = ["--meta", "team=interop"] if compat == "rust-0.10" else []
    assert main(["create", str(src), "-o", str(out), "--compat", compat, *facts]) == 0
    if compat == "rust-0.10" and no_fsmeta(binary):
        # its reader takes __znippy_meta__ (before 0.9.9) and __znippy_fsmeta__ (before
        # 0.9.12) for data sub-indexes and panics concatenating them with the files' rows
        # (0.9.0: the raw trie too, no Arrow stream); `get` (lookup + trie) still reads, and
        # 0.9.9's `meta` finds the fact
        said = "Unable to get root as message" if no_lookup(binary) else "concat sub-indexes"
        for command in ("verify", "list"):
            done = real(binary, command, "-i", out)
            assert done.returncode == 101 and said in done.stderr, done.stderr
        assert real(binary, "decompress", "-i", out, "-o", tmp_path / "x").returncode == 101
        if no_lookup(binary):
            return
        got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "docs/readme.md"],
                             capture_output=True, timeout=600)
        assert got.returncode == 0 and got.stdout == corpus.files()["docs/readme.md"]
        if not old(binary):
            found = real(binary, "meta", "-i", out, "-k", "team")
            assert found.returncode == 0 and "interop" in found.stdout, found.stderr
        return
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == corpus.files()
    listed = real(binary, "list", "-i", out)
    assert listed.returncode == 0 and "docs/readme.md" in listed.stdout
    got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "docs/readme.md"],
                         capture_output=True, timeout=600)
    if no_lookup(binary):
        assert got.returncode != 0 and b"unrecognized subcommand" in got.stderr, got.stderr
    elif compat == "rust-0.8" and no_sign(binary):  # 0.9.2's `get` reads it without one
        assert got.returncode == 0 and got.stdout == corpus.files()["docs/readme.md"]
    elif compat == "rust-0.8":  # `get` wants the lookup sub-index only rust-0.10 writes
        assert got.returncode != 0 and b"no lookup sub-index" in got.stderr, got.stderr
    else:
        assert got.returncode == 0 and got.stdout == corpus.files()["docs/readme.md"]
    if facts:  # the Rust typed __znippy_meta__: `znippy meta` finds the fact
        found = real(binary, "meta", "-i", out, "-k", "team")
        assert found.returncode == 0 and "interop" in found.stdout, found.stdout + found.stderr


def test_they_do_not_read_our_default_layout(binary: Path, tmp_path: Path) -> None:
    """Without --compat the Rust readers take this project's section names for data
    sub-indexes (docs/interop.md): they fail, which is why --compat exists."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "ours.znippy"
    assert main(["create", str(src), "-o", str(out)]) == 0
    assert real(binary, "decompress", "-i", out, "-o", tmp_path / "x").returncode != 0


def modes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mode & 0o7777 for p in root.rglob("*")}


def test_we_write_dirs_and_modes_they_restore(binary: Path, tmp_path: Path) -> None:
    """``--compat rust-0.10`` records the tree's shape as ``__znippy_fsmeta__``: the real
    ``decompress`` makes the empty directory and sets every directory and file mode."""
    takes_rust10(binary)
    src = corpus.write(tmp_path / "in")
    (src / "docs" / "readme.md").chmod(0o600)
    (src / "empty-dir").chmod(0o700)
    (src / "maven" / "org").chmod(0o750)
    out = tmp_path / "ours.znippy"
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.10"]) == 0
    assert real(binary, "verify", "-i", out).returncode == 0
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == corpus.files()
    assert (tmp_path / "x" / "empty-dir").is_dir()
    assert modes(tmp_path / "x") == modes(src)
    # and this reader takes the same section: extract makes the directories, --preserve
    with open_archive(out) as a:
        a.extract(tmp_path / "y", preserve=True)
    assert modes(tmp_path / "y") == modes(src)


def test_we_write_plugin_columns_they_take(binary: Path, tmp_path: Path) -> None:
    """``--pkg-type auto --compat rust-0.10``: the module groups are written as the Rust
    plugins' (their pkg_types and columns); the real ``list`` prints the maven coordinates
    from the plugin's ``group_id``/``artifact_id``/``version`` columns, and ``meta``,
    ``verify``, ``decompress`` and ``get`` read the archive of four groups."""
    takes_rust10(binary)
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "ours.znippy"
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.10",
                 "--pkg-type", "auto", "--meta", "team=interop"]) == 0
    found = real(binary, "meta", "-i", out, "-k", "team")
    assert found.returncode == 0 and "interop" in found.stdout, found.stdout + found.stderr
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = real(binary, "list", "-i", out)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2:] for line in listed.stdout.splitlines()}
    assert rows["maven/org/example/demo/1.2.3/demo-1.2.3.pom"] == ["org.example:demo:1.2.3"]
    assert rows["crates/tiny-0.1.0.crate"] == [] and set(rows) == set(corpus.files())
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == corpus.files()
    got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "crates/tiny-0.1.0.crate"],
                         capture_output=True, timeout=600)
    assert got.returncode == 0 and got.stdout == corpus.files()["crates/tiny-0.1.0.crate"]
    with open_archive(out) as a:  # and this reader, as it reads the Rust plugins' archives
        assert dict(a.read_many(corpus.files())) == corpus.files()
        assert a.verify().ok


def test_we_sign_they_verify(binary: Path, tmp_path: Path) -> None:
    """``--compat rust-0.10 --sign-key --sign-cert``: the Rust signature sections over the Rust
    digests; the real ``verify --signed`` takes them with the test CA as its root, and refuses
    them with another root or with one signature byte changed."""
    takes_rust10(binary)
    from znippy_sql.provenance.sign import verify_signatures

    src = corpus.write(tmp_path / "in")
    key, cert = corpus.signer(tmp_path / "keys")
    ca = cert.parent / "ca.cert.der"
    out = tmp_path / "signed.znippy"
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.10", "--pkg-type",
                 "auto", "--sign-key", str(key), "--sign-cert", str(cert)]) == 0
    checked = real(binary, "verify", "-i", out, "--signed", "--root", ca)
    if "not compiled" in checked.stderr or "feature" in checked.stderr and checked.returncode:
        pytest.skip(f"{version(binary)} was built without the sign feature")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{len(corpus.files())}" in checked.stdout.split("artefakter:")[-1], checked.stdout
    with open_archive(out) as a:
        assert verify_signatures(a, ca) == []
        row = [r for r in a.manifest.to_pylist()
               if r["module_name"] == "__znippy_sign_archive__"][0]
    # another root: the signer does not chain to it
    other = corpus.signer(tmp_path / "other")[1].parent / "ca.cert.der"
    other.write_bytes(cert.read_bytes())  # the signer's own certificate is never an anchor
    refused = real(binary, "verify", "-i", out, "--signed", "--root", other)
    assert refused.returncode != 0 and "chain" in refused.stderr, refused.stderr
    # the archive signature's last byte (the end of its ECDSA value) changed
    bad = tmp_path / "tampered.znippy"
    data = bytearray(out.read_bytes())
    data[row["index_offset"] + row["index_len"] - 1] ^= 0x01
    bad.write_bytes(bytes(data))
    refused = real(binary, "verify", "-i", bad, "--signed", "--root", ca)
    assert refused.returncode != 0 and "archive signature" in refused.stderr, refused.stderr


def data_metadata(path: Path) -> dict[bytes, bytes]:
    """The schema metadata of the archive's first data sub-index (the Rust compress records
    its configuration there: ``max_core_in_flight`` is its worker count)."""
    import struct

    import pyarrow as pa

    data = path.read_bytes()
    start = struct.unpack("<Q", data[-8:])[0]
    for row in pa.ipc.open_stream(data[start:-16]).read_all().to_pylist():
        if row["pkg_type"] >= 0:
            at = row["index_offset"]
            return pa.ipc.open_stream(data[at:at + row["index_len"]]).schema.metadata or {}
    return {}


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while piece := f.read(1 << 20):
            h.update(piece)
    return h.hexdigest()


@pytest.fixture(scope="module")
def big_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A directory holding the big file (``interop_corpus.BIG_SIZE``) and a small one; the
    big file's SHA-256."""
    root = tmp_path_factory.mktemp("big") / "in"
    root.mkdir()
    (root / "small.txt").write_bytes(b"small\n")
    return root, corpus.write_big(root / "big.bin")


@pytest.mark.slow
def test_they_cut_a_big_file_we_read(binary: Path, big_source: tuple[Path, str],
                                     tmp_path: Path) -> None:
    """The real ``compress`` cuts a file past its slice size (200 MiB / workers,
    ``poolplan.rs``) into chunks; every read path here gives its bytes back."""
    src, digest = big_source
    out = tmp_path / "theirs.znippy"
    done = real(binary, "compress", "-i", src, "-o", out, "--format", generic(binary))
    assert done.returncode == 0, done.stderr
    with open_archive(out) as a:
        rows = [r for r in a.lookup.to_pylist() if r["relative_path"] == "big.bin"]
        workers = int(data_metadata(out).get(b"max_core_in_flight", b"1"))
        slice_size = (200 << 20) // max(workers, 1)
        assert len(rows) == -(-corpus.BIG_SIZE // slice_size)
        assert [r["fdata_offset"] for r in rows] == [i * slice_size for i in range(len(rows))]
        if len(rows) < 2:
            pytest.skip(f"{workers} worker(s): the Rust cut is past the big file")
        assert hashlib.sha256(a.read("big.bin")).hexdigest() == digest
        assert a.verify().ok
        a.extract(tmp_path / "x")
    assert sha256_of(tmp_path / "x" / "big.bin") == digest
    assert (tmp_path / "x" / "small.txt").read_bytes() == b"small\n"


@pytest.mark.slow
def test_we_cut_a_big_file_they_read(binary: Path, big_source: tuple[Path, str],
                                     tmp_path: Path) -> None:
    """Ours (``--compat rust-0.10``, 10 MiB chunks) through the real ``verify``,
    ``decompress`` and ``get``: the big file back byte for byte."""
    takes_rust10(binary)
    src, digest = big_source
    out = tmp_path / "ours.znippy"
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.10"]) == 0
    with open_archive(out) as a:
        assert sum(r["relative_path"] == "big.bin" for r in a.lookup.to_pylist()) == 11
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sha256_of(tmp_path / "x" / "big.bin") == digest
    got = real(binary, "get", "-i", out, "-p", "big.bin", "-o", tmp_path / "got.bin")
    assert got.returncode == 0, got.stderr
    assert sha256_of(tmp_path / "got.bin") == digest


ZGEN = Path(os.environ.get("ZNIPPY_RUST_ZGEN", "/opt/zgen-0.10.6/bin/zgen"))


@pytest.mark.skipif(not ZGEN.is_file(), reason="no zgen (the 0.10.6 library program of "
                    "tests/data/rust-common-0.10.6/zgen.rs.txt): set ZNIPPY_RUST_ZGEN")
def test_we_seal_their_hot_archive(tmp_path: Path) -> None:
    """The real library (``HotArchive``, through zgen) writes a hot archive and, the same
    appends again, its seal; sealed here, the hot one is the real seal byte for byte (this
    host's configuration included: the seal takes the journal's schema metadata)."""
    from znippy_sql.write.rustseal import seal_rust_hot

    src = corpus.write(tmp_path / "in")
    changed = tmp_path / "changed.md"
    changed.write_bytes(corpus.CHANGED["docs/readme.md"])
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([str(ZGEN), str(src), str(out), str(changed)], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    hot = out / "lib-hot.znippy"
    assert list(out.glob("lib-hot.znippy.hot.*"))
    seal_rust_hot(hot)
    assert hot.read_bytes() == (out / "lib-hot-sealed.znippy").read_bytes()
    assert not list(out.glob("lib-hot.znippy.hot.*"))
    for binary in BINARIES:
        if no_lookup(binary):  # the 0.8 layout's reader: the sealed lookup is no data for it
            continue
        checked = real(binary, "verify", "-i", hot)
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("compat", ["rust-0.8", "rust-0.10"])
def test_we_append_they_read(binary: Path, compat: str, tmp_path: Path) -> None:
    """``append`` to a ``--compat`` archive keeps its layout (``write/rustappend.py``): the
    real ``verify``, ``decompress``, ``list`` and (``rust-0.10``) ``get`` and ``meta`` take
    the result; ``decompress`` restores the appended files' modes and directories merged
    with the archive's (``__znippy_fsmeta__``)."""
    src = corpus.write(tmp_path / "in")
    more = corpus.write(tmp_path / "more", corpus.APPENDED)
    (more / "added").chmod(0o750)
    (more / "added" / "new.txt").chmod(0o600)
    out = tmp_path / "ours.znippy"
    rust10 = compat == "rust-0.10"
    if rust10:
        takes_rust10(binary)
    extra = ["--pkg-type", "auto", "--meta", "team=interop"] if rust10 else []
    assert main(["create", str(src), "-o", str(out), "--compat", compat, *extra]) == 0
    assert main(["append", str(out), str(more), *extra[:2]]) == 0
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    want = corpus.expected("appended")
    assert tree(tmp_path / "x") == want
    listed = real(binary, "list", "-i", out)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2:] for line in listed.stdout.splitlines()}
    assert set(rows) == set(want)
    if rust10:
        assert rows["maven/org/example/demo/1.2.3/demo-1.2.3.pom"] == ["org.example:demo:1.2.3"]
        both = corpus.write(tmp_path / "both")
        (both / "hello.txt").write_bytes(corpus.APPENDED["hello.txt"])
        (both / "added").mkdir(mode=0o750)
        (both / "added" / "new.txt").write_bytes(corpus.APPENDED["added/new.txt"])
        (both / "added" / "new.txt").chmod(0o600)
        assert modes(tmp_path / "x") == modes(both)
        got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "added/new.txt"],
                             capture_output=True, timeout=600)
        assert got.returncode == 0 and got.stdout == want["added/new.txt"]
        found = real(binary, "meta", "-i", out, "-k", "team")
        assert found.returncode == 0 and "interop" in found.stdout, found.stdout + found.stderr
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok


def test_they_do_not_read_delta_payloads(binary: Path, tmp_path: Path) -> None:
    """Why ``--compat rust-0.10`` writes no delta chunk (docs/interop.md, "Delta payloads"):
    the real binaries' ``verify``, ``decompress`` and ``get`` take a delta row for a whole
    file and fail its checksum (0.10.1: "1 korrupta filer"; 0.9.12 panics) on the library's
    own delta archive; only the library's ``ZnippyArchive::extract_file_verified`` resolves
    one. The file that is no delta still reads."""
    delta = Path(__file__).parent / "data" / "rust-common-0.10.6" / "lib-delta.znippy"
    assert real(binary, "verify", "-i", delta).returncode != 0
    assert real(binary, "decompress", "-i", delta, "-o", tmp_path / "x").returncode != 0
    if no_lookup(binary):
        return  # no get
    got = subprocess.run([str(binary), "get", "-i", str(delta), "-p", "docs/readme-v1.md"],
                         capture_output=True, timeout=600)
    assert got.returncode != 0
    got = subprocess.run([str(binary), "get", "-i", str(delta), "-p", "docs/readme.md"],
                         capture_output=True, timeout=600)
    assert got.returncode == 0 and got.stdout == corpus.expected("delta")["docs/readme.md"]
    with open_archive(delta) as a:  # this reader resolves it (interop/delta.py)
        assert a.read("docs/readme-v1.md") == corpus.expected("delta")["docs/readme-v1.md"]


GIT_GOLDEN = Path(__file__).parent / "data" / "rust-plugin-git-0.2.4" / "lib-git.znippy"


def test_their_git_commands_agree_with_our_git_views(binary: Path, tmp_path: Path) -> None:
    """The binaries write no git section (``compress --format git`` claims the oid-named
    entries, type 42, and derives no ``__gunnar_*``: only the library's ``GitIndexBuilder``
    does), but they read the library's: ``znippy run git graph`` and ``git lookup`` on
    ``lib-git.znippy`` print what this reader's ``git_commits`` and ``git_objects`` hold."""
    if old(binary):
        pytest.skip(f"{version(binary)} has no git handler")
    import duckdb

    from znippy_sql.duckdb import register

    con = duckdb.connect()
    register(con, GIT_GOLDEN, "g")
    commits = con.execute("SELECT oid, generation, committer_time, parents FROM g_git_commits"
                          ).fetchall()
    shown = real(binary, "run", "git", "graph", GIT_GOLDEN)
    assert shown.returncode == 0, shown.stderr
    assert f"commits: {len(commits)}" in shown.stdout
    for oid, gen, time, parents in commits:
        assert f"{oid} gen={gen} time={time} parents=[{' '.join(parents)}]" in shown.stdout
    for oid, row, ordinal in con.execute(
            "SELECT oid, lookup_row, ordinal FROM g_git_objects").fetchall():
        found = real(binary, "run", "git", "lookup", GIT_GOLDEN, oid.hex())
        if no_fsmeta(binary):  # 0.9.9's git plugin reads the oid index of version 2 only
            assert found.returncode == 101, found.stderr
            assert "__gunnar_oid__ is version 3, this reader speaks 2 only" in found.stderr
            continue
        assert found.returncode == 0, found.stderr
        assert f"lookup_row: {row}" in found.stdout and f"ordinal:    {ordinal}" in found.stdout
    objs = tmp_path / "objs"
    objs.mkdir()
    with open_archive(GIT_GOLDEN) as a:
        for path, data in a.read_many(a.first_paths()):
            (objs / path).write_bytes(data)
    out = tmp_path / "theirs.znippy"
    done = real(binary, "compress", "-i", objs, "-o", out, "--format", "git")
    assert done.returncode == 0, done.stderr
    with open_archive(out) as a:
        assert not [s for s in a.sections if s.startswith("__gunnar")]
        assert {k.pkg_type for k in a.groups} == {42}
