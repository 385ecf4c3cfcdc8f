"""Object names as ``git rev-parse`` takes them, for what an archive holds.

A name is, in git's order: a full id (40 hex digits; it must be in the archive); a ref —
``HEAD``, a full ref name, or a short one tried as ``refs/<n>``, ``refs/tags/<n>``,
``refs/heads/<n>``, ``refs/remotes/<n>``, ``refs/remotes/<n>/HEAD`` (the first that exists
wins, as git's dwim); else an abbreviated id of 4 or more hex digits, which must name exactly
one object (an ambiguous one is an error listing every candidate with its type). Anything else
is an error naming it. Refs come from the archive (git/refs.py). Then git's suffixes: ``~n``
(first parents), ``^n`` (n-th parent), ``^{type}`` / ``^{}`` (peel), ``:path`` (a tree
entry); a shallow boundary commit has no parents, as in git.

On top: :meth:`Names.commit` peels tags to the commit ``git log`` starts from (a tree, a blob
or a tag of one is "not a commit"); :meth:`Names.reachable` is what
``git rev-list --objects <name>`` lists (a tag lists itself and the tags it passes; a tree its
closure; a blob itself).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Mapping
from typing import Any, cast

from .roaring import BitMap

from ..errors import NotFoundError, ZnippyError
from .graph import tree_closure
from .objects import GitObjects, _TreeReader
from .pack import parse_commit, tree_entries
from .refs import Refs, load_refs, peel

HEX = frozenset("0123456789abcdef")
MIN_ABBREV = 4
#: longer names are refused before any parsing (git's own limit for a ref name is PATH_MAX)
MAX_NAME = 4096
#: git's dwim rules (refs.c ref_rev_parse_rules), in order
RULES = ("{}", "refs/{}", "refs/tags/{}", "refs/heads/{}", "refs/remotes/{}",
         "refs/remotes/{}/HEAD")
_SUFFIXES = re.compile(r"(.+?)((?:~\d*|\^(?:\{[a-z]*\}|\d*))*)")
_STEP = re.compile(r"~\d*|\^\{[a-z]*\}|\^\d*")


class Names:
    """Name resolution for one archive's objects and refs."""

    def __init__(self, objects: GitObjects, refs: Refs | None = None) -> None:
        self.objects = objects
        self.refs = refs if refs is not None else load_refs(objects.archive)
        self.path = objects.archive.path

    def resolve(self, name: str) -> bytes:
        """The object id ``name`` names (any type)."""
        text = name.strip()
        if not text:
            raise ZnippyError("an empty object name", path=self.path)
        if len(text) > MAX_NAME:
            raise ZnippyError(f"an object name of {len(text)} characters (at most {MAX_NAME})",
                              path=self.path)
        base, colon, path = text.partition(":")
        m = _SUFFIXES.fullmatch(base)
        if m is None or (not m.group(2) and not colon):
            return self._base(text)
        oid = self._base(m.group(1))
        for step in _STEP.findall(m.group(2)):
            oid = self._step(oid, step, text)
        return self._path(oid, path, text) if colon else oid

    def _base(self, text: str) -> bytes:
        width = 2 * self.objects.index.oid_len
        hexish = set(text.lower()) <= HEX
        if hexish and len(text) == width:
            oid = bytes.fromhex(text)
            if self.objects.index.find(oid) is None:
                raise NotFoundError(f"no object {text.lower()} in the archive", path=self.path)
            return oid
        ref = self._ref(text)
        if ref is not None:
            return ref
        if hexish and MIN_ABBREV <= len(text) < width:
            return self._abbreviation(text.lower())
        known = f"{len(self.refs.by_name)} refs" if self.refs.by_name else "no refs"
        raise NotFoundError(f"no object or ref named {text!r} in the archive (it has {known};"
                            f" ids are {MIN_ABBREV} to {width} hex digits)", path=self.path)

    # -- suffixes: ~n, ^n, ^{type}, ^{}, :path -------------------------------------------------
    def _step(self, oid: bytes, step: str, name: str) -> bytes:
        if step.startswith("^{"):
            want = step[2:-1]
            if want not in ("", "object", "commit", "tree", "blob", "tag"):
                raise ZnippyError(f"{name!r}: unknown object type {want!r}", path=self.path)
            return self._peel_to(oid, want, name)
        count = int(step[1:] or 1)
        oid = self._peel_to(oid, "commit", name)
        if step[0] == "^":
            return oid if count == 0 else self._parent(oid, count - 1, name)
        for _ in range(count):
            oid = self._parent(oid, 0, name)
        return oid

    def _peel_to(self, oid: bytes, want: str, name: str) -> bytes:
        if want == "object" or (want == "tag" and self.objects.type_of(oid) == "tag"):
            return oid
        _tags, target, kind = peel(self.objects, oid)
        if want in ("", kind):
            return target
        if want == "tree" and kind == "commit":
            return parse_commit(self.objects.read(target)[1])[0]
        raise ZnippyError(f"{name!r}: {target.hex()} is a {kind}, not a {want}", path=self.path)

    def _parent(self, commit: bytes, which: int, name: str) -> bytes:
        parents = () if commit in self.refs.shallow else \
            parse_commit(self.objects.read(commit)[1])[1]
        if which >= len(parents):
            raise NotFoundError(f"{name!r}: commit {commit.hex()} has no parent {which + 1}"
                                + (" (a shallow boundary)" if commit in self.refs.shallow else ""),
                                path=self.path)
        if self.objects.index.find(parents[which]) is None:
            raise NotFoundError(f"{name!r}: parent {parents[which].hex()} is not in the archive",
                                path=self.path)
        return parents[which]

    def _path(self, oid: bytes, path: str, name: str) -> bytes:
        oid = self._peel_to(oid, "tree", name)
        for part in (p for p in path.split("/") if p):
            kind, content = self.objects.read(oid)
            hit = next((child for _mode, entry, child in tree_entries(content)
                        if entry == part.encode()), None) if kind == "tree" else None
            if hit is None or self.objects.index.find(hit) is None:
                raise NotFoundError(f"{name!r}: path {path!r} is not in the archive's tree",
                                    path=self.path)
            oid = hit
        return oid

    def _ref(self, text: str) -> bytes | None:
        by_name = self.refs.by_name
        for rule in RULES:
            ref = by_name.get(rule.format(text))
            if ref is None:
                continue
            if ref.target is None:
                why = f"points to {ref.symbolic}, which has no commit yet (an unborn branch)" \
                    if ref.symbolic else "names no object"
                raise NotFoundError(f"{ref.name} {why}", path=self.path)
            if self.objects.index.find(ref.target) is None:
                raise NotFoundError(f"{ref.name} points at {ref.target.hex()}, which is not in "
                                    "the archive", path=self.path)
            return ref.target
        return None

    def _abbreviation(self, text: str) -> bytes:
        index = self.objects.index
        hits = index.with_prefix(text)
        if not hits:
            raise NotFoundError(f"no object {text} in the archive", path=self.path)
        if len(hits) > 1:
            shown = ", ".join(f"{index.oid(i).hex()} {self.objects.type_of(index.oid(i))}"
                              for i in hits[:20])
            more = f" and {len(hits) - 20} more" if len(hits) > 20 else ""
            raise ZnippyError(f"short object id {text} is ambiguous; the candidates are: "
                              f"{shown}{more}", path=self.path)
        return index.oid(hits[0])

    def commit(self, name: str) -> bytes:
        """The commit ``git log <name>`` starts from: tags peeled; anything else refused."""
        return self.commit_of(self.resolve(name), name)

    def commit_of(self, oid: bytes, name: str | None = None) -> bytes:
        """``oid`` peeled to a commit (tags followed), or an error saying it is not one."""
        _tags, target, kind = peel(self.objects, oid)
        if kind != "commit":
            what = f"{kind} {target.hex()}" if target == oid else \
                f"tag {oid.hex()} of a {kind} ({target.hex()})"
            raise ZnippyError(f"{name or oid.hex()!r} names a {what}, not a commit",
                              path=self.path)
        return target

    def log(self, name: str) -> list[bytes]:
        """The commits ``git log <name>`` lists, in its order."""
        return self.log_of(self.resolve(name), name)

    def log_of(self, oid: bytes, name: str | None = None) -> list[bytes]:
        """:meth:`log` of a resolved id. At a shallow boundary git follows no parent; when a
        boundary commit's parent is in the archive after all (another branch fetched deeper),
        the walk cuts it there, else the plain walk of :meth:`GitObjects.log` is the same."""
        commit = self.commit_of(oid, name)
        if not self.grafts_matter():
            return self.objects.log(commit)
        graph = self.objects._graph
        shallow = self.refs.shallow
        seen = {commit}
        heap = [(-graph[commit][2], 0, commit)]
        count = 1
        out = []
        while heap:
            _t, _n, cur = heapq.heappop(heap)
            out.append(cur)
            for p in graph[cur][1] if cur not in shallow else ():
                if p not in seen and p in graph:
                    seen.add(p)
                    heapq.heappush(heap, (-graph[p][2], count, p))
                    count += 1
        return out

    def reachable(self, name: str) -> BitMap:
        """Ordinals of what ``git rev-list --objects <name>`` lists."""
        return self.reachable_of(self.resolve(name))

    def reachable_of(self, oid: bytes) -> BitMap:
        """:meth:`reachable` of a resolved id: a tag adds itself and the tags it passes."""
        tags, target, kind = peel(self.objects, oid)
        find = self.objects.index.find
        if kind == "commit":
            out = self._commit_closure(target)
        elif kind == "tree":
            out = BitMap()
            tree_closure(out, target, _trees(self.objects), find)
        else:
            out = BitMap([i for i in (find(target),) if i is not None])
        out.update(i for i in map(find, tags) if i is not None)
        return out

    def grafts_matter(self) -> bool:
        """True when a shallow boundary commit has a parent in the archive: git cuts that
        edge, the stored graph and bitmaps do not, so log and reach must walk."""
        graph = self.objects._graph
        return any(p in graph for c in self.refs.shallow if c in graph for p in graph[c][1])

    def _commit_closure(self, commit: bytes) -> BitMap:
        """A commit's ``rev-list --objects`` set: the stored bitmaps (completed), or, when a
        shallow boundary cuts a parent that is in the archive (the bitmaps follow every parent
        present), a walk of the commits :meth:`log_of` lists and their trees."""
        objects = self.objects
        if not self.grafts_matter():
            return objects.reachable(commit)
        out = BitMap()
        trees = _trees(objects)
        for cur in self.log_of(commit):
            own = objects.index.find(cur)
            if own is not None:
                out.add(own)
            tree_closure(out, objects._graph[cur][0], trees, objects.index.find)
        return out


def _trees(objects: Any) -> Mapping[bytes, Any]:
    """A :class:`_TreeReader` where ``tree_closure`` wants a mapping: it reads trees on
    demand and has ``[]`` and ``in``, all that function uses."""
    return cast(Mapping[bytes, Any], _TreeReader(objects))
