"""The refs of a git archive: ``__gunnar_refs__`` (docs/git-sections.md).

One row per ref, as the repository had them when it was sealed: ``HEAD`` (its ``symbolic``
target when it names a branch, its ``target`` id when the branch has a commit), every branch,
tag, remote-tracking and other ref under ``refs/`` (``target`` = the id it names; a symbolic
ref such as ``refs/remotes/origin/HEAD`` also has ``symbolic``), ``peeled`` = the first non-tag
object an annotated tag leads to (what ``git show-ref -d`` prints as ``^{}``), and one row named
``shallow`` per boundary commit of a shallow repository (its ``target``; git treats it as
having no parents, whatever the archive holds). Rows in name order (bytes).

An archive sealed before this section existed has its refs only in ``__meta__`` (archive-level
facts ``refs/…`` and ``HEAD`` = id, no symbolic target, no shallow boundary): :func:`load_refs`
reads those instead, with ``peeled`` left to the caller (:func:`peel`). A ``__gunnar_refs__``
written by the Rust ``znippy-plugin-git`` is a log of pushes (``interop/pushlog.py``): read as
the refs its last push left.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import corelib
from ..errors import FormatError, NotFoundError, ZnippyError
if TYPE_CHECKING:  # pyarrow is the readers': ``git import`` writes the refs without it
    import pyarrow as pa

    from ..read.reader import Archive      # the readers' (an import need not load it)
    from .objects import GitObjects

SHALLOW = "shallow"


def refs_schema() -> pa.Schema:
    """``__gunnar_refs__``'s schema (the core writes it: ``native/src/git/seal.rs``)."""
    import pyarrow as pa

    oid = pa.binary(20)
    return pa.schema([
        pa.field("name", pa.utf8(), nullable=False),
        pa.field("target", oid, nullable=True),
        pa.field("peeled", oid, nullable=True),
        pa.field("symbolic", pa.utf8(), nullable=True),
    ])


@dataclass(frozen=True)
class Ref:
    name: str
    target: bytes | None
    peeled: bytes | None = None
    symbolic: str | None = None


@dataclass
class Refs:
    """The refs of one archive by name, and its shallow boundary. ``stored``: read from
    ``__gunnar_refs__`` (False: from ``__meta__``, an older archive, or none at all)."""

    by_name: dict[str, Ref] = field(default_factory=dict)
    shallow: frozenset[bytes] = frozenset()
    stored: bool = False

    def sorted(self) -> list[Ref]:
        return [self.by_name[n] for n in sorted(self.by_name, key=lambda n: n.encode())]


# -- writing: the refs of a repository, from git ------------------------------------------------
@dataclass(frozen=True)
class RepoRefs:
    """A repository's refs as read before its objects are pushed (names and ids only, no
    object read, so a damaged pack is reported by the push, not here); :meth:`table` peels
    the tags once the objects are known good. Kept as columns (one entry per ref, in git's
    listing order, ``HEAD`` last): a mirror has thousands of refs and an import makes no
    Python object per ref beyond its name and id."""

    repo: str
    names: list[str]
    targets: list[bytes | None]
    symbolic: list[str | None]
    shallow: tuple[bytes, ...]

    @property
    def refs(self) -> list[Ref]:
        return [Ref(n, t, None, s) for n, t, s in zip(self.names, self.targets, self.symbolic)]

    def table(self, git: Callable[..., bytes], *,
              tags: Collection[bytes] | None = None) -> pa.Table:
        """:meth:`stream` read as a table."""
        return _read(self.stream(git, tags=tags))

    def stream(self, git: Callable[..., bytes], *,
               tags: Collection[bytes] | None = None) -> bytes:
        """The ``__gunnar_refs__`` stream, annotated tags peeled (one ``git cat-file``).
        ``tags``: the ids of every tag object the repository holds, when the caller knows
        them (``git import`` does, from the packs' entry types): only refs naming one are
        asked about (a ref naming anything else peels to itself)."""
        targets = self.targets
        peeled: list[bytes | None] = [None] * len(targets)
        asked = [i for i, t in enumerate(targets)
                 if t is not None and (tags is None or t in tags)]
        ask = "".join([f"{targets[i].hex()}^{{}}\n" for i in asked])  # type: ignore[union-attr]
        if ask:
            out = git(self.repo, "cat-file", "--batch-check=%(objectname)",
                      stdin=ask.encode()).decode().split("\n")
            for i, got in zip(asked, out):
                if len(got) == 40 and bytes.fromhex(got) != targets[i]:  # a tag
                    peeled[i] = bytes.fromhex(got)
        return _stream(self.names, targets, peeled, self.symbolic, self.shallow)


