"""The inputs of the archives the real Rust tool wrote (``tests/data/rust-<version>/``).

Every byte is made from fixed seeds: ``python tests/interop_corpus.py DIR`` writes the same
tree on every machine, and the tests make it again to compare what they read, byte for byte.
Package files carry what the Rust plugins read: a ``.crate`` (gzip'd tar with a
``Cargo.toml``), a ``.whl`` (zip with ``*.dist-info/METADATA``), a Maven ``.jar`` and ``.pom``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import sys
import tarfile
import zipfile
from pathlib import Path

#: file modes the tree is written with (the Rust 0.9.18+ ``__znippy_fsmeta__`` records them)
MODES = {"bin/run.sh": 0o755}
#: directories that hold no file (``__znippy_fsmeta__`` records them)
EMPTY_DIRS = ("empty-dir",)


def noise(n: int, seed: str) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return bytes(out[:n])


def text(n: int, seed: str) -> bytes:
    out = bytearray()
    i = 0
    while len(out) < n:
        out += f"{seed} line {i:06d}: the quick brown fox jumps over the lazy dog\n".encode()
        i += 1
    return bytes(out[:n])


def _targz(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=6, mtime=0)


def _zip(members: dict[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return raw.getvalue()


def crate(name: str, version: str, deps: list[str]) -> bytes:
    toml = f'[package]\nname = "{name}"\nversion = "{version}"\n\n[dependencies]\n'
    toml += "".join(f'{d} = "1"\n' for d in deps)
    return _targz({f"{name}-{version}/Cargo.toml": toml.encode(),
                   f"{name}-{version}/src/lib.rs": text(300, name)})


def wheel(name: str, version: str, requires: list[str]) -> bytes:
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    return _zip({f"{name}/__init__.py": text(200, name),
                 f"{name}-{version}.dist-info/METADATA": meta.encode()})


def files() -> dict[str, bytes]:
    """relative path → bytes of the corpus."""
    pom = (b'<project><modelVersion>4.0.0</modelVersion><groupId>org.example</groupId>'
           b'<artifactId>demo</artifactId><version>1.2.3</version></project>\n')
    return {
        "hello.txt": b"hello, znippy\n",
        "empty.txt": b"",
        "docs/readme.md": text(20_000, "readme"),
        "docs/\u00e9t\u00e9 notes.txt": text(3_000, "unicode"),
        "random.bin": noise(3_000, "random"),  # incompressible: stored raw
        "bin/run.sh": b"#!/bin/sh\necho hi\n",
        "crates/serde-1.0.200.crate": crate("serde", "1.0.200", ["serde_derive", "itoa"]),
        "crates/tiny-0.1.0.crate": crate("tiny", "0.1.0", []),
        "wheels/demo-1.0-py3-none-any.whl": wheel("demo", "1.0", ["requests>=2", "attrs"]),
        "maven/org/example/demo/1.2.3/demo-1.2.3.pom": pom,
        "maven/org/example/demo/1.2.3/demo-1.2.3.jar": _zip({"META-INF/MANIFEST.MF":
                                                             b"Manifest-Version: 1.0\n"}),
    }


#: a second version of one file, for the delta and append archives
CHANGED = {"docs/readme.md": text(20_000, "readme")[:15_000] + b"an edited tail\n" * 50}


#: what ``znippy append --add`` adds to the append archives
APPENDED = {"added/new.txt": text(5_000, "appended"), "hello.txt": b"hello again\n"}


def expected(kind: str) -> dict[str, bytes]:
    """The files an archive of the goldens' manifest holds: ``corpus`` (the corpus),
    ``appended`` (the corpus, then an ``append`` of :data:`APPENDED`: its paths replace),
    ``delta`` (the corpus with the readme edited, and the old readme as
    ``docs/readme-v1.md``: stored as a delta), ``hot`` (the corpus with the readme edited: a
    later append replaced it)."""
    out = files()
    if kind == "appended":
        out.update(APPENDED)
    elif kind == "delta":
        out["docs/readme-v1.md"] = out["docs/readme.md"]
        out.update(CHANGED)
    elif kind == "hot":
        out.update(CHANGED)
    elif kind == "big":  # the generated archive with a multi-chunk file
        out["big/multi.bin"] = text(3 * 65536 + 5, "multi")
    elif kind != "corpus":
        raise ValueError(f"no corpus kind {kind!r}")
    return out


def write(root: str | os.PathLike[str], content: dict[str, bytes] | None = None) -> Path:
    """The corpus under ``root`` (made if missing): its files, modes and empty directories."""
    base = Path(root)
    for rel, data in (files() if content is None else content).items():
        target = base / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(MODES.get(rel, 0o644))
    for d in EMPTY_DIRS:
        (base / d).mkdir(parents=True, exist_ok=True)
    return base


def signer(root: str | os.PathLike[str]) -> tuple[Path, Path]:
    """A fixed ECDSA P-256 signing key (PKCS#8 DER) and its certificate (DER), issued by a
    fixed test CA whose self-signed certificate is ``ca.cert.der`` beside them: what ``znippy
    compress --sign KEY --sign-cert CERT`` takes, and the trust anchor a verify is given (the
    Rust verifier never takes the signer's own certificate as its anchor). The keys are the
    same on every run; the certificates' signatures are not (ECDSA)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def usage(ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(digital_signature=not ca, content_commitment=False,
                             key_encipherment=False, data_encipherment=False,
                             key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                             encipher_only=False, decipher_only=False)

    ca_key = ec.derive_private_key(0xCA_2026_1205, ec.SECP256R1())
    key = ec.derive_private_key(0x5EED_2026_1205, ec.SECP256R1())
    start, end = (dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
                  dt.datetime(2036, 1, 1, tzinfo=dt.timezone.utc))
    ca = (x509.CertificateBuilder().subject_name(name("znippy interop test CA"))
          .issuer_name(name("znippy interop test CA")).public_key(ca_key.public_key())
          .serial_number(1).not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(usage(True), critical=True).sign(ca_key, hashes.SHA256()))
    cert = (x509.CertificateBuilder().subject_name(name("znippy interop test signer"))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(20261205).not_valid_before(start).not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage(False), critical=True).sign(ca_key, hashes.SHA256()))
    base = Path(root)
    base.mkdir(parents=True, exist_ok=True)
    key_path, cert_path = base / "signer.key.der", base / "signer.cert.der"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.DER,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.DER))
    (base / "ca.cert.der").write_bytes(ca.public_bytes(serialization.Encoding.DER))
    return key_path, cert_path


if __name__ == "__main__":  # DIR [KIND]: the corpus, or what an archive of KIND holds
    if len(sys.argv) > 2 and sys.argv[2] == "changed":  # the edited readme alone
        Path(sys.argv[1]).write_bytes(CHANGED["docs/readme.md"])
    elif len(sys.argv) > 2 and sys.argv[2] == "appended":  # the files an append adds
        write(sys.argv[1], APPENDED)
    elif len(sys.argv) > 2 and sys.argv[2] == "signer":
        signer(sys.argv[1])
    else:
        write(sys.argv[1])
