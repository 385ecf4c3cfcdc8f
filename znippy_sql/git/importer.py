"""``git import``: a real repository's packs, indexed (from their checked ``.idx``) and sealed.

``mode="packs"`` (default) pushes the repository's own pack files verbatim (oldest first),
each indexed from its ``.idx`` when it has one (checked by the core), then one pack of
its loose objects made by ``git pack-objects``; ``mode="one-pack"`` pushes
one pack of every object (``git pack-objects`` over ``--batch-all-objects``), a mirror. Either
way the archive holds exactly the objects ``git cat-file --batch-all-objects`` lists. The refs
go into ``__gunnar_refs__`` (git/refs.py: HEAD's branch, every ref's target and peeled id, the
shallow boundary) and, as before, into ``__meta__`` (archive-level facts: key = ref name,
value = object id; ``HEAD`` = the id it resolves to). The packs are written straight into a
staging sibling of the output and sealed there (no journal: the repository keeps its packs;
pushes go through :class:`~.push.Receiver`), then renamed onto the output; on failure nothing
is left. The output is a local file (a ``file://`` URL is one); other URLs are refused.
"""

from __future__ import annotations

import mmap
import os
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from collections.abc import Sequence
from typing import TYPE_CHECKING, BinaryIO, Literal

from .. import corelib
from ..errors import ZnippyError, missing_or
from ..format.names import GIT_REFS, META
from .pack import TAG, ParsedPack, index_pack
from .sections import WALK_BOUND as DEFAULT_WALK_BOUND

if TYPE_CHECKING:  # pyarrow: only for a caller that asks for the refs as a table (_refs)
    import pyarrow as pa

    from .refs import RepoRefs

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
    """git's output. Its input and errors go through files, so the output is its one pipe,
    read in one call (two pipes are served by a select loop whose rounds grow with the
    output: Python work per ref or object, issue 33)."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as feed:
        if stdin is not None:
            feed.write(stdin)
            feed.seek(0)
        try:
            done = subprocess.run(["git", "-C", repo, *args],
                                  stdin=feed if stdin is not None else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=err, check=False)
        except FileNotFoundError:
            raise ZnippyError("the git command is not installed", path=repo) from None
        if done.returncode:
            err.seek(0)
            why = err.read().decode(errors="replace").strip().splitlines()
            raise ZnippyError(f"git {args[0]} failed: {why[-1] if why else done.returncode}",
                              path=repo)
    return done.stdout


def _git_paths(repo: str) -> tuple[str, str]:
    """The repository's objects folder and its shallow file (which may not exist)."""
    if not os.path.isdir(repo):
        raise missing_or(repo, "not a directory", "repository")
    try:
        got = _git(repo, "rev-parse", "--git-path", "objects", "--git-path", "shallow")
    except ZnippyError:
        raise ZnippyError("not a git repository", path=repo) from None
    paths = got.decode().strip().split("\n")
    if len(paths) != 2:
        raise ZnippyError("not a git repository", path=repo)
    objects, shallow = (p if os.path.isabs(p) else os.path.join(repo, p) for p in paths)
    return objects, shallow


def _pack_files(objects: str) -> list[str]:
    folder = os.path.join(objects, "pack")
    if not os.path.isdir(folder):
        return []
    packs = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".pack")]
    return sorted(packs, key=lambda p: (os.stat(p).st_mtime_ns, os.path.basename(p)))


def _loose_ids(objects: str) -> list[str]:
    out: list[str] = []
    for d in sorted(os.listdir(objects)):
        if len(d) == 2 and all(c in "0123456789abcdef" for c in d):
            out.extend(d + n for n in sorted(os.listdir(os.path.join(objects, d)))
                       if len(n) == 38)
    return out


def _refs(repo: str) -> pa.Table:
    """The ``__meta__`` facts of the refs as a table (key = ref name and ``HEAD``, value =
    id): what :func:`_meta_refs` writes, read by pyarrow."""
    import pyarrow as pa

    from .refs import repo_refs

    named = repo_refs(repo, _git)
    return pa.ipc.open_stream(_meta_refs(named.names, named.targets)[1]).read_all()


def _meta_refs(names: Sequence[str], targets: Sequence[bytes | None]) -> tuple[str, bytes, int]:
    """The ``__meta__`` section of the refs (archive-level facts: key = ref name, value =
    id), rows in name order, encoded by the core."""
    rows = sorted([(n, t.hex()) for n, t in zip(names, targets) if t is not None])
    stream = corelib.meta_stream([None] * len(rows), [r[0] for r in rows],
                                 [r[1] for r in rows])
    return META, stream, len(rows)


def import_repository(repo_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                      mode: Mode = "packs", walk_bound: int = DEFAULT_WALK_BOUND
                      ) -> ImportReport:
    """Push every object of the repository at ``repo_dir`` and seal ``out``."""
    return _import(repo_dir, out, mode=mode, walk_bound=walk_bound)


