"""The dependency closure of one artifact, from the POMs of a repository (docs/modules.md).

The artifact is the root project: all its direct dependencies count, whatever their scope.
Below them the walk is breadth first, in declaration order, which visits the nodes of each
depth in the order Maven's depth-first collector meets them; that is what nearest-wins needs:

- a dependency is selected before management: below the direct ones, ``test`` and
  ``provided`` dependencies and ``optional`` ones are left out, and so is anything an
  exclusion on the way down names (``*`` matches all);
- then the root's ``dependencyManagement`` (imports included) sets version, scope and
  optional of every dependency below the direct ones, and adds its exclusions at any depth;
- nearest wins per ``groupId:artifactId:extension:classifier``: the first one met at the
  smallest depth (of two siblings, the higher version); a loser, and a node with the root's
  key, is not followed;
- scopes are then settled parents first: a child's scope derives from its parent's
  (compile→child's; runtime/test→the parent's; provided/system→provided), and a node met on
  several paths takes the widest (compile > runtime > provided > test), unless it is a direct
  dependency, whose declared scope stands.

Every node that wins is checked for its POM and its artifact file; what is not there, or a
version that is missing, a property that is not defined, a range nothing satisfies, a missing
parent or BOM, is reported as missing with the reason.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from . import version as mversion
from .model import Broken, Coords, Effective, Environment, ModelBuilder, gav
from .pom import Dep

#: what each output scope filter keeps
SCOPES = {"compile": {"compile", "provided", "system"}, "runtime": {"compile", "runtime"},
          "test": {"compile", "runtime", "provided", "system", "test"}}
_ROOT = "\0root"
#: packaging whose artifact is a jar although the packaging says otherwise
JAR_PACKAGING = {"bundle", "maven-plugin", "ejb", "eclipse-plugin", "maven-archetype",
                 "hk2-jar", "takari-jar", "takari-maven-plugin", "jar"}


class Repository(Protocol):
    """Where POMs and artifact files are found by coordinates."""

    def pom(self, group_id: str, artifact_id: str, version: str
            ) -> tuple[str, bytes] | None: ...

    def artifact(self, group_id: str, artifact_id: str, version: str, extension: str,
                 classifier: str) -> str | None: ...

    def versions(self, group_id: str, artifact_id: str) -> list[str]: ...


@dataclass
class _Node:
    dep: Dep
    group_id: str
    artifact_id: str
    version: str
    extension: str
    classifier: str
    scope: str
    optional: bool
    depth: int
    parent: int
    #: exclusions in force for this node's children: (groupId, artifactId)
    exclusions: frozenset[tuple[str, str]]
    model: Effective | Broken | None = None
    problem: tuple[str, str] | None = None
    alive: bool = True

    @property
    def key(self) -> str:
        return f"{self.group_id}:{self.artifact_id}:{self.extension}:{self.classifier}"

    @property
    def coords(self) -> Coords:
        return (self.group_id, self.artifact_id, self.version)


@dataclass(frozen=True)
class Resolved:
    """One artifact of the closure."""

    group_id: str
    artifact_id: str
    version: str
    type: str
    extension: str
    classifier: str
    scope: str
    optional: bool
    depth: int
    #: coordinates of the artifact that brought it in (``None`` for a direct dependency)
    via: str | None
    pom: str | None
    file: str | None

    @property
    def coordinates(self) -> str:
        parts = [self.group_id, self.artifact_id, self.extension]
        if self.classifier:
            parts.append(self.classifier)
        return ":".join([*parts, self.version])


@dataclass(frozen=True)
class Missing:
    """Something the closure needs that the repository does not have."""

    coordinates: str
    #: ``pom``, ``artifact``, ``parent``, ``import``, ``version``, ``property``, ``range``
    what: str
    reason: str
    via: str | None
    depth: int


@dataclass
class Closure:
    root: str
    root_pom: str | None
    root_file: str | None
    resolved: list[Resolved] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    #: every POM read to build the models: the closure's own, their parents and BOMs
    poms: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


def derive_scope(parent: str, child: str) -> str:
    """Maven's ``JavaScopeDeriver``: the scope a child gets under a parent of scope ``parent``."""
    if child in ("system", "test"):
        return child
    if not parent or parent == "compile":
        return child
    if parent in ("test", "runtime"):
        return parent
    if parent in ("system", "provided"):
        return "provided"
    return "runtime"


def _widest(scopes: set[str]) -> str:
    if len(scopes) > 1:
        scopes.discard("system")
    if len(scopes) == 1:
        return next(iter(scopes))
    for s in ("compile", "runtime", "provided", "test"):
        if s in scopes:
            return s
    return ""


def _excluded(exclusions: Iterable[tuple[str, str]], group_id: str, artifact_id: str) -> bool:
    return any((g in ("*", group_id)) and (a in ("*", artifact_id)) for g, a in exclusions)


