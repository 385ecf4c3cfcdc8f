"""Package-type modules: parsers on real-world names, the registry, auto grouping end to end."""

from __future__ import annotations

import json
import sys
import textwrap

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from znippy_sql import Entry, GroupKey, ZnippyError, modules, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.modules import cargo, maven, npm, pypi

NO_READ = lambda: pytest.fail("read() called for a file whose name says it all")  # noqa: E731


def _cols(module, path, data=b""):
    return dict(module.columns(path, lambda: data))


# -- maven -------------------------------------------------------------------------------------
M = maven.MavenModule()


@pytest.mark.parametrize("path,group,artifact,version,classifier,packaging,ext", [
    ("org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.jar",
     "org.slf4j", "slf4j-api", "2.0.9", None, "jar", "jar"),
    ("org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9-sources.jar",
     "org.slf4j", "slf4j-api", "2.0.9", "sources", "jar", "jar"),
    ("io/netty/netty-transport-native-epoll/4.1.100.Final/"
     "netty-transport-native-epoll-4.1.100.Final-linux-x86_64.jar",
     "io.netty", "netty-transport-native-epoll", "4.1.100.Final", "linux-x86_64", "jar", "jar"),
    ("org/apache/maven/apache-maven/3.9.6/apache-maven-3.9.6-bin.tar.gz",
     "org.apache.maven", "apache-maven", "3.9.6", "bin", "tar.gz", "tar.gz"),
    ("com/acme/app/1.2-SNAPSHOT/app-1.2-SNAPSHOT.jar",
     "com.acme", "app", "1.2-SNAPSHOT", None, "jar", "jar"),
    ("com/acme/app/1.2-SNAPSHOT/app-1.2-20240105.101530-7-javadoc.jar",
     "com.acme", "app", "1.2-SNAPSHOT", "javadoc", "jar", "jar"),
    ("junit/junit/4.13.2/junit-4.13.2.jar.sha1",
     "junit", "junit", "4.13.2", None, "jar", "jar.sha1"),
    ("com/google/guava/guava/33.0.0-jre/guava-33.0.0-jre.jar.asc.md5",
     "com.google.guava", "guava", "33.0.0-jre", None, "jar", "jar.asc.md5"),
    ("org/jetbrains/kotlin/kotlin-stdlib/1.9.22/kotlin-stdlib-1.9.22.module",
     "org.jetbrains.kotlin", "kotlin-stdlib", "1.9.22", None, "module", "module"),
])
def test_maven_artifacts(path, group, artifact, version, classifier, packaging, ext):
    assert M.claims(path)
    assert dict(M.columns(path, NO_READ)) == {
        "maven_group_id": group, "maven_artifact_id": artifact, "maven_version": version,
        "maven_classifier": classifier, "maven_packaging": packaging, "maven_extension": ext}


@pytest.mark.parametrize("path", [
    "README.md",
    "src/main/java/App.java",
    "slf4j-api/2.0.9/slf4j-api-2.0.9.jar",  # no group directory
    "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.8.jar",  # version disagrees with its directory
    "org/slf4j/slf4j-api/2.0.9/other-2.0.9.jar",  # artifact disagrees
    "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9",  # no extension
    "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9-sources",  # classifier, no extension
    "org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.",
    "com/acme/app/1.2-SNAPSHOT/app-1.2-2024.jar",  # not a snapshot time stamp
    "@babel/core/-/core-7.23.0.tgz",
])
def test_maven_rejects(path):
    assert not M.claims(path)
    assert dict(M.columns(path, NO_READ)) == {}


POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <parent><groupId>org.acme.parent</groupId><artifactId>p</artifactId><version>7</version></parent>
  {group}<artifactId>widget</artifactId>{version}{packaging}
