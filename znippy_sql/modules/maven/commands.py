"""``znippy-sql maven ARCHIVE lookup|versions|pom|deps|extract-closure ...`` (docs/modules.md).

The functions here (:func:`lookup`, :func:`versions`, :func:`pom`, :func:`closure`) are also
what the SQL macros ``maven_versions`` and ``maven_deps`` call, so both give the same answers.
"""

from __future__ import annotations

import argparse
import re
import weakref
from typing import Any

from ...format.units import counted
from ..commands import Answer, ArchiveView, Command, files_text, with_sizes
from .index import MavenIndex
from .model import Environment
from .resolve import SCOPES, Closure, Resolver

_PART = re.compile(r"^[^:\s]+$")
#: per open archive and repo filter: its index and a resolver sharing built models
_CACHE: "weakref.WeakKeyDictionary[Any, dict[Any, tuple[MavenIndex, dict[str, Resolver]]]]" = \
    weakref.WeakKeyDictionary()


def coordinates(text: str, *, least: int, most: int, usage: str) -> tuple[str, ...]:
    """``G:A[:V...]`` split and checked: between ``least`` and ``most`` parts, none empty
    (except an empty classifier: ``g:a:1.0::pom`` is the POM without a classifier)."""
    parts = text.strip().split(":")
    ok = least <= len(parts) <= most and all(
        _PART.match(p) or (i == 3 and p == "") for i, p in enumerate(parts))
    if not ok:
        raise argparse.ArgumentTypeError(f"{text!r} is not {usage}")
    return tuple(parts)


def index_of(archive: ArchiveView, module: Any, repo: str | None = None) -> MavenIndex:
    """The archive's maven index (built once per open archive and repo)."""
    return _cached(archive, module, repo)[0]


def resolver_of(archive: ArchiveView, module: Any, repo: str | None = None,
                env: Environment | None = None) -> Resolver:
    index, resolvers = _cached(archive, module, repo)
    env = env or Environment()
    found = resolvers.get(env.jdk)
    if found is None or found.models.env != env:
        found = resolvers[env.jdk] = Resolver(index, env)
    return found


def _cached(archive: ArchiveView, module: Any, repo: str | None
            ) -> tuple[MavenIndex, dict[str, Resolver]]:
    try:
        per = _CACHE.setdefault(archive, {})
    except TypeError:  # an archive object that takes no weak reference: no cache
        return MavenIndex(archive, module, repo=repo), {}
    hit = per.get(repo)
    if hit is None:
        hit = per[repo] = (MavenIndex(archive, module, repo=repo), {})
    return hit


# -- the answers, as Python ------------------------------------------------------------------
def lookup(archive: ArchiveView, module: Any, coords: tuple[str, ...], *,
           repo: str | None = None) -> list[dict[str, Any]]:
    """The files of ``G:A[:V[:CLASSIFIER[:EXTENSION]]]`` with their sizes."""
    g, a, *rest = coords
    v = rest[0] if rest else None
    classifier = rest[1] if len(rest) > 1 else None
    ext = rest[2] if len(rest) > 2 else None
    index = MavenIndex(archive, module, repo=repo, group_id=g, artifact_id=a)
    files = index.files(g, a, v, classifier=classifier, extension=ext)
    return with_sizes(archive, [{
        "relative_path": f.relative_path, "repo": f.repo, "group_id": f.group_id,
        "artifact_id": f.artifact_id, "version": f.version, "classifier": f.classifier or None,
        "extension": f.extension} for f in files])


def versions(archive: ArchiveView, module: Any, group_id: str, artifact_id: str, *,
             repo: str | None = None) -> list[dict[str, Any]]:
    """Each version of ``G:A`` in Maven's order, with its file count and whether a POM is
    there."""
    index = MavenIndex(archive, module, repo=repo, group_id=group_id, artifact_id=artifact_id)
    out = []
    for v in index.versions(group_id, artifact_id):
        files = index.files(group_id, artifact_id, v)
        out.append({"version": v, "files": len(files),
                    "pom": index.pom_file(group_id, artifact_id, v) is not None})
    return out


