"""``znippy-sql <module> ARCHIVE <command>``: the host, a third-party module's commands,
cargo and npm, and the SQL macros giving the CLI's answers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

import znippy_sql.duckdb as zd
from znippy_sql import Entry, modules, write_archive
from znippy_sql.cli import main
from znippy_sql.modules import semver

DATA = Path(__file__).parent / "data" / "maven" / "repository"

GADGET_SOURCE = textwrap.dedent('''
    import pyarrow as pa
    from znippy_sql.modules.commands import Answer, Command, module_rows

    def _count(archive, args):
        rows = module_rows(archive, Gadget(), ["gadget_size"], repo=args.repo)
        big = [r for r in rows if r["gadget_size"] >= args.at_least]
        return Answer({"files": len(big)}, f"{len(big)} gadgets\\n", 0 if big else 1,
                      None if big else "no gadget that big")

    class Gadget:
        name = "gadget"
        pkg_type = 11
        fields = (pa.field("gadget_size", pa.int64()),)
        commands = (Command("count", "gadgets of at least N bytes", _count,
                            lambda p: p.add_argument("--at-least", type=int, default=0)),)

        def claims(self, relative_path):
            return relative_path.endswith(".gadget")

        def columns(self, relative_path, read):
            return {"gadget_size": len(read())}
''')


@pytest.fixture()
def gadget_plugin(tmp_path: Path, monkeypatch) -> Path:
    """A third-party module announced through the ``znippy_sql.modules`` entry point."""
    (tmp_path / "gadget_mod.py").write_text(GADGET_SOURCE)
    dist = tmp_path / "gadget_mod-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gadget-mod\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[znippy_sql.modules]\ngadget = gadget_mod:Gadget\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(modules, "_REGISTRY", {})
    monkeypatch.setattr(modules, "_LOADED", False)
    yield tmp_path
    sys.modules.pop("gadget_mod", None)


def test_third_party_module_brings_its_command(gadget_plugin: Path, capsys) -> None:
    out = gadget_plugin / "g.znippy"
    write_archive(out, [Entry("a.gadget", data=b"12345"), Entry("b.gadget", data=b"1"),
                        Entry("c.txt", data=b"c")], pkg_type="auto", workers=1)
    assert main(["gadget", str(out), "count", "--at-least", "2"]) == 0
    assert capsys.readouterr().out == "1 gadgets\n"
    assert main(["gadget", str(out), "count", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"files": 2}
    assert main(["gadget", str(out), "count", "--at-least", "9"]) == 1
    assert capsys.readouterr().err == "znippy-sql gadget count: no gadget that big\n"
    assert main(["modules", "--json"]) == 0
    listed = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert listed["gadget"]["commands"] == [{"name": "count",
                                             "help": "gadgets of at least N bytes"}]
    assert main(["modules"]) == 0
    assert "znippy-sql gadget ARCHIVE count" in capsys.readouterr().out


def test_registered_module_gets_a_command(tmp_path: Path, monkeypatch, capsys) -> None:
    """The registry's hook (``modules.register``) does the same as an entry point."""
    namespace: dict = {}
    exec(GADGET_SOURCE, namespace)
    modules.all_modules()  # loaded first: the copy below is the whole registry
    monkeypatch.setattr(modules, "_REGISTRY", dict(modules._REGISTRY))
    modules.register(namespace["Gadget"]())
    out = tmp_path / "g.znippy"
    write_archive(out, [Entry("x.gadget", data=b"abc")], pkg_type="auto", workers=1)
    assert main(["gadget", str(out), "count"]) == 0
    assert capsys.readouterr().out == "1 gadgets\n"


