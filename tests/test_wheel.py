"""The installed package works (issue 23 §1): a wheel built from the checkout, installed
non-editable into a fresh virtual environment, runs one command of every family and imports
every subpackage, with the checkout out of reach (cwd elsewhere, no PYTHONPATH).

The wheel is built (``pip wheel --no-deps``) and installed once per test run, ``--no-deps``:
the dependencies are the test environment's own packages, reached through a ``.pth`` line (its
editable ``znippy_sql`` is not: ``.pth`` files of a directory added that way are not run). So
that this cannot hide a missing requirement, ``pip check`` must pass and every distribution
the package's own source imports (its ``import`` statements, read from the wheel) must be in
the wheel's declared requirement closure (its extras included). ``ZNIPPY_TEST_WHEEL_RESOLVE=1`` installs with a full dependency
resolution instead (minutes on a loaded machine). The subpackages imported are those of the
wheel's own file list, never a hand-written list. Extras are read from the installed
metadata: all of them resolve together (one ``pip install --dry-run``); ``uring`` (one small package) is
installed and its module imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAVEN = REPO / "tests" / "data" / "maven" / "repository"
#: the tree whose wheel is built: this checkout, or another (to show the test fails on an
#: older packaging, e.g. a checkout of 38e67fc^ with its hand-written package list)
SOURCE = Path(os.environ.get("ZNIPPY_TEST_WHEEL_SOURCE", REPO))

pytestmark = pytest.mark.slow


@dataclass
class Installed:
    venv: Path
    wheel: Path
    work: Path  # a working directory outside the checkout

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSAFEPATH")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return env

    def run(self, *argv: str, ok: bool = True, stdin: bytes | None = None
            ) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(list(argv), cwd=self.work, env=self.env(), capture_output=True,
                              input=stdin, timeout=600)
        if ok:
            assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])
        assert b"Traceback" not in done.stderr, (argv, done.stderr.decode()[-4000:])
        return done

    def zs(self, *argv: str, ok: bool = True) -> subprocess.CompletedProcess[bytes]:
        return self.run(str(self.venv / "bin" / "znippy-sql"), *argv, ok=ok)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(SOURCE)], check=True, capture_output=True, timeout=600)
    wheel, = dist.glob("znippy_sql-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    work = root / "work"
    work.mkdir()
    inst = Installed(venv, wheel, work)
    if os.environ.get("ZNIPPY_TEST_WHEEL_RESOLVE") == "1":
        inst.run(inst.python, "-m", "pip", "install", "-q", "--no-compile", str(wheel))
        return inst
    inst.run(inst.python, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", str(wheel))
    site = Path(inst.run(inst.python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                            "['purelib'])").stdout.decode().strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst.run(inst.python, "-m", "pip", "check")
    return inst


#: run in the venv: the distributions of the top-level modules named in argv[1] (one a line)
#: that are outside the wheel's declared requirement closure
UNDECLARED = """
import sys, importlib.metadata as md
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
extras = [e for e in md.metadata("znippy_sql").get_all("Provides-Extra") or [] if e != "dev"]
seen, todo = set(), [("znippy_sql", ("", *extras))]
while todo:
    name, extras = todo.pop()
    if (canon(name), extras) in seen:
        continue
    seen.add((canon(name), extras))
    try:
        reqs = md.requires(name) or []
    except md.PackageNotFoundError:
        continue
    for text in reqs:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras):
            todo.append((req.name, ("",) + tuple(sorted(req.extras))))
allowed = {n for n, _ in seen} | {"pip", "setuptools", "wheel"}  # (pip's own runs)
dists = md.packages_distributions()
mods = set(open(sys.argv[1]).read().split())
used = {canon(d) for m in mods for d in dists.get(m, [])}
print(" ".join(sorted(used - allowed)))
"""


def _packages(wheel: Path) -> list[str]:
    """Every package in the wheel: each directory of it holding an ``__init__.py``."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    return sorted(n[: -len("/__init__.py")].replace("/", ".") for n in names
                  if n.endswith("/__init__.py") and ".dist-info/" not in n)


def test_the_checkout_is_out_of_reach(installed: Installed) -> None:
    out = installed.run(installed.python, "-c",
                        "import znippy_sql, json; print(json.dumps(znippy_sql.__file__))")
    where = Path(json.loads(out.stdout))
    assert installed.venv in where.parents and REPO not in where.parents \
        and SOURCE not in where.parents
    direct = installed.run(installed.python, "-m", "pip", "show", "-f", "znippy_sql").stdout
    assert b"Editable project location" not in direct


def test_every_subpackage_imports(installed: Installed) -> None:
    packages = _packages(installed.wheel)
    # the ones the hand-written list once left out, and the data packages
    assert {"znippy_sql.remote", "znippy_sql.queries", "znippy_sql.udfs"} <= set(packages)
    with zipfile.ZipFile(installed.wheel) as z:
        assert any(n.startswith("znippy_sql/queries/") and n.endswith(".sql")
                   for n in z.namelist())
    installed.run(installed.python, "-c", "; ".join(f"import {p}" for p in packages))
    # the compiled core (issue 33): inside the wheel, and the installed one answers
    with zipfile.ZipFile(installed.wheel) as z:
        assert any(n.startswith("znippy_sql/_native.") and n.endswith((".so", ".pyd"))
                   for n in z.namelist())
    out = installed.run(installed.python, "-c", "from znippy_sql import corelib; "
                        "print(corelib.version(), corelib._native.__file__)").stdout.decode()
    assert str(installed.venv) in out.split()[1], out


