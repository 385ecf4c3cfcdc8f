"""Provenance signatures: FORMAT §4 digests, openssl as ground truth, tampering, trust, CLI."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import blake3
import pyarrow as pa
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from znippy_sql import Entry, GroupKey, open_archive, write_archive
from znippy_sql.provenance import sign as sign_mod
from znippy_sql.cli import main
from znippy_sql.errors import SignatureError
from znippy_sql.format.schema import LOOKUP_SCHEMA, META, SIGN_ARCHIVE, SIGN_ARTIFACTS
from znippy_sql.provenance.sign import (
    Signer,
    archive_root,
    file_digests,
    signature_builder,
    signatures_table,
    verify_signatures,
)
from znippy_sql.format.sections import ReservedSection
from znippy_sql.write.tail import write_tail

NOW = dt.datetime.now(dt.timezone.utc)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject_key, cn: str, *, issuer_key=None, issuer: str | None = None, ca: bool = False,
          start: dt.datetime | None = None, days: int = 30) -> x509.Certificate:
    start = start or NOW - dt.timedelta(days=1)
    b = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(issuer or cn))
         .public_key(subject_key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days)))
    if ca:
        b = b.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    return b.sign(issuer_key or subject_key, hashes.SHA256())


def _pem(path: Path, obj) -> Path:
    if isinstance(obj, x509.Certificate):
        path.write_bytes(obj.public_bytes(serialization.Encoding.PEM))
    else:
        path.write_bytes(obj.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert(ca_key, "Test CA", ca=True)
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    leaf = _cert(leaf_key, "release signer", issuer_key=ca_key, issuer="Test CA")
    self_key = ec.generate_private_key(ec.SECP256R1())
    self_cert = _cert(self_key, "self signer")
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert(other_key, "someone else", ca=True)
    return {
        "ca": _pem(d / "ca.pem", ca), "leaf_key": _pem(d / "leaf.key", leaf_key),
        "leaf": _pem(d / "leaf.pem", leaf), "self_key": _pem(d / "self.key", self_key),
        "self": _pem(d / "self.pem", self_cert), "other": _pem(d / "other.pem", other),
        "objs": {"ca_key": ca_key, "ca": ca, "leaf_key": leaf_key, "leaf": leaf,
                 "self_key": self_key, "self": self_cert},
    }


def _entries() -> list[Entry]:
    return [
        Entry("a.txt", data=b"alpha " * 50),
        Entry("b.txt", data=b"beta " * 40),
        Entry("dir/big.bin", data=bytes(range(256)) * 5),  # several chunks at block_size 512
        Entry("dir/empty", data=b""),
        Entry("raw.zip", data=os.urandom(700)),  # stored raw: a flipped byte fails BLAKE3
        Entry("zz/ünïcode.txt", data=b"utf-8 path"),
    ]


@pytest.fixture
def signed(tmp_path, pki):
    out = tmp_path / "s.znippy"
    write_archive(out, _entries(), block_size=512, workers=1,
                  signer=(pki["self_key"], pki["self"]))
    return out


def _artifacts(archive) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(archive.section(SIGN_ARTIFACTS))).read_all()


def _openssl_verify(tmp: Path, der: bytes, content: bytes, cafile: Path) -> subprocess.CompletedProcess:
    (tmp / "sig.der").write_bytes(der)
    (tmp / "digest.bin").write_bytes(content)
    return subprocess.run(
        ["openssl", "cms", "-verify", "-binary", "-inform", "DER", "-in", str(tmp / "sig.der"),
         "-content", str(tmp / "digest.bin"), "-CAfile", str(cafile), "-purpose", "any",
         "-out", os.devnull], capture_output=True, text=True)


# -- digests -----------------------------------------------------------------------------------
def test_digests_follow_format_section_4(signed):
    """Recompute file digests and the root from the lookup with struct + blake3 alone."""
    with open_archive(signed) as a:
        rows = a.lookup.to_pylist()
        paths, digests = file_digests(a.lookup)
    by_path: dict[str, list[dict]] = {}
    for r in rows:
        by_path.setdefault(r["relative_path"], []).append(r)
    want = {}
    for path, chunks in by_path.items():
        data = b"znippy-file-v1\0" + path.encode() + b"\0" + struct.pack("<I", len(chunks))
        for c in sorted(chunks, key=lambda c: c["chunk_seq"]):
            data += struct.pack("<I", c["chunk_seq"]) + c["checksum"]
        want[path] = blake3.blake3(data).digest()
    assert dict(zip(paths, digests)) == want
    assert len(by_path["dir/big.bin"]) == 3
    order = sorted(want, key=lambda p: p.encode())
    assert paths == order
    root = blake3.blake3(b"znippy-archive-v1\0" + b"".join(
        p.encode() + b"\0" + want[p] for p in order)).digest()
    assert archive_root(paths, digests) == root


def test_signing_uses_only_the_lookup(pki):
    """The builder gets a lookup table that points at no file at all: nothing to re-read."""
    lookup = pa.table({
        "relative_path": ["x/one", "x/two"], "chunk_seq": pa.array([0, 0], pa.uint32()),
        "fdata_offset": pa.array([0, 0], pa.uint64()), "compressed": [False, True],
        "uncompressed_size": pa.array([5, 9], pa.uint64()),
        "blob_offset": pa.array([10**12, 2 * 10**12], pa.uint64()),
        "blob_size": pa.array([5, 4], pa.uint64()),
        "checksum": pa.array([b"\1" * 32, b"\2" * 32], pa.binary(32)),
    }, schema=LOOKUP_SCHEMA)
    sections = list(signature_builder((pki["self_key"], pki["self"]))(lookup))
    assert [s.name for s in sections] == [SIGN_ARTIFACTS, SIGN_ARCHIVE]
    table = pa.ipc.open_stream(pa.py_buffer(sections[0].payload)).read_all()
    assert table.column("relative_path").to_pylist() == ["x/one", "x/two"]
    assert all(len(c) > 100 for c in table.column("cms").to_pylist())


# -- ground truth: openssl -----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["self", "ca-issued", "rsa"])
def test_openssl_accepts_every_signature(tmp_path, pki, kind):
    if kind == "self":
        signer, anchor = (pki["self_key"], pki["self"]), pki["self"]
    elif kind == "ca-issued":
        signer, anchor = (pki["leaf_key"], pki["leaf"]), pki["ca"]
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cert = _cert(key, "rsa signer")
        signer = Signer(key, cert)
        anchor = _pem(tmp_path / "rsa.pem", cert)
    out = tmp_path / "k.znippy"
    write_archive(out, _entries(), block_size=512, workers=1, signer=signer)
    with open_archive(out) as a:
        paths, digests = file_digests(a.lookup)
        table = _artifacts(a)
        assert table.column("relative_path").to_pylist() == paths
        for der, digest in zip(table.column("cms").to_pylist(), digests):
            res = _openssl_verify(tmp_path, der, digest, anchor)
            assert res.returncode == 0, res.stderr
        root = _openssl_verify(tmp_path, bytes(a.section(SIGN_ARCHIVE)),
                               archive_root(paths, digests), anchor)
        assert root.returncode == 0, root.stderr
        # and openssl refuses a signature over other content
        bad = _openssl_verify(tmp_path, table.column("cms")[0].as_py(), digests[1], anchor)
        assert bad.returncode != 0
        assert verify_signatures(a, anchor) == []


# -- reading and checking --------------------------------------------------------------------------
def test_signatures_table_with_and_without_trust(signed, pki):
    with open_archive(signed) as a:
        paths, digests = file_digests(a.lookup)
        t = signatures_table(a)
        assert t.schema.names == ["relative_path", "signer", "signing_time", "digest", "valid",
                                  "problem"]
        rows = t.to_pylist()
        assert [r["relative_path"] for r in rows] == [*paths, None]
        assert [r["digest"] for r in rows[:-1]] == [d.hex() for d in digests]
        assert {r["signer"] for r in rows} == {"CN=self signer"}
        assert all(r["valid"] is None and r["problem"] is None for r in rows)
        when = rows[0]["signing_time"]
        assert abs((when - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 600
        trusted = signatures_table(a, trust=pki["self"]).column("valid").to_pylist()
        assert trusted == [True] * len(rows)
        untrusted = signatures_table(a, trust=pki["other"]).to_pylist()
        assert [r["valid"] for r in untrusted] == [False] * len(rows)
        assert all("not trusted" in r["problem"] for r in untrusted)


def test_unsigned_archive(tmp_path, pki):
    out = tmp_path / "u.znippy"
    write_archive(out, _entries(), workers=1)
    with open_archive(out) as a:
        assert signatures_table(a).num_rows == 0
        assert verify_signatures(a, pki["self"]) == [
            f"archive is not signed (no {SIGN_ARTIFACTS} / {SIGN_ARCHIVE} sections)"]


def test_trust_through_a_ca(tmp_path, pki):
    out = tmp_path / "ca.znippy"
    write_archive(out, _entries(), workers=1, signer=(pki["leaf_key"], pki["leaf"]))
    with open_archive(out) as a:
        assert verify_signatures(a, pki["ca"]) == []
        assert verify_signatures(a, [pki["other"], pki["ca"]]) == []
        assert verify_signatures(a, pki["leaf"]) == []  # the signer itself, exactly
        problems = verify_signatures(a, pki["other"])
        assert len(problems) == 7
        assert all("signer CN=release signer is not trusted" in p for p in problems)


def test_expired_certificate_at_signing_time(tmp_path, pki):
    key = ec.generate_private_key(ec.SECP256R1())
    old = _cert(key, "expired", issuer_key=pki["objs"]["ca_key"], issuer="Test CA",
                start=NOW - dt.timedelta(days=60), days=10)
    out = tmp_path / "old.znippy"
    write_archive(out, _entries()[:2], workers=1, signer=Signer(key, old))
    with open_archive(out) as a:
        problems = verify_signatures(a, pki["ca"])
    assert problems and all("CN=expired is not valid at" in p for p in problems)


def test_key_must_match_certificate(pki):
    with pytest.raises(SignatureError, match="does not belong to the certificate"):
        Signer.from_files(pki["self_key"], pki["leaf"])


def test_unreadable_key_names_the_file(tmp_path, pki):
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    with pytest.raises(SignatureError, match="not a usable private key") as err:
        Signer.from_files(bad, pki["self"])
    assert str(bad) in str(err.value)


def test_encrypted_key_from_environment(tmp_path, pki, monkeypatch):
    key = pki["objs"]["self_key"]
    enc = tmp_path / "enc.key"
    enc.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"s3cret")))
    monkeypatch.delenv(sign_mod.PASSWORD_ENV, raising=False)
    with pytest.raises(SignatureError, match=sign_mod.PASSWORD_ENV):
        Signer.from_files(enc, pki["self"])
    monkeypatch.setenv(sign_mod.PASSWORD_ENV, "s3cret")
    assert Signer.from_files(enc, pki["self"]).cert == pki["objs"]["self"]


def test_helper_threads_give_the_same_answers(tmp_path, signed, pki, monkeypatch):
    with open_archive(signed) as a:
        single = signatures_table(a, trust=pki["self"])
        monkeypatch.setattr(sign_mod, "POOL_THRESHOLD", 2)
        monkeypatch.setattr(sign_mod, "BATCH", 1)
        monkeypatch.setattr(sign_mod.os, "cpu_count", lambda: 4)  # three helper threads
        pooled = signatures_table(a, trust=pki["self"])
        pooled_bad = verify_signatures(a, pki["other"])
        assert pooled.equals(single)
        assert len(pooled_bad) == 7
        # signing shared with helper threads: same files, every signature verifies
        out = tmp_path / "pooled.znippy"
        write_archive(out, _entries(), block_size=512, workers=1,
                      signer=(pki["self_key"], pki["self"]))
        with open_archive(out) as b:
            assert _artifacts(b).column("relative_path").to_pylist() == a.select()
            assert verify_signatures(b, pki["self"]) == []
            ders = _artifacts(b).column("cms").to_pylist()
            _, digests = file_digests(b.lookup)
        # made concurrently from one SignatureTemplate: OpenSSL accepts every one
        for der, digest in zip(ders, digests):
            res = _openssl_verify(tmp_path, der, digest, pki["self"])
            assert res.returncode == 0, res.stderr


# -- tampering ---------------------------------------------------------------------------------
def _rewrite(src: Path, dst: Path, *, rename: tuple[str, str] | None = None,
             artifacts: pa.Table | None = None) -> None:
    """Re-tail ``src`` into ``dst`` as a forger would: same blobs, edited index/signatures."""
    with open_archive(src) as a:
        groups = {}
        for key in a.groups:
            t = a.group_table(key)
            if rename:
                names = [rename[1] if p == rename[0] else p
                         for p in t.column("relative_path").to_pylist()]
                t = t.set_column(0, t.schema.field(0), pa.array(names, pa.utf8()))
            groups[key] = pa.table(t.to_pydict(), schema=t.schema)
        table = artifacts if artifacts is not None else _artifacts(a)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        sections = [ReservedSection(SIGN_ARTIFACTS, sink.getvalue().to_pybytes()),
                    ReservedSection(SIGN_ARCHIVE, bytes(a.section(SIGN_ARCHIVE)))]
        blob_end = a.blob_end
    shutil.copyfile(src, dst)
    with open(dst, "r+b") as fh:
        write_tail(fh, blob_end, groups, sections=sections, fsync=False)


def test_flipped_blob_byte_is_found_with_deep(tmp_path, signed, pki):
    bad = tmp_path / "flip.znippy"
    shutil.copyfile(signed, bad)
    with open_archive(signed) as a:
        chunk = a.find("raw.zip").chunks[0]
        assert not chunk.compressed
    with open(bad, "r+b") as fh:
        fh.seek(chunk.blob_offset + 100)
        byte = fh.read(1)
        fh.seek(chunk.blob_offset + 100)
        fh.write(bytes([byte[0] ^ 0x01]))
    with open_archive(bad) as a:
        assert verify_signatures(a, pki["self"]) == []  # the index still matches its signatures
        deep = verify_signatures(a, pki["self"], deep=True)
    assert len(deep) == 1
    assert deep[0].startswith("'raw.zip': content does not match its signed digest")
    assert "BLAKE3 mismatch" in deep[0]
    # the CLI: --trust checks everything verify checks (the flip is found); only the
    # explicit --signatures-only skips the blobs, and --deep brings them back
    from znippy_sql.cli import main

    assert main(["verify", str(bad), "--trust", str(pki["self"])]) == 1
    assert main(["verify", str(bad), "--trust", str(pki["self"]), "--signatures-only"]) == 0
    assert main(["verify", str(bad), "--trust", str(pki["self"]), "--signatures-only",
                 "--deep"]) == 1


def test_changed_path_is_reported(tmp_path, signed, pki):
    bad = tmp_path / "renamed.znippy"
    _rewrite(signed, bad, rename=("b.txt", "b2.txt"))
    with open_archive(bad) as a:
        problems = verify_signatures(a, pki["self"])
    assert problems == [
        "'b.txt': signed, but no such file in the archive",
        "'b2.txt': no signature",
        "archive root: signature does not match the archive root (files were added, removed, "
        "renamed or changed since signing)",
    ]


def test_changed_path_in_index_and_signature_list(tmp_path, signed, pki):
    bad = tmp_path / "renamed2.znippy"
    with open_archive(signed) as a:
        table = _artifacts(a)
    names = ["b2.txt" if p == "b.txt" else p for p in table.column("relative_path").to_pylist()]
    table = table.set_column(0, table.schema.field(0), pa.array(names, pa.utf8()))
    _rewrite(signed, bad, rename=("b.txt", "b2.txt"), artifacts=table)
    with open_archive(bad) as a:
        problems = verify_signatures(a, pki["self"])
    assert problems[0] == ("'b2.txt': signature does not match the file's digest (its path, "
                           "chunks or checksums changed since signing)")
    assert len(problems) == 2 and problems[1].startswith("archive root:")


def test_swapped_signatures_are_reported(tmp_path, signed, pki):
    bad = tmp_path / "swapped.znippy"
    with open_archive(signed) as a:
        table = _artifacts(a)
    cms = table.column("cms").to_pylist()
    cms[0], cms[1] = cms[1], cms[0]
    table = table.set_column(1, table.schema.field(1), pa.array(cms, pa.binary()))
    _rewrite(signed, bad, artifacts=table)
    with open_archive(bad) as a:
        problems = verify_signatures(a, pki["self"])
        rows = signatures_table(a, trust=pki["self"]).to_pylist()
    assert problems == ["'a.txt': the signature is that of 'b.txt' (signatures swapped)",
                        "'b.txt': the signature is that of 'a.txt' (signatures swapped)"]
    assert [r["valid"] for r in rows] == [False, False, True, True, True, True, True]


def test_damaged_signature_bytes(tmp_path, signed, pki):
    bad = tmp_path / "damaged.znippy"
    with open_archive(signed) as a:
        table = _artifacts(a)
    cms = table.column("cms").to_pylist()
    sig = bytearray(cms[2])
    sig[-5] ^= 0xFF  # inside the signature value
    cms[2] = bytes(sig)
    cms[3] = cms[3][:40]  # truncated
    table = table.set_column(1, table.schema.field(1), pa.array(cms, pa.binary()))
    _rewrite(signed, bad, artifacts=table)
    with open_archive(bad) as a:
        paths = a.select()
        problems = verify_signatures(a, pki["self"])
    assert len(problems) == 2
    assert problems[0].startswith(f"{paths[2]!r}: signature invalid")
    assert problems[1].startswith(f"{paths[3]!r}: not a readable signature")


def test_wrong_certificate_is_reported_per_file(signed, pki):
    with open_archive(signed) as a:
        problems = verify_signatures(a, pki["other"])
        paths = a.select()
    assert problems[:-1] == [f"{p!r}: signer CN=self signer is not trusted by the given "
                             "certificate(s)" for p in paths]
    assert problems[-1].startswith("archive root: signer CN=self signer is not trusted")


# -- CLI -------------------------------------------------------------------------------------------
def test_cli_sign_and_verify(tmp_path, pki, capsys):
    src = tmp_path / "src"
    (src / "lib").mkdir(parents=True)
    (src / "lib" / "x.py").write_text("print('x')\n" * 20)
    (src / "README").write_text("hello\n")
    out = tmp_path / "c.znippy"
    assert main(["create", str(src), "-o", str(out), "--sign-key", str(pki["leaf_key"]),
                 "--sign-cert", str(pki["leaf"])]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--trust", str(pki["ca"])]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["verify", str(out), "--trust", str(pki["ca"]), "--deep"]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--trust", str(pki["other"])]) == 1
    text = capsys.readouterr().out
    assert "PROBLEM: 'README': signer CN=release signer is not trusted" in text
    assert "PROBLEM: 'lib/x.py': signer CN=release signer is not trusted" in text


def test_cli_sign_key_needs_cert(tmp_path, pki, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("f")
    code = main(["create", str(src), "-o", str(tmp_path / "x.znippy"),
                 "--sign-key", str(pki["self_key"])])
    assert code == 2
    assert "--sign-key and --sign-cert go together" in capsys.readouterr().err


def test_cli_verify_without_trust_still_checks_digests(tmp_path, signed, capsys):
    bad = tmp_path / "renamed.znippy"
    _rewrite(signed, bad, rename=("a.txt", "a0.txt"))
    assert main(["verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "PROBLEM: 'a0.txt': no signature" in out
    assert main(["verify", str(signed)]) == 0


def test_group_key_untouched_by_signing(signed):
    """Signing adds reserved sections only: the data groups are the unsigned ones."""
    with open_archive(signed) as a:
        assert a.groups == [GroupKey(0, "", "")]
        assert META not in a.sections
        assert a.sections[-2:] == [SIGN_ARTIFACTS, SIGN_ARCHIVE]


def test_reader_agrees_with_asn1crypto(signed):
    """Every field the small DER reader takes out, asn1crypto's full CMS parse gives too."""
    from asn1crypto import cms as acms

    from znippy_sql.provenance import cms

    with open_archive(signed) as a:
        ders = [*_artifacts(a).column("cms").to_pylist(), bytes(a.section(SIGN_ARCHIVE))]
    for der in ders:
        mine = cms.parse(der)
        sd = acms.ContentInfo.load(der)["content"]
        si = sd["signer_infos"][0]
        attrs = {at["type"].native: at["values"][0].native for at in si["signed_attrs"]}
        assert mine.message_digest == attrs["message_digest"]
        assert mine.signing_time == attrs["signing_time"]
        assert mine.signature == si["signature"].native
        assert mine.sid == si["sid"].dump()
        assert mine.digest_algorithm == si["digest_algorithm"]["algorithm"].native
        assert mine.signed_attrs[1:] == si["signed_attrs"].dump()[1:]
        assert mine.certificates == sd["certificates"].contents
        assert sd["encap_content_info"]["content"].native is None


