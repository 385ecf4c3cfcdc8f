"""An archive's maven files by coordinates: what ``lookup``, ``versions`` and ``deps`` ask.

Everything comes from the module's own columns (``maven_group_id`` ... ``maven_extension``) on
the first-chunk rows of the archive's maven groups, so a POM is found by what it declares and
an artifact by its place in the layout. :class:`MavenIndex` reads those rows once (filtered by
Arrow kernels to the asked ``groupId:artifactId`` when there is one) and keeps them by
``(groupId, artifactId, version)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..commands import ArchiveView, module_rows
from . import version as mversion

COLUMNS = ("maven_group_id", "maven_artifact_id", "maven_version", "maven_classifier",
           "maven_extension")


@dataclass(frozen=True)
class File:
    relative_path: str
    repo: str
    group_id: str
    artifact_id: str
    version: str
    classifier: str
    extension: str


class MavenIndex:
    """The maven files of ``archive`` (of ``repo`` only, when given) by coordinates.

    Implements :class:`~znippy_sql.modules.maven.resolve.Repository` over the archive.
    """

    def __init__(self, archive: ArchiveView, module: Any, *, repo: str | None = None,
                 group_id: str | None = None, artifact_id: str | None = None) -> None:
        self.archive = archive
        where = {}
        if group_id is not None:
            where["maven_group_id"] = group_id
        if artifact_id is not None:
            where["maven_artifact_id"] = artifact_id
        self._by_gav: dict[tuple[str, str, str], list[File]] = {}
        self._by_ga: dict[tuple[str, str], set[str]] = {}
        self._by_dir: dict[str, list[str]] = {}
        for row in module_rows(archive, module, COLUMNS, where=where, repo=repo):
            g, a, v = row["maven_group_id"], row["maven_artifact_id"], row["maven_version"]
            if g is None or a is None or v is None:
                continue  # metadata of a group or an artifact: no version
            f = File(row["relative_path"], row["repo"], g, a, v, row["maven_classifier"] or "",
                     row["maven_extension"] or "")
            self._by_gav.setdefault((g, a, v), []).append(f)
            self._by_ga.setdefault((g, a), set()).add(v)
            head, _, name = f.relative_path.rpartition("/")
            self._by_dir.setdefault(head, []).append(name)

    def files(self, group_id: str, artifact_id: str, version: str | None = None, *,
              classifier: str | None = None, extension: str | None = None) -> list[File]:
        """Files of the coordinates, by version (Maven order) then path."""
        versions = [version] if version is not None else \
            mversion.sort_versions(self._by_ga.get((group_id, artifact_id), ()))
        out: list[File] = []
        for v in versions:
            out.extend(sorted((f for f in self._by_gav.get((group_id, artifact_id, v), ())
                               if (classifier is None or f.classifier == classifier)
                               and (extension is None or f.extension == extension)),
                              key=lambda f: f.relative_path))
        return out

    def versions(self, group_id: str, artifact_id: str) -> list[str]:
        """Every version with a file here, in Maven's order."""
        return mversion.sort_versions(self._by_ga.get((group_id, artifact_id), ()))

    def _one(self, files: Iterable[File], name: str) -> File | None:
        """The file called exactly ``name``, else (timestamped snapshots) the last one."""
        found = sorted(files, key=lambda f: f.relative_path)
        exact = [f for f in found if f.relative_path.rsplit("/", 1)[-1] == name]
        last = exact or found
        return last[-1] if last else None

    def pom_file(self, group_id: str, artifact_id: str, version: str) -> File | None:
        files = self.files(group_id, artifact_id, version, classifier="", extension="pom")
        return self._one(files, f"{artifact_id}-{version}.pom")

    def pom(self, group_id: str, artifact_id: str, version: str
            ) -> tuple[str, bytes] | None:
        f = self.pom_file(group_id, artifact_id, version)
        return None if f is None else (f.relative_path, self.archive.read(f.relative_path))

    def artifact(self, group_id: str, artifact_id: str, version: str, extension: str,
                 classifier: str) -> str | None:
        files = self.files(group_id, artifact_id, version, classifier=classifier,
                           extension=extension)
        name = f"{artifact_id}-{version}{'-' + classifier if classifier else ''}.{extension}"
        f = self._one(files, name)
        return None if f is None else f.relative_path

    def sidecars(self, path: str) -> list[str]:
        """The checksum and signature files kept next to ``path`` (``.sha1``, ``.asc`` ...)."""
        head, sep, name = path.rpartition("/")
        return sorted(f"{head}{sep}{n}" for n in self._by_dir.get(head, ())
                      if n.startswith(name + "."))