def test_one_command_of_every_family(installed: Installed) -> None:
    work = installed.work
    src = work / "src"
    (src / "d").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"hello\n")
    (src / "d" / "b.bin").write_bytes(os.urandom(300_000))
    arc = work / "a.znippy"
    zs = installed.zs
    zs("create", str(src), "-o", str(arc), "--repo", "r")
    assert b"d/b.bin" in zs("ls", str(arc)).stdout
    assert zs("cat", str(arc), "a.txt").stdout == b"hello\n"
    zs("extract", str(arc), "-o", str(work / "out"))
    assert (work / "out" / "d" / "b.bin").read_bytes() == (src / "d" / "b.bin").read_bytes()
    zs("verify", str(arc))
    assert b"files" in zs("info", str(arc)).stdout
    out = zs("sql", str(arc), "SELECT count(*) AS n FROM a_files", "--format", "csv").stdout
    assert out.split()[-1] == b"2"
    # the macros (queries/ and udfs/ inside the package)
    out = zs("sql", str(arc), "SELECT count(*) AS n FROM a_files WHERE repo = 'r'",
             "--format", "csv").stdout
    assert out.split()[-1] == b"2"

    wh = work / "wh"
    zs("catalog", "init", str(wh))
    zs("catalog", "add", str(wh), str(arc))
    out = zs("catalog", "sql", str(wh), "SELECT count(*) AS n FROM files", "--format",
             "csv").stdout
    assert out.split()[-1] == b"2"

    git = shutil.which("git")
    assert git is not None
    repo = work / "repo"
    genv = dict(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
                GIT_COMMITTER_EMAIL="t@e", GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
                GIT_COMMITTER_DATE="2020-01-01T00:00:00Z")
    subprocess.run([git, "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("git\n")
    for argv in (["add", "f.txt"], ["commit", "-q", "-m", "one"]):
        subprocess.run([git, "-C", str(repo), *argv], check=True,
                       env={**os.environ, **genv})
    head = subprocess.run([git, "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    want = subprocess.run([git, "-C", str(repo), "cat-file", "-p", head], check=True,
                          capture_output=True).stdout
    garc = work / "g.znippy"
    zs("git", "import", str(repo), "-o", str(garc))
    assert zs("git", "cat-file", str(garc), head, "-p").stdout == want

    marc = work / "m.znippy"
    zs("create", str(MAVEN), "-o", str(marc), "--pkg-type", "maven")
    out = zs("maven", str(marc), "versions", "org.codehaus.plexus:plexus-utils", "--json").stdout
    assert json.loads(out)["versions"]


def _extras(installed: Installed) -> dict[str, list[str]]:
    """extra → its requirements, from the installed metadata."""
    code = ("import json; from importlib.metadata import metadata; m = metadata('znippy_sql');"
            "print(json.dumps([m.get_all('Provides-Extra') or [], m.get_all('Requires-Dist') or []]))")
    extras, requires = json.loads(installed.run(installed.python, "-c", code).stdout)
    out: dict[str, list[str]] = {e: [] for e in extras}
    for req in requires:
        name, _, marker = req.partition(";")
        for e in extras:
            if f'extra == "{e}"' in marker.replace("'", '"'):
                out[e].append(name.strip())
    return out


def test_extras_resolve(installed: Installed) -> None:
    extras = _extras(installed)
    assert "uring" in extras and extras["uring"]
    features = sorted(e for e in extras if e != "dev")  # dev: the test tools, not a feature
    # one resolve of every feature extra together (each alone took a minute of pip here): a
    # joint resolve that succeeds resolves each of them, and must hold each one's requirements
    report = installed.work / "report-extras.json"
    installed.run(installed.python, "-m", "pip", "install", "--dry-run", "-q", "--report",
                  str(report), f"{installed.wheel}[{','.join(features)}]")
    would = {item["metadata"]["name"].lower().replace("_", "-")
             for item in json.loads(report.read_text())["install"]}
    have = installed.run(installed.python, "-m", "pip", "list", "--format", "json").stdout
    present = {p["name"].lower().replace("_", "-") for p in json.loads(have)}
    for extra in features:
        for req in extras[extra]:
            name = req.split("[")[0]
            for cut in "<>=!~ (":
                name = name.split(cut)[0]
            name = name.strip().lower().replace("_", "-")
            assert name in would | present, (extra, name)
    installed.run(installed.python, "-m", "pip", "install", "-q", f"{installed.wheel}[uring]")
    installed.run(installed.python, "-c", "import znippy_sql.git.uring")


def _imported_names(wheel: Path) -> set[str]:
    """The top-level modules the package's own source imports (absolute imports), stdlib
    and the package itself left out."""
    import ast

    names: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if not n.endswith(".py") or ".dist-info/" in n:
                continue
            for node in ast.walk(ast.parse(z.read(n), n)):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"znippy_sql", "__future__"}


def test_only_declared_dependencies_are_imported(installed: Installed) -> None:
    """Every distribution the package's source imports is a declared requirement (or one of
    theirs, or of an extra): the test environment's other packages cannot hide a missing
    one."""
    names = _imported_names(installed.wheel)
    assert {"pyarrow", "duckdb", "pyiceberg", "obstore"} <= names  # the check sees them
    listing = installed.work / "imported.txt"
    listing.write_text("\n".join(sorted(names)) + "\n")
    out = installed.run(installed.python, "-c", UNDECLARED, str(listing)).stdout.decode()
    assert out.split() == [], f"imported but not declared: {out}"