def repo_refs(repo: str, git: Callable[..., bytes], *, shallow: str | None = None
              ) -> RepoRefs:
    """The refs of the repository at ``repo``; ``git(repo, *args, stdin=...)`` runs git there
    (the importer's runner, errors as ``ZnippyError``). ``shallow``: the path of its shallow
    file when the caller asked git for it already."""
    listing = git(repo, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(symref)")
    rows = [line.split("\0") for line in listing.decode().split("\n") if line]
    names = [r[0] for r in rows]
    targets: list[bytes | None] = [bytes.fromhex(r[1]) for r in rows]
    symbolic: list[str | None] = [r[2] or None for r in rows]
    head = _quiet(repo, "rev-parse", "-q", "--verify", "HEAD")
    branch = _quiet(repo, "symbolic-ref", "-q", "HEAD")
    if head or branch:
        names.append("HEAD")
        targets.append(bytes.fromhex(head) if head else None)
        symbolic.append(branch or None)
    if shallow is None:
        shallow = git(repo, "rev-parse", "--git-path", "shallow").decode().strip()
        shallow = shallow if os.path.isabs(shallow) else os.path.join(repo, shallow)
    return RepoRefs(repo, names, targets, symbolic, tuple(_shallow_file(shallow)))


def _quiet(repo: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", repo, *args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return done.stdout.decode().strip() if done.returncode == 0 else ""


def _shallow_file(path: str) -> list[bytes]:
    try:
        with open(path, encoding="ascii") as fh:
            return sorted(bytes.fromhex(ln.strip()) for ln in fh if ln.strip())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ZnippyError(f"cannot read the shallow file: {exc}", path=path) from None


def refs_table(refs: Sequence[Ref], shallow: Iterable[bytes] = ()) -> pa.Table:
    """``refs`` (and the shallow boundary) as the ``__gunnar_refs__`` table, in name order.
    A writer that knows its refs (an import, a push server at seal time) passes this as a
    :class:`~znippy_sql.format.sections.ReservedSection` named ``GIT_REFS``."""
    return _read(_stream([r.name for r in refs], [r.target for r in refs],
                         [r.peeled for r in refs], [r.symbolic for r in refs], shallow))


def _read(stream: bytes) -> pa.Table:
    import pyarrow as pa

    return pa.ipc.open_stream(stream).read_all()


def _stream(names: Sequence[str], targets: Sequence[bytes | None],
            peeled: Sequence[bytes | None], symbolic: Sequence[str | None],
            shallow: Iterable[bytes]) -> bytes:
    """The stream of refs given as columns, rows in name order (a ``str`` sorts as its UTF-8
    bytes do), then one ``shallow`` row per boundary commit."""
    if SHALLOW in names:
        raise ZnippyError(f"a ref may not be named {SHALLOW!r} (the shallow boundary's rows)")
    order = [i for _n, i in sorted(zip(names, range(len(names))))]
    bounds: list[bytes | None] = list(sorted(set(shallow)))
    return corelib.git_refs_stream(
        [names[i] for i in order] + [SHALLOW] * len(bounds),
        [targets[i] for i in order] + bounds,
        [peeled[i] for i in order] + [None] * len(bounds),
        [symbolic[i] for i in order] + [None] * len(bounds))


# -- reading ------------------------------------------------------------------------------------
def load_refs(archive: Archive) -> Refs:
    """The archive's refs: ``__gunnar_refs__``, else the ``refs/…``/``HEAD`` facts of
    ``__meta__`` (older archives), else none."""
    import pyarrow as pa

    from ..format.schema import GIT_REFS

    if archive.has_section(GIT_REFS):
        table = archive.section(GIT_REFS)
        if isinstance(table, pa.Table) and "push_seq" in table.schema.names:
            return _rust_refs(table, archive.path)
        if not isinstance(table, pa.Table) or not _schema_ok(table.schema):
            got = table.schema if isinstance(table, pa.Table) else "raw bytes"
            raise FormatError(f"{GIT_REFS} does not have the refs schema (name, target, "
                              f"peeled, symbolic): {got}".replace("\n", ", "), path=archive.path)
        by_name: dict[str, Ref] = {}
        shallow = set()
        for row in table.to_pylist():
            if row["name"] == SHALLOW:
                if row["target"] is None:
                    raise FormatError(f"{GIT_REFS}: a shallow row without a commit id",
                                      path=archive.path)
                shallow.add(row["target"])
            else:
                by_name[row["name"]] = Ref(row["name"], row["target"], row["peeled"],
                                           row["symbolic"])
        return Refs(by_name, frozenset(shallow), stored=True)
    return Refs(_meta_refs(archive))


def _rust_refs(table: pa.Table, path: str) -> Refs:
    """A Rust push log (``interop/pushlog.py``), folded: every ref its last push left.
    ``stored`` False: a tag's peeled id, unless the pusher gave it, comes from the objects."""
    from ..interop.pushlog import rust_refs

    return Refs({n: Ref(n, target, peeled, symbolic)
                 for n, (target, peeled, symbolic) in rust_refs(table, path).items()})


def _schema_ok(schema: pa.Schema) -> bool:
    return [(f.name, f.type) for f in schema] == [(f.name, f.type) for f in refs_schema()]


def _meta_refs(archive: Archive) -> dict[str, Ref]:
    from ..format.schema import META

    if not archive.has_section(META):
        return {}
    from ..provenance.meta import read_meta

    table = read_meta(archive)
    out: dict[str, Ref] = {}
    if table is None:
        return out
    for row in table.to_pylist():
        key, value = row["key"], row["value"]
        if row["relative_path"] is not None or not (key == "HEAD" or key.startswith("refs/")):
            continue
        try:
            oid = bytes.fromhex(value)
        except ValueError:
            continue
        if len(oid) == 20:
            out[key] = Ref(key, oid)
    return out


def peel(objects: "GitObjects", oid: bytes) -> tuple[list[bytes], bytes, str]:
    """Follow tags from ``oid``: ``(the tag ids passed, the first non-tag id, its type)``.
    A tag whose object is not in the archive is a NotFoundError naming both."""
    path = objects.archive.path
    tags: list[bytes] = []
    kind = objects.type_of(oid)
    while kind == "tag":
        if len(tags) >= 1000 or oid in tags:
            raise FormatError(f"tag {oid.hex()} leads to a cycle of tags", path=path)
        tags.append(oid)
        line = objects.read(oid)[1].split(b"\n", 1)[0]
        try:
            if not line.startswith(b"object ") or len(line) != 47:
                raise ValueError
            target = bytes.fromhex(line[7:].decode("ascii"))
        except ValueError:
            raise FormatError(f"tag {oid.hex()} has no object line", path=path) from None
        if objects.index.find(target) is None:
            raise NotFoundError(f"tag {oid.hex()} points at {target.hex()}, which is not in "
                                "the archive", path=path)
        oid, kind = target, objects.type_of(target)
    return tags, oid, kind


def show_ref(refs: Refs, objects: "GitObjects | None" = None, *, head: bool = False,
             dereference: bool = False, heads: bool = False, tags: bool = False,
             hash_only: bool = False, patterns: Sequence[str] = ()) -> list[str]:
    """The lines ``git show-ref`` prints for these refs: ``<id> <name>`` of every ref under
    ``refs/`` in name order (only ``refs/heads/``, ``refs/tags/`` with ``heads``/``tags``;
    only names equal to a pattern or ending in ``/<pattern>`` when patterns are given),
    ``HEAD`` first with ``head``, and ``<peeled> <name>^{}`` after an annotated tag with
    ``dereference`` (peeled from ``objects`` when the archive did not store it)."""
    lines = []
    for ref in refs.sorted():
        if ref.target is None:
            continue
        if ref.name == "HEAD":
            if not head:
                continue
        elif not ref.name.startswith("refs/"):
            continue
        else:
            spaces = ("refs/heads/",) * heads + ("refs/tags/",) * tags
            if spaces and not ref.name.startswith(spaces):
                continue
            if patterns and not any(ref.name == p or ref.name.endswith("/" + p)
                                    for p in patterns):
                continue
        lines.append(ref.target.hex() if hash_only else f"{ref.target.hex()} {ref.name}")
        if dereference:
            peeled = ref.peeled
            if peeled is None and not refs.stored and objects is not None \
                    and objects.index.find(ref.target) is not None \
                    and objects.type_of(ref.target) == "tag":
                peeled = peel(objects, ref.target)[1]
            if peeled is not None:
                # git prints the name here even with --hash
                lines.append(f"{peeled.hex()} {ref.name}^{{}}")
    return lines