@pytest.mark.parametrize("mangle,match", [
    (lambda d: d[:-3], "runs past its container|truncated"),
    (lambda d: d[:1] + b"\x80" + d[2:], "indefinite length"),
    (lambda d: b"\x31" + d[1:], "unexpected ASN.1 element"),
    (lambda d: d + b"\x00\x00", "trailing bytes"),
])
def test_reader_refuses_malformed_der(signed, mangle, match):
    from znippy_sql.provenance import cms

    with open_archive(signed) as a:
        der = bytes(a.section(SIGN_ARCHIVE))
    with pytest.raises(cms.CmsError, match=match):
        cms.parse(mangle(der))


def test_an_error_in_a_helper_thread_is_raised_here(monkeypatch):
    monkeypatch.setattr(sign_mod, "POOL_THRESHOLD", 2)
    monkeypatch.setattr(sign_mod, "BATCH", 1)

    def fail_on_seven(batch):
        if batch == [7]:
            raise SignatureError("batch seven")
        return batch

    with pytest.raises(SignatureError, match="batch seven"):
        sign_mod._shared(fail_on_seven, list(range(40)))


def test_damaged_signatures_never_crash_the_checker(pki):
    """Every single-byte change and every truncation of a signature is reported (never an
    exception), except changes that leave every signed and checked value as it was."""
    from znippy_sql.provenance import cms

    signer = Signer.from_files(pki["self_key"], pki["self"])
    content = b"\x07" * 32
    der = signer.sign(content)
    anchor = [pki["objs"]["self"].public_bytes(serialization.Encoding.DER)]
    checker = sign_mod._Checker(anchor)
    assert checker.check(der, content, verify=True).untrusted is None
    variants = [der[:n] for n in range(0, len(der), 7)]
    for pos in range(len(der)):
        for xor in (0x01, 0x80, 0xFF):
            damaged = bytearray(der)
            damaged[pos] ^= xor
            variants.append(bytes(damaged))
    accepted = []
    for bad in variants:
        try:
            cms.parse(bad)
        except cms.CmsError:
            pass
        c = sign_mod._Checker(anchor).check(bad, content, verify=True)
        if c.unreadable is None and c.digest_ok and c.bad_signature is None \
                and c.untrusted is None:
            accepted.append(bad)
    # The one kind of change that still verifies leaves the signer's certificate the same
    # certificate: its signed part and signature value unchanged (e.g. the BIT STRING's
    # unused-bits octet of the certificate signature, which X.509 verification ignores).
    original = pki["objs"]["self"]
    for bad in accepted:
        (cert,) = cms.certificates(cms.parse(bad))
        assert cert.tbs_certificate_bytes == original.tbs_certificate_bytes
        assert cert.signature == original.signature
    assert len(accepted) <= 3


