"""``maven deps`` of a POM whose parent (or a farther ancestor, or a BOM) is not in the
archive: the POM is there, so the answer names what is missing (the parent's coordinates)
and still resolves what the POM itself declares. A small Maven tree is written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from znippy_sql import modules, open_archive
from znippy_sql.cli import main
from znippy_sql.modules.maven.commands import closure

MAVEN = modules.by_name("maven")


def _pom(g: str, a: str, v: str, *, parent: str = "", deps: str = "", managed: str = "",
         packaging: str = "jar") -> str:
    p = ""
    if parent:
        pg, pa_, pv = parent.split(":")
        p = (f"<parent><groupId>{pg}</groupId><artifactId>{pa_}</artifactId>"
             f"<version>{pv}</version></parent>")
    return (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
            f'</modelVersion>{p}<groupId>{g}</groupId><artifactId>{a}</artifactId>'
            f'<version>{v}</version><packaging>{packaging}</packaging>'
            f'<dependencyManagement><dependencies>{managed}</dependencies>'
            f'</dependencyManagement><dependencies>{deps}</dependencies></project>')


def _dep(gav: str, extra: str = "") -> str:
    g, a, *v = gav.split(":")
    version = f"<version>{v[0]}</version>" if v else ""
    return f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>{version}" \
           f"{extra}</dependency>"


TREE = {
    # the parent t:gone:1 is not in the tree; t:unversioned's version was the parent's to give
    "t:child:1": _pom("t", "child", "1", parent="t:gone:1",
                      deps=_dep("t:dep:1") + _dep("t:unversioned")),
    "t:dep:1": _pom("t", "dep", "1", deps=_dep("t:leaf:1")),
    "t:leaf:1": _pom("t", "leaf", "1"),
    # a grandparent missing: the parent is here and gives a dependency
    "t:mid:1": _pom("t", "mid", "1", parent="t:top:1", packaging="pom",
                    deps=_dep("t:leaf:1")),
    "t:kid:1": _pom("t", "kid", "1", parent="t:mid:1", deps=_dep("t:dep:1")),
    # a BOM missing
    "t:boms:1": _pom("t", "boms", "1", deps=_dep("t:dep:1"),
                     managed=_dep("t:nobom:1", "<type>pom</type><scope>import</scope>")),
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("m2")
    for gav, text in TREE.items():
        g, a, v = gav.split(":")
        d = root / g / a / v
        d.mkdir(parents=True)
        (d / f"{a}-{v}.pom").write_text(text)
        if a != "mid":
            (d / f"{a}-{v}.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    out = root.parent / "m2.znippy"
    assert main(["create", str(root), "-o", str(out), "--pkg-type", "auto"]) == 0
    return out


def test_deps_names_the_missing_parent_and_resolves_the_rest(
        archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maven", str(archive), "deps", "t:child:1"]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "t:child:1"  # the POM is there: no "(no POM)"
    assert "missing: t:gone:1 (parent): no POM in the archive (via t:child:1)" in lines
    assert "  t:dep:jar:1 (compile)" in lines and "    t:leaf:jar:1 (compile)" in lines
    assert any(ln.startswith("missing: t:unversioned:") for ln in lines)


def test_a_missing_grandparent_is_named_and_the_parent_used(archive: Path) -> None:
    with open_archive(archive) as a:
        found = closure(a, MAVEN, ("t", "kid", "1"))
    assert found.root_pom == "t/kid/1/kid-1.pom" and found.root_file == "t/kid/1/kid-1.jar"
    assert [(m.coordinates, m.what, m.reason, m.via) for m in found.missing] == [
        ("t:top:1", "parent", "no POM in the archive", "t:mid:1")]
    assert {r.artifact_id for r in found.resolved} == {"dep", "leaf"}  # leaf: from t:mid:1
    assert "t/mid/1/mid-1.pom" in found.poms


def test_a_missing_bom_is_named_and_the_rest_resolved(archive: Path) -> None:
    with open_archive(archive) as a:
        found = closure(a, MAVEN, ("t", "boms", "1"))
    assert found.root_pom == "t/boms/1/boms-1.pom"
    assert [(m.coordinates, m.what, m.via) for m in found.missing] == [
        ("t:nobom:1", "import", "t:boms:1")]
    assert {r.artifact_id for r in found.resolved} == {"dep", "leaf"}


def test_a_missing_pom_is_still_no_pom(archive: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["maven", str(archive), "deps", "t:nothere:1"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "t:nothere:1  (no POM)"
    assert "missing: t:nothere:1 (pom): no POM in the archive" in out
