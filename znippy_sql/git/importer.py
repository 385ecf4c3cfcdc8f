"""``git import``: a real repository's objects pushed through the push path and sealed.

``mode="packs"`` (default) pushes the repository's own pack files verbatim (oldest first),
then one pack of its loose objects made by ``git pack-objects``; ``mode="one-pack"`` pushes
one pack of every object (``git pack-objects`` over ``--batch-all-objects``), a mirror. Either
way the archive holds exactly the objects ``git cat-file --batch-all-objects`` lists. The refs
go into ``__gunnar_refs__`` (git/refs.py: HEAD's branch, every ref's target and peeled id, the
shallow boundary) and, as before, into ``__meta__`` (archive-level facts: key = ref name,
value = object id; ``HEAD`` = the id it resolves to). The blob file and journal live in a
staging directory beside the output, removed when the seal is in place (or on failure).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from ..errors import ZnippyError
from ..format.schema import GIT_REFS, META, META_SCHEMA
from ..format.sections import ReservedSection
from .push import Receiver
from .refs import repo_refs
from .sections import BITMAP_EVERY

Mode = Literal["packs", "one-pack"]


@dataclass(frozen=True)
class ImportReport:
    archive: str
    packs: int
    objects: int
    commits: int
    refs: int
    pack_bytes: int
    archive_bytes: int
    seconds: float


def _git(repo: str, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["git", "-C", repo, *args], input=stdin, capture_output=True,
                              check=False)
    except FileNotFoundError:
        raise ZnippyError("the git command is not installed", path=repo) from None
    if done.returncode:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise ZnippyError(f"git {args[0]} failed: {why[-1] if why else done.returncode}",
                          path=repo)
    return done.stdout


def _objects_dir(repo: str) -> str:
    if not os.path.isdir(repo):
        raise ZnippyError("not a directory", path=repo)
    try:
        path = _git(repo, "rev-parse", "--git-path", "objects").decode().strip()
    except ZnippyError:
        raise ZnippyError("not a git repository", path=repo) from None
    return path if os.path.isabs(path) else os.path.join(repo, path)


def _pack_files(objects: str) -> list[str]:
    folder = os.path.join(objects, "pack")
    if not os.path.isdir(folder):
        return []
    packs = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".pack")]
    return sorted(packs, key=lambda p: (os.stat(p).st_mtime_ns, os.path.basename(p)))


def _loose_ids(objects: str) -> list[str]:
    out = []
    for d in sorted(os.listdir(objects)):
        if len(d) == 2 and all(c in "0123456789abcdef" for c in d):
            out.extend(d + n for n in sorted(os.listdir(os.path.join(objects, d)))
                       if len(n) == 38)
    return out


def _refs(repo: str) -> pa.Table:
    lines = _git(repo, "for-each-ref", "--format=%(objectname) %(refname)").decode().split("\n")
    rows = [ln.split(" ", 1) for ln in lines if ln]
    head = subprocess.run(["git", "-C", repo, "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True, check=False).stdout.decode().strip()
    if head:
        rows.append([head, "HEAD"])
    rows.sort(key=lambda r: r[1])
    return pa.table({"relative_path": pa.array([None] * len(rows), pa.utf8()),
                     "key": [r[1] for r in rows], "value": [r[0] for r in rows]},
                    schema=META_SCHEMA)


def import_repository(repo_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                      mode: Mode = "packs", bitmap_every: int = BITMAP_EVERY) -> ImportReport:
    """Push every object of the repository at ``repo_dir`` and seal ``out``."""
    start = time.perf_counter()
    repo, out = os.fspath(repo_dir), os.fspath(out)
    out = _local_output(out)
    objects = _objects_dir(repo)
    refs = _refs(repo)
    named = repo_refs(repo, _git)
    stage = f"{out}.import-{os.getpid()}"
    try:
        os.mkdir(stage)
    except OSError as exc:
        raise ZnippyError(f"cannot create the staging directory {stage}: {exc.strerror}",
                          path=out) from None
    try:
        with Receiver(os.path.join(stage, "objects.pack")) as rx:
            pushed = 0
            if mode == "one-pack":
                ids = _git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
                pushed += _push_made(rx, repo, ids, "all objects")
            else:
                for path in _pack_files(objects):
                    pushed += _push_file(rx, path)
                loose = _loose_ids(objects)
                if loose:
                    pushed += _push_made(rx, repo, "\n".join(loose).encode() + b"\n",
                                         "loose objects")
            stored = [ReservedSection(META, refs), ReservedSection(GIT_REFS, named.table(_git))]
            report = rx.seal(out, stored, bitmap_every=bitmap_every)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return ImportReport(out, report.packs_sealed, report.objects, report.commits, refs.num_rows,
                        report.blob_bytes, report.sealed_total_bytes,
                        time.perf_counter() - start)


def _local_output(out: str) -> str:
    """``out`` as a local path (a ``file://`` URL is one); any other URL is refused."""
    from ..remote import is_url, local_path

    if not is_url(out):
        return out
    path = local_path(out)
    if path is None:
        raise ZnippyError("git import writes local files only; write a local archive and copy "
                          "it", path=out)
    return path


def _push_file(rx: Receiver, path: str) -> int:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ZnippyError(f"cannot read: {exc.strerror}", path=path) from None
    rx.push(data, name=path)
    return len(data)


def _push_made(rx: Receiver, repo: str, ids: bytes, what: str) -> int:
    data = _git(repo, "pack-objects", "--stdout", "--delta-base-offset", "-q", stdin=ids)
    rx.push(data, name=f"<git pack-objects of the {what}>")
    return len(data)