def test_junk_signature_sections_are_format_errors(tmp_path, pki, capsys):
    from znippy_sql import FormatError

    out = tmp_path / "junk.znippy"
    write_archive(out, _entries()[:2], workers=1, reserved_sections=[
        ReservedSection(SIGN_ARTIFACTS, b"not arrow"), ReservedSection(SIGN_ARCHIVE, b"x")])
    with open_archive(out) as a:
        with pytest.raises(FormatError, match=f"{SIGN_ARTIFACTS} does not end with the Arrow "
                           "end-of-stream marker"):
            verify_signatures(a, pki["self"])
    half = tmp_path / "half.znippy"
    write_archive(half, _entries()[:2], workers=1,
                  reserved_sections=[ReservedSection(SIGN_ARCHIVE, b"x")])
    with open_archive(half) as a:
        with pytest.raises(FormatError, match=f"without its {SIGN_ARTIFACTS}"):
            signatures_table(a)
    assert main(["verify", str(out), "--trust", str(pki["self"])]) == 1
    assert f"{SIGN_ARTIFACTS} does not end with the Arrow end-of-stream marker" in \
        capsys.readouterr().out


def test_without_trust_only_digests_are_checked(tmp_path, signed, pki):
    bad = tmp_path / "swapped.znippy"
    with open_archive(signed) as a:
        table = _artifacts(a)
        assert verify_signatures(a, None) == []
    cms = table.column("cms").to_pylist()
    cms[0], cms[1] = cms[1], cms[0]
    _rewrite(signed, bad, artifacts=table.set_column(1, table.schema.field(1),
                                                     pa.array(cms, pa.binary())))
    with open_archive(bad) as a:
        assert verify_signatures(a, None) == [
            "'a.txt': the signature is that of 'b.txt' (signatures swapped)",
            "'b.txt': the signature is that of 'a.txt' (signatures swapped)"]


