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
    """The real library's typed ``__znippy_meta__`` is carried over (it failed with a
    KeyError traceback before): the archive is appended to (in its own rust-0.10 layout,
    ``write/rustappend.py``) and reads with the old facts and the new file."""
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


# -- archives the real Rust tool wrote (tests/data/rust-0.10.1: its compress and append) ----------
REAL = DATA / "rust-0.10.1"
#: the reserved rows an append writes for rust-0.10, in its order
RUST10_SECTIONS = ["__znippy_fsmeta__", "__znippy_lookup__", "__znippy_trie__",
                   "__znippy_meta__"]


def real_copy(tmp_path: Path, name: str) -> Path:
    out = tmp_path / f"{name}.znippy"
    shutil.copy(REAL / f"{name}.znippy", out)
    return out


def more_files(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """The golden append's files again (``hello.txt`` changed, ``added/new.txt`` at 0600 in a
    0750 directory) and ``later/l.txt`` in a 0700 directory; what the archive holds after."""
    more = corpus.write(tmp_path / "more", corpus.APPENDED)
    (more / "later").mkdir(mode=0o700)
    (more / "later" / "l.txt").write_bytes(b"later\n")
    (more / "later").chmod(0o700)
    (more / "added").chmod(0o750)
    (more / "added" / "new.txt").chmod(0o600)
    return more, {**corpus.expected("appended"), "later/l.txt": b"later\n"}


@pytest.mark.parametrize(("name", "group"), [("cli-generic", (26, "", "")),
                                             ("cli-rust", (1, "", "")),
                                             ("cli-python", (2, "", "")),
                                             ("cli-append-meta", (0, "", ""))])
def test_append_to_a_real_rust_archive_keeps_its_layout(tmp_path: Path, name: str,
                                                        group: tuple[int, str, str]) -> None:
    """An archive the real ``znippy`` 0.10.1 wrote (its ``compress --format generic|rust|
    python``, its ``append --meta``) is appended to in its own layout (it was written in this
    project's before, which the real tool cannot read): its group and plugin columns as
    written (the Rust append's two sub-indexes of ``(0, "", "")`` as one), every new file in
    it (no move), one sub-index schema with ``znippy_format_version`` 3, the Rust-named
    sections at -128, the typed meta with each old value's kind and the new facts as
    strings, ``__znippy_fsmeta__`` merged; the old bytes before the blob end untouched."""
    out = real_copy(tmp_path, name)
    before = out.read_bytes()
    old = sections(out)
    old_schema = [t for r, t in old if r["pkg_type"] != -128][0].schema  # type: ignore[union-attr]
    more, want = more_files(tmp_path)
    report = append_archive(out, more, posix=True, meta={"team": "interop"})
    assert report.files_moved == 0
    assert (report.files_unchanged, report.files_replaced) == \
        ((2, 0) if name == "cli-append-meta" else (0, 1))
    assert out.read_bytes()[:report.old_blob_end] == before[:report.old_blob_end]
    found = sections(out)
    data = [(r, t) for r, t in found if r["pkg_type"] != -128]
    assert [(r["pkg_type"], r["repo"], r["module_name"]) for r, _ in data] == [group]
    table = data[0][1]
    assert table is not None and table.num_rows == len(want)
    assert table.schema.remove_metadata() == old_schema.remove_metadata()
    assert table.schema.metadata[b"znippy_format_version"] == b"3"
    assert table.schema.metadata[b"znippy.compat"] == b"rust-0.10"
    assert [r["module_name"] for r, _ in found if r["pkg_type"] == -128] == RUST10_SECTIONS
    assert all(r["pkg_type"] in (-128, group[0]) for r, _ in found)
    if name == "cli-rust":  # the plugin's values of the old rows kept, none for the new
        rows = {r["relative_path"]: r for r in table.to_pylist()}
        assert rows["crates/tiny-0.1.0.crate"]["crate_name"] == "tiny"
        assert rows["crates/tiny-0.1.0.crate"]["pkg_type"] == 1
        assert rows["later/l.txt"]["pkg_type"] is None
    fsmeta = {(p, k): m for p, k, m in zip(*(
        [t for r, t in found if r["module_name"] == "__znippy_fsmeta__"][0]  # type: ignore[union-attr]
        .column(n).to_pylist() for n in ("relative_path", "kind", "mode")))}
    assert fsmeta[("bin/run.sh", 1)] == 0o755 and fsmeta[("", 2)] == 0o644
    assert fsmeta[("added/new.txt", 1)] == 0o600 and fsmeta[("later", 0)] == 0o700
    assert fsmeta[("added", 0)] == 0o750 and ("empty-dir", 0) in fsmeta
    meta = [t for r, t in found if r["module_name"] == "__znippy_meta__"][0]
    assert meta is not None
    kinds = {(r["relative_path"], r["key"]): r for r in meta.to_pylist()}
    assert kinds[(None, "team")]["v_str"] == "interop" and kinds[(None, "team")]["value_type"] == 0
    if name == "cli-append-meta":  # their typed facts keep their kinds
        assert kinds[("added/new.txt", "build")]["v_i64"] == 7
        assert kinds[("added/new.txt", "ratio")]["v_f64"] == 0.25
        assert kinds[("added/new.txt", "ok")]["v_bool"] is True
        assert kinds[("added/new.txt", "raw")]["v_bytes"] == b"\x00\x01\xfe"
        assert kinds[(None, "release")]["v_str"] == "r1"
    with open_archive(out) as a:
        assert dict(a.read_many(want)) == want and a.verify().ok
        assert sorted(a.first_paths()) == sorted(want)


def test_append_to_a_real_rust_archive_finds_its_unchanged_files(tmp_path: Path) -> None:
    """The corpus again: every file found unchanged in the archive's generic group (26), no
    blob written, the old tail kept as it was."""
    out = real_copy(tmp_path, "cli-generic")
    before = out.read_bytes()
    report = append_archive(out, corpus.write(tmp_path / "in"))
    assert report.files_unchanged == len(corpus.files()) and report.blob_bytes_written == 0
    assert out.read_bytes() == before


def test_append_to_a_real_signed_rust_archive(tmp_path: Path) -> None:
    """The real tool's signatures no longer cover the files once an append changes them: the
    append is refused (the archive left as it was) unless it re-signs (the Rust-named
    sections over the Rust digests of the new content) or drops them, saying so."""
    from znippy_sql import SignatureError
    from znippy_sql.provenance.sign import Signer, verify_signatures

    more, want = more_files(tmp_path)
    out = real_copy(tmp_path, "cli-signed")
    before = out.read_bytes()
    with pytest.raises(SignatureError, match="re-sign .*or drop them") as err:
        append_archive(out, more)
    assert str(out) in str(err.value) and out.read_bytes() == before
    signer = Signer.from_files(SIGNER / "signer.key.der", SIGNER / "signer.cert.der")
    append_archive(out, more, signer=signer)
    names = [r["module_name"] for r, _ in sections(out) if r["pkg_type"] == -128]
    assert names == [*RUST10_SECTIONS[:3], "__znippy_sign_artifacts__",
                     "__znippy_sign_archive__"]
    with open_archive(out) as a:
        assert verify_signatures(a, SIGNER / "ca.cert.der") == []
        assert dict(a.read_many(want)) == want
    (tmp_path / "d").mkdir()
    dropped = real_copy(tmp_path / "d", "cli-signed")
    report = append_archive(dropped, more, drop_signatures=True)
    assert report.dropped_sections == ["__sign_artifacts__", "__sign_archive__"]
    assert [r["module_name"] for r, _ in sections(dropped) if r["pkg_type"] == -128] == \
        RUST10_SECTIONS[:3]


def test_append_to_a_real_rust_08_archive_keeps_its_layout(tmp_path: Path) -> None:
    """``tests/data/rust-0.8-cli.znippy`` (the 0.8 layout: no lookup, no reserved row) stays
    in it: data sub-indexes of one schema and the manifest, no facts; ``meta`` refused."""
    out = tmp_path / "r08.znippy"
    shutil.copy(DATA / "rust-0.8-cli.znippy", out)
    more = tmp_path / "more"
    (more / "added").mkdir(parents=True)
    (more / "added" / "one.txt").write_bytes(b"one\n")
    with pytest.raises(ZnippyError, match="rust-0.8.*meta cannot be written"):
        append_archive(out, more, meta={"a": "b"})
    append_archive(out, more, posix=True)
    found = sections(out)
    assert all(r["pkg_type"] >= 0 for r, _ in found)
    assert len({t.schema for _, t in found if t is not None}) == 1
    with open_archive(out) as a:
        assert a.read("added/one.txt") == b"one\n" and a.verify().ok


def test_append_to_a_real_rust_archive_refuses_another_compat(tmp_path: Path) -> None:
    out = real_copy(tmp_path, "cli-generic")
    before = out.read_bytes()
    with pytest.raises(ZnippyError, match="rust-0.10 layout of the real znippy.*would mix two "
                                          "layouts"):
        append_archive(out, corpus.write(tmp_path / "more", corpus.APPENDED), compat="rust-0.8")
    assert out.read_bytes() == before


def test_a_failed_append_to_a_rust_appended_archive_leaves_its_own_bytes(
        tmp_path: Path) -> None:
    """After a Rust ``append`` the archive is read laid anew (its two sub-indexes as one); an
    append that fails after writing blobs rolls back to the file's own bytes, not the
    tail made in memory."""
    from znippy_sql.write.append import open_for_append

    out = real_copy(tmp_path, "cli-append-meta")
    before = out.read_bytes()
    with pytest.raises(RuntimeError, match="stop"):
        with open_for_append(out) as app:
            app.add("x.txt", b"x" * 1000)
            raise RuntimeError("stop")
    assert out.read_bytes() == before
    more = tmp_path / "m"
    (more / "docs").mkdir(parents=True)
    (more / "docs" / "readme.md").write_bytes(b"moved")
    with pytest.raises(ZnippyError, match="would move"):  # refused after its blobs
        append_archive(out, more, pkg_type=5)
    assert out.read_bytes() == before


def package_files(tmp_path: Path) -> Path:
    """A new crate and a Maven pom, for ``pkg_type="auto"``."""
    more = tmp_path / "pkgs"
    (more / "crates").mkdir(parents=True)
    (more / "crates" / "extra-2.0.0.crate").write_bytes(corpus.crate("extra", "2.0.0", []))
    pom = more / "maven" / "org" / "acme" / "lib" / "1.0"
    pom.mkdir(parents=True)
    (pom / "lib-1.0.pom").write_bytes(
        b"<project><modelVersion>4.0.0</modelVersion><groupId>org.acme</groupId>"
        b"<artifactId>lib</artifactId><version>1.0</version></project>\n")
    return more


def test_append_packages_to_a_real_rust_archive(tmp_path: Path) -> None:
    """``pkg_type="auto"`` on the real tool's ``--format rust`` archive: the crate joins its
    cargo group ``(1, "", "")`` with the plugin's ``crate_name``/``version``, the pom makes the
    Maven plugin's group ``(3, "", "")``; both groups under one schema."""
    out = real_copy(tmp_path, "cli-rust")
    append_archive(out, package_files(tmp_path), pkg_type="auto")
    data = {(r["pkg_type"], r["module_name"]): t for r, t in sections(out) if r["pkg_type"] >= 0}
    assert set(data) == {(1, ""), (3, "")}
    assert len({t.schema for t in data.values() if t is not None}) == 1
    cargo = {r["relative_path"]: r for r in data[(1, "")].to_pylist()}  # type: ignore[union-attr]
    assert cargo["crates/extra-2.0.0.crate"]["crate_name"] == "extra"
    assert cargo["crates/extra-2.0.0.crate"]["pkg_type"] == 1
    assert cargo["crates/tiny-0.1.0.crate"]["crate_name"] == "tiny"
    maven = data[(3, "")].to_pylist()  # type: ignore[union-attr]
    assert [(r["group_id"], r["artifact_id"], r["version"]) for r in maven] == \
        [("org.acme", "lib", "1.0")]
    with open_archive(out) as a:
        assert a.verify().ok and a.read("crates/extra-2.0.0.crate").startswith(b"\x1f\x8b")
