"""The effective model of a POM, built as Maven 3.8 builds a dependency's model.

Steps, in Maven's order: every POM of the parent chain is read and its active profiles are
injected (:class:`Environment` decides activation); the chain is merged from the top down
(a child's properties win, its dependencies and managed dependencies come first and keep
theirs; groupId and version fall back to ``<parent>``); every value is interpolated
(``${project.version}``, ``${pom.groupId}``, ``${project.parent.version}``, model properties,
the environment's system properties, then the legacy ``${version}``); ``import``-scope BOMs of
``dependencyManagement`` are replaced by their own managed dependencies (first one wins);
managed version, scope, optional, exclusions and systemPath fill what a dependency leaves out;
the scope defaults to ``compile``.

A model that cannot be built (a missing or unreadable POM, parent or BOM) is a
:class:`Broken` saying why; a value whose ``${...}`` cannot be resolved stays as written and
is reported by the resolver where a coordinate needs it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import overload

from .pom import Activation, Dep, Pom, PomError, parse

Coords = tuple[str, str, str]
#: where a POM's bytes come from: (groupId, artifactId, version) -> (path, bytes) or None
PomSource = Callable[[str, str, str], "tuple[str, bytes] | None"]

_EXPR = re.compile(r"\$\{([^}]+)\}")


def _uname() -> tuple[str, str, str]:
    """(system, release, machine) of this machine, lower case."""
    import platform  # only when an Environment is made: it costs every CLI start otherwise

    u = platform.uname()
    return u.system.lower(), u.release.lower(), u.machine.lower()


def _java_arch() -> str:
    machine = _uname()[2]
    return {"x86_64": "amd64", "aarch64": "aarch64", "arm64": "aarch64"}.get(machine, machine)


@dataclass(frozen=True)
class Environment:
    """What profile activation and ``${...}`` see of the machine Maven would run on.

    Defaults: Java 17 on the running operating system. Only these system properties exist;
    no user properties, no ``env.*``.
    """

    jdk: str = "17"
    os_name: str = field(default_factory=lambda: _uname()[0])
    os_arch: str = field(default_factory=_java_arch)
    os_version: str = field(default_factory=lambda: _uname()[1])

    @property
    def os_family(self) -> set[str]:
        name = self.os_name
        if name.startswith("windows"):
            return {"windows", "dos"}
        if name.startswith("mac") or name == "darwin":
            return {"mac", "unix"}
        return {"unix"}

    def system_properties(self) -> dict[str, str]:
        return {"java.version": self.jdk, "java.specification.version": self.jdk.split(".")[0],
                "os.name": self.os_name, "os.arch": self.os_arch, "os.version": self.os_version,
                "file.separator": "/", "path.separator": ":", "line.separator": "\n"}


@dataclass(frozen=True)
class Effective:
    """An effective model: coordinates, managed and used dependencies, the POMs it came from."""

    group_id: str
    artifact_id: str
    version: str
    packaging: str
    dependencies: tuple[Dep, ...]
    managed: tuple[Dep, ...]
    #: archive paths of the POMs read: its own, its parents', its BOMs' (and theirs)
    poms: tuple[str, ...]
    relocation: Coords | None = None

    @property
    def coords(self) -> Coords:
        return (self.group_id, self.artifact_id, self.version)


@dataclass(frozen=True)
class Lack:
    """A parent or BOM a model needs and cannot read: its coordinates, why, and the
    coordinates of the POM that names it."""

    coords: Coords
    reason: str
    named_by: Coords


@dataclass(frozen=True)
class Broken:
    """A model that could not be built, and why (``what`` is ``pom``, ``parent``, ``import``).

    When the POM itself is there and a parent or BOM is not: ``lack`` says which, and
    ``partial`` is the model built without it (what the POMs that are here declare)."""

    coords: Coords
    what: str
    reason: str
    poms: tuple[str, ...] = ()
    lack: Lack | None = None
    partial: Effective | None = None


def gav(coords: Coords) -> str:
    return ":".join(coords)


class ModelBuilder:
    """Effective models of the POMs a :data:`PomSource` has, each built once."""

    def __init__(self, source: PomSource, env: Environment | None = None) -> None:
        self.source = source
        self.env = env or Environment()
        self._raw: dict[Coords, tuple[str, Pom] | Broken] = {}
        self._built: dict[Coords, Effective | Broken] = {}

    # -- raw POMs ----------------------------------------------------------------------------
    def raw(self, coords: Coords) -> tuple[str, Pom] | Broken:
        hit = self._raw.get(coords)
        if hit is None:
            found = self.source(*coords)
            if found is None:
                hit = Broken(coords, "pom", "no POM in the archive")
            else:
                path, data = found
                try:
                    hit = (path, self._activate(parse(data)))
                except PomError as exc:
                    hit = Broken(coords, "pom", f"{path}: {exc}", (path,))
            self._raw[coords] = hit
        return hit

    def _activate(self, pom: Pom) -> Pom:
        active = [p for p in pom.profiles if _activated(p.activation, self.env)]
        if not active:
            active = [p for p in pom.profiles if p.activation.active_by_default]
        for profile in active:
            pom = pom.with_profile(profile)
        return pom

    # -- effective models --------------------------------------------------------------------
    def effective(self, coords: Coords) -> Effective | Broken:
        hit = self._built.get(coords)
        if hit is None:
            self._built[coords] = Broken(coords, "import", f"{gav(coords)} imports itself")
            hit = self._build(coords)
            self._built[coords] = hit
        return hit

    def _build(self, coords: Coords) -> Effective | Broken:
        lineage: list[Pom] = []
        paths: list[str] = []
        problem: Broken | None = None
        want, seen, named_by = coords, set(), coords
        while True:
            got = self.raw(want)
            if isinstance(got, Broken):
                if not lineage:
                    return got
                problem = Broken(coords, "parent", f"parent {gav(want)}: {got.reason}",
                                 lack=Lack(want, got.reason, named_by))
                break
            path, pom = got
            lineage.append(pom)
            paths.append(path)
            seen.add(want)
            if pom.parent is None:
                break
            want, named_by = pom.parent, want
            if want in seen:
                problem = Broken(coords, "parent", f"parent {gav(want)} is its own ancestor")
                break
        merged = lineage[-1]
        for child in reversed(lineage[:-1]):
            merged = _inherit(child, merged)
        props = _Properties(merged, self.env)
        model = _interpolate(merged, props)
        managed, poms, bom_problem = self._import(model, coords, tuple(paths))
        deps = tuple(_manage(d, managed) for d in model.dependencies)
        reloc = None
        if model.relocation is not None:
            g, a, v = model.relocation
            reloc = (g or model.group_id or "", a or model.artifact_id or "",
                     v or model.version or "")
        built = Effective(
            group_id=model.group_id or coords[0], artifact_id=model.artifact_id or coords[1],
            version=model.version or coords[2], packaging=model.packaging or "jar",
            dependencies=deps, managed=managed, poms=poms, relocation=reloc)
        problem = problem or bom_problem
        return built if problem is None else replace(problem, poms=poms, partial=built)

    def _import(self, model: Pom, coords: Coords, poms: tuple[str, ...]
                ) -> tuple[tuple[Dep, ...], tuple[str, ...], Broken | None]:
        """The managed dependencies with the BOMs' merged in, the POMs read, and the first
        BOM that could not be read (the others are merged all the same)."""
        own = [d for d in model.managed if not _is_import(d)]
        imports = [d for d in model.managed if _is_import(d)]
        merged = {d.management_key: d for d in own}
        all_poms = list(poms)
        problem: Broken | None = None
        for d in imports:
            bom = (d.group_id or "", d.artifact_id or "", d.version or "")
            if not d.version or "${" in d.version:
                problem = problem or Broken(
                    coords, "import", f"import-scope BOM {d.group_id}:{d.artifact_id} has "
                    f"no usable version ({d.version or 'none'})")
                continue
            got = self.effective(bom)
            all_poms.extend(p for p in got.poms if p not in all_poms)
            if isinstance(got, Broken):
                problem = problem or Broken(coords, "import", f"import-scope BOM {gav(bom)}: "
                                            f"{got.reason}",
                                            lack=got.lack or Lack(bom, got.reason, coords))
                if got.partial is None:
                    continue
                got = got.partial
            for m in got.managed:
                merged.setdefault(m.management_key, m)
        return tuple(merged.values()), tuple(all_poms), problem


def _is_import(d: Dep) -> bool:
    return d.scope == "import" and (d.type or "jar") == "pom"


def _inherit(child: Pom, parent: Pom) -> Pom:
    """``child`` merged with its (already merged) parent: the child wins."""
    deps = {d.management_key: d for d in child.dependencies}
    for d in parent.dependencies:
        deps.setdefault(d.management_key, d)
    managed = {d.management_key: d for d in child.managed}
    for d in parent.managed:
        managed.setdefault(d.management_key, d)
    p = child.parent or ("", "", "")
    return replace(child,
                   group_id=child.group_id or p[0] or parent.group_id,
                   version=child.version or p[2] or parent.version,
                   properties={**parent.properties, **child.properties},
                   dependencies=tuple(deps.values()), managed=tuple(managed.values()),
                   profiles=())


def _manage(d: Dep, managed: tuple[Dep, ...]) -> Dep:
    """``d`` with what its managed entry gives and it lacks; scope defaults to compile."""
    m = next((x for x in managed if x.management_key == d.management_key), None)
    if m is not None:
        d = replace(d, version=d.version or m.version, scope=d.scope or m.scope,
                    optional=d.optional or m.optional,
                    system_path=d.system_path or m.system_path,
                    exclusions=d.exclusions or m.exclusions)
    return d if d.scope else replace(d, scope="compile")


class _Properties:
    """Resolves ``${...}`` as Maven's model interpolator does; what it cannot stays as is."""

    _MODEL = ("groupId", "artifactId", "version", "packaging")

    def __init__(self, model: Pom, env: Environment) -> None:
        parent = model.parent or ("", "", "")
        fields = {"groupId": model.group_id, "artifactId": model.artifact_id,
                  "version": model.version, "packaging": model.packaging or "jar",
                  "parent.groupId": parent[0] or None, "parent.artifactId": parent[1] or None,
                  "parent.version": parent[2] or None}
        self.fields = {k: v for k, v in fields.items() if v is not None}
        self.props = model.properties
        self.system = env.system_properties()
        self._cache: dict[str, str | None] = {}

    def lookup(self, name: str, stack: tuple[str, ...]) -> str | None:
        if name in stack:
            return None  # a cycle: left as written
        if name in self._cache:
            return self._cache[name]
        raw: str | None = None
        for prefix in ("project.", "pom."):
            if name.startswith(prefix) and name[len(prefix):] in self.fields:
                raw = self.fields[name[len(prefix):]]
                break
        else:
            if name in self.props:
                raw = self.props[name]
            elif name in self.system:
                raw = self.system[name]
            elif name in self._MODEL and name in self.fields:
                raw = self.fields[name]
        value = None if raw is None else self.expand(raw, stack + (name,))
        self._cache[name] = value
        return value

    @overload
    def expand(self, text: str, stack: tuple[str, ...] = ()) -> str: ...
    @overload
    def expand(self, text: None, stack: tuple[str, ...] = ()) -> None: ...
    @overload
    def expand(self, text: str | None, stack: tuple[str, ...] = ()) -> str | None: ...

    def expand(self, text: str | None, stack: tuple[str, ...] = ()) -> str | None:
        if text is None or "${" not in text:
            return text

        def sub(m: re.Match[str]) -> str:
            value = self.lookup(m.group(1), stack)
            return m.group(0) if value is None else value
        return _EXPR.sub(sub, text)


