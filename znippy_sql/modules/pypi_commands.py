"""``znippy-sql pypi ARCHIVE lookup|versions|deps ...`` (docs/modules.md).

The module is passed in (its ``normalize`` is PEP 503's), so this file does not import
``pypi.py``. ``lookup NAME[==VERSION]`` and ``versions NAME`` go by the ``pypi_*`` columns: the name
normalised as PEP 503 says, versions ordered and compared as PEP 440 says (``packaging``), so
``==1.0`` finds ``1.0.0``. ``deps NAME==VERSION`` reads ``Requires-Dist`` from the ``METADATA``
of the wheel inside the archive that fits the target (``--python``, ``--platform``), evaluates
each requirement's marker for that target and follows what remains, taking for each project
the highest version here that every requirement met so far allows and that has a fitting wheel
(greedy: no backtracking, a later requirement that the chosen version does not satisfy is
reported as a conflict).
"""

from __future__ import annotations

import argparse
import io
import zipfile
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesHeaderParser
from typing import TYPE_CHECKING, Any, Protocol

from .commands import Answer, ArchiveView, Command, NameVersion, counted, module_rows

if TYPE_CHECKING:  # packaging is imported when a command runs, not with the module
    from packaging.tags import Tag
    from packaging.version import Version


class PypiModule(Protocol):
    """What the commands use of the pypi module (``pypi.PypiModule`` is one)."""

    name: str
    pkg_type: int

    def normalize(self, name: str) -> str: ...

COLUMNS = ("pypi_name", "pypi_version", "pypi_kind", "pypi_python_tag", "pypi_abi_tag",
           "pypi_platform_tag", "pypi_build_tag")


def version_key(text: str) -> tuple[int, Version | str]:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(text))
    except InvalidVersion:
        return (0, text)