def pom(archive: ArchiveView, module: Any, coords: tuple[str, str, str], *,
        repo: str | None = None) -> tuple[str, bytes] | None:
    index = MavenIndex(archive, module, repo=repo, group_id=coords[0], artifact_id=coords[1])
    return index.pom(*coords)


def closure(archive: ArchiveView, module: Any, coords: tuple[str, str, str], *,
            scope: str | None = None, depth: int | None = None, repo: str | None = None,
            env: Environment | None = None) -> Closure:
    return resolver_of(archive, module, repo, env).closure(coords, scope=scope, depth=depth)


def closure_paths(archive: ArchiveView, module: Any, found: Closure, *,
                  repo: str | None = None) -> list[str]:
    """Every file an offline Maven needs for the closure: POMs (parents and BOMs too),
    artifact files and their checksum/signature sidecars."""
    index = index_of(archive, module, repo)
    maybe = [found.root_pom, found.root_file, *found.poms]
    for r in found.resolved:
        maybe += (r.pom, r.file)
    want = {p for p in maybe if p is not None}
    out = set(want)
    for p in want:
        out.update(index.sidecars(p))
    return sorted(out)


def closure_data(found: Closure) -> dict[str, Any]:
    return {
        "root": found.root, "pom": found.root_pom, "file": found.root_file,
        "complete": found.complete,
        "resolved": [{"coordinates": r.coordinates, "group_id": r.group_id,
                      "artifact_id": r.artifact_id, "version": r.version, "type": r.type,
                      "extension": r.extension, "classifier": r.classifier or None,
                      "scope": r.scope, "optional": r.optional, "depth": r.depth,
                      "via": r.via, "pom": r.pom, "file": r.file} for r in found.resolved],
        "missing": [{"coordinates": m.coordinates, "what": m.what, "reason": m.reason,
                     "via": m.via, "depth": m.depth} for m in found.missing],
    }