</project>"""


def test_maven_pom_coordinates_come_from_the_pom():
    path = "org/acme/widget/7/widget-7.pom"
    full = POM.format(group="<groupId>org.acme</groupId>", version="<version>7</version>",
                      packaging="<packaging>war</packaging>").encode()
    assert _cols(M, path, full) == {
        "maven_group_id": "org.acme", "maven_artifact_id": "widget", "maven_version": "7",
        "maven_classifier": None, "maven_packaging": "war", "maven_extension": "pom"}
    # groupId and version inherited from <parent>; packaging defaults to jar
    inherited = POM.format(group="", version="", packaging="").encode()
    cols = _cols(M, "x/y/widget/7/widget-7.pom", inherited)
    assert (cols["maven_group_id"], cols["maven_version"], cols["maven_packaging"]) == \
        ("org.acme.parent", "7", "jar")
    # a ${property} is not a coordinate: the path's value stays
    prop = POM.format(group="", version="<version>${revision}</version>", packaging="").encode()
    assert _cols(M, "x/y/widget/7/widget-7.pom", prop)["maven_version"] == "7"


def test_maven_unreadable_pom_falls_back_to_the_path():
    cols = _cols(M, "org/acme/widget/7/widget-7.pom", b"<project><unclosed>")
    assert cols["maven_group_id"] == "org.acme" and cols["maven_packaging"] == "pom"


def test_maven_metadata_files():
    art = b"""<metadata><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId>
      <versioning><latest>2.0.9</latest></versioning></metadata>"""
    path = "org/slf4j/slf4j-api/maven-metadata.xml"
    assert M.claims(path)
    assert _cols(M, path, art) == {
        "maven_group_id": "org.slf4j", "maven_artifact_id": "slf4j-api", "maven_version": None,
        "maven_classifier": None, "maven_packaging": "maven-metadata",
        "maven_extension": "maven-metadata.xml"}
    snap = b"""<metadata><groupId>com.acme</groupId><artifactId>app</artifactId>
      <version>1.2-SNAPSHOT</version></metadata>"""
    cols = _cols(M, "com/acme/app/1.2-SNAPSHOT/maven-metadata.xml", snap)
    assert (cols["maven_artifact_id"], cols["maven_version"]) == ("app", "1.2-SNAPSHOT")
    plugins = b"<metadata><plugins><plugin><prefix>x</prefix></plugin></plugins></metadata>"
    cols = _cols(M, "org/apache/maven/plugins/maven-metadata.xml", plugins)
    assert (cols["maven_group_id"], cols["maven_artifact_id"]) == \
        ("org.apache.maven.plugins", None)
    sidecar = "org/slf4j/slf4j-api/maven-metadata.xml.sha1"
    assert _cols(M, sidecar, b"")["maven_extension"] == "maven-metadata.xml.sha1"
    assert M.claims("org/slf4j/slf4j-api/maven-metadata-central.xml")
    assert not M.claims("org/slf4j/slf4j-api/maven-metadata.json")


# -- pypi --------------------------------------------------------------------------------------
P = pypi.PypiModule()


@pytest.mark.parametrize("name,expect", [
    ("requests-2.31.0-py3-none-any.whl",
     ("requests", "2.31.0", None, "py3", "none", "any", "wheel")),
    ("numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
     ("numpy", "1.26.4", None, "cp311", "cp311", "manylinux_2_17_x86_64.manylinux2014_x86_64",
      "wheel")),
    ("six-1.16.0-py2.py3-none-any.whl", ("six", "1.16.0", None, "py2.py3", "none", "any", "wheel")),
    ("Django-5.0.1-py3-none-any.whl", ("django", "5.0.1", None, "py3", "none", "any", "wheel")),
    ("typing_extensions-4.9.0-py3-none-any.whl",
     ("typing-extensions", "4.9.0", None, "py3", "none", "any", "wheel")),
    ("torch-2.1.0+cu121-cp310-cp310-linux_x86_64.whl",
     ("torch", "2.1.0+cu121", None, "cp310", "cp310", "linux_x86_64", "wheel")),
    ("pkg-1.0-1build2-py3-none-any.whl", ("pkg", "1.0", "1build2", "py3", "none", "any", "wheel")),
    ("cryptography-42.0.0-cp39-abi3-macosx_10_12_universal2.whl",
     ("cryptography", "42.0.0", None, "cp39", "abi3", "macosx_10_12_universal2", "wheel")),
    ("python-dateutil-2.8.2.tar.gz", ("python-dateutil", "2.8.2", None, None, None, None, "sdist")),
    ("zope.interface-6.1.tar.gz", ("zope-interface", "6.1", None, None, None, None, "sdist")),
    ("Flask_SQLAlchemy-3.1.1.tar.gz", ("flask-sqlalchemy", "3.1.1", None, None, None, None, "sdist")),
    ("backports.zoneinfo-0.2.1.zip", ("backports-zoneinfo", "0.2.1", None, None, None, None, "sdist")),
    ("pytest-8.0.0rc1.tar.gz", ("pytest", "8.0.0rc1", None, None, None, None, "sdist")),
    ("foo-bar-2-1.0.post1.tar.gz", ("foo-bar-2", "1.0.post1", None, None, None, None, "sdist")),
    ("legacy-1.0-1.tar.bz2", ("legacy", "1.0-1", None, None, None, None, "sdist")),
])
def test_pypi_names(name, expect):
    keys = ("pypi_name", "pypi_version", "pypi_build_tag", "pypi_python_tag", "pypi_abi_tag",
            "pypi_platform_tag", "pypi_kind")
    path = f"simple/x/{name}"
    assert P.claims(path)
    assert dict(P.columns(path, NO_READ)) == dict(zip(keys, expect))


@pytest.mark.parametrize("name", [
    "requests-2.31.0.whl",  # too few wheel parts
    "requests-2.31.0-py3-none-any-extra-x.whl",  # too many
    "pkg-1.0-build-py3-none-any.whl",  # build tag must start with a digit
    "requests-notaversion-py3-none-any.whl",
    "requests.tar.gz",  # no version
    "requests-latest.tar.gz",
    "-1.0.tar.gz",
    "foo-1.0.egg",
    "foo-1.0-py3-none-any.whl.metadata",
    "linux-6.1.tar.xz",
    "left-pad-1.3.0.tgz",
    "notes.txt",
])
def test_pypi_rejects(name):
    assert not P.claims(name)
    assert dict(P.columns(name, NO_READ)) == {}


# -- cargo -------------------------------------------------------------------------------------
C = cargo.CargoModule()


@pytest.mark.parametrize("path,name,version", [
    ("crates/serde/serde-1.0.195.crate", "serde", "1.0.195"),
    ("tokio-util-0.7.10.crate", "tokio-util", "0.7.10"),
    ("base64-0.21.5.crate", "base64", "0.21.5"),
    ("windows_x86_64_msvc-0.52.0.crate", "windows_x86_64_msvc", "0.52.0"),
    ("foo-bar-1.0.0-alpha.1.crate", "foo-bar", "1.0.0-alpha.1"),
    ("x-1.0.0-rc-1+build.5.crate", "x", "1.0.0-rc-1+build.5"),
    ("utf8-1-2.0.0.crate", "utf8-1", "2.0.0"),
])
def test_cargo_names(path, name, version):
    assert C.claims(path)
    assert dict(C.columns(path, NO_READ)) == {"cargo_name": name, "cargo_version": version}


@pytest.mark.parametrize("path", ["serde-1.0.crate", "serde-01.0.0.crate", "1serde-1.0.0.crate",
                                  "serde.crate", "serde-1.0.195.tar.gz", "serde-1.0.195.crate.sha"])
def test_cargo_rejects(path):
    assert not C.claims(path)


# -- npm ---------------------------------------------------------------------------------------
N = npm.NpmModule()


@pytest.mark.parametrize("path,name,version", [
    ("left-pad/-/left-pad-1.3.0.tgz", "left-pad", "1.3.0"),
    ("@babel/core/-/core-7.23.0.tgz", "@babel/core", "7.23.0"),
    ("storage/@types/node/node-20.11.5.tgz", "@types/node", "20.11.5"),
    ("lodash.merge-4.6.2.tgz", "lodash.merge", "4.6.2"),
    ("typescript-5.4.0-beta.tgz", "typescript", "5.4.0-beta"),
    ("babel-core-7.23.0.tgz", "babel-core", "7.23.0"),  # npm pack of @babel/core: scope lost
    ("@scope/other/-/pkg-1.0.0.tgz", "pkg", "1.0.0"),  # the scope names another package
])
def test_npm_names(path, name, version):
    assert N.claims(path)
    assert dict(N.columns(path, NO_READ)) == {"npm_name": name, "npm_version": version}


@pytest.mark.parametrize("path", ["left-pad-1.3.tgz", "left-pad.tgz", "left-pad-1.3.0.tar.gz",
                                  ".hidden-1.0.0.tgz", "node_modules/x/index.js"])
def test_npm_rejects(path):
    assert not N.claims(path)


# -- registry ------------------------------------------------------------------------------------
def test_builtin_registry_order_and_columns():
    found = modules.all_modules()
    assert [(m.name, m.pkg_type) for m in found] == [("maven", 1), ("cargo", 2), ("npm", 3),
                                                      ("pypi", 4)]
    for m in found:
        assert all(f.name.startswith(m.name + "_") and f.nullable for f in m.fields)
    assert modules.for_pkg_type(4).name == "pypi"
    assert modules.for_pkg_type(0) is None
    assert modules.claim("README") is None


#: a third-party module; the entry-point test installs this very source as a file
WIDGET_SOURCE = textwrap.dedent("""
    import pyarrow as pa

    class Widget:
        name = "widget"
        pkg_type = 9
        fields = (pa.field("widget_size", pa.int64()),)

        def claims(self, relative_path):
            return relative_path.endswith(".widget")

        def columns(self, relative_path, read):
            return {"widget_size": len(read())}