def same_version(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


# -- the target: tags a wheel must carry, marker environment ---------------------------------
@dataclass(frozen=True)
class Target:
    """The interpreter and platform the dependencies are wanted for."""

    python: tuple[int, int]
    platforms: tuple[str, ...]

    @classmethod
    def make(cls, python: str | None, platforms: list[str] | None) -> "Target":
        import sys

        from packaging import tags

        if python:
            major, _, minor = python.partition(".")
            ver = (int(major), int(minor or 0))
        else:
            ver = sys.version_info[:2]
        return cls(ver, tuple(platforms) if platforms else tuple(tags.platform_tags()))

    def supported(self) -> set[Tag]:
        from packaging import tags

        plats = list(_expand_platforms(self.platforms))
        interp = f"cp{self.python[0]}{self.python[1]}"
        return set(tags.cpython_tags(self.python, platforms=plats)) | set(
            tags.compatible_tags(self.python, interp, platforms=plats))

    def environment(self) -> dict[str, str]:
        from packaging.markers import default_environment

        env = {k: str(v) for k, v in default_environment().items()}  # a TypedDict of str
        env.update(python_version=f"{self.python[0]}.{self.python[1]}",
                   python_full_version=f"{self.python[0]}.{self.python[1]}.0",
                   implementation_name="cpython", platform_python_implementation="CPython")
        plat = self.platforms[0] if self.platforms else ""
        for prefix, (sys_platform, system, os_name) in (
                ("manylinux", ("linux", "Linux", "posix")), ("musllinux", ("linux", "Linux",
                                                                          "posix")),
                ("linux", ("linux", "Linux", "posix")), ("macosx", ("darwin", "Darwin", "posix")),
                ("win", ("win32", "Windows", "nt"))):
            if plat.startswith(prefix):
                env.update(sys_platform=sys_platform, platform_system=system, os_name=os_name,
                           platform_machine=_machine(plat, prefix))
                break
        return env


def _machine(plat: str, prefix: str) -> str:
    if prefix == "win":
        return {"win32": "x86", "win_amd64": "AMD64", "win_arm64": "ARM64"}.get(plat, plat)
    arch = plat.split("_", 3)[-1] if prefix in ("manylinux", "musllinux", "macosx") \
        else plat[len("linux_"):]
    if prefix in ("manylinux", "musllinux") and plat.count("_") < 3:  # manylinux2014_x86_64
        arch = plat.split("_", 1)[1]
    return "x86_64" if arch == "universal2" else arch


def _expand_platforms(platforms: tuple[str, ...]) -> list[str]:
    """A manylinux or macOS tag also accepts the older ones it includes (as pip does)."""
    from packaging import tags

    legacy = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
    out: list[str] = []
    for plat in platforms:
        out.append(plat)
        parts = plat.split("_")
        if plat.startswith("manylinux_") and len(parts) >= 4 and parts[1].isdigit() \
                and parts[2].isdigit():
            major, minor, arch = int(parts[1]), int(parts[2]), "_".join(parts[3:])
            for m in range(minor, -1, -1):
                out.append(f"manylinux_{major}_{m}_{arch}")
                if (major, m) in legacy:
                    out.append(f"{legacy[(major, m)]}_{arch}")
        elif plat.startswith("macosx_") and len(parts) >= 4 and parts[1].isdigit():
            out.extend(tags.mac_platforms((int(parts[1]), int(parts[2])), "_".join(parts[3:])))
    return list(dict.fromkeys(out))


# -- distributions in the archive ------------------------------------------------------------
class Distributions:
    """The archive's pypi files by normalised name."""

    def __init__(self, archive: ArchiveView, module: PypiModule, *, repo: str | None) -> None:
        self.archive, self.module, self.repo = archive, module, repo
        self._by_name: dict[str, list[dict[str, Any]]] = {}

    def files(self, name: str) -> list[dict[str, Any]]:
        hit = self._by_name.get(name)
        if hit is None:
            hit = self._by_name[name] = module_rows(
                self.archive, self.module, COLUMNS, where={"pypi_name": name}, repo=self.repo)
        return hit

    def wheel_for(self, name: str, version: str, supported: set[Tag]) -> dict[str, Any] | None:
        """The fitting wheel of ``name==version`` most preferred by the target's tag order."""
        from packaging.utils import InvalidWheelFilename, parse_wheel_filename

        best, best_rank = None, None
        order = {t: i for i, t in enumerate(_ordered(supported))}
        for f in self.files(name):
            if f["pypi_kind"] != "wheel" or not same_version(f["pypi_version"], version):
                continue
            try:
                wheel_tags = parse_wheel_filename(f["relative_path"].rsplit("/", 1)[-1])[3]
            except InvalidWheelFilename:
                continue
            ranks = [order[t] for t in wheel_tags if t in order]
            if ranks and (best_rank is None or min(ranks) < best_rank):
                best, best_rank = f, min(ranks)
        return best

    def metadata(self, path: str) -> Message | None:
        """The wheel's ``*.dist-info/METADATA`` headers; ``None`` when it has none or is not
        a readable zip."""
        try:
            with zipfile.ZipFile(io.BytesIO(self.archive.read(path))) as z:
                names = [n for n in z.namelist()
                         if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
                return BytesHeaderParser().parsebytes(z.read(names[0])) if names else None
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError):
            return None


def _ordered(supported: set[Tag]) -> list[Tag]:
    """Tags from most to least specific: platform wheels before ``py3-none-any``."""
    return sorted(supported, key=lambda t: (t.platform == "any", t.abi == "none",
                                            not t.interpreter.startswith("cp"),
                                            str(t)))


# -- deps ------------------------------------------------------------------------------------
@dataclass
class Picked:
    name: str
    version: str
    file: str | None
    depth: int
    via: str | None
    requirement: str
    extras: set[str] = field(default_factory=set)


def resolve(archive: ArchiveView, module: PypiModule, name: str, version: str, *, target: Target,
            extras: tuple[str, ...] = (), repo: str | None = None) -> dict[str, Any]:
    """The closure of ``name==version`` for ``target``: ``resolved`` and ``missing``."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet

    normalize = module.normalize
    dists = Distributions(archive, module, repo=repo)
    supported = target.supported()
    env = target.environment()
    picked: dict[str, Picked] = {}
    missing: list[dict[str, Any]] = []
    queue: list[tuple[str, SpecifierSet, set[str], int, str | None, str]] = [
        (normalize(name), SpecifierSet(f"=={version}"), set(extras), 0, None,
         f"{name}=={version}")]
    pos = 0
    while pos < len(queue):
        want, spec, want_extras, depth, via, text = queue[pos]
        pos += 1
        have = picked.get(want)
        if have is not None:
            if not spec.contains(have.version, prereleases=True):
                missing.append({"name": want, "requirement": text, "via": via,
                                "reason": f"conflict: {have.version} was chosen "
                                          f"(for {have.via or 'the root'})"})
                continue
            new = want_extras - have.extras
            if not new or have.file is None:
                continue
            have.extras |= new
            chosen = have  # its requirements again, for the new extras
        else:
            versions = sorted({f["pypi_version"] for f in dists.files(want)}, key=version_key)
            fits = [v for v in spec.filter(versions)]
            if not versions:
                missing.append({"name": want, "requirement": text, "via": via,
                                "reason": "no distribution in the archive"})
                continue
            if not fits:
                missing.append({"name": want, "requirement": text, "via": via,
                                "reason": f"no version allowed by {spec or 'it'} (here: "
                                          f"{', '.join(versions)})"})
                continue
            wheel = next(((v, w) for v in reversed(fits)
                          if (w := dists.wheel_for(want, v, supported)) is not None), None)
            if wheel is None:
                missing.append({"name": want, "requirement": text, "via": via,
                                "reason": "no wheel for this Python and platform "
                                          f"(versions {', '.join(fits)})"})
                continue
            chosen = picked[want] = Picked(want, wheel[0], wheel[1]["relative_path"], depth,
                                           via, text, set(want_extras))
        assert chosen.file is not None
        meta = dists.metadata(chosen.file)
        if meta is None:
            missing.append({"name": want, "requirement": text, "via": via,
                            "reason": f"{chosen.file} is not a wheel with a METADATA"})
            continue
        for line in meta.get_all("Requires-Dist") or ():
            try:
                req = Requirement(line)
            except InvalidRequirement as exc:
                missing.append({"name": line, "requirement": line, "via": chosen.file,
                                "reason": f"unreadable requirement: {exc}"})
                continue
            if req.marker is not None and not any(
                    req.marker.evaluate({**env, "extra": e}) for e in ("", *chosen.extras)):
                continue
            queue.append((normalize(req.name), req.specifier, set(req.extras), chosen.depth + 1,
                          f"{chosen.name}=={chosen.version}", str(req)))
    root = picked.get(normalize(name))
    resolved = [{"name": p.name, "version": p.version, "file": p.file, "depth": p.depth,
                 "via": p.via, "requirement": p.requirement, "extras": sorted(p.extras)}
                for p in picked.values() if p is not root]
    return {"root": f"{normalize(name)}=={version}", "file": root.file if root else None,
            "python": f"{target.python[0]}.{target.python[1]}",
            "platforms": list(target.platforms), "resolved": resolved, "missing": missing,
            "complete": not missing}


def make_commands(module: PypiModule) -> tuple[Command, ...]:
    nv = NameVersion(module, "pypi_name", "pypi_version", version_key, "==",
                     normalize=module.normalize, extra_columns=("pypi_kind",),
                     version_equal=same_version)

    def pin(text: str) -> tuple[str, str]:
        name, version = nv.split(text)
        if version is None:
            raise argparse.ArgumentTypeError(f"{text!r}: expected NAME==VERSION")
        return name, version

    def deps_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("spec", metavar="NAME==VERSION", type=pin)
        p.add_argument("--python", metavar="X.Y", help="the Python version (default: this one)")
        p.add_argument("--platform", action="append", metavar="TAG",
                       help="a wheel platform tag, e.g. manylinux_2_17_x86_64, win_amd64 "
                            "(repeatable; default: this machine's)")
        p.add_argument("--extra", action="append", default=[], metavar="NAME",
                       help="an extra of the root to include (repeatable)")

    def run_deps(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        name, version = args.spec
        data = resolve(archive, module, name, version, repo=args.repo,
                       target=Target.make(args.python, args.platform),
                       extras=tuple(args.extra))
        lines = [f"{data['root']}  {data['file'] or '(no fitting wheel)'}"]
        lines += [f"{'  ' * r['depth']}{r['name']}=={r['version']}  ({r['requirement']})"
                  for r in data["resolved"]]
        lines += [f"missing: {m['requirement']}: {m['reason']}"
                  + (f" (via {m['via']})" if m["via"] else "") for m in data["missing"]]
        message = None if data["complete"] else \
            f"{data['root']}: {counted(len(data['missing']), 'requirement')} not met"
        return Answer(data, "\n".join(lines) + "\n", 0 if data["complete"] else 1, message)

    return (*nv.commands(), Command(
        "deps", "the dependencies of NAME==VERSION from its wheel's METADATA, markers "
        "evaluated for the target", run_deps, deps_args))
