"""Maven 2 repository layout: ``group/path/artifact/version/artifact-version[-classifier].ext``.

What this module claims (docs/modules.md):

- artifacts: ``org/slf4j/slf4j-api/2.0.9/slf4j-api-2.0.9.jar``, with a classifier
  (``...-2.0.9-sources.jar``), a compound extension (``...-bin.tar.gz``), and timestamped
  snapshots in a ``-SNAPSHOT`` directory (``1.0-SNAPSHOT/x-1.0-20240101.120000-3.jar``);
- their sidecars in the same directory: checksums and signatures (``.jar.sha1``, ``.pom.asc``,
  ``.jar.asc.md5`` ...): same coordinates, ``maven_extension`` keeps the whole chain;
- repository metadata: ``maven-metadata.xml`` (and ``-local``, and their sidecars) at the
  artifact or version level. The XML itself is read for its coordinates; a sidecar takes them
  from its directory.

For a ``.pom`` the coordinates come from the POM (``parent`` fills a missing groupId/version;
a ``${property}`` or an unreadable POM falls back to the path), and ``maven_packaging`` is the
POM's ``<packaging>`` (default ``jar``). For every other file ``maven_packaging`` is the
artifact's extension with sidecar suffixes removed.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import pyarrow as pa

#: Checksum and signature suffixes a repository keeps next to each artifact.
SIDECARS = ("sha1", "md5", "sha256", "sha512", "asc", "sig")
_METADATA = re.compile(r"^maven-metadata(?:-[A-Za-z0-9_.-]+)?\.xml((?:\.(?:%s))*)$"
                       % "|".join(SIDECARS))
_SNAPSHOT_STAMP = re.compile(r"^\d{8}\.\d{6}-\d+$")
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+~-]*$")


class MavenModule:
    name = "maven"
    pkg_type = 1
    fields = (
        pa.field("maven_group_id", pa.utf8()),
        pa.field("maven_artifact_id", pa.utf8()),
        pa.field("maven_version", pa.utf8()),
        pa.field("maven_classifier", pa.utf8()),
        pa.field("maven_packaging", pa.utf8()),
        pa.field("maven_extension", pa.utf8()),
    )

    #: what every path it claims matches (``modules.claim_all`` asks no other): a metadata
    #: file's name, or ``.../ARTIFACT/VERSION/ARTIFACT-...`` under a group directory
    claim_pattern = re.compile(r"(?:^|/)maven-metadata[^/]*$"
                               r"|^(?:[^/]+/)+([^/]+)/[^/]+/\1-[^/]*$")

    def claims(self, relative_path: str) -> bool:
        return _parsed(relative_path) is not None

    def columns(self, relative_path: str, read: Callable[[], bytes]) -> Mapping[str, Any]:
        parsed = _parsed(relative_path)
        if parsed is None:
            return {}
        coords = dict(parsed)
        ext = coords.get("maven_extension") or ""
        if ext == "pom":
            coords.update(_from_xml(read, metadata=False))
        elif ext == "maven-metadata.xml":
            declared = _from_xml(read, metadata=True)
            if declared.pop("group_level", False):  # e.g. the plugin list of a group
                dirs = relative_path.split("/")[:-1]
                declared = {"maven_group_id": ".".join(dirs) or None,
                            "maven_artifact_id": None, "maven_version": None}
            coords.update(declared)
        return coords

    @property
    def commands(self) -> tuple[Any, ...]:
        """``lookup``, ``versions``, ``pom``, ``deps``, ``extract-closure`` (commands.py)."""
        from .commands import make_commands

        return make_commands(self)


@lru_cache(maxsize=1024)
def _parsed(relative_path: str) -> dict[str, Any] | None:
    """:func:`parse_path`, remembered: a write claims a batch of paths (up to 256) before
    it asks for their columns, so each path is parsed once (do not change the dict)."""
    return parse_path(relative_path)


def parse_path(relative_path: str) -> dict[str, Any] | None:
    """Coordinates from the layout alone, or ``None`` when the path is not in it."""
    parts = relative_path.split("/")
    name = parts[-1]
    meta = _METADATA.match(name)
    if meta:
        return _metadata_coords(parts, "maven-metadata.xml" + meta.group(1))
    if len(parts) < 4:
        return None
    *group, artifact, version, _ = parts
    for p in (*group, artifact, version):  # (a loop: a generator costs a call a step)
        if not _SEGMENT.match(p):
            return None
    rest = _after_version(name, artifact, version)
    if rest is None:
        return None
    if rest.startswith("-"):
        classifier, dot, ext = rest[1:].partition(".")
        if not classifier or not dot:
            return None
    else:
        classifier, ext = None, rest[1:]
    if not ext or ext.startswith(".") or ext.endswith(".") or ".." in ext:
        return None
    return {
        "maven_group_id": ".".join(group),
        "maven_artifact_id": artifact,
        "maven_version": version,
        "maven_classifier": classifier,
        "maven_packaging": _strip_sidecars(ext),
        "maven_extension": ext,
    }


def _after_version(name: str, artifact: str, version: str) -> str | None:
    """What follows ``artifact-version`` in the file name (starts with '-' or '.'), if it fits.

    A ``-SNAPSHOT`` directory also holds timestamped files: ``1.0-20240101.120000-3``.
    """
    prefix = f"{artifact}-"
    if not name.startswith(prefix):
        return None
    tail = name[len(prefix):]
    if tail.startswith(version) and tail[len(version):len(version) + 1] in ("-", "."):
        return tail[len(version):]
    if version.endswith("-SNAPSHOT"):
        base = version[: -len("SNAPSHOT")]
        if tail.startswith(base):
            stamp = re.match(r"^(\d{8}\.\d{6}-\d+)([-.].*)$", tail[len(base):])
            if stamp and _SNAPSHOT_STAMP.match(stamp.group(1)):
                return stamp.group(2)
    return None


def _strip_sidecars(ext: str) -> str:
    parts = ext.split(".")
    while len(parts) > 1 and parts[-1] in SIDECARS:
        parts.pop()
    return ".".join(parts)


def _metadata_coords(parts: list[str], ext: str) -> dict[str, Any]:
    """``.../artifact/maven-metadata.xml`` or ``.../artifact/version/maven-metadata.xml``.

    From the path alone a metadata file is ambiguous (artifact level, version level, or a
    plugin group); the directory names are a first guess that the XML then corrects.
    """
    dirs = parts[:-1]
    version = dirs[-1] if dirs and dirs[-1].endswith("-SNAPSHOT") else None
    if version is not None:
        dirs = dirs[:-1]
    return {
        "maven_group_id": ".".join(dirs[:-1]) or None,
        "maven_artifact_id": dirs[-1] if dirs else None,
        "maven_version": version,
        "maven_classifier": None,
        "maven_packaging": "maven-metadata",
        "maven_extension": ext,
    }


def _from_xml(read: Callable[[], bytes], *, metadata: bool) -> dict[str, Any]:
    """Coordinates a POM or a maven-metadata.xml declares; empty when it cannot be read."""
    try:
        root = ET.fromstring(read())
    except (ET.ParseError, ValueError):
        return {}

    def text(*path: str) -> str | None:
        node: ET.Element | None = root
        for step in path:
            node = next((c for c in node if _local(c.tag) == step), None) if node is not None \
                else None
        value = (node.text or "").strip() if node is not None else ""
        return value if value and "${" not in value else None

    out: dict[str, Any] = {}
    group = text("groupId") or (None if metadata else text("parent", "groupId"))
    version = text("version") or (None if metadata else text("parent", "version"))
    if metadata:
        if _local(root.tag) != "metadata":
            return {}
        artifact = text("artifactId")
        if artifact is None:
            return {"group_level": True}
        out.update(maven_group_id=group, maven_artifact_id=artifact, maven_version=version)
        return {k: v for k, v in out.items() if v is not None}
    if _local(root.tag) != "project":
        return {}
    for key, value in (("maven_group_id", group), ("maven_artifact_id", text("artifactId")),
                       ("maven_version", version)):
        if value is not None:
            out[key] = value
    out["maven_packaging"] = text("packaging") or "jar"
    return out


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""