class Resolver:
    """Resolves closures against one repository; models are built once and shared."""

    def __init__(self, repo: Repository, env: Environment | None = None) -> None:
        self.repo = repo
        self.models = ModelBuilder(repo.pom, env)

    def closure(self, root: Coords, *, scope: str | None = None,
                depth: int | None = None) -> Closure:
        root_model = self.models.effective(root)
        out = Closure(root=gav(root), root_pom=None, root_file=None)
        if isinstance(root_model, Broken):
            out.missing.append(_missing_of(root_model))
            if root_model.partial is None:
                out.poms = list(root_model.poms)
                return out
            root_model = root_model.partial  # the POM is here: resolve what it declares
        out.root_pom = root_model.poms[0]
        ext = "jar" if root_model.packaging in JAR_PACKAGING else root_model.packaging
        if ext != "pom":
            out.root_file = self.repo.artifact(*root, ext, "")
            if out.root_file is None and ext != "jar":
                out.root_file = self.repo.artifact(*root, "jar", "")
            if out.root_file is None:
                out.missing.append(Missing(gav(root), "artifact", f"no {ext} file", None, 0))
        nodes, winners = self._walk(root, root_model)
        scopes, optional = self._settle(nodes, winners)
        poms: dict[str, None] = dict.fromkeys(root_model.poms)
        keep = SCOPES.get(scope or "test", SCOPES["test"])
        for i in self._preorder(nodes, winners):
            n = nodes[i]
            poms.update(dict.fromkeys(n.model.poms if n.model is not None else ()))
            s = scopes[i]
            if s not in keep or (depth is not None and n.depth > depth):
                continue
            via = None if n.parent == 0 else ":".join(nodes[n.parent].coords)
            pom = file = None
            if isinstance(n.model, Effective):
                pom = n.model.poms[0]
                file = pom if n.extension == "pom" else self.repo.artifact(
                    *n.coords, n.extension, n.classifier)
                if file is None:
                    n.problem = n.problem or ("artifact", f"no {n.extension} file"
                                              + (f" (classifier {n.classifier})"
                                                 if n.classifier else ""))
            if s == "system":
                n.problem = None  # a file on the machine (systemPath), not in a repository
            out.resolved.append(Resolved(
                n.group_id, n.artifact_id, n.version, n.dep.type or "jar", n.extension,
                n.classifier, s, optional[i], n.depth, via, pom, file))
            if n.problem is not None:
                out.missing.append(Missing(":".join(n.coords), *n.problem, via, n.depth))
        out.poms = list(poms)
        return out

    # -- the walk ----------------------------------------------------------------------------
    def _walk(self, root: Coords, model: Effective) -> tuple[list[_Node], dict[str, int]]:
        managed: dict[str, Dep] = {}
        for m in model.managed:
            managed.setdefault(self._key(m), m)
        root_node = _Node(Dep(root[0], root[1], root[2]), *root, "jar", "", "", False, 0, -1,
                          frozenset(), model)
        nodes = [root_node]
        winners: dict[str, int] = {}  # the root takes no part: a dependency on it is a node
        queue = [(d, 0) for d in model.dependencies]
        pos = 0
        while pos < len(queue):
            dep, parent = queue[pos]
            pos += 1
            up = nodes[parent]
            if not up.alive:
                continue
            node = self._node(dep, up, parent, managed)
            if node is None:
                continue
            nodes.append(node)
            index = len(nodes) - 1
            if not self._wins(node, nodes, winners):
                continue
            if node.problem is None and node.scope != "system":
                key = node.key
                self._load(node)
                if node.key != key and not self._wins(node, nodes, winners):
                    continue  # relocated onto an artifact that is already nearer
            winners[node.key] = index
            if node.scope == "system" or node.problem is not None:
                continue
            if isinstance(node.model, Effective):
                queue.extend((d, index) for d in node.model.dependencies)
        return nodes, winners

    @staticmethod
    def _key(d: Dep) -> str:
        return f"{d.group_id}:{d.artifact_id}:{d.extension}:{d.artifact_classifier}"

    def _node(self, dep: Dep, up: _Node, parent: int, managed: dict[str, Dep]
              ) -> _Node | None:
        depth = up.depth + 1
        g, a = dep.group_id or "", dep.artifact_id or ""
        if depth >= 2 and (dep.scope in ("test", "provided") or dep.is_optional):
            return None
        if _excluded(up.exclusions, g, a):
            return None
        m = managed.get(self._key(dep))
        exclusions = set(up.exclusions) | set(dep.exclusions)
        if m is not None:
            if depth >= 2:
                dep = replace(dep, version=m.version or dep.version,
                              scope=m.scope or dep.scope,
                              optional=m.optional if m.optional is not None else dep.optional)
            exclusions |= set(m.exclusions)
        node = _Node(dep, g, a, dep.version or "", dep.extension, dep.artifact_classifier,
                     dep.scope or "compile", dep.is_optional, depth, parent,
                     frozenset(exclusions))
        node.problem = self._version(node)
        return node

    @staticmethod
    def _wins(node: _Node, nodes: list[_Node], winners: dict[str, int]) -> bool:
        """Nearest wins; of two siblings the higher version (the other one is dropped)."""
        held = winners.get(node.key)
        if held is None:
            return True
        w = nodes[held]
        if w.depth == node.depth and w.parent == node.parent \
                and mversion.compare(node.version, w.version) > 0:
            w.alive = False
            return True
        return False

    def _version(self, node: _Node) -> tuple[str, str] | None:
        """Settle the node's version (a range → the highest one here); the problem, if any."""
        for value in (node.group_id, node.artifact_id, node.version):
            if "${" in value:
                start = value.index("${")
                expr = value[start:value.index("}", start) + 1] if "}" in value[start:] \
                    else value[start:]
                return ("property", f"{expr} is not defined")
        if not node.version:
            return ("version", "no version, and none managed")
        if mversion.is_range(node.version):
            try:
                bounds = mversion.parse_range(node.version)
            except ValueError as exc:
                return ("range", str(exc))
            fits = [v for v in self.repo.versions(node.group_id, node.artifact_id)
                    if mversion.in_range(v, bounds)]
            if not fits:
                return ("range", f"no version in {node.version} here")
            node.version = mversion.sort_versions(fits)[-1]
        return None

    def _load(self, node: _Node) -> None:
        """The node's model, following relocations (at most a few)."""
        seen = {node.coords}
        for _ in range(8):
            model = self.models.effective(node.coords)
            node.model = model
            if isinstance(model, Broken):
                node.problem = (model.what, model.reason)
                return
            if model.relocation is None or model.relocation == node.coords \
                    or model.relocation in seen:
                return
            node.group_id, node.artifact_id, node.version = model.relocation
            seen.add(node.coords)

    # -- scopes ------------------------------------------------------------------------------
    def _settle(self, nodes: list[_Node], winners: dict[str, int]
                ) -> tuple[dict[int, str], dict[int, bool]]:
        winner_of = {i: k for k, i in winners.items()}
        winner_of[0] = _ROOT
        items: dict[str, list[int]] = {}
        edges: dict[str, set[str]] = {}
        for i, n in enumerate(nodes[1:], 1):
            if n.parent in winner_of and nodes[n.parent].alive:
                items.setdefault(n.key, []).append(i)
                edges.setdefault(winner_of[n.parent], set()).add(n.key)
        order = _topological(list(winners), {k: v for k, v in edges.items() if k != _ROOT})
        key_scope: dict[str, str] = {_ROOT: ""}
        key_optional: dict[str, bool] = {_ROOT: False}
        for key in order:
            w = nodes[winners[key]]
            its = items.get(key, [winners[key]])
            direct = next((i for i in its if nodes[i].depth <= 1), None)
            if w.scope == "system":
                key_scope[key] = "system"
            elif direct is not None:
                key_scope[key] = nodes[direct].scope
            else:
                key_scope[key] = _widest({derive_scope(
                    key_scope.get(winner_of[nodes[i].parent], ""), nodes[i].scope)
                    for i in its})
            if direct is not None:
                key_optional[key] = nodes[direct].optional
            else:
                key_optional[key] = all(
                    nodes[i].optional or key_optional.get(winner_of[nodes[i].parent], False)
                    for i in its)
        return ({i: key_scope[k] for k, i in winners.items()},
                {i: key_optional[k] for k, i in winners.items()})

    @staticmethod
    def _preorder(nodes: list[_Node], winners: dict[str, int]) -> list[int]:
        """The winners as a tree, depth first in declaration order (as Maven prints it)."""
        alive = set(winners.values())
        children: dict[int, list[int]] = {}
        for i in sorted(alive - {0}):
            children.setdefault(nodes[i].parent, []).append(i)
        out: list[int] = []
        stack = list(reversed(children.get(0, [])))
        while stack:
            i = stack.pop()
            out.append(i)
            stack.extend(reversed(children.get(i, [])))
        return out