@pytest.mark.parametrize("which", ["self", "rsa"])
def test_template_signatures_are_the_builders_signatures(tmp_path, pki, which):
    """Signer.sign re-fills the builder's reference signature: the same structure byte for
    byte, the message digest of the new content, a fresh signature value."""
    from znippy_sql.provenance import cms

    if which == "self":
        key, cert = pki["objs"]["self_key"], pki["objs"]["self"]
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cert = _cert(key, "rsa signer")
    when = dt.datetime(2031, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)
    content = b"\x42" * 32
    fast = cms.SignatureTemplate(key, cert).sign(content, now=when)
    built = cms.sign(content, key, cert)
    a, b = cms.parse(fast), cms.parse(built)
    for field in ("certificates", "sid", "digest_algorithm", "key_kind", "signature_hash",
                  "message_digest"):
        assert getattr(a, field) == getattr(b, field)
    assert a.signing_time == when
    assert len(fast) - len(a.signature) == len(built) - len(b.signature)
    assert cms.check_signature(a, cert.public_key()) is None
    # the signed attributes differ from the builder's only in the signing time's 13 octets
    diff = [i for i, (x, y) in enumerate(zip(a.signed_attrs, b.signed_attrs)) if x != y]
    assert len(a.signed_attrs) == len(b.signed_attrs) and len(diff) <= 13
    # and a later year takes GeneralizedTime (RFC 5652 §11.3); still verifies
    late = cms.SignatureTemplate(key, cert).sign(content, now=when.replace(year=2051))
    assert cms.parse(late).signing_time == when.replace(year=2051)
    assert cms.check_signature(cms.parse(late), cert.public_key()) is None
    anchor = _pem(tmp_path / "anchor.pem", cert)
    for der in (fast, late):
        res = _openssl_verify(tmp_path, der, content, anchor)
        assert res.returncode == 0, res.stderr


