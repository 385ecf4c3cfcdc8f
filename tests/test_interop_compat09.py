"""``--compat rust-0.9`` against the real binaries (docs/interop.md): the 0.9.5 binary
(``znippy-common`` 0.9.11), which refuses every ``--compat rust-0.10`` archive, takes ours
through ``verify``, ``decompress`` (byte for byte), ``list``, ``get`` and ``verify --signed``
(an EC P-256 key and a CA made with ``openssl``); the later binaries read it too, and so does
this project's reader. Skipped, saying so, without the 0.9.5 binary.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import interop_corpus as corpus
from test_interop_real import BINARIES, no_sign, real, tree, version
from znippy_sql import open_archive
from znippy_sql.cli import main

OLD = Path("/opt/znippy-0.9.5/bin/znippy")
pytestmark = pytest.mark.skipif(not OLD.is_file() or shutil.which("openssl") is None,
                                reason=f"no {OLD} (docs/interop.md, 'Building the real "
                                "tools') or no openssl")
#: 0.9.5 and every other binary installed but 0.9.0 (which reads no 0.9.1+ layout:
#: docs/interop.md); 0.9.2 reads the plain one, not the signed
READERS = [OLD, *(b for b in BINARIES if b != OLD and "0.9.0" not in str(b))]


def openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def p256_signer(root: Path) -> tuple[Path, Path, Path]:
    """A P-256 signing key and its certificate (PEM), issued by a new CA whose certificate
    (DER) is the trust anchor ``znippy verify --signed --root`` takes."""
    root.mkdir()
    ext = root / "ext.cnf"
    ext.write_text("[leaf]\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n")
    for name in ("ca", "signer"):
        openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                root / f"{name}.key")
    openssl("req", "-x509", "-new", "-key", root / "ca.key", "-subj", "/CN=compat09 test CA",
            "-days", "3650", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", "-out", root / "ca.pem")
    openssl("req", "-new", "-key", root / "signer.key", "-subj", "/CN=compat09 signer",
            "-out", root / "signer.csr")
    openssl("x509", "-req", "-in", root / "signer.csr", "-CA", root / "ca.pem", "-CAkey",
            root / "ca.key", "-CAcreateserial", "-days", "3650", "-extfile", ext,
            "-extensions", "leaf", "-out", root / "signer.pem")
    openssl("x509", "-in", root / "ca.pem", "-outform", "DER", "-out", root / "ca.der")
    return root / "signer.key", root / "signer.pem", root / "ca.der"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, Path]:
    """The corpus (an empty file, a raw-stored random one, non-ASCII names, packages), its
    ``--compat rust-0.9`` archive with ``--pkg-type auto``, and a signed one; the CA (DER)."""
    base = tmp_path_factory.mktemp("compat09")
    src = corpus.write(base / "in")
    plain, signed = base / "plain.znippy", base / "signed.znippy"
    assert main(["create", str(src), "-o", str(plain), "--compat", "rust-0.9",
                 "--pkg-type", "auto"]) == 0
    key, cert, ca = p256_signer(base / "keys")
    assert main(["create", str(src), "-o", str(signed), "--compat", "rust-0.9",
                 "--sign-key", str(key), "--sign-cert", str(cert)]) == 0
    return src, plain, signed, ca


@pytest.mark.parametrize("reader", READERS, ids=[b.parent.parent.name for b in READERS])
@pytest.mark.parametrize("which", ["plain", "signed"])
def test_they_read_rust09(reader: Path, which: str, archives: tuple[Path, Path, Path, Path],
                          tmp_path: Path) -> None:
    src, plain, signed, ca = archives
    out = plain if which == "plain" else signed
    if which == "signed" and no_sign(reader):
        # 0.9.2 (znippy-common 0.9.4) knows no signature section: it reads the raw archive
        # signature as an Arrow stream and panics; `get` (lookup + trie) still reads
        for command in ("verify", "list"):
            done = real(reader, command, "-i", out)
            assert done.returncode == 101 and "failed to fill whole buffer" in done.stderr
        got = subprocess.run([str(reader), "get", "-i", str(out), "-p", "hello.txt"],
                             capture_output=True, timeout=600)
        assert got.returncode == 0 and got.stdout == corpus.files()["hello.txt"]
        return
    done = real(reader, "verify", "-i", out)
    assert done.returncode == 0, done.stdout + done.stderr
    done = real(reader, "decompress", "-i", out, "-o", tmp_path / "x")
    assert done.returncode == 0, done.stdout + done.stderr
    assert tree(tmp_path / "x") == corpus.files()  # no __znippy_fsmeta__: no empty directory
    listed = real(reader, "list", "-i", out)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[2:] for line in listed.stdout.splitlines()}
    assert set(rows) == set(corpus.files())
    if which == "plain":  # the Maven plugin's group_id, artifact_id, version columns
        assert rows["maven/org/example/demo/1.2.3/demo-1.2.3.pom"] == ["org.example:demo:1.2.3"]
    for path in ("docs/\u00e9t\u00e9 notes.txt", "random.bin", "empty.txt"):
        got = subprocess.run([str(reader), "get", "-i", str(out), "-p", path],
                             capture_output=True, timeout=600)
        assert got.returncode == 0 and got.stdout == corpus.files()[path], got.stderr
    if which == "signed":
        checked = real(reader, "verify", "-i", out, "--signed", "--root", ca)
        if checked.returncode and ("not compiled" in checked.stderr
                                   or "feature" in checked.stderr):
            pytest.skip(f"{version(reader)} was built without the sign feature")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert f"{len(corpus.files())}" in checked.stdout.split("artefakter:")[-1], \
            checked.stdout


def test_we_read_rust09(archives: tuple[Path, Path, Path, Path]) -> None:
    from znippy_sql.provenance.sign import verify_signatures

    _, plain, signed, ca = archives
    for out in (plain, signed):
        with open_archive(out) as a:
            assert dict(a.read_many(corpus.files())) == corpus.files()
            assert a.verify().ok
    with open_archive(signed) as a:
        assert verify_signatures(a, ca) == []