class _Beside(threading.Thread):
    """The seal's modules imported and the refs listed by git, on a thread of their own while
    the caller's thread parses the packs in the core with the GIL released. A daemon: an
    interrupted import does not wait for it (the caller's thread stays the one that sees
    Ctrl-C)."""

    def __init__(self, repo: str, shallow: str) -> None:
        super().__init__(name="znippy-git-beside", daemon=True)
        self.repo, self.shallow = repo, shallow
        self.refs: RepoRefs | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            from . import seal  # noqa: F401  (the staging file and the seal)
            from .refs import repo_refs

            self.refs = repo_refs(self.repo, _git, shallow=self.shallow)
        except BaseException as exc:  # handed to the caller's thread by result()
            self.error = exc

    def result(self) -> RepoRefs:
        self.join()
        if self.error is not None:
            raise self.error
        assert self.refs is not None
        return self.refs


def _import(repo_dir: str | os.PathLike[str], out: str | os.PathLike[str], *, mode: Mode,
            walk_bound: int) -> ImportReport:
    """git lists the refs (one thread, :class:`_Beside`) while this thread indexes the packs
    in the core (GIL released; Ctrl-C seen here); then each pack is copied into the staging
    file (a background thread: kernel copy, BLAKE3, fdatasync) while the refs are peeled;
    the core writes the tail last (git/seal.py): no pyarrow, no numpy."""
    start = time.perf_counter()
    repo, out = os.fspath(repo_dir), os.fspath(out)
    out = _local_output(out)
    objects, shallow = _git_paths(repo)
    beside = _Beside(repo, shallow)
    beside.start()
    staged: list[tuple[bytes | memoryview, BinaryIO | None]] = []
    packs: list[ParsedPack] = []
    try:
        if mode == "one-pack":
            ids = _git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
            data: bytes | memoryview = _made(repo, ids)
            packs.append(index_pack(data, name="<git pack-objects of all objects>"))
            staged.append((data, None))
        else:
            for path in _pack_files(objects):
                data, idx, source = _read_pack(path)
                staged.append((data, source))
                packs.append(index_pack(data, name=path, idx=idx))
        named = beside.result()
        from .seal import PackSet, StagedPacks

        stage = StagedPacks(out)
    except BaseException:
        _close(staged)
        raise
    with stage:
        bases = PackSet()
        for (data, source), pack in zip(staged, packs):
            stage.add(data, source)
            bases.add(memoryview(data), pack)
        loose = _loose_ids(objects) if mode != "one-pack" else []
        if loose:
            data = _made(repo, "\n".join(loose).encode() + b"\n")
            stage.add(data)
            pack = index_pack(data, name="<git pack-objects of the loose objects>",
                              external=bases)
            bases.add(memoryview(data), pack)
            packs.append(pack)
        meta = _meta_refs(named.names, named.targets)
        prefer = {t for t in named.targets if t is not None}
        refs = named.stream(_git, tags=_tag_ids(packs))
        sections = [(GIT_REFS, refs, len(named.names) + len(set(named.shallow))), meta]
        report = stage.seal(packs, sections, walk_bound=walk_bound, prefer=prefer)
    return ImportReport(out, report.packs_sealed, report.objects, report.commits, meta[2],
                        report.blob_bytes, report.sealed_total_bytes,
                        time.perf_counter() - start)


def _close(staged: Sequence[tuple[object, BinaryIO | None]]) -> None:
    """The pack files opened for the staging file, closed (an import that failed first)."""
    for _, source in staged:
        if source is not None:
            source.close()


def _local_output(out: str) -> str:
    """``out`` as a local path (a ``file://`` URL is one); any other URL is refused."""
    if "://" not in out:  # not a URL: the remote package (7 ms of imports) is not needed
        return out
    from ..remote import is_url, local_path

    if not is_url(out):
        return out
    path = local_path(out)
    if path is None:
        raise ZnippyError("git import writes local files only; write a local archive and copy "
                          "it", path=out)
    return path


def _read_pack(path: str) -> tuple[bytes | memoryview, bytes | None, BinaryIO | None]:
    """A pack file's bytes (mapped read-only: the page cache's pages, no copy into this
    process; git replaces a pack by rename, never rewrites one in place), its ``.idx``'s
    (None: it has none) and the pack opened (the caller closes it; None: it is empty), from
    which the staging file copies the same bytes in the kernel."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise ZnippyError(f"cannot read: {exc.strerror}", path=path) from None
    try:
        size = os.fstat(fh.fileno()).st_size
        data: bytes | memoryview = (memoryview(mmap.mmap(fh.fileno(), 0,
                                                         access=mmap.ACCESS_READ))
                                    if size else b"")
        idx_path = path[:-len(".pack")] + ".idx"
        idx = None
        if os.path.exists(idx_path):
            with open(idx_path, "rb") as ih:
                idx = ih.read()
    except OSError as exc:
        fh.close()
        raise ZnippyError(f"cannot read: {exc.strerror}", path=path) from None
    if not size:
        fh.close()
        return data, idx, None
    return data, idx, fh


def _tag_ids(packs: Sequence[ParsedPack]) -> set[bytes]:
    """The ids of every tag object of the packs (from the core's type column)."""
    raw = b"".join([p.core.ids_of_type(TAG) for p in packs])
    return {raw[i:i + 20] for i in range(0, len(raw), 20)}


def _made(repo: str, ids: bytes) -> bytes:
    return _git(repo, "pack-objects", "--stdout", "--delta-base-offset", "-q", stdin=ids)