def _interpolate(model: Pom, props: _Properties) -> Pom:
    x = props.expand

    def dep(d: Dep) -> Dep:
        return Dep(group_id=x(d.group_id), artifact_id=x(d.artifact_id), version=x(d.version),
                   type=x(d.type), classifier=x(d.classifier), scope=x(d.scope),
                   optional=x(d.optional), system_path=x(d.system_path),
                   exclusions=tuple((x(g) or "", x(a) or "") for g, a in d.exclusions))

    reloc = model.relocation
    return replace(
        model,
        group_id=x(model.group_id), version=x(model.version),
        artifact_id=x(model.artifact_id), packaging=x(model.packaging),
        dependencies=tuple(dep(d) for d in model.dependencies),
        managed=tuple(dep(d) for d in model.managed),
        relocation=None if reloc is None else (x(reloc[0]), x(reloc[1]), x(reloc[2])),
    )


# -- profile activation (Maven 3.8's activators; all present conditions must hold) ----------
def _activated(a: Activation, env: Environment) -> bool:
    present = [a.jdk is not None, a.property is not None, a.os is not None, a.file]
    if not any(present):
        return False
    if a.file:
        return False  # relative to a project directory, which a repository POM has none of
    if a.jdk is not None and not _jdk_active(a.jdk, env.jdk):
        return False
    if a.property is not None and not _property_active(*a.property, env):
        return False
    if a.os is not None and not _os_active(a.os, env):
        return False
    return True


