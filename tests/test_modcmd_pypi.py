"""``znippy-sql pypi ARCHIVE lookup|versions|deps``, on wheels built here by ``pip wheel``.

For this machine the expectation is pip's own: ``pip install --dry-run --report`` over the
same wheels (``--no-index --find-links``). For another platform and Python pip is no judge (it
evaluates markers for the interpreter it runs in), so there the expectation is the wheel's
``METADATA`` on disk, its markers evaluated for that target by ``packaging`` in the test.
"""

from __future__ import annotations

import email.parser
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from znippy_sql.cli import main

pytestmark = pytest.mark.slow

#: (name, version, dependencies, optional dependencies, plat-name or None)
PROJECTS = [
    ("Alpha_Pkg", "1.0", ["beta>=1.1", "gamma; sys_platform == 'win32'",
                          "delta[fast]; python_version >= '3.10'"],
     {"extra1": ["epsilon", "beta<1.2"]}, None),
    ("beta", "1.0", [], {}, None),
    ("beta", "1.5", [], {}, None),
    ("delta", "1.5", [], {"fast": ["zeta>=2"]}, None),
    ("zeta", "2.1", [], {}, None),
    ("gamma", "1.0", [], {}, "win_amd64"),
]


def _project(root: Path, name: str, version: str, deps: list[str],
             extras: dict[str, list[str]]) -> Path:
    d = root / f"{name}-{version}"
    d.mkdir()
    opt = "".join(f"{k} = {json.dumps(v)}\n" for k, v in extras.items())
    (d / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = {json.dumps(deps)}\n'
        f"[project.optional-dependencies]\n{opt}[tool.setuptools]\npy-modules = []\n")
    return d


def _pip(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=900, **kw)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pypi")
    tools = root / "tools"
    got = _pip("download", "-q", "--no-deps", "setuptools>=70.1", "-d", str(tools))
    if got.returncode:
        pytest.skip("pip could not fetch setuptools to build the test wheels (no PyPI and no "
                    f"pip cache here): {got.stderr.strip().splitlines()[-1:]}")
    # one setuptools for every build (it writes wheels itself from 70.1 on), not an isolated
    # environment installed per project
    for whl in tools.glob("setuptools-*.whl"):
        with zipfile.ZipFile(whl) as z:
            z.extractall(tools / "lib")
    env = {**os.environ, "PYTHONPATH": str(tools / "lib")}
    out = root / "wheels"
    calls: list[tuple[str | None, list[str]]] = []  # one pip call: one version of each name
    for n, v, d, e, plat in PROJECTS:
        call = next((c for c in calls if c[0] == plat and not any(
            Path(x).name.startswith(n + "-") for x in c[1])), None)
        if call is None:
            calls.append(call := (plat, []))
        call[1].append(str(_project(root, n, v, d, e)))
    for plat, dirs in calls:
        extra = [f"--config-settings=--build-option=--plat-name={plat}"] if plat else []
        got = _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                   *extra, *dirs, env=env)
        assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "alpha_pkg-1.0-py3-none-any.whl", "beta-1.0-py3-none-any.whl",
        "beta-1.5-py3-none-any.whl", "delta-1.5-py3-none-any.whl",
        "gamma-1.0-py3-none-win_amd64.whl", "zeta-2.1-py3-none-any.whl"]
    return out


@pytest.fixture(scope="module")
def archive(wheels: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pypi-archive") / "py.znippy"
    assert main(["create", str(wheels), "-o", str(out), "--pkg-type", "auto"]) == 0
    return out


def pip_resolves(wheels: Path, requirement: str, *target: str) -> dict[str, str]:
    """What pip's own resolver installs for ``requirement`` from ``wheels`` alone."""
    got = _pip("install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-",
               "--no-index", "--find-links", str(wheels), "--only-binary=:all:", *target,
               requirement)
    assert got.returncode == 0, got.stderr
    report = json.loads(got.stdout)
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
            for i in report["install"]}


