"""``append`` to an archive written with ``compat`` keeps its layout (``write/rustappend.py``),
checked with pyarrow alone against the facts of the Rust sources (docs/interop.md); the real
binaries read the result in ``tests/test_interop_real.py::test_we_append_they_read``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import interop_corpus as corpus
from test_rust10_write import SIGNER, sections
from znippy_sql import ZnippyError, append_archive, open_archive, write_archive

DATA = Path(__file__).parent / "data"


def made(tmp_path: Path, compat: str, **kwargs: object) -> tuple[Path, Path]:
    src = corpus.write(tmp_path / "in")
    more = corpus.write(tmp_path / "more", corpus.APPENDED)
    (more / "added" / "new.txt").chmod(0o600)
    out = tmp_path / "a.znippy"
    write_archive(out, src, compat=compat, posix=compat == "rust-0.10", **kwargs)  # type: ignore[arg-type]
    return out, more


def test_append_keeps_the_rust_010_layout(tmp_path: Path) -> None:
    """The Rust-named sections at -128 in the Rust order, one schema over every data
    sub-index with ``znippy_format_version`` 3, the plugin groups under their Rust keys,
    the typed meta with the old and new facts, and ``__znippy_fsmeta__`` merged: the
    replaced file keeps the usual mode, the new file its own, the new directory listed."""
    out, more = made(tmp_path, "rust-0.10", pkg_type="auto", meta={"team": "interop"})
    append_archive(out, more, pkg_type="auto", posix=True, meta={"release": "r2"})
    found = sections(out)
    data = [(r, t) for r, t in found if r["pkg_type"] != -128]
    reserved = [r["module_name"] for r, _ in found if r["pkg_type"] == -128]
    assert reserved == ["__znippy_fsmeta__", "__znippy_lookup__", "__znippy_trie__",
                        "__znippy_meta__"]
    assert {(r["pkg_type"], r["module_name"]) for r, _ in data} >= {(3, ""), (1, ""), (2, "")}
    schemas = {t.schema.remove_metadata() for _, t in data if t is not None}
    assert len(schemas) == 1
    for _, t in data:
        assert t is not None and t.schema.metadata[b"znippy_format_version"] == b"3"
    fsmeta = {(p, k): m for p, k, m in zip(*(
        [t for r, t in found if r["module_name"] == "__znippy_fsmeta__"][0]
        .column(n).to_pylist() for n in ("relative_path", "kind", "mode")))}
    assert fsmeta[("", 2)] == 0o644 and fsmeta[("added/new.txt", 1)] == 0o600
    assert fsmeta[("bin/run.sh", 1)] == 0o755 and ("added", 0) in fsmeta
    assert ("empty-dir", 0) in fsmeta and ("hello.txt", 1) not in fsmeta
    meta = [t for r, t in found if r["module_name"] == "__znippy_meta__"][0]
    assert meta is not None and {"team", "release"} <= set(meta.column("key").to_pylist())
    want = corpus.expected("appended")
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok


def test_append_keeps_the_rust_08_layout(tmp_path: Path) -> None:
    """Data sub-indexes of one schema and the manifest only, no facts recorded."""
    out, more = made(tmp_path, "rust-0.8")
    append_archive(out, more, posix=True)  # posix follows the archive: none for rust-0.8
    found = sections(out)
    assert all(r["pkg_type"] != -128 and r["pkg_type"] != -1 for r, _ in found)
    assert len({t.schema for _, t in found if t is not None}) == 1
    want = corpus.expected("appended")
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want


def test_append_rust_08_refuses_meta(tmp_path: Path) -> None:
    out, more = made(tmp_path, "rust-0.8")
    before = out.read_bytes()
    with pytest.raises(ZnippyError, match="rust-0.8.*meta cannot be written"):
        append_archive(out, more, meta={"a": "b"})
    assert out.read_bytes() == before


@pytest.mark.parametrize(("compat", "given"), [("rust-0.10", "rust-0.8"), (None, "rust-0.10")])
def test_append_refuses_another_compat(tmp_path: Path, compat: str | None, given: str) -> None:
    out, more = made(tmp_path, compat) if compat else (tmp_path / "a.znippy", tmp_path / "m")
    if compat is None:
        write_archive(out, corpus.write(tmp_path / "in"))
        corpus.write(more, corpus.APPENDED)
    before = out.read_bytes()
    with pytest.raises(ZnippyError, match="would mix two layouts") as err:
        append_archive(out, more, compat=given)  # type: ignore[arg-type]
    assert str(out) in str(err.value)
    assert out.read_bytes() == before


def test_append_resigns_over_the_rust_digests(tmp_path: Path) -> None:
    """A signed ``rust-0.10`` archive re-signed by the append: the Rust-named sections over
    the Rust digests of the new content, which this reader checks the Rust way."""
    from znippy_sql.provenance.sign import Signer, verify_signatures

    signer = Signer.from_files(SIGNER / "signer.key.der", SIGNER / "signer.cert.der")
    out, more = made(tmp_path, "rust-0.10", signer=signer)
    append_archive(out, more, signer=signer)
    names = [r["module_name"] for r, _ in sections(out) if r["pkg_type"] == -128]
    assert names[-2:] == ["__znippy_sign_artifacts__", "__znippy_sign_archive__"]
    with open_archive(out) as a:
        assert verify_signatures(a, SIGNER / "ca.cert.der") == []


def test_append_to_a_real_rust_archive_with_typed_meta(tmp_path: Path) -> None:
    """The real tool's typed ``__znippy_meta__`` is carried over as facts (it failed with a
    KeyError traceback before): the archive is appended to (in this project's layout, as
    any archive without ``compat``) and reads with the old facts and the new file."""
    out = tmp_path / "r.znippy"
    shutil.copy(DATA / "rust-common-0.10.6" / "lib-meta.znippy", out)
    with open_archive(out) as a:
        facts = a.meta
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "later.txt").write_bytes(b"later\n")
    append_archive(out, tmp_path / "more", posix=True)  # facts merged into the old ones
    with open_archive(out) as a:
        assert a.read("later.txt") == b"later\n" and a.verify().ok
        assert a.meta is not None and facts is not None
        assert set(facts.column("key").to_pylist()) <= set(a.meta.column("key").to_pylist())


def test_append_a_package_joins_its_rust_plugin_group(tmp_path: Path) -> None:
    """A crate appended with ``pkg_type="auto"`` joins the Rust cargo group ``(1, "", "")``
    with the plugin's ``crate_name``/``version`` (our cargo module's values), one group."""
    out, _ = made(tmp_path, "rust-0.10", pkg_type="auto")
    more = tmp_path / "crates-more"
    (more / "crates").mkdir(parents=True)
    (more / "crates" / "extra-2.0.0.crate").write_bytes(corpus.crate("extra", "2.0.0", []))
    append_archive(out, more, pkg_type="auto")
    cargo = [t for r, t in sections(out) if r["pkg_type"] == 1]
    assert len(cargo) == 1 and cargo[0] is not None
    by_path = {r["relative_path"]: r for r in cargo[0].to_pylist()}
    assert by_path["crates/extra-2.0.0.crate"]["crate_name"] == "extra"
    assert by_path["crates/extra-2.0.0.crate"]["version"] == "2.0.0"
    assert by_path["crates/tiny-0.1.0.crate"]["crate_name"] == "tiny"
