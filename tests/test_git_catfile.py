"""``git cat-file`` of an archive answers what git answers, for every object of real histories:
``-t``, ``-s``, ``-p`` and ``-e`` checked in-process for all objects against one
``git cat-file --batch-all-objects --batch-check`` and one ``--batch`` (git is the oracle), and
the CLI as a process spot-checked against ``git cat-file`` itself.

Histories: this project's own (``git clone --mirror`` of the repository the tests sit in), the
5,000-commit ``fast-import`` history of test_git, and a small one made so that a delta's zlib
stream spends more than 64 bytes on its Huffman tables before the first output byte (what made
``-s`` call good objects damaged)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from test_git import Repo, fast_import_stream, git_env

from znippy_sql import open_archive
from znippy_sql.errors import NotFoundError
from znippy_sql.git.importer import import_repository
from znippy_sql.git.objects import GitObjects, quote_path
from znippy_sql.git.pack import OFS_DELTA, REF_DELTA, entry_header, ofs_distance, tree_entries
from znippy_sql.git.revparse import Names

CLI = Path(sys.executable).parent / "znippy-sql"


def git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          env=git_env(repo.parent)).stdout


def oracle(repo: Path) -> dict[str, tuple[str, int, bytes]]:
    """``oid -> (type, size, content)`` from two git processes."""
    check = {}
    for ln in git(repo, "cat-file", "--batch-all-objects", "--batch-check").splitlines():
        oid, kind, size = ln.decode().split()
        check[oid] = (kind, int(size))
    batch = git(repo, "cat-file", "--batch-all-objects", "--batch")
    out, pos = {}, 0
    while pos < len(batch):
        nl = batch.index(b"\n", pos)
        oid, kind, size = batch[pos:nl].decode().split()
        content = batch[nl + 1:nl + 1 + int(size)]
        pos = nl + 2 + int(size)
        assert check[oid] == (kind, int(size)), oid
        out[oid] = (kind, int(size), content)
    assert set(out) == set(check)
    return out


def ls_tree(raw: bytes) -> bytes:
    """What ``git cat-file -p`` prints for a tree, from the tree bytes git gave."""
    lines = []
    for mode, name, child in tree_entries(raw):
        what = b"tree" if mode == 0o40000 else b"commit" if mode == 0o160000 else b"blob"
        lines.append(b"%06o %s %s\t%s\n" % (mode, what, child.hex().encode(), quote_path(name)))
    return b"".join(lines)


def check_every_object(repo: Path, archive: Path) -> int:
    """-t, -s, -p, -e of every object in-process; returns how many objects were checked."""
    want = oracle(repo)
    with open_archive(archive) as a:
        objects = GitObjects(a)
        names = Names(objects)
        index = objects.index
        assert {index.oid(i).hex() for i in range(index.count)} == set(want)
        for oid, (kind, size, content) in want.items():
            raw = bytes.fromhex(oid)
            assert names.resolve(oid) == raw                    # -e
            assert objects.type_of(raw) == kind, oid            # -t
            assert objects.size_of(raw) == size, oid            # -s
            assert objects.read(raw) == (kind, content), oid    # git cat-file <type>
            shown = objects.pretty(raw)                         # -p
            assert shown == (ls_tree(content) if kind == "tree" else content), oid
        absent = [o[:-1] + ("0" if o[-1] != "0" else "1") for o in list(want)[:50]]
        for oid in (o for o in absent if o not in want):
            with pytest.raises(NotFoundError, match=oid):
                names.resolve(oid)
    return len(want)


def spot_check_cli(repo: Path, archive: Path, oids: list[str] | None = None,
                   flags: tuple[str, ...] = ("-t", "-s", "-p")) -> None:
    """The CLI as a process against ``git cat-file`` as a process: ``oids`` (default: the
    last object of each type) with each of ``flags``, then ``-e`` of one present and one
    absent id. A process costs a second or two on a loaded machine, so a few only."""
    if oids is None:
        want = oracle(repo)
        oids = [[o for o, (k, _s, _c) in want.items() if k == kind][-1]
                for kind in ("commit", "tree", "blob", "tag")
                if any(k == kind for k, _s, _c in want.values())]
    for oid in oids:
        for flag in flags:
            got = subprocess.run([str(CLI), "git", "cat-file", str(archive), oid, flag],
                                 capture_output=True, check=False)
            assert (got.returncode, got.stdout) == (0, git(repo, "cat-file", flag, oid)), (
                oid, flag, got.stderr)
    for oid, code in ((oids[0], 0), ("0" * 40, 1)):
        assert subprocess.run([str(CLI), "git", "cat-file", str(archive), oid, "-e"]
                              ).returncode == code


def window_64_fails(repo: Path) -> list[str]:
    """The delta entries of the repository's packs whose first 64 bytes of zlib stream do not
    give their two size varints (the old fixed window)."""
    bad = []
    for pack in (repo / "objects" / "pack").glob("*.pack"):
        data = memoryview(pack.read_bytes())
        for ln in git(repo, "verify-pack", "-v", str(pack.with_suffix(".idx"))).splitlines():
            f = ln.split()
            if len(f) < 5 or len(f[0]) != 40:
                continue
            kind, _size, pos = entry_header(data, int(f[4]), len(data))
            if kind in (OFS_DELTA, REF_DELTA):
                pos = ofs_distance(data, pos, len(data))[1] if kind == OFS_DELTA else pos + 20
                if len(zlib.decompressobj().decompress(data[pos:pos + 64], 20)) < 4:
                    bad.append(f[0].decode())
    return bad


def test_size_of_a_delta_whose_huffman_tables_outgrow_64_bytes(tmp_path: Path) -> None:
    r = Repo(tmp_path / "work")
    rnd = random.Random(7)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
             for _ in range(400)]
    lines = [" ".join(rnd.choice(words) for _ in range(8)) for _ in range(2000)]
    for v in range(4):  # scattered edits: many copy instructions, many distinct bytes
        for _ in range(80):
            lines[rnd.randrange(len(lines))] = " ".join(rnd.choice(words) for _ in range(3))
        r.write("f.txt", "\n".join(lines) + "\n")
        r.commit(f"v{v}")
    r.git("repack", "-a", "-d", "-q")
    hard = window_64_fails(r.path / ".git")
    assert hard  # the case is really here
    out = tmp_path / "w.znippy"
    import_repository(r.path, out)
    assert check_every_object(r.path / ".git", out) == len(r.objects())
    spot_check_cli(r.path / ".git", out, hard, flags=("-s",))


def project_repository() -> Path | None:
    here = Path(__file__).resolve().parent
    done = subprocess.run(["git", "-C", str(here), "rev-parse", "--path-format=absolute",
                           "--git-common-dir"], capture_output=True, check=False,
                          env=git_env(here))
    return Path(done.stdout.decode().strip()) if done.returncode == 0 else None


def test_every_object_of_this_projects_history(tmp_path: Path) -> None:
    source = project_repository()
    if source is None:
        pytest.skip("the tests are not in a git checkout: this project's own history "
                    "is the corpus")
    mirror = tmp_path / "self.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(source), str(mirror)], check=True,
                   env=git_env(tmp_path))
    out = tmp_path / "self.znippy"
    import_repository(mirror, out)
    start = time.perf_counter()
    checked = check_every_object(mirror, out)
    print(f"{checked} objects of this project's history checked in "
          f"{time.perf_counter() - start:.1f}s; {len(window_64_fails(mirror))} deltas need more "
          "than 64 bytes of zlib input for their sizes")
    assert checked > 1_000
    spot_check_cli(mirror, out)


@pytest.mark.slow
def test_every_object_of_a_5000_commit_history(tmp_path: Path) -> None:
    r = Repo(tmp_path / "big")
    r.raw("fast-import", "--quiet", input=b"".join(fast_import_stream(5_000)))
    out = tmp_path / "big.znippy"
    import_repository(r.path, out)  # fast-import's own pack, verbatim
    start = time.perf_counter()
    checked = check_every_object(r.path / ".git", out)
    print(f"{checked} objects of the fast-import history checked in "
          f"{time.perf_counter() - start:.1f}s")
    assert checked > 15_000
    spot_check_cli(r.path / ".git", out)