# -- the commands ----------------------------------------------------------------------------
def make_commands(module: Any) -> tuple[Command, ...]:
    def gav_arg(text: str) -> tuple[str, ...]:
        return coordinates(text, least=3, most=3, usage="G:A:V")

    def lookup_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("coords", metavar="G:A[:V[:CLASSIFIER[:EXTENSION]]]",
                       type=lambda t: coordinates(
                           t, least=2, most=5, usage="G:A[:V[:CLASSIFIER[:EXTENSION]]]"))

    def versions_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("coords", metavar="G:A",
                       type=lambda t: coordinates(t, least=2, most=2, usage="G:A"))

    def gav_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("coords", metavar="G:A:V", type=gav_arg)

    def deps_args(p: argparse.ArgumentParser) -> None:
        gav_args(p)
        p.add_argument("--scope", choices=tuple(SCOPES),
                       help="keep the classpath of this scope (compile: compile, provided, "
                            "system; runtime: compile, runtime; default test: all)")
        p.add_argument("--depth", type=_depth, metavar="N",
                       help="only artifacts at most N levels below the root")
        p.add_argument("--jdk", default="17", metavar="VERSION",
                       help="the java.version profiles are activated for (default 17)")

    def extract_args(p: argparse.ArgumentParser) -> None:
        deps_args(p)
        p.add_argument("-o", "--out", required=True, metavar="DIR",
                       help="where to write the closure (a Maven repository layout)")

    def run_lookup(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        rows = lookup(archive, module, args.coords, repo=args.repo)
        if not rows:
            return Answer({"files": []}, status=1,
                          message=f"no maven files for {':'.join(args.coords)}")
        return Answer({"files": rows}, files_text(rows))

    def run_versions(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        g, a = args.coords
        rows = versions(archive, module, g, a, repo=args.repo)
        data = {"group_id": g, "artifact_id": a, "versions": rows}
        if not rows:
            return Answer(data, status=1, message=f"no versions of {g}:{a} in the archive")
        return Answer(data, "".join(r["version"] + "\n" for r in rows))

    def run_pom(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        found = pom(archive, module, args.coords, repo=args.repo)
        if found is None:
            return Answer(None, status=1, message=f"no POM for {':'.join(args.coords)}")
        path, data = found
        return Answer({"relative_path": path, "size": len(data), "pom": _xml_text(data)}, data)

    def run_deps(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        found = closure(archive, module, args.coords, scope=args.scope, depth=args.depth,
                        repo=args.repo, env=Environment(jdk=args.jdk))
        data = closure_data(found)
        message = None if found.complete else \
            f"{':'.join(args.coords)}: {counted(len(found.missing), 'coordinate')} missing"
        return Answer(data, _deps_text(found), 0 if found.complete else 1, message)

    def run_extract(archive: ArchiveView, args: argparse.Namespace) -> Answer:
        found = closure(archive, module, args.coords, scope=args.scope, depth=args.depth,
                        repo=args.repo, env=Environment(jdk=args.jdk))
        paths = closure_paths(archive, module, found, repo=args.repo)
        report = archive.extract(args.out, paths=paths) if paths else None
        failed = dict(report.failed) if report is not None else {}
        data = {**closure_data(found), "dest": args.out, "extracted": len(paths) - len(failed),
                "bytes": report.bytes_written if report is not None else 0,
                "failed": failed}
        lines = [f"{args.out}: {counted(len(paths) - len(failed), 'file')} of the closure of "
                 f"{found.root} ({counted(len(found.resolved), 'artifact')})"]
        lines += [f"missing: {m.coordinates} ({m.what}): {m.reason}" for m in found.missing]
        lines += [f"failed: {p}: {why}" for p, why in sorted(failed.items())]
        ok = found.complete and not failed
        message = None if ok else (f"{counted(len(found.missing), 'coordinate')} missing, "
                                   f"{counted(len(failed), 'file')} failed")
        return Answer(data, "\n".join(lines) + "\n", 0 if ok else 1, message)

    return (
        Command("lookup", "the files of G:A[:V[:CLASSIFIER[:EXTENSION]]], with sizes",
                run_lookup, lookup_args),
        Command("versions", "the versions of G:A, in Maven's order", run_versions,
                versions_args),
        Command("pom", "the POM of G:A:V, as stored", run_pom, gav_args),
        Command("deps", "the dependency closure of G:A:V from the POMs in the archive, and "
                "what is missing", run_deps, deps_args),
        Command("extract-closure", "extract G:A:V and its closure (POMs, parents, BOMs, "
                "files) as a repository", run_extract, extract_args),
    )


def _depth(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"not a depth: {text!r}")
    return n


def _xml_text(data: bytes) -> str:
    m = re.match(rb"^<\?xml[^>]*encoding=[\"']([A-Za-z0-9._-]+)[\"']", data.lstrip())
    encoding = m.group(1).decode("ascii") if m else "utf-8"
    try:
        return data.decode(encoding, errors="replace")
    except LookupError:
        return data.decode("utf-8", errors="replace")


def _deps_text(found: Closure) -> str:
    lines = [found.root + ("" if found.root_pom else "  (no POM)")]
    for r in found.resolved:
        flags = r.scope + (", optional" if r.optional else "")
        absent = "" if r.file else "  MISSING"
        lines.append(f"{'  ' * r.depth}{r.coordinates} ({flags}){absent}")
    for m in found.missing:
        via = f" (via {m.via})" if m.via else ""
        lines.append(f"missing: {m.coordinates} ({m.what}): {m.reason}{via}")
    lines.append(f"{counted(len(found.resolved), 'artifact')}, {len(found.missing)} missing")
    return "\n".join(lines) + "\n"
