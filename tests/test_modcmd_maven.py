"""``znippy-sql maven ...``: version order, lookup, versions, pom, deps and extract-closure.

Expectations come from elsewhere: Maven's own ``ComparableVersion`` and resolver (Maven 3.8's
jars in /usr/share/maven/lib, run by ``tests/data/maven/MavenDeps.java``), a recording of that
resolver over the fixture in ``tests/data/maven`` (README there), and XPath over the POM files
on disk. The real ``~/.m2/repository`` of this machine is archived and checked where it exists.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from znippy_sql import modules, open_archive
from znippy_sql.cli import main
from znippy_sql.modules.maven import version as mv
from znippy_sql.modules.maven.commands import closure
from znippy_sql.modules.maven.model import Environment

DATA = Path(__file__).parent / "data" / "maven"
FIXTURE = DATA / "repository"
MAVEN_LIB = Path("/usr/share/maven/lib")
M2 = Path.home() / ".m2" / "repository"
DEBIAN_REPO = Path("/usr/share/maven-repo")
MAVEN = modules.by_name("maven")


# -- helpers: Maven itself, archives, the tree as Maven prints it ----------------------------
def _need_maven() -> None:
    if shutil.which("java") is None:
        pytest.skip("no java on this machine: the comparison with Maven's own resolver and "
                    "ComparableVersion needs a JDK (Debian: default-jdk-headless)")
    if not glob.glob(str(MAVEN_LIB / "maven-resolver-provider*.jar")):
        pytest.skip(f"no Maven libraries in {MAVEN_LIB}: the comparison with Maven's own "
                    "resolver needs them (Debian package maven)")


def maven_says(repo: Path, coords: list[str]) -> tuple[str, dict[str, dict]]:
    """Maven's resolver over ``repo``: java.version it ran with, and per root its tree
    lines and problems."""
    _need_maven()
    out = subprocess.run(["java", "-cp", f"{MAVEN_LIB}/*", str(DATA / "MavenDeps.java"),
                          str(repo), "-"], input="\n".join(coords) + "\n",
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return parse_recording(out)


def parse_recording(text: str) -> tuple[str, dict[str, dict]]:
    jdk, roots, cur = "17", {}, None
    for line in text.splitlines():
        if line.startswith("@ java.version="):
            jdk = line.split("=", 1)[1]
        elif line.startswith("# "):
            cur = roots[line[2:]] = {"lines": [], "problems": []}
        elif line.startswith("!"):
            cur["problems"].append(line[2:])
        elif line.strip():
            cur["lines"].append(line)
    return jdk, roots


def tree_lines(found) -> list[str]:
    return [f"{r.depth} {r.group_id}:{r.artifact_id}:{r.extension}:{r.classifier}:{r.version}"
            f" {r.scope} {str(r.optional).lower()}" for r in found.resolved]


def archive_of(src: Path, out: Path) -> Path:
    assert main(["create", str(src), "-o", str(out), "--pkg-type", "auto"]) == 0
    return out


def pom_coords(path: Path) -> tuple[str, str, str]:
    """groupId, artifactId, version of a POM by XPath (parent's where the POM has none)."""
    root = ET.parse(path).getroot()

    def text(xpath: str) -> str | None:
        value = root.findtext(xpath)
        return value.strip() if value else None
    return (text("{*}groupId") or text("{*}parent/{*}groupId"), text("{*}artifactId"),
            text("{*}version") or text("{*}parent/{*}version"))


@pytest.fixture(scope="module")
def fixture_archive(tmp_path_factory) -> Path:
    return archive_of(FIXTURE, tmp_path_factory.mktemp("fixture") / "fixture.znippy")


# -- ComparableVersion ---------------------------------------------------------------------
def test_version_order_of_the_issue() -> None:
    chain = ["1.0-alpha-1", "1.0-beta", "1.0-rc1", "1.0", "1.0-sp1"]
    assert mv.sort_versions(reversed(chain)) == chain
    assert all(mv.compare(a, b) < 0 for a, b in zip(chain, chain[1:]))
    assert mv.compare("1.10", "1.9") > 0
    assert mv.sort_versions(["1.10", "1.9", "1.2", "1.11-SNAPSHOT", "1.11"]) == \
        ["1.2", "1.9", "1.10", "1.11-SNAPSHOT", "1.11"]


@pytest.mark.parametrize("a,b", [("1", "1.0.0"), ("1.0", "1-ga"), ("1.0", "1.0-final"),
                                  ("1.0", "1.0.RELEASE"), ("1.0a1", "1.0-alpha-1"),
                                  ("1-cr1", "1-rc1"), ("1.0m2", "1.0-milestone-2"),
                                  ("1.0.0.X1", "1-x-1")])
def test_equal_versions(a: str, b: str) -> None:
    assert mv.compare(a, b) == 0 and mv.canonical(a) == mv.canonical(b)


@pytest.mark.parametrize("lower,higher", [
    ("1.0-SNAPSHOT", "1.0"), ("1.0-rc1", "1.0-SNAPSHOT"), ("1.0-sp1", "1.0-abc"),
    ("1.0-abc", "1.0-xyz"), ("1-1", "1.1"), ("1-sp", "1-1"), ("1.0.0.X1", "1.0.0-X2"),
    ("2.0.0-M1", "2.0.0-RC1"), ("9", "10"), ("1.0-alpha-1", "1.0-alpha-2"),
])
def test_ordered_versions(lower: str, higher: str) -> None:
    assert mv.compare(lower, higher) < 0 < mv.compare(higher, lower)


def test_ranges() -> None:
    assert mv.in_range("1.5", mv.parse_range("[1.0,2.0)"))
    assert not mv.in_range("2.0", mv.parse_range("[1.0,2.0)"))
    assert mv.in_range("2.0", mv.parse_range("(,1.0],[1.2,)"))
    assert not mv.in_range("1.1", mv.parse_range("(,1.0],[1.2,)"))
    assert mv.in_range("1.2", mv.parse_range("[1.2]")) and not mv.in_range("1.3",
                                                                            mv.parse_range("[1.2]"))
    with pytest.raises(ValueError):
        mv.parse_range("[1.0")


@pytest.mark.slow
def test_version_order_is_mavens() -> None:
    """Our order of every version on this machine (and tricky ones) is ComparableVersion's."""
    _need_maven()
    jar = next(iter(glob.glob(str(MAVEN_LIB / "maven-artifact*.jar"))), None)
    if jar is None:
        pytest.skip(f"no maven-artifact jar in {MAVEN_LIB} (Debian package "
                    "libmaven3-core-java): ComparableVersion is the oracle")
    found = {p.parent.name for p in FIXTURE.rglob("*.pom")}
    if M2.is_dir():
        found |= {p.parent.name for p in M2.rglob("*.pom")}
    found |= {"1.0-alpha-1", "1.0-beta", "1.0-rc1", "1.0", "1.0-sp1", "1.9", "1.10", "1-ga",
              "1.0.0.X1", "1.0-xyz-1", "1..2", "1--1", "2.0-SNAPSHOT", "1.0.RELEASE"}
    ordered = mv.sort_versions(found)
    out = subprocess.run(["java", "-cp", jar,
                          "org.apache.maven.artifact.versioning.ComparableVersion", *ordered],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    verdicts = [ln.split()[1] for ln in out if ln.startswith("   ")]
    assert len(verdicts) == len(ordered) - 1
    assert set(verdicts) <= {"<", "=="}, [
        (a, v, b) for a, v, b in zip(ordered, verdicts, ordered[1:]) if v not in ("<", "==")]
    canon = dict(ln.split(". ", 1)[1].split(" -> ", 1) for ln in out
                 if ln[:1].isdigit() and " -> " in ln)
    assert {v: c.split(";")[0] for v, c in canon.items()} == \
        {v: mv.canonical(v) for v in ordered}


# -- the fixture of real POMs --------------------------------------------------------------
def test_fixture_deps_are_what_maven_recorded(fixture_archive: Path) -> None:
    jdk, recorded = parse_recording((DATA / "expected-deps.txt").read_text())
    assert len(recorded) == 26
    with open_archive(fixture_archive) as a:
        for root, want in recorded.items():
            found = closure(a, MAVEN, tuple(root.split(":")), env=Environment(jdk=jdk))
            assert tree_lines(found) == want["lines"], root


@pytest.mark.slow
def test_fixture_recording_is_mavens_answer() -> None:
    _, recorded = parse_recording((DATA / "expected-deps.txt").read_text())
    _, now = maven_says(FIXTURE, list(recorded))
    assert now == recorded


def test_fixture_versions_and_lookup_against_disk(fixture_archive: Path, capsys) -> None:
    by_ga: dict[tuple[str, str], set[str]] = {}
    for p in FIXTURE.rglob("*.pom"):
        g, a, v = pom_coords(p)
        by_ga.setdefault((g, a), set()).add(v)
    for (g, a), versions in by_ga.items():
        assert main(["maven", str(fixture_archive), "versions", f"{g}:{a}", "--json"]) == 0
        got = json.loads(capsys.readouterr().out)
        assert [r["version"] for r in got["versions"]] == mv.sort_versions(versions)
        assert all(r["pom"] and r["files"] == 1 for r in got["versions"])
    assert main(["maven", str(fixture_archive), "versions", "org.codehaus.plexus:plexus-utils"]) == 0
    assert capsys.readouterr().out == "3.3.0\n4.0.0\n"
    pom = FIXTURE / "org/codehaus/plexus/plexus-utils/4.0.0/plexus-utils-4.0.0.pom"
    assert main(["maven", str(fixture_archive), "lookup",
                 "org.codehaus.plexus:plexus-utils:4.0.0", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert [(f["relative_path"], f["size"], f["extension"]) for f in files] == \
        [(str(pom.relative_to(FIXTURE)), pom.stat().st_size, "pom")]
    assert main(["maven", str(fixture_archive), "lookup", "org.codehaus.plexus:plexus-utils"]) == 0
    assert capsys.readouterr().out.count("plexus-utils-") == 2


def test_pom_is_the_stored_bytes(fixture_archive: Path, capsysbinary) -> None:
    pom = FIXTURE / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.pom"
    assert main(["maven", str(fixture_archive), "pom", "org.slf4j:slf4j-api:1.7.36"]) == 0
    assert capsysbinary.readouterr().out == pom.read_bytes()
    assert main(["maven", str(fixture_archive), "pom", "org.slf4j:slf4j-api:9"]) == 1
    assert b"no POM for org.slf4j:slf4j-api:9" in capsysbinary.readouterr().err


def test_direct_deps_are_the_poms_dependencies(fixture_archive: Path) -> None:
    """plexus-build-api 1.2.0 declares literal coordinates: XPath gives its direct deps."""
    pom = FIXTURE / "org/codehaus/plexus/plexus-build-api/1.2.0/plexus-build-api-1.2.0.pom"
    declared = [":".join(d.findtext(f"{{*}}{k}") for k in ("groupId", "artifactId", "version"))
                for d in ET.parse(pom).getroot().findall("{*}dependencies/{*}dependency")]
    with open_archive(fixture_archive) as a:
        found = closure(a, MAVEN, ("org.codehaus.plexus", "plexus-build-api", "1.2.0"))
    assert [f"{r.group_id}:{r.artifact_id}:{r.version}" for r in found.resolved] == declared
    # the *:* exclusions keep sisu-plexus's and the sonatype API's own dependencies out
    assert all(r.depth == 1 for r in found.resolved)
    # the parent's import-scope BOM and the parents were read
    assert "org/junit/junit-bom/5.9.3/junit-bom-5.9.3.pom" in found.poms
    assert "org/sonatype/forge/forge-parent/5/forge-parent-5.pom" in found.poms


def test_missing_coordinates_are_listed(fixture_archive: Path, capsys) -> None:
    root = "org.eclipse.sisu:org.eclipse.sisu.plexus:0.9.0.M2"
    assert main(["maven", str(fixture_archive), "deps", root, "--json"]) == 1
    got = json.loads(capsys.readouterr().out)
    assert not got["complete"]
    poms = {m["coordinates"] for m in got["missing"] if m["what"] == "pom"}
    assert poms == {"com.google.inject:guice:4.0", "org.osgi:osgi.core:5.0.0",
                    "ch.qos.logback:logback-classic:1.1.11"}
    # the fixture has POMs only: every other artifact lacks its jar
    jars = {m["coordinates"] for m in got["missing"] if m["what"] == "artifact"}
    assert jars == {f"{r['group_id']}:{r['artifact_id']}:{r['version']}"
                    for r in got["resolved"]} - poms | {root}
    assert main(["maven", str(fixture_archive), "deps", root]) == 1
    out, err = capsys.readouterr()
    assert "missing: com.google.inject:guice:4.0 (pom): no POM in the archive" in out
    assert err.strip().count("\n") == 0 and "coordinates missing" in err


def test_scope_and_depth_filters(fixture_archive: Path) -> None:
    gav = ("org.eclipse.sisu", "org.eclipse.sisu.plexus", "0.9.0.M2")
    with open_archive(fixture_archive) as a:
        every = closure(a, MAVEN, gav)
        runtime = closure(a, MAVEN, gav, scope="runtime")
        compile_ = closure(a, MAVEN, gav, scope="compile")
        direct = closure(a, MAVEN, gav, depth=1)
    assert {r.scope for r in every.resolved} == {"compile", "provided", "test"}
    assert [r for r in every.resolved if r.scope in ("compile", "runtime")] == runtime.resolved
    assert [r for r in every.resolved if r.scope in ("compile", "provided")] == \
        compile_.resolved
    assert [r for r in every.resolved if r.depth == 1] == direct.resolved


def test_extract_closure_is_an_offline_repository(fixture_archive: Path, tmp_path: Path,
                                                  capsys) -> None:
    root = "org.codehaus.plexus:plexus-build-api:1.2.0"
    out = tmp_path / "closure"
    assert main(["maven", str(fixture_archive), "extract-closure", root, "-o", str(out),
                 "--json"]) == 1  # the jars are not in the fixture
    got = json.loads(capsys.readouterr().out)
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert got["extracted"] == len(written) == 12
    for p in written:
        assert (out / p).read_bytes() == (FIXTURE / p).read_bytes()
    # the extracted directory resolves to the same closure as the whole fixture
    again = archive_of(out, tmp_path / "again.znippy")
    with open_archive(fixture_archive) as a, open_archive(again) as b:
        gav = tuple(root.split(":"))
        assert tree_lines(closure(b, MAVEN, gav)) == tree_lines(closure(a, MAVEN, gav))


def test_bad_coordinates_are_usage_errors(fixture_archive: Path, capsys) -> None:
    for argv in (["lookup", "org.slf4j"], ["versions", "a:b:c"], ["deps", "a::c"],
                 ["deps", "a:b:c", "--depth", "-1"], ["extract-closure", "a:b:c"]):
        with pytest.raises(SystemExit) as stop:
            main(["maven", str(fixture_archive), *argv])
        assert stop.value.code == 2
        assert "usage:" in capsys.readouterr().err
    assert main(["maven", str(fixture_archive.parent / "nope.znippy"), "versions", "a:b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("znippy-sql: error:") and "nope.znippy" in err


# -- resolution rules on a repository written here -----------------------------------------
def _pom(g: str, a: str, v: str, *, deps: str = "", managed: str = "", parent: str = "",
         props: str = "", extra: str = "", packaging: str = "jar") -> str:
    p = ""
    if parent:
        pg, pa_, pv = parent.split(":")
        p = f"<parent><groupId>{pg}</groupId><artifactId>{pa_}</artifactId>" \
            f"<version>{pv}</version></parent>"
    return (f'<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
            f'</modelVersion>{p}<groupId>{g}</groupId><artifactId>{a}</artifactId>'
            f'<version>{v}</version><packaging>{packaging}</packaging>'
            f'<properties>{props}</properties>'
            f'<dependencyManagement><dependencies>{managed}</dependencies>'
            f'</dependencyManagement><dependencies>{deps}</dependencies>{extra}</project>')


def _dep(gav: str, **kw: str) -> str:
    g, a, *v = gav.split(":")
    body = f"<groupId>{g}</groupId><artifactId>{a}</artifactId>"
    body += f"<version>{v[0]}</version>" if v else ""
    for k, val in kw.items():
        if k == "exclude":
            body += "<exclusions>" + "".join(
                f"<exclusion><groupId>{x.split(':')[0]}</groupId><artifactId>"
                f"{x.split(':')[1]}</artifactId></exclusion>" for x in val.split(",")) + \
                "</exclusions>"
        else:
            body += f"<{k}>{val}</{k}>"
    return f"<dependency>{body}</dependency>"


RULES = {
    "t:parent:1": _pom("t", "parent", "1", packaging="pom",
                       props="<lib.version>2.0</lib.version>",
                       managed=_dep("t:lib:${lib.version}") + _dep("t:bom:1", type="pom",
                                                                   scope="import"),
                       deps=_dep("t:inherited:${project.version}")),
    "t:bom:1": _pom("t", "bom", "1", packaging="pom", managed=_dep("t:deep:5")),
    "t:app:1": _pom("t", "app", "1", parent="t:parent:1", deps="".join([
        _dep("t:lib"), _dep("t:a:1"), _dep("t:b:1", scope="runtime"), _dep("t:c:1", scope="test"),
        _dep("t:opt:1", optional="true"), _dep("t:prov:1", scope="provided"),
        _dep("t:reloc:1")])),
    "t:a:1": _pom("t", "a", "1", deps="".join([
        _dep("t:lib:1.0"), _dep("t:deep:1"), _dep("t:x:1", exclude="t:y"),
        _dep("t:opt2:1", optional="true"), _dep("t:test2:1", scope="test"), _dep("t:shared:1")]),
        extra="<profiles><profile><id>d</id><activation><activeByDefault>true</activeByDefault>"
              "</activation><dependencies>" + _dep("t:pdef:1") + "</dependencies></profile>"
              "<profile><id>j</id><activation><jdk>[11,)</jdk></activation><dependencies>"
              + _dep("t:pjdk:1") + "</dependencies></profile></profiles>"),
    "t:b:1": _pom("t", "b", "1", deps=_dep("t:shared:2") + _dep("t:w:1")),
    "t:c:1": _pom("t", "c", "1", deps=_dep("t:ct:1")),
    "t:prov:1": _pom("t", "prov", "1", deps=_dep("t:pp:1")),
    "t:deep:5": _pom("t", "deep", "5", deps=_dep("t:w:1")),
    "t:deep:1": _pom("t", "deep", "1", deps=_dep("t:never:1")),
    "t:x:1": _pom("t", "x", "1", deps=_dep("t:y:1") + _dep("t:z:1")),
    "t:reloc:1": _pom("t", "reloc", "1", extra="<distributionManagement><relocation>"
                      "<artifactId>moved</artifactId></relocation></distributionManagement>"),
    **{k: _pom(*k.split(":")) for k in (
        "t:lib:2.0", "t:lib:1.0", "t:inherited:1", "t:opt:1", "t:shared:1", "t:shared:2",
        "t:w:1", "t:ct:1", "t:pp:1", "t:y:1", "t:z:1", "t:pjdk:1", "t:pdef:1", "t:moved:1",
        "t:never:1", "t:opt2:1", "t:test2:1", "t:ranged:1.0", "t:ranged:1.5", "t:ranged:2.0")},
    "t:broken:1": _pom("t", "broken", "1", deps="".join([
        _dep("t:nover"), _dep("t:prop:${undefined.prop}"), _dep("t:orphan:1"),
        _dep("t:bomless:1"), _dep("t:ranged:[1.0,2.0)"), _dep("t:ghost:1"),
        _dep("t:junk:1")])),
    "t:junk:1": "<project><dependencies>",
    "t:orphan:1": _pom("t", "orphan", "1", parent="t:gone:1"),
    "t:bomless:1": _pom("t", "bomless", "1", managed=_dep("t:gonebom:1", type="pom",
                                                          scope="import")),
}


@pytest.fixture(scope="module")
def rules_repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rules")
    for gav, text in RULES.items():
        g, a, v = gav.split(":")
        d = root / g / a / v
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{a}-{v}.pom").write_text(text)
        if gav not in ("t:z:1", "t:parent:1", "t:bom:1"):
            (d / f"{a}-{v}.jar").write_bytes(b"PK\x05\x06" + bytes(18))
    return root


def test_resolution_rules(rules_repo: Path, tmp_path: Path) -> None:
    with open_archive(archive_of(rules_repo, tmp_path / "r.znippy")) as a:
        found = closure(a, MAVEN, ("t", "app", "1"))
    got = {r.artifact_id: r for r in found.resolved}
    assert got["lib"].version == "2.0" and got["lib"].depth == 1  # managed via a property
    assert "inherited" in got  # a parent's dependency, ${project.version} of the child
    assert got["deep"].version == "5"  # the root's BOM manages depth 2
    assert "never" not in got  # deep:1's dependency: deep:1 never got there
    assert "y" not in got and got["z"].depth == 3  # excluded below x, its sibling stays
    assert "opt2" not in got and "test2" not in got and got["opt"].optional
    assert got["shared"].version == "1" and got["shared"].depth == 2  # first at depth 2
    assert got["pjdk"].depth == 2 and "pdef" not in got  # jdk [11,) beats activeByDefault
    assert got["ct"].scope == "test" and got["pp"].scope == "provided"  # propagated
    assert got["w"].scope == "compile"  # runtime via b at depth 2, compile via deep at 3
    assert "moved" in got and "reloc" not in got  # relocation followed
    assert {m.coordinates: m.what for m in found.missing} == {"t:z:1": "artifact"}


def test_broken_coordinates_say_why(rules_repo: Path, tmp_path: Path) -> None:
    with open_archive(archive_of(rules_repo, tmp_path / "r.znippy")) as a:
        found = closure(a, MAVEN, ("t", "broken", "1"))
    why = {m.coordinates: (m.what, m.reason) for m in found.missing}
    assert why["t:nover:"] == ("version", "no version, and none managed")
    assert why["t:prop:${undefined.prop}"] == ("property", "${undefined.prop} is not defined")
    assert why["t:orphan:1"][0] == "parent" and "t:gone:1" in why["t:orphan:1"][1]
    assert why["t:bomless:1"][0] == "import" and "t:gonebom:1" in why["t:bomless:1"][1]
    assert why["t:ghost:1"] == ("pom", "no POM in the archive")
    assert why["t:junk:1"][0] == "pom" and "t/junk/1/junk-1.pom: not XML" in why["t:junk:1"][1]
    ranged = next(r for r in found.resolved if r.artifact_id == "ranged")
    assert ranged.version == "1.5"  # the highest version here inside [1.0,2.0)


@pytest.mark.slow
def test_resolution_rules_are_mavens(rules_repo: Path, tmp_path: Path) -> None:
    jdk, said = maven_says(rules_repo, ["t:app:1"])
    assert said["t:app:1"]["problems"] == []
    with open_archive(archive_of(rules_repo, tmp_path / "r.znippy")) as a:
        found = closure(a, MAVEN, ("t", "app", "1"), env=Environment(jdk=jdk))
    assert tree_lines(found) == said["t:app:1"]["lines"]


# -- this machine's Maven repositories -----------------------------------------------------
@pytest.fixture(scope="module")
def m2_archive(tmp_path_factory) -> Path:
    if not M2.is_dir() or not any(M2.rglob("*.pom")):
        pytest.skip(f"no local Maven repository with POMs at {M2} on this machine")
    return archive_of(M2, tmp_path_factory.mktemp("m2") / "m2.znippy")


def _m2_roots() -> list[str]:
    roots = []
    for p in sorted(M2.rglob("*.pom")):
        rel = p.relative_to(M2).parts
        roots.append(f"{'.'.join(rel[:-3])}:{rel[-3]}:{rel[-2]}")
    return roots


@pytest.mark.slow
def test_m2_versions_and_lookup_against_disk(m2_archive: Path, capsys) -> None:
    artifacts = sorted({p.parent.parent for p in M2.rglob("*.pom")})
    with open_archive(m2_archive) as a:
        from znippy_sql.modules.maven.commands import lookup, versions
        for art in artifacts:
            g, aid = ".".join(art.relative_to(M2).parts[:-1]), art.name
            on_disk = {v.name for v in art.iterdir() if v.is_dir() and any(v.glob("*.pom"))}
            got = versions(a, MAVEN, g, aid)
            assert {r["version"] for r in got} >= on_disk, art
            assert [r["version"] for r in got] == mv.sort_versions(r["version"] for r in got)
        art = artifacts[len(artifacts) // 2]
        g, aid = ".".join(art.relative_to(M2).parts[:-1]), art.name
        v = sorted(d.name for d in art.iterdir() if d.is_dir())[0]
        files = lookup(a, MAVEN, (g, aid, v))
    want = sorted((str(f.relative_to(M2)), f.stat().st_size) for f in (art / v).iterdir()
                  if f.is_file() and f.name.startswith(f"{aid}-{v}"))
    assert sorted((f["relative_path"], f["size"]) for f in files) == want


@pytest.mark.slow
def test_m2_deps_are_mavens(m2_archive: Path) -> None:
    """Every 12th POM of ~/.m2 as a root: the tree Maven's resolver prints, line for line;
    where Maven fails (a parent or BOM not here), we report the closure incomplete."""
    roots = _m2_roots()[::12]
    jdk, said = maven_says(M2, roots)
    compared = 0
    with open_archive(m2_archive) as a:
        for root in roots:
            found = closure(a, MAVEN, tuple(root.split(":")), env=Environment(jdk=jdk))
            problems = said[root]["problems"]
            if not problems:
                assert tree_lines(found) == said[root]["lines"], root
                compared += 1
            elif not any("[" in p or "(" in p for p in problems):  # ranges: Maven offline
                assert not found.complete, root                # has no metadata to use
    assert compared > len(roots) // 2


@pytest.mark.slow
def test_debian_maven_core_closure_is_mavens(tmp_path: Path) -> None:
    """maven-core's deep closure in Debian's /usr/share/maven-repo, against Maven itself."""
    pom = DEBIAN_REPO / "org/apache/maven/maven-core/3.x/maven-core-3.x.pom"
    if not pom.exists():
        pytest.skip(f"{pom} is not on this machine (Debian package libmaven3-core-java)")
    src = tmp_path / "repo"
    shutil.copytree(DEBIAN_REPO, src, symlinks=False, ignore_dangling_symlinks=True)
    root = "org.apache.maven:maven-core:3.x"
    jdk, said = maven_says(src, [root])
    with open_archive(archive_of(src, tmp_path / "debian.znippy")) as a:
        found = closure(a, MAVEN, tuple(root.split(":")), env=Environment(jdk=jdk))
    assert max(r.depth for r in found.resolved) >= 3
    assert tree_lines(found) == said[root]["lines"]


def test_maven_commands_are_listed(capsys) -> None:
    assert main(["modules", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert [c["name"] for c in listed["maven"]["commands"]] == \
        ["lookup", "versions", "pom", "deps", "extract-closure"]


def test_environment_defaults_to_this_machine() -> None:
    env = Environment()
    assert env.jdk == "17" and env.os_name == os.uname().sysname.lower()


def test_pom_reader_takes_what_mavens_lenient_reader_takes() -> None:
    from znippy_sql.modules.maven import pom

    got = pom.parse(b"<project><name>J&oslash;rgen &amp; co</name><groupId> g </groupId>"
                    b"<artifactId>a</artifactId><version>1</version></project>")
    assert (got.group_id, got.artifact_id, got.version) == ("g", "a", "1")  # trimmed
    with pytest.raises(pom.PomError, match="not <project>"):
        pom.parse(b"<metadata/>")
    with pytest.raises(pom.PomError, match="not XML"):
        pom.parse(b"<project>")