def test_bad_commands_are_named(tmp_path: Path, monkeypatch, capsys) -> None:
    namespace: dict = {}
    exec(GADGET_SOURCE, namespace)

    class Odd(namespace["Gadget"]):
        commands = ("count",)

    modules.all_modules()
    monkeypatch.setattr(modules, "_REGISTRY", dict(modules._REGISTRY))
    modules.register(Odd())
    assert main(["gadget", str(tmp_path / "x.znippy"), "count"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("znippy-sql: error: module 'gadget'") and err.count("\n") == 1


def test_unknown_command_is_still_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["no-such-command", "x"])
    assert stop.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_module_commands_cost_other_commands_nothing() -> None:
    """``ls`` builds no module parser: the registry (entry points) is not loaded."""
    code = ("import sys; from znippy_sql.cli import build_parser; build_parser('ls'); "
            "print('znippy_sql.modules.builtin' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"


# -- cargo and npm -------------------------------------------------------------------------
SEMVER_ORDER = ["0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.2.0", "1.10.0"]


def test_semver_precedence() -> None:
    assert sorted(reversed(SEMVER_ORDER), key=semver.key) == SEMVER_ORDER  # semver.org §11
    assert semver.key("1.0.0+build.5")[:5] == semver.key("1.0.0")[:5]


@pytest.fixture()
def packages(tmp_path: Path) -> Path:
    entries = [Entry(f"crates/serde-json/serde-json-{v}.crate", data=v.encode())
               for v in SEMVER_ORDER]
    entries += [Entry("npm/@babel/core/-/core-7.23.0.tgz", data=b"x" * 7),
                Entry("npm/@babel/core/-/core-7.9.0.tgz", data=b"y"),
                Entry("npm/left-pad/-/left-pad-1.3.0.tgz", data=b"z")]
    out = tmp_path / "pk.znippy"
    write_archive(out, entries, pkg_type="auto", workers=1)
    return out


def test_cargo_versions_and_lookup(packages: Path, capsys) -> None:
    assert main(["cargo", str(packages), "versions", "serde-json"]) == 0
    assert capsys.readouterr().out.split() == SEMVER_ORDER
    assert main(["cargo", str(packages), "lookup", "serde-json@1.0.0-beta.11", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert [(f["relative_path"], f["size"]) for f in files] == \
        [("crates/serde-json/serde-json-1.0.0-beta.11.crate", len("1.0.0-beta.11"))]
    assert main(["cargo", str(packages), "lookup", "serde_json"]) == 1  # names are exact
    assert "no cargo files for serde_json" in capsys.readouterr().err


def test_npm_scoped_lookup(packages: Path, capsys) -> None:
    assert main(["npm", str(packages), "versions", "@babel/core"]) == 0
    assert capsys.readouterr().out == "7.9.0\n7.23.0\n"
    assert main(["npm", str(packages), "lookup", "@babel/core@7.23.0"]) == 0
    assert capsys.readouterr().out == "7  npm/@babel/core/-/core-7.23.0.tgz\n"
    with pytest.raises(SystemExit):
        main(["npm", str(packages), "lookup", "left-pad@"])
    assert "expected NAME or NAME@VERSION" in capsys.readouterr().err


# -- the SQL macros answer what the CLI answers ---------------------------------------------
def test_macros_equal_the_cli(tmp_path: Path, capsys) -> None:
    src = tmp_path / "src"
    for p in DATA.rglob("*.pom"):
        (src / "m2" / p.relative_to(DATA)).parent.mkdir(parents=True, exist_ok=True)
        (src / "m2" / p.relative_to(DATA)).write_bytes(p.read_bytes())
    for name in ("Demo_Pkg-1.0-py3-none-any.whl", "demo.pkg-1.10.tar.gz",
                 "demo_pkg-1.9rc1-py3-none-any.whl", "demo-pkg-1.9.tar.gz"):
        (src / "py" / name).parent.mkdir(parents=True, exist_ok=True)
        (src / "py" / name).write_bytes(b"not really")
    out = tmp_path / "both.znippy"
    # each tree in its own repo: the maven layout from its root, the wheels and sdists
    write_archive(out, [Entry(str(p.relative_to(src / "m2")), data=p.read_bytes(), repo="m2")
                        for p in sorted((src / "m2").rglob("*.pom"))]
                  + [Entry(p.name, data=p.read_bytes(), repo="py")
                     for p in sorted((src / "py").iterdir())], pkg_type="auto", workers=1)
    con = duckdb.connect()
    zd.register(con, out, "b")

    assert main(["maven", str(out), "versions", "org.codehaus.plexus:plexus-utils", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["versions"]
    sql = con.sql("SELECT version, files, pom FROM maven_versions('b', "
                  "'org.codehaus.plexus:plexus-utils')").fetchall()
    assert sql == [(r["version"], r["files"], r["pom"]) for r in cli]

    gav = "org.eclipse.sisu:org.eclipse.sisu.plexus:0.9.0.M2"
    for scope in (None, "runtime"):
        argv = ["maven", str(out), "deps", gav, "--json"] + (["--scope", scope] if scope else [])
        assert main(argv) == 1
        cli_deps = json.loads(capsys.readouterr().out)
        arg = f", scope := '{scope}'" if scope else ""
        rows = con.sql(f"SELECT coordinates, scope, depth, via, missing, reason "
                       f"FROM maven_deps('b', '{gav}'{arg})").fetchall()
        assert [r[:4] for r in rows if r[1] is not None] == \
            [(r["coordinates"], r["scope"], r["depth"], r["via"]) for r in cli_deps["resolved"]]
        assert sorted(r[4] for r in rows if r[4]) == \
            sorted(m["what"] for m in cli_deps["missing"])

    assert main(["pypi", str(out), "versions", "DEMO.pkg", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["versions"]
    assert [r["version"] for r in cli] == ["1.0", "1.9rc1", "1.9", "1.10"]  # PEP 440
    sql = con.sql("SELECT version, files FROM pypi_versions('b', 'DEMO.pkg')").fetchall()
    assert sql == [(r["version"], r["files"]) for r in cli]


def test_a_wheel_that_is_not_a_zip_is_reported(tmp_path: Path, capsys) -> None:
    out = tmp_path / "w.znippy"
    write_archive(out, [Entry("bad-1.0-py3-none-any.whl", data=b"not a zip")],
                  pkg_type="auto", workers=1)
    assert main(["pypi", str(out), "deps", "bad==1.0"]) == 1
    captured = capsys.readouterr()
    assert "bad-1.0-py3-none-any.whl is not a wheel with a METADATA" in captured.out
    assert captured.err == "znippy-sql pypi deps: bad==1.0: 1 requirement not met\n"
