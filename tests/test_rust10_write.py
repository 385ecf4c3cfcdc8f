"""``compat="rust-0.10"``: the tree's shape and the plugin columns, checked against the facts
of the Rust sources (docs/interop.md) with pyarrow alone; no golden, no Rust binary (those are
tests/test_interop_real.py).

- ``__znippy_fsmeta__`` (``znippy-common`` 0.10.6 ``fsmeta.rs``): ``relative_path: utf8,
  kind: uint8, mode: uint32``, none nullable, schema metadata ``znippy_format_version`` 3;
  a row per directory but the root (kind 0), one row with an empty path and the most common
  file mode (kind 2; a tie: the lowest), a row per file of another mode (kind 1); modes are
  ``st_mode & 0o7777``; rows sorted by path bytes; pushed right after the data sub-index,
  before the lookup (``slot_packer.rs``), at ``pkg_type`` -128.
- the plugin columns (``plugin.rs`` ``Col``, the plugins' ``HandlerSpec.fields``): maven 3
  ``group_id, artifact_id, version, packaging, classifier``; cargo 1 ``crate_name, version,
  deps: List<Utf8>``; python 2 ``name, version, python_tag, abi_tag, platform_tag,
  build_tag, requires_dist: List<Utf8>``; npm 6 ``name, version``; all nullable, after a
  nullable ``pkg_type: int8``; every chunk of a claimed file carries the plugin's type
  (``index.rs``, the index builder).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from znippy_sql import open_archive, write_archive
from znippy_sql.write.rust10 import fsmeta_table

U = pa.utf8()
STR_LIST = pa.list_(pa.field("item", pa.utf8(), nullable=True))


def sections(path: Path) -> list[tuple[dict, pa.Table | None]]:
    """Every manifest row and its stream (None for the raw trie and archive CMS), as the Rust
    reader reads them: the manifest stream ends 16 bytes before the end (``ZNPYMIDX`` + the
    manifest's offset)."""
    data = path.read_bytes()
    assert data[-16:-8] == b"ZNPYMIDX"
    start = struct.unpack("<Q", data[-8:])[0]
    out = []
    for row in pa.ipc.open_stream(data[start:-16]).read_all().to_pylist():
        raw = data[row["index_offset"]:row["index_offset"] + row["index_len"]]
        raw_section = row["module_name"] in ("__znippy_trie__", "__znippy_sign_archive__")
        table = None if raw_section else pa.ipc.open_stream(raw).read_all()
        out.append((row, table))
    return out


def test_fsmeta_rows_are_fsmeta_rs_rows() -> None:
    files = [("b/x", 0o100644), ("a/ro", 0o100444), ("z", 0o100644), ("a/run", 0o104755),
             ("é", 0o100644)]
    dirs = [("b", 0o40755), ("a", 0o40700), ("empty", 0o41777)]
    table = fsmeta_table(files, dirs)
    assert table is not None
    assert table.schema.equals(pa.schema([pa.field("relative_path", U, nullable=False),
                                          pa.field("kind", pa.uint8(), nullable=False),
                                          pa.field("mode", pa.uint32(), nullable=False)]))
    assert table.schema.metadata == {b"znippy_format_version": b"3"}
    rows = [tuple(r.values()) for r in table.to_pylist()]
    assert rows == [("", 2, 0o644), ("a", 0, 0o700), ("a/ro", 1, 0o444), ("a/run", 1, 0o4755),
                    ("b", 0, 0o755), ("empty", 0, 0o1777)]


def test_fsmeta_default_mode_tie_is_the_lowest() -> None:
    table = fsmeta_table([("p", 0o100644), ("q", 0o100600), ("r", 0o100644), ("s", 0o100600)],
                         [])
    assert table is not None
    assert [tuple(r.values()) for r in table.to_pylist()] == [
        ("", 2, 0o600), ("p", 1, 0o644), ("r", 1, 0o644)]


def test_fsmeta_sorts_by_path_bytes() -> None:
    """Rust's ``String`` order is byte order: ``Z`` (0x5a) before ``a``, ``é`` after ``z``."""
    table = fsmeta_table([], [("z", 0o40755), ("é", 0o40755), ("a", 0o40755), ("Z", 0o40755),
                              ("a/b", 0o40755), ("a-b", 0o40755)])
    assert table is not None
    assert table.column("relative_path").to_pylist() == ["Z", "a", "a-b", "a/b", "z", "é"]


def test_fsmeta_nothing_to_record() -> None:
    assert fsmeta_table([], []) is None


def tree(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "run.sh").write_bytes(b"#!/bin/sh\n")
    (root / "bin" / "run.sh").chmod(0o755)
    (root / "doc.txt").write_bytes(b"doc\n")
    (root / "doc.txt").chmod(0o644)
    (root / "other.txt").write_bytes(b"other\n")
    (root / "other.txt").chmod(0o644)
    (root / "empty").mkdir()
    (root / "empty").chmod(0o700)
    os.symlink("doc.txt", root / "link")
    return root


def test_archive_has_fsmeta_where_the_rust_compress_puts_it(tmp_path: Path) -> None:
    src = tree(tmp_path / "in")
    out = tmp_path / "a.znippy"
    report = write_archive(out, src, compat="rust-0.10", posix=True)
    assert report.links_left_out == 1  # the Rust compress stores no link either
    found = sections(out)
    names = [(r["pkg_type"], r["module_name"]) for r, _ in found]
    assert names == [(0, ""), (-128, "__znippy_fsmeta__"), (-128, "__znippy_lookup__"),
                     (-128, "__znippy_trie__")]
    row, fsmeta = found[1]
    assert fsmeta is not None and row["row_count"] == fsmeta.num_rows
    assert [tuple(r.values()) for r in fsmeta.to_pylist()] == [
        ("", 2, 0o644), ("bin", 0, 0o755), ("bin/run.sh", 1, 0o755), ("empty", 0, 0o700)]
    data = found[0][1]
    assert data is not None and "link" not in data.column("relative_path").to_pylist()
    assert b"posix" not in out.read_bytes()  # no __meta__ rows of this project's facts
    with open_archive(out) as a:  # this reader makes the directories and sets the modes
        a.extract(tmp_path / "x", preserve=True)
    assert (tmp_path / "x" / "empty").stat().st_mode & 0o7777 == 0o700
    assert (tmp_path / "x" / "bin" / "run.sh").stat().st_mode & 0o7777 == 0o755


def test_no_posix_no_fsmeta(tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    write_archive(out, tree(tmp_path / "in"), compat="rust-0.10")
    assert "__znippy_fsmeta__" not in [r["module_name"] for r, _ in sections(out)]


def test_rust_08_still_refuses_posix(tmp_path: Path) -> None:
    from znippy_sql import OptionError

    with pytest.raises(OptionError, match="rust-0.8"):
        write_archive(tmp_path / "a.znippy", tree(tmp_path / "in"), compat="rust-0.8",
                      posix=True)


#: the plugin columns the Rust sources declare (module docstring)
PLUGIN_COLUMNS = {
    3: [("group_id", U), ("artifact_id", U), ("version", U), ("packaging", U),
        ("classifier", U)],
    1: [("crate_name", U), ("version", U), ("deps", STR_LIST)],
    2: [("name", U), ("version", U), ("python_tag", U), ("abi_tag", U), ("platform_tag", U),
        ("build_tag", U), ("requires_dist", STR_LIST)],
    6: [("name", U), ("version", U)],
}
POM = (b"<project><groupId>org.acme</groupId><artifactId>widget</artifactId>"
       b"<version>7</version></project>")


def packages(root: Path) -> Path:
    files = {"m/org/acme/widget/7/widget-7.pom": POM,
             "c/tiny-0.1.0.crate": b"crate" * 10,
             "p/demo-1.0-py3-none-any.whl": b"wheel" * 10,
             "n/left-pad/-/left-pad-1.3.0.tgz": b"npm" * 10,
             "big.crate.bin": bytes(range(16)),
             "readme.txt": b"plain\n"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    big = root / "c" / "big-2.0.0.crate"  # three chunks of a claimed file
    big.write_bytes(b"".join(bytes([i]) * 4096 for i in range(3)))
    return root


def test_plugin_groups_are_the_rust_plugins(tmp_path: Path) -> None:
    out = tmp_path / "a.znippy"
    write_archive(out, packages(tmp_path / "in"), compat="rust-0.10", pkg_type="auto",
                  block_size=4096)
    data = [(r, t) for r, t in sections(out) if r["pkg_type"] != -128]
    assert sorted(r["pkg_type"] for r, _ in data) == [0, 1, 2, 3, 6]
    assert all(r["module_name"] == "" for r, _ in data)
    schemas = {t.schema.remove_metadata() for _, t in data if t is not None}
    assert len(schemas) == 1  # one schema: the Rust reader concatenates them by position
    schema = schemas.pop()
    assert schema.names[:9] == ["relative_path", "chunk_seq", "fdata_offset", "compressed",
                                "uncompressed_size", "blob_offset", "blob_size", "checksum",
                                "pkg_type"]
    assert schema.field("pkg_type").type == pa.int8() and schema.field("pkg_type").nullable
    for type_id, columns in PLUGIN_COLUMNS.items():
        for name, typ in columns:
            field = schema.field(name)
            assert field.type.equals(typ) and field.nullable, (type_id, name, field)
    groups = {r["pkg_type"]: t for r, t in data}
    for type_id, table in groups.items():
        kinds = set(table.column("pkg_type").to_pylist())
        assert kinds == ({None} if type_id == 0 else {type_id}), (type_id, kinds)
    crates = groups[1].to_pylist()
    assert [(r["relative_path"], r["chunk_seq"], r["crate_name"], r["version"])
            for r in crates] == [("c/big-2.0.0.crate", 0, "big", "2.0.0"),
                                 ("c/big-2.0.0.crate", 1, "big", "2.0.0"),
                                 ("c/big-2.0.0.crate", 2, "big", "2.0.0"),
                                 ("c/tiny-0.1.0.crate", 0, "tiny", "0.1.0")]
    pom = groups[3].to_pylist()[0]
    assert (pom["group_id"], pom["artifact_id"], pom["version"]) == ("org.acme", "widget", "7")
    whl = groups[2].to_pylist()[0]
    assert (whl["name"], whl["version"], whl["python_tag"], whl["abi_tag"],
            whl["platform_tag"], whl["requires_dist"]) == ("demo", "1.0", "py3", "none", "any",
                                                           None)
    assert groups[6].to_pylist()[0]["name"] == "left-pad"
    for column in ("cargo_name", "pypi_kind", "maven_extension", "npm_name"):
        assert column not in schema.names
    with open_archive(out) as a:  # this reader reads it as it reads the Rust tool's
        assert a.verify().ok
        assert a.read("c/big-2.0.0.crate") == (tmp_path / "in" / "c" / "big-2.0.0.crate"
                                               ).read_bytes()


SIGNER = Path(__file__).parent / "data" / "rust-signer"
#: DER of the object identifier ecdsa-with-SHA256 (1.2.840.10045.4.3.2)
ECDSA_WITH_SHA256 = bytes.fromhex("06082a8648ce3d040302")


def test_signatures_are_the_rust_sections_over_the_rust_digests(tmp_path: Path) -> None:
    """``sign.rs``: ``__znippy_sign_artifacts__`` (a stream of ``relative_path: utf8, cms:
    binary``, none nullable) and ``__znippy_sign_archive__`` (one DER CMS), both at pkg_type
    -128 with row_count 0, after ``__znippy_meta__``; each CMS's ``messageDigest`` is SHA-256
    of the Rust digest (``interop/sign.py``), signed ECDSA-with-SHA256, carrying the signer's
    certificate alone."""
    import hashlib

    from znippy_sql.interop.sign import archive_root, file_digests
    from znippy_sql.provenance import cms
    from znippy_sql.provenance.sign import Signer, verify_signatures

    src = packages(tmp_path / "in")
    out = tmp_path / "a.znippy"
    signer = Signer.from_files(SIGNER / "signer.key.der", SIGNER / "signer.cert.der")
    write_archive(out, src, compat="rust-0.10", pkg_type="auto", block_size=4096,
                  signer=signer, meta={"team": "interop"})
    found = sections(out)
    names = [(r["pkg_type"], r["module_name"], r["row_count"]) for r, _ in found
             if r["pkg_type"] == -128]
    assert names[-3:] == [(-128, "__znippy_meta__", names[-3][2]),
                          (-128, "__znippy_sign_artifacts__", 0),
                          (-128, "__znippy_sign_archive__", 0)]
    lookup = [t for r, t in found if r["module_name"] == "__znippy_lookup__"][0]
    artifacts = [t for r, t in found if r["module_name"] == "__znippy_sign_artifacts__"][0]
    assert lookup is not None and artifacts is not None
    assert artifacts.schema.remove_metadata().equals(pa.schema([
        pa.field("relative_path", U, nullable=False), pa.field("cms", pa.binary(),
                                                               nullable=False)]))
    paths, digests = file_digests(lookup)
    assert artifacts.column("relative_path").to_pylist() == paths
    for der, digest in zip(artifacts.column("cms").to_pylist(), digests):
        parsed = cms.parse(der)
        assert parsed.message_digest == hashlib.sha256(digest).digest()
        assert (parsed.key_kind, parsed.signature_hash) == ("ec", "sha256")
        assert ECDSA_WITH_SHA256 in der  # the OID the Rust verifier dispatches on
        assert len(cms.certificates(parsed)) == 1
    row = [r for r, _ in found if r["module_name"] == "__znippy_sign_archive__"][0]
    archive_cms = out.read_bytes()[row["index_offset"]:row["index_offset"] + row["index_len"]]
    root = archive_root(paths, digests)
    assert cms.parse(archive_cms).message_digest == hashlib.sha256(root).digest()
    with open_archive(out) as a:  # this reader checks them the Rust way
        assert verify_signatures(a, SIGNER / "ca.cert.der") == []


def test_rsa_is_refused_for_the_rust_verifier(tmp_path: Path) -> None:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    from znippy_sql import SignatureError
    from znippy_sql.provenance.sign import Signer

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rsa")])
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    with pytest.raises(SignatureError, match="P-256 or P-384"):
        write_archive(tmp_path / "a.znippy", packages(tmp_path / "in"), compat="rust-0.10",
                      signer=Signer(key, cert))
