"""A POM as written (the raw model): what dependency resolution reads of it.

Read with ElementTree, by local names (any or no namespace). Values are trimmed, as Maven's
reader trims them; HTML entities (``&oslash;``), which Maven's lenient reader accepts, are
turned into character references first. Nothing is interpolated here: ``${...}`` stays as
written until the effective model is built (:mod:`.model`).
"""

from __future__ import annotations

import html.entities
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace

_ENTITY = re.compile(rb"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = {b"amp", b"lt", b"gt", b"quot", b"apos"}

#: Maven's artifact types: type -> (extension, classifier); any other type is its extension
TYPES = {
    "pom": ("pom", ""), "jar": ("jar", ""), "maven-plugin": ("jar", ""), "ejb": ("jar", ""),
    "ejb-client": ("jar", "client"), "test-jar": ("jar", "tests"),
    "javadoc": ("jar", "javadoc"), "java-source": ("jar", "sources"), "war": ("war", ""),
    "ear": ("ear", ""), "rar": ("rar", ""), "par": ("par", ""),
}


class PomError(ValueError):
    """The bytes are not a POM (not XML, or the root is not ``<project>``)."""


@dataclass(frozen=True)
class Dep:
    """One ``<dependency>`` (of ``dependencies`` or ``dependencyManagement``), as written."""

    group_id: str | None
    artifact_id: str | None
    version: str | None = None
    type: str | None = None
    classifier: str | None = None
    scope: str | None = None
    optional: str | None = None
    system_path: str | None = None
    #: (groupId, artifactId) pairs; ``*`` matches anything
    exclusions: tuple[tuple[str, str], ...] = ()

    @property
    def management_key(self) -> str:
        """``groupId:artifactId:type[:classifier]``, how Maven matches management to use."""
        key = f"{self.group_id}:{self.artifact_id}:{self.type or 'jar'}"
        return f"{key}:{self.classifier}" if self.classifier else key

    @property
    def extension(self) -> str:
        return TYPES.get(self.type or "jar", (self.type or "jar", ""))[0]

    @property
    def artifact_classifier(self) -> str:
        """The classifier of the file: the declared one, else the type's (``test-jar``)."""
        return self.classifier or TYPES.get(self.type or "jar", ("", ""))[1]

    @property
    def is_optional(self) -> bool:
        return (self.optional or "").strip().lower() == "true"


@dataclass(frozen=True)
class Activation:
    active_by_default: bool = False
    jdk: str | None = None
    #: (name, value or None)
    property: tuple[str, str | None] | None = None
    #: name, family, arch, version (each may start with ``!``)
    os: tuple[str | None, str | None, str | None, str | None] | None = None
    #: a ``<file>`` condition is present (never active here: no project directory)
    file: bool = False


@dataclass(frozen=True)
class Profile:
    id: str
    activation: Activation
    properties: dict[str, str] = field(default_factory=dict)
    dependencies: tuple[Dep, ...] = ()
    managed: tuple[Dep, ...] = ()


@dataclass(frozen=True)
class Pom:
    """The parts of a POM that decide its dependencies."""

    group_id: str | None
    artifact_id: str | None
    version: str | None
    packaging: str | None
    #: (groupId, artifactId, version) of ``<parent>``
    parent: tuple[str, str, str] | None
    properties: dict[str, str]
    dependencies: tuple[Dep, ...]
    managed: tuple[Dep, ...]
    profiles: tuple[Profile, ...] = ()
    #: ``distributionManagement/relocation``: (groupId, artifactId, version), None = unchanged
    relocation: tuple[str | None, str | None, str | None] | None = None

    def with_profile(self, profile: Profile) -> "Pom":
        """This POM with an active profile injected (the profile's values win)."""
        return replace(self, properties={**self.properties, **profile.properties},
                       dependencies=merge_deps(self.dependencies, profile.dependencies),
                       managed=merge_deps(self.managed, profile.managed))


def merge_deps(base: tuple[Dep, ...], dominant: tuple[Dep, ...]) -> tuple[Dep, ...]:
    """``base`` in its order, a dependency of ``dominant`` with the same management key
    replacing it in place, the rest of ``dominant`` appended."""
    if not dominant:
        return base
    merged = {d.management_key: d for d in base}
    for d in dominant:
        merged[d.management_key] = d
    return tuple(merged.values())


def dedupe(deps: tuple[Dep, ...]) -> tuple[Dep, ...]:
    """Maven's ``mergeDuplicates``: one entry per management key, at the first one's place,
    with the last one's values."""
    merged: dict[str, Dep] = {}
    for d in deps:
        merged[d.management_key] = d
    return tuple(merged.values()) if len(merged) != len(deps) else deps


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _child(node: ET.Element | None, name: str) -> ET.Element | None:
    return None if node is None else node.find(name)


def _children(node: ET.Element | None, name: str) -> list[ET.Element]:
    return [] if node is None else node.findall(name)


def _text(node: ET.Element | None, *path: str) -> str | None:
    found = None if node is None else node.find("/".join(path))
    if found is None:
        return None
    return (found.text or "").strip()


def _html_entities(data: bytes) -> bytes:
    def sub(m: re.Match[bytes]) -> bytes:
        name = m.group(1)
        if name in _XML_ENTITIES:
            return m.group(0)
        cp = html.entities.name2codepoint.get(name.decode("ascii"))
        return b"&#%d;" % cp if cp is not None else m.group(0)
    return _ENTITY.sub(sub, data)


def parse(data: bytes) -> Pom:
    """The raw model of a POM; :class:`PomError` when it is not one."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        if "undefined entity" not in str(exc):
            raise PomError(f"not XML: {exc}") from None
        try:
            root = ET.fromstring(_html_entities(data))
        except ET.ParseError as exc2:
            raise PomError(f"not XML: {exc2}") from None
    for el in root.iter():  # local names from here on: any namespace, or none
        if isinstance(el.tag, str) and "}" in el.tag:
            el.tag = el.tag.rsplit("}", 1)[1]
    if root.tag != "project":
        raise PomError(f"the root element is <{_local(root.tag)}>, not <project>")
    parent = _child(root, "parent")
    parent_coords = None
    if parent is not None:
        parent_coords = (_text(parent, "groupId") or "", _text(parent, "artifactId") or "",
                         _text(parent, "version") or "")
    reloc = _child(_child(root, "distributionManagement"), "relocation")
    return Pom(
        group_id=_text(root, "groupId"),
        artifact_id=_text(root, "artifactId"),
        version=_text(root, "version"),
        packaging=_text(root, "packaging"),
        parent=parent_coords,
        properties=_properties(root),
        dependencies=dedupe(_deps(_child(root, "dependencies"))),
        managed=dedupe(_deps(_child(_child(root, "dependencyManagement"), "dependencies"))),
        profiles=tuple(_profile(p) for p in _children(_child(root, "profiles"), "profile")),
        relocation=None if reloc is None else (_text(reloc, "groupId") or None,
                                               _text(reloc, "artifactId") or None,
                                               _text(reloc, "version") or None),
    )


def _properties(node: ET.Element | None) -> dict[str, str]:
    return {p.tag: (p.text or "").strip() for p in _children_all(_child(node, "properties"))}


def _children_all(node: ET.Element | None) -> list[ET.Element]:
    return [] if node is None else [c for c in node if isinstance(c.tag, str)]


def _deps(node: ET.Element | None) -> tuple[Dep, ...]:
    out = []
    for d in _children(node, "dependency"):
        exclusions = tuple((_text(e, "groupId") or "*", _text(e, "artifactId") or "*")
                           for e in _children(_child(d, "exclusions"), "exclusion"))
        out.append(Dep(
            group_id=_text(d, "groupId"), artifact_id=_text(d, "artifactId"),
            version=_text(d, "version") or None, type=_text(d, "type") or None,
            classifier=_text(d, "classifier") or None, scope=_text(d, "scope") or None,
            optional=_text(d, "optional") or None, system_path=_text(d, "systemPath") or None,
            exclusions=exclusions))
    return tuple(out)


def _profile(node: ET.Element) -> Profile:
    act = _child(node, "activation")
    activation = Activation()
    if act is not None:
        prop = _child(act, "property")
        os_ = _child(act, "os")
        activation = Activation(
            active_by_default=(_text(act, "activeByDefault") or "").lower() == "true",
            jdk=_text(act, "jdk") or None,
            property=None if prop is None else (_text(prop, "name") or "",
                                                _text(prop, "value")),
            os=None if os_ is None else (
                _text(os_, "name") or None, _text(os_, "family") or None,
                _text(os_, "arch") or None, _text(os_, "version") or None),
            file=_child(act, "file") is not None,
        )
    return Profile(
        id=_text(node, "id") or "default",
        activation=activation,
        properties=_properties(node),
        dependencies=dedupe(_deps(_child(node, "dependencies"))),
        managed=dedupe(_deps(_child(_child(node, "dependencyManagement"), "dependencies"))),
    )