def _ours(archive: Path, capsys, *argv: str) -> tuple[int, dict]:
    code = main(["pypi", str(archive), "deps", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_versions_and_lookup(archive: Path, capsys) -> None:
    assert main(["pypi", str(archive), "versions", "BETA"]) == 0
    assert capsys.readouterr().out == "1.0\n1.5\n"
    assert main(["pypi", str(archive), "lookup", "alpha.pkg==1.0.0", "--json"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert [(f["relative_path"], f["name"], f["pypi_kind"]) for f in files] == \
        [("alpha_pkg-1.0-py3-none-any.whl", "alpha-pkg", "wheel")]  # PEP 503, PEP 440


def test_deps_here_are_pips(archive: Path, wheels: Path, capsys) -> None:
    v = f"{sys.version_info[0]}.{sys.version_info[1]}"
    code, ours = _ours(archive, capsys, "alpha-pkg==1.0", "--python", v)
    assert code == 0 and ours["complete"], ours["missing"]
    got = {r["name"]: r["version"] for r in ours["resolved"]}
    assert got == {k: x for k, x in pip_resolves(wheels, "alpha-pkg==1.0").items()
                   if k != "alpha-pkg"}
    assert got == {"beta": "1.5", "delta": "1.5", "zeta": "2.1"}  # delta[fast] brings zeta
    assert {r["name"]: r["depth"] for r in ours["resolved"]}["zeta"] == 2


def test_deps_for_windows_and_an_older_python(archive: Path, wheels: Path, capsys) -> None:
    """gamma has only a win_amd64 wheel; python_version >= '3.10' drops delta."""
    code, ours = _ours(archive, capsys, "alpha-pkg==1.0", "--platform", "win_amd64",
                       "--python", "3.9")
    assert code == 0, ours["missing"]
    got = {r["name"]: r["version"] for r in ours["resolved"]}
    with zipfile.ZipFile(wheels / "alpha_pkg-1.0-py3-none-any.whl") as z:
        meta = email.parser.BytesParser().parsebytes(
            z.read("alpha_pkg-1.0.dist-info/METADATA"))
    env = {**default_environment(), "sys_platform": "win32", "platform_system": "Windows",
           "os_name": "nt", "platform_machine": "AMD64", "python_version": "3.9",
           "python_full_version": "3.9.0", "extra": ""}
    direct = {Requirement(r).name for r in meta.get_all("Requires-Dist")
              if Requirement(r).marker is None or Requirement(r).marker.evaluate(env)}
    assert set(got) == direct == {"beta", "gamma"}  # win32 marker in, python >= 3.10 out
    assert got["beta"] == "1.5"
    wheel = {r["name"]: r["file"] for r in ours["resolved"]}["gamma"]
    assert wheel == "gamma-1.0-py3-none-win_amd64.whl"


def test_what_is_missing_is_said(archive: Path, capsys) -> None:
    code, ours = _ours(archive, capsys, "alpha-pkg==1.0", "--extra", "extra1")
    assert code == 1
    reasons = {m["requirement"]: m["reason"] for m in ours["missing"]}
    assert reasons['epsilon; extra == "extra1"'] == "no distribution in the archive"
    assert reasons['beta<1.2; extra == "extra1"'].startswith("conflict: 1.5 was chosen")
    code, ours = _ours(archive, capsys, "gamma==1.0", "--platform", "manylinux_2_17_x86_64")
    assert code == 1 and ours["file"] is None
    assert ours["missing"][0]["reason"].startswith("no wheel for this Python and platform")
    code, ours = _ours(archive, capsys, "beta==3")  # a version that is not here
    assert code == 1 and "no version allowed by ==3" in ours["missing"][0]["reason"]
    with pytest.raises(SystemExit) as stop:
        main(["pypi", str(archive), "deps", "beta"])
    assert stop.value.code == 2 and "NAME==VERSION" in capsys.readouterr().err
