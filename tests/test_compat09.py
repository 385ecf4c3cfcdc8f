"""``compat="rust-0.9"``: the layout the readers of ``znippy-common`` 0.9.11 (the binaries
0.9.1 … 0.9.5) take, checked with pyarrow alone against the goldens their ``compress`` wrote
(``tests/data/rust-0.9.5/``); the binaries themselves read it in
``tests/test_interop_compat09.py``.

- reserved sections at ``pkg_type`` -128: ``__znippy_lookup__`` and ``__znippy_trie__``, then
  the signatures when signed; no ``__znippy_meta__`` and no ``__znippy_fsmeta__`` (those
  readers take a reserved name they do not know for a data sub-index);
- the plugin groups with 0.9.11's columns: cargo ``crate_name, version`` (no ``deps``), python
  without ``requires_dist``, maven as later; ``znippy_format_version`` 3 on every data
  sub-index.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import interop_corpus as corpus
from test_rust10_write import SIGNER as KEYS, sections
from znippy_sql import ZnippyError, append_archive, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.provenance.sign import verify_signatures

SIGNER = (KEYS / "signer.key.der", KEYS / "signer.cert.der")
GOLDEN = Path(__file__).parent / "data" / "rust-0.9.5"
#: the binaries whose readers --compat rust-0.9 is for: 0.9.2 writes the eight base columns
#: only, 0.9.5 and 0.9.9 the same plugin columns (docs/interop.md)
EARLY_GOLDENS = [GOLDEN.parent / f"rust-{v}" for v in ("0.9.2", "0.9.5", "0.9.9")]


def data_schemas(path: Path) -> dict[int, pa.Schema]:
    return {r["pkg_type"]: t.schema for r, t in sections(path)
            if r["pkg_type"] != -128 and t is not None}


@pytest.mark.parametrize("golden_dir", EARLY_GOLDENS, ids=lambda p: p.name)
def test_rust09_layout_is_the_095_binarys(golden_dir: Path, tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "a.znippy"
    write_archive(out, src, compat="rust-0.9", pkg_type="auto")
    found = sections(out)
    assert [r["module_name"] for r, _ in found if r["pkg_type"] == -128] == \
        ["__znippy_lookup__", "__znippy_trie__"]
    ours = data_schemas(out)
    assert set(ours) >= {1, 2, 3}
    for pkg_type, golden in (("cli-rust", 1), ("cli-python", 2), ("cli-maven", 3)):
        theirs = data_schemas(golden_dir / f"{pkg_type}.znippy")[golden]
        names = theirs.names  # one schema over every group: theirs is a part of it
        assert all(theirs.field(n).type == ours[golden].field(n).type for n in names[8:])
    for schema in ours.values():
        assert "deps" not in schema.names and "requires_dist" not in schema.names
        assert schema.metadata[b"znippy_format_version"] == b"3"
        assert schema.metadata[b"znippy.compat"] == b"rust-0.9"
    with open_archive(out) as a:
        assert dict(a.read_many(corpus.files())) == corpus.files() and a.verify().ok


def test_rust09_signatures_take_the_rust_names(tmp_path: Path) -> None:
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "s.znippy"
    write_archive(out, src, compat="rust-0.9", signer=SIGNER)
    assert [r["module_name"] for r, _ in sections(out) if r["pkg_type"] == -128] == \
        ["__znippy_lookup__", "__znippy_trie__", "__znippy_sign_artifacts__",
         "__znippy_sign_archive__"]
    with open_archive(out) as a:  # over the Rust digests, as this reader checks them
        assert verify_signatures(a, KEYS / "ca.cert.der") == []


def test_rust09_refuses_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No ``__znippy_meta__`` or ``__znippy_fsmeta__``: facts and POSIX facts are refused,
    nothing is written; without ``--meta`` the CLI records no provenance facts either."""
    src = corpus.write(tmp_path / "in")
    out = tmp_path / "a.znippy"
    with pytest.raises(ZnippyError, match="rust-0.9.*__znippy_meta__"):
        write_archive(out, src, compat="rust-0.9", meta={"team": "x"})
    with pytest.raises(ZnippyError, match="posix"):
        write_archive(out, src, compat="rust-0.9", posix=True)
    assert not out.exists()
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.9",
                 "--meta", "team=x"]) == 2
    assert "--meta cannot be used" in capsys.readouterr().err and not out.exists()
    assert main(["create", str(src), "-o", str(out), "--compat", "rust-0.9"]) == 0
    assert all(r["module_name"] not in ("__znippy_meta__", "__znippy_fsmeta__")
               for r, _ in sections(out))


def test_append_keeps_rust09(tmp_path: Path) -> None:
    """An append to a ``rust-0.9`` archive stays ``rust-0.9``: no facts, a re-signature under
    the Rust names."""
    src = corpus.write(tmp_path / "in")
    more = corpus.write(tmp_path / "more", corpus.APPENDED)
    out = tmp_path / "a.znippy"
    write_archive(out, src, compat="rust-0.9", pkg_type="auto", signer=SIGNER)
    append_archive(out, more, pkg_type="auto", signer=SIGNER)
    found = sections(out)
    assert [r["module_name"] for r, _ in found if r["pkg_type"] == -128] == \
        ["__znippy_lookup__", "__znippy_trie__", "__znippy_sign_artifacts__",
         "__znippy_sign_archive__"]
    for schema in data_schemas(out).values():
        assert schema.metadata[b"znippy.compat"] == b"rust-0.9" and "deps" not in schema.names
    want = corpus.expected("appended")
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok
        assert verify_signatures(a, KEYS / "ca.cert.der") == []


def test_rust09_refuses_a_p384_key(tmp_path: Path) -> None:
    """``znippy-common`` 0.9.11 checks ECDSA with SHA-256 (P-256) and Ed25519 only: a P-384
    signer is refused before anything is written (``rust-0.10`` takes it)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from znippy_sql import SignatureError
    from znippy_sql.provenance.sign import Signer

    key = ec.generate_private_key(ec.SECP384R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "p384")])
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA384()))
    src = corpus.write(tmp_path / "in")
    with pytest.raises(SignatureError, match="rust-0.9: .* P-256 signatures only"):
        write_archive(tmp_path / "a.znippy", src, compat="rust-0.9", signer=Signer(key, cert))
    assert not (tmp_path / "a.znippy").exists()
    write_archive(tmp_path / "b.znippy", src, compat="rust-0.10", posix=False,
                  signer=Signer(key, cert))