def _missing_of(root: Broken) -> Missing:
    """What a root model that could not be built lacks: the parent or BOM it (or an ancestor)
    names, else the root itself."""
    if root.lack is None:
        return Missing(gav(root.coords), root.what, root.reason, None, 0)
    return Missing(gav(root.lack.coords), root.what, root.lack.reason, gav(root.lack.named_by),
                   0)


def _topological(keys: list[str], edges: dict[str, set[str]]) -> list[str]:
    """``keys`` parents before children; a cycle is broken at the key met first."""
    rank = {k: i for i, k in enumerate(keys)}
    indegree = {k: 0 for k in keys}
    for src, dsts in edges.items():
        for d in dsts:
            if d != src and d in indegree:
                indegree[d] += 1
    ready = [(rank[k], k) for k in keys if indegree[k] == 0]
    heapq.heapify(ready)
    done: list[str] = []
    placed: set[str] = set()
    while len(done) < len(keys):
        if not ready:  # a cycle: take the earliest remaining key
            k = min((k for k in keys if k not in placed), key=rank.__getitem__)
            heapq.heappush(ready, (rank[k], k))
            indegree[k] = 0
        _, k = heapq.heappop(ready)
        if k in placed:
            continue
        placed.add(k)
        done.append(k)
        for d in edges.get(k, ()):
            if d in indegree and d not in placed and d != k:
                indegree[d] -= 1
                if indegree[d] <= 0:
                    heapq.heappush(ready, (rank[d], d))
    return done