def test_shared_work_reaches_the_helpers_and_keeps_order(monkeypatch):
    """Helper threads take batches alongside the calling thread; results keep their order."""
    import threading

    monkeypatch.setattr(sign_mod, "POOL_THRESHOLD", 2)
    monkeypatch.setattr(sign_mod, "BATCH", 1)
    monkeypatch.setattr(sign_mod.os, "cpu_count", lambda: 2)
    who: dict[int, str] = {}

    def slow(batch):
        time.sleep(0.01)  # releases the GIL, as OpenSSL does while it signs
        who[batch[0]] = threading.current_thread().name
        return [-x for x in batch]

    items = list(range(60))
    assert sign_mod._shared(slow, items) == [-x for x in items]
    assert set(who) == set(items)
    assert len(set(who.values())) == 2  # the calling thread and one helper


def _outcome(fn, der):
    from znippy_sql.provenance import cms

    try:
        return fn(der)
    except cms.CmsError as exc:
        return f"CmsError: {exc}"


@pytest.mark.parametrize("which", ["self", "rsa"])
def test_reading_by_shape_is_the_full_walk(pki, which):
    """After one full walk, signatures of the same length are read by comparing every byte but
    the time, digest and signature values: the answer must be the full walk's, for good
    signatures and for every single-byte change of one."""
    from znippy_sql.provenance import cms

    if which == "self":
        key, cert = pki["objs"]["self_key"], pki["objs"]["self"]
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        cert = _cert(key, "rsa signer")
    template = cms.SignatureTemplate(key, cert)
    start = dt.datetime(2031, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc)
    ders = [template.sign(bytes([i]) * 32, now=start + dt.timedelta(seconds=i * 997))
            for i in range(30)]
    ders.append(template.sign(b"late" * 8, now=start.replace(year=2051)))  # GeneralizedTime
    cms._SHAPES.clear()
    fast = 0
    for der in ders:
        shape = cms._SHAPES.get(len(der))
        fast += shape is not None and shape.match(der) is not None
        assert cms.parse(der) == cms._parse_full(der)
    assert fast >= 20  # most signatures of 30 share a length with an earlier one
    der = ders[1]
    for i in range(len(der)):
        for bit in (0x01, 0x80):
            bad = der[:i] + bytes([der[i] ^ bit]) + der[i + 1:]
            cms._SHAPES.clear()
            cms.parse(der)  # the pattern is this good signature
            assert _outcome(cms.parse, bad) == _outcome(cms._parse_full, bad), i
