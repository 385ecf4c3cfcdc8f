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
import os
import subprocess
from pathlib import Path

import pytest

import interop_corpus as corpus
from znippy_sql import open_archive
from znippy_sql.cli import main


def _binaries() -> list[Path]:
    given = os.environ.get("ZNIPPY_RUST_BINS")
    paths = given.split(":") if given else sorted(glob.glob("/opt/znippy-*/bin/znippy"))
    return [Path(p) for p in paths if p and Path(p).is_file()]


BINARIES = _binaries()
pytestmark = pytest.mark.skipif(not BINARIES, reason="no real znippy binary: set "
                                "ZNIPPY_RUST_BINS or install one under /opt (docs/interop.md)")


def version(binary: Path) -> str:
    return subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                          check=True).stdout.strip()


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
    done = real(binary, "compress", "-i", src, "-o", out, "--format", fmt)
    assert done.returncode == 0, done.stderr
    want = corpus.files()
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want
        assert a.verify().ok
        assert a.not_understood() == {}
        a.extract(tmp_path / "x")
    assert tree(tmp_path / "x") == want
    assert (tmp_path / "x" / "empty-dir").is_dir()  # __znippy_fsmeta__


def test_they_sign_we_verify(binary: Path, tmp_path: Path) -> None:
    from znippy_sql.provenance.sign import verify_signatures

    src = corpus.write(tmp_path / "in")
    key, cert = corpus.signer(tmp_path / "keys")
    out = tmp_path / "signed.znippy"
    done = real(binary, "compress", "-i", src, "-o", out, "--sign", key, "--sign-cert", cert)
    if "not compiled" in done.stderr or "feature" in done.stderr and done.returncode:
        pytest.skip(f"{version(binary)} was built without the sign feature")
    assert done.returncode == 0, done.stderr
    ca = cert.parent / "ca.cert.der"
    checked = real(binary, "verify", "-i", out, "--signed", "--root", ca)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with open_archive(out) as a:
        assert verify_signatures(a, ca) == []


def test_they_append_meta_we_read(binary: Path, tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    add = corpus.write(tmp_path / "add", corpus.APPENDED)
    out = tmp_path / "meta.znippy"
    assert real(binary, "compress", "-i", src, "-o", out, "--format", "generic").returncode == 0
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
    done = real(binary, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(binary, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == corpus.files()
    listed = real(binary, "list", "-i", out)
    assert listed.returncode == 0 and "docs/readme.md" in listed.stdout
    got = subprocess.run([str(binary), "get", "-i", str(out), "-p", "docs/readme.md"],
                         capture_output=True, timeout=600)
    if compat == "rust-0.8":  # `get` wants the lookup sub-index only rust-0.10 writes
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