""")
_namespace: dict = {}
exec(WIDGET_SOURCE, _namespace)
_Widget = _namespace["Widget"]


def test_register_validates(monkeypatch):
    monkeypatch.setattr(modules, "_REGISTRY", dict(modules._REGISTRY))

    class Bad(_Widget):
        fields = (pa.field("size", pa.int64()),)

    with pytest.raises(ValueError, match="lacks its prefix"):
        modules.register(Bad())

    class Reserved(_Widget):
        name = "__lookup__"

    with pytest.raises(ValueError, match="identifier"):
        modules.register(Reserved())

    class Strict(_Widget):
        fields = (pa.field("widget_size", pa.int64(), nullable=False),)

    with pytest.raises(ValueError, match="nullable"):
        modules.register(Strict())
    with pytest.raises(ValueError, match="not a package-type module"):
        modules.register(object())


def test_entry_point_module_is_loaded(tmp_path, monkeypatch):
    """A third-party module announced in the ``znippy_sql.modules`` entry-point group."""
    (tmp_path / "widget_mod.py").write_text(WIDGET_SOURCE)
    dist = tmp_path / "widget_mod-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: widget-mod\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[znippy_sql.modules]\nwidget = widget_mod:Widget\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(modules, "_REGISTRY", {})
    monkeypatch.setattr(modules, "_LOADED", False)
    try:
        assert [m.name for m in modules.all_modules()] == ["maven", "cargo", "npm", "pypi",
                                                           "widget"]
        out = tmp_path / "w.znippy"
        write_archive(out, [Entry("a/b.widget", data=b"12345"), Entry("c.txt", data=b"c")],
                      pkg_type="auto", workers=1)
        with open_archive(out) as a:
            assert a.groups == [GroupKey(0, "", ""), GroupKey(9, "", "widget")]
            t = a.group_table(GroupKey(9, "", "widget"))
            assert t.column("widget_size").to_pylist() == [5]
    finally:
        sys.modules.pop("widget_mod", None)


def test_broken_entry_point_is_named(tmp_path, monkeypatch):
    dist = tmp_path / "broken-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[znippy_sql.modules]\nbroken = no_such_mod:X\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(modules, "_REGISTRY", {})
    monkeypatch.setattr(modules, "_LOADED", False)
    with pytest.raises(ZnippyError, match="entry point 'broken'"):
        modules.all_modules()
    with pytest.raises(ZnippyError, match="entry point 'broken'"):  # not silently skipped later
        modules.claim("x/y/z/z-1.0.jar")


# -- end to end: --pkg-type auto --------------------------------------------------------------------
POM_BYTES = (b'<project xmlns="http://maven.apache.org/POM/4.0.0"><groupId>org.acme</groupId>'
             b'<artifactId>widget</artifactId><version>7</version>'
             b'<packaging>bundle</packaging></project>')


def _mixed() -> list[Entry]:
    return [
        Entry("maven/org/acme/widget/7/widget-7.jar", data=b"PK jar bytes"),
        Entry("maven/org/acme/widget/7/widget-7.pom", data=POM_BYTES),
        Entry("maven/org/acme/widget/7/widget-7.jar.sha1", data=b"da39a3ee"),
        Entry("pypi/requests-2.31.0-py3-none-any.whl", data=b"wheel"),
        Entry("pypi/python-dateutil-2.8.2.tar.gz", data=b"sdist"),
        Entry("crates/serde-1.0.195.crate", data=b"crate"),
        Entry("npm/@babel/core/-/core-7.23.0.tgz", data=b"tgz"),
        Entry("README.md", data=b"# readme\n" * 100),
        Entry("src/lib.rs", data=b"fn main() {}\n"),
    ]


def test_auto_assigns_each_file_to_its_module(tmp_path):
    out = tmp_path / "auto.znippy"
    write_archive(out, _mixed(), pkg_type="auto", workers=1, repo="mirror")
    with open_archive(out) as a:
        assert a.groups == [GroupKey(0, "mirror", ""), GroupKey(1, "mirror", "maven"),
                            GroupKey(2, "mirror", "cargo"), GroupKey(3, "mirror", "npm"),
                            GroupKey(4, "mirror", "pypi")]
        mvn = a.group_table(GroupKey(1, "mirror", "maven"))
        names = mvn.schema.names
        assert names[8] == "inner_offset"  # packed small files (FORMAT §3), then the module's
        assert names[9:] == ["pkg_type", "maven_group_id", "maven_artifact_id", "maven_version",
                             "maven_classifier", "maven_packaging", "maven_extension"]
        rows = {r["relative_path"]: r for r in mvn.to_pylist()}
        pom = rows["maven/org/acme/widget/7/widget-7.pom"]
        assert (pom["pkg_type"], pom["maven_group_id"], pom["maven_packaging"]) == \
            (1, "org.acme", "bundle")
        assert rows["maven/org/acme/widget/7/widget-7.jar.sha1"]["maven_extension"] == "jar.sha1"
        # a group that starts under the repo directory: the group path is everything above
        assert rows["maven/org/acme/widget/7/widget-7.jar"]["maven_group_id"] == "maven.org.acme"
        raw = a.group_table(GroupKey(0, "mirror", ""))
        assert raw.schema.names == ["relative_path", "chunk_seq", "fdata_offset", "compressed",
                                    "uncompressed_size", "blob_offset", "blob_size", "checksum",
                                    "inner_offset"]
        py = a.group_table(GroupKey(4, "mirror", "pypi")).to_pylist()
        # rows in production order: the wheel's directory pack is placed when it closes
        assert sorted((r["pypi_name"], r["pypi_kind"]) for r in py) == [
            ("python-dateutil", "sdist"), ("requests", "wheel")]
        assert a.select(pkg_type="npm") == ["npm/@babel/core/-/core-7.23.0.tgz"]
        assert a.select(pkg_type="cargo") == ["crates/serde-1.0.195.crate"]
        idx = a.index(pkg_type="pypi")
        assert "pypi_version" in idx.schema.names
        report = a.extract(tmp_path / "x", pkg_type="pypi")
        assert report.files == 2
        assert sorted(p.name for p in (tmp_path / "x" / "pypi").iterdir()) == [
            "python-dateutil-2.8.2.tar.gz", "requests-2.31.0-py3-none-any.whl"]


def test_module_columns_only_on_chunk_zero(tmp_path):
    out = tmp_path / "chunks.znippy"
    big = bytes(range(256)) * 8
    write_archive(out, [Entry("serde-1.0.195.crate", data=big)], pkg_type="auto",
                  block_size=512, workers=1)
    with open_archive(out) as a:
        t = a.group_table(GroupKey(2, "", "cargo"))
    assert t.column("chunk_seq").to_pylist() == [0, 1, 2, 3]
    assert t.column("cargo_name").to_pylist() == ["serde", None, None, None]
    assert t.column("pkg_type").to_pylist() == [2, None, None, None]


def test_explicit_pkg_type_on_foreign_names_leaves_columns_null(tmp_path):
    out = tmp_path / "forced.znippy"
    write_archive(out, [Entry("notes.txt", data=b"n")], pkg_type="maven", workers=1)
    with open_archive(out) as a:
        t = a.group_table(GroupKey(1, "", "maven"))
    assert t.column("pkg_type").to_pylist() == [1]
    assert pc.all(pc.is_null(t.column("maven_group_id"))).as_py()


def test_cli_modules_lists_columns(capsys):
    assert main(["modules"]) == 0
    text = capsys.readouterr().out
    assert "maven  (pkg_type 1" in text and "maven_group_id" in text and "npm_version" in text
    assert main(["modules", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [m["name"] for m in listed] == ["maven", "cargo", "npm", "pypi"]
    assert {"name": "cargo_version", "type": "string"} in listed[1]["columns"]


def test_cli_create_auto(tmp_path, capsys):
    src = tmp_path / "src"
    for e in _mixed():
        p = src / e.relative_path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(e.data)
    out = tmp_path / "cli.znippy"
    assert main(["create", str(src), "-o", str(out), "--pkg-type", "auto"]) == 0
    with open_archive(out) as a:
        assert [k.module_name for k in a.groups] == ["", "maven", "cargo", "npm", "pypi"]