def _jdk_active(spec: str, version: str) -> bool:
    if spec.startswith("!"):
        return not version.startswith(spec[1:])
    if spec[:1] in ("[", "("):
        return _jdk_in_range(version, spec)
    return version.startswith(spec)


def _jdk_in_range(version: str, spec: str) -> bool:
    tokens = spec.split(",")
    while tokens and not tokens[-1]:  # as Java's String.split drops trailing empty strings
        tokens.pop()
    bounds = []
    for token in tokens:
        if token.startswith("["):
            bounds.append((token.replace("[", ""), True))
        elif token.startswith("("):
            bounds.append((token.replace("(", ""), False))
        elif token.endswith("]"):
            bounds.append((token.replace("]", ""), True))
        elif token.endswith(")"):
            bounds.append((token.replace(")", ""), False))
        elif not token:
            bounds.append(("", False))
    if len(bounds) < 2:
        bounds.append(("99999999", False))

    def relation(value: str, bound: tuple[str, bool], left: bool) -> int:
        text, closed = bound
        if not text:
            return 1 if left else -1
        value = re.sub(r"\.+", ".", re.sub(r"[._-]", ".", re.sub(r"[^\d._-]", "", value)))
        xs = (re.split(r"[._-]", value) + ["0", "0", "0"])[:3]
        ys = (re.split(r"[._-]", text) + ["0", "0", "0"])[:3]
        for x, y in zip(xs, ys):
            xi, yi = int(x or 0), int(y or 0)
            if xi != yi:
                return -1 if xi < yi else 1
        return 0 if closed else (-1 if left else 1)

    left = relation(version, bounds[0], True)
    if left == 0:
        return True
    if left < 0:
        return False
    return relation(version, bounds[1], False) <= 0


def _property_active(name: str, value: str | None, env: Environment) -> bool:
    negate = name.startswith("!")
    name = name[1:] if negate else name
    if not name:
        return False
    actual = env.system_properties().get(name)
    if not value:
        return not actual if negate else bool(actual)
    want_not = value.startswith("!")
    want = value[1:] if want_not else value
    return (want != actual) if want_not else (want == actual)


def _os_active(spec: tuple[str | None, str | None, str | None, str | None],
               env: Environment) -> bool:
    name, family, arch, version = spec

    def test(want: str | None, actual: str | Callable[[str], bool]) -> bool:
        if want is None:
            return True
        want = want.lower()
        negate = want.startswith("!")
        want = want[1:] if negate else want
        hit = actual(want) if callable(actual) else want == actual
        return hit != negate

    return (test(family, lambda f: f in env.os_family) and test(name, env.os_name)
            and test(arch, env.os_arch) and test(version, env.os_version))
