"""Git archives checked against git itself (the real ``git`` CLI), on repositories made here:
merges, several packs (OFS deltas from ``git repack``, REF deltas from ``git pack-objects``,
a thin push), annotated tags (of a commit, a blob, a tag), an empty tree, loose objects, and a
``gc`` whose consolidated pack retires the older ones."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from dulwich.commit_graph import read_commit_graph

from znippy_sql import open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.git.importer import import_repository
from znippy_sql.git.journal import retire_packs
from znippy_sql.git.objects import GitObjects
from znippy_sql.git.pack import REF_DELTA, OFS_DELTA, entry_header
from znippy_sql.errors import ChecksumError, PackError
from znippy_sql.git.push import Receiver

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


def git_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="A U Thor",
               GIT_AUTHOR_EMAIL="a@example.com", GIT_COMMITTER_NAME="C O Mitter",
               GIT_COMMITTER_EMAIL="c@example.com")
    return env


class Repo:
    """A repository driven through the git CLI, with increasing commit dates."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = git_env(path.parent)
        self.clock = 1_700_000_000
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, input: bytes | None = None) -> str:
        return self.raw(*args, input=input).decode()

    def raw(self, *args: str, input: bytes | None = None) -> bytes:
        return subprocess.run(["git", "-C", str(self.path), *args], input=input, check=True,
                              capture_output=True, env=self.env).stdout

    def write(self, name: str, text: str) -> None:
        p = self.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def commit(self, message: str, *extra: str) -> str:
        self.clock += 60
        date = f"{self.clock} +0100"
        self.env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, *extra)
        return self.git("rev-parse", "HEAD").strip()

    def objects(self) -> dict[str, tuple[str, int]]:
        out = self.git("cat-file", "--batch-all-objects",
                       "--batch-check=%(objectname) %(objecttype) %(objectsize)")
        return {o: (t, int(s)) for o, t, s in (ln.split() for ln in out.splitlines())}

    def commits(self) -> list[str]:
        return self.git("rev-list", "--all").split()


def numbers(n: int, tag: str = "") -> str:
    return "".join(f"line {i} {tag}\n" for i in range(n))


def build(path: Path) -> Repo:
    r = Repo(path)
    r.commit("root: the empty tree")
    for i in range(6):
        r.write("src/big.txt", numbers(200 + 40 * i))
        r.write(f"src/pkg/mod{i % 3}.py", numbers(30, f"v{i}"))
        r.write("README", f"readme {i}\n")
        r.commit(f"main {i}")
    r.git("repack", "-d", "-q")                      # pack 1: OFS deltas
    r.git("checkout", "-q", "-b", "side")
    for i in range(3):
        r.write("side.txt", numbers(50 + i, "side"))
        r.write("src/big.txt", numbers(420 + i))
        r.commit(f"side {i}")
    r.git("checkout", "-q", "main")
    for i in range(3):
        r.write("docs/guide.md", numbers(80 + 10 * i, "doc"))
        r.commit(f"main after {i}")
    r.clock += 60
    r.env.update(GIT_AUTHOR_DATE=f"{r.clock} +0100", GIT_COMMITTER_DATE=f"{r.clock} +0100")
    r.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    r.git("tag", "-a", "v1", "-m", "release 1")
    r.git("tag", "light", "HEAD~2")
    blob = r.git("rev-parse", "HEAD:README").strip()
    r.git("tag", "-a", "blobtag", "-m", "a tag of a blob", blob)
    r.git("tag", "-a", "tagtag", "-m", "a tag of a tag", "v1")
    r.git("repack", "-d", "-q")                      # pack 2: the new loose objects
    before = r.git("rev-parse", "HEAD").strip()
    for i in range(3):
        r.write("src/big.txt", numbers(500 + 7 * i))
        r.write(f"gen/{i}.txt", numbers(60, f"gen {i}"))
        r.commit(f"ref-delta {i}")
    ids = r.raw("rev-list", "--objects", f"{before}..HEAD")
    ids = b"\n".join(ln.split(b" ")[0] for ln in ids.splitlines()) + b"\n"
    pack = r.raw("pack-objects", "--stdout", "-q", input=ids)   # REF deltas: no --delta-base-offset
    r.raw("index-pack", "--stdin", input=pack)
    r.git("prune-packed")
    r.write("src/big.txt", numbers(560))
    r.write("loose.txt", "loose object\n")
    r.commit("left loose")                          # loose objects
    return r


def pack_entry_types(r: Repo) -> dict[str, set[int]]:
    """Stored entry types per pack file, at the offsets ``git verify-pack -v`` gives."""
    out = {}
    folder = r.path / ".git" / "objects" / "pack"
    for idx in sorted(folder.glob("*.idx")):
        data = memoryview((idx.with_suffix(".pack")).read_bytes())
        lines = r.git("verify-pack", "-v", str(idx)).splitlines()
        offsets = [int(ln.split()[4]) for ln in lines if len(ln.split()) >= 5
                   and len(ln.split()[0]) == 40]
        out[idx.stem] = {entry_header(data, o, len(data))[0] for o in offsets}
    return out


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return build(tmp_path_factory.mktemp("git") / "repo")


@pytest.fixture(scope="module")
def archive(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arc") / "repo.znippy"
    import_repository(repo.path, out)
    return out


def check_against_git(r: Repo, path: Path, *, rev_list_every: int = 1) -> None:
    """Objects, contents, commits, generations and reachability of ``path`` against ``r``."""
    expected = r.objects()
    with open_archive(path) as a:
        objs = GitObjects(a)
        t = objs.index
        got = {t.oid(i).hex(): None for i in range(t.count)}
        assert set(got) == set(expected)
        batch = r.raw("cat-file", "--batch-all-objects", "--batch")
        pos = 0
        while pos < len(batch):
            nl = batch.index(b"\n", pos)
            oid, kind, size = batch[pos:nl].decode().split()
            content = batch[nl + 1:nl + 1 + int(size)]
            pos = nl + 2 + int(size)
            assert objs.read(bytes.fromhex(oid)) == (kind, content), oid
            assert objs.type_of(bytes.fromhex(oid)) == expected[oid][0]
            assert objs.size_of(bytes.fromhex(oid)) == expected[oid][1]
    con = duckdb.connect()
    register(con, path, "g")
    rows = con.execute("SELECT lower(hex(oid)), type_name FROM g_git_objects").fetchall()
    assert dict(rows) == {o: k for o, (k, _s) in expected.items()}
    commits = con.execute("SELECT lower(hex(oid)), list_transform(parents, lambda p: lower(hex(p))),"
                          " generation, commit_time, corrected_date FROM g_git_commits").fetchall()
    log_all = r.git("log", "--all", "--format=%H %P").splitlines()
    assert {(c[0], " ".join(c[1])) for c in commits} == {
        (ln.split(" ", 1)[0], ln.split(" ", 1)[1]) for ln in log_all}
    # generation: git's own commit-graph (topological level), read back with dulwich
    r.git("commit-graph", "write", "--reachable")
    graph = read_commit_graph(str(r.path / r.git("rev-parse", "--git-path",
                                                 "objects/info/commit-graph").strip()))
    assert graph is not None
    assert {c[0]: c[2] for c in commits} == {e.commit_id.decode(): e.generation for e in graph}
    times = {c[0]: c[3] for c in commits}
    corrected: dict[str, int] = {}  # generation number v2, computed here from git's topo order
    for ln in r.git("rev-list", "--all", "--topo-order", "--reverse", "--parents").splitlines():
        c, *ps = ln.split()
        corrected[c] = max([times[c]] + [corrected[p] + 1 for p in ps])
    assert {c[0]: c[4] for c in commits} == corrected
    for i, c in enumerate(r.commits()):
        want = r.git("log", "--format=%H %P", c).splitlines()
        got_log = con.execute("SELECT lower(hex(oid)), list_transform(parents, lambda p: "
                              "lower(hex(p))) FROM git_log('g', ?)", [c]).fetchall()
        assert [f"{o} {' '.join(p)}".rstrip() for o, p in got_log] == [w.rstrip() for w in want]
        if i % rev_list_every == 0:
            listed = {ln.split(" ")[0] for ln in r.git("rev-list", "--objects", c).splitlines()}
            reach = con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                [c]).fetchall()
            assert {x for (x,) in reach} == listed, c


def test_the_repository_has_what_the_checks_need(repo: Repo) -> None:
    kinds = pack_entry_types(repo)
    assert len(kinds) == 3
    every = set().union(*kinds.values())
    assert OFS_DELTA in every and REF_DELTA in every
    assert list((repo.path / ".git" / "objects").glob("??/*"))  # loose objects too
    assert EMPTY_TREE in repo.objects()
    assert len(repo.git("rev-list", "--merges", "--all").split()) == 1


def test_import_matches_git(repo: Repo, archive: Path) -> None:
    check_against_git(repo, archive)
    with open_archive(archive) as a:
        assert a.verify().ok  # every pack's BLAKE3, the tail, the sections
        assert a.lookup.column("compressed").to_pylist() == [False] * 4
    con = duckdb.connect()
    register(con, archive, "g")
    refs = dict(con.execute("SELECT key, value FROM g_meta").fetchall())
    assert refs["HEAD"] == repo.git("rev-parse", "HEAD").strip()
    assert refs["refs/tags/v1"] == repo.git("rev-parse", "v1").strip()
    stored = {o for (o,) in con.execute("SELECT lower(hex(oid)) FROM g_git_reach").fetchall()}
    gens = dict(con.execute("SELECT lower(hex(oid)), generation FROM g_git_commits").fetchall())
    tips = set(repo.commits()) - {p for ln in repo.git("log", "--all", "--format=%P")
                                  .splitlines() for p in ln.split()}
    assert tips <= stored == set(gens)  # under 100 commits git's selection takes each
    tag = refs["refs/tags/tagtag"]
    assert con.execute("SELECT type, content FROM git_cat('g', ?)", [tag]).fetchall() == [
        ("tag", repo.raw("cat-file", "tag", tag))]
    with pytest.raises(duckdb.Error, match="no object 0{40} in the archive"):
        con.execute("SELECT * FROM git_cat('g', ?)", ["0" * 40]).fetchall()


def test_polars_sections_equal_the_duckdb_views(archive: Path) -> None:
    from znippy_sql.polars import scan

    con = duckdb.connect()
    register(con, archive, "g")
    for section, view in (("git_objects", "g_git_objects"), ("git_commits", "g_git_commits"),
                          ("git_reach", "g_git_reach")):
        frame = scan(archive, section).collect()
        cols = ", ".join(f'"{c}"' for c in frame.columns)
        assert sorted(frame.rows()) == sorted(con.execute(f"SELECT {cols} FROM {view}")
                                              .fetchall()), section
    objects = scan(archive, "git_objects").collect()
    assert set(objects["type_name"]) == {"commit", "tree", "blob", "tag"}


def test_one_pack_mode_and_every_bitmap(repo: Repo, tmp_path: Path) -> None:
    out = tmp_path / "one.znippy"
    import_repository(repo.path, out, mode="one-pack")
    with open_archive(out) as a:
        assert a.lookup.num_rows == 1
    check_against_git(repo, out)
    every = tmp_path / "every.znippy"
    import_repository(repo.path, every, walk_bound=0)
    with open_archive(every) as a:
        assert a.section("__gunnar_reach__").num_rows == len(repo.commits())
    check_against_git(repo, every, rev_list_every=2)


def test_cat_file_cli_matches_git(repo: Repo, archive: Path, capfdbinary: pytest.CaptureFixture
                                  ) -> None:
    objects = repo.objects()
    picked = {kind: [o for o, (k, _s) in objects.items() if k == kind][:4]
              for kind in ("commit", "tree", "blob", "tag")}
    for kind, oids in picked.items():
        assert oids, kind
        for oid in oids:
            for flag in ("-t", "-s", "-p"):
                assert main(["git", "cat-file", str(archive), oid, flag]) == 0
                assert capfdbinary.readouterr().out == repo.raw("cat-file", flag, oid)
    assert main(["git", "cat-file", str(archive), EMPTY_TREE[:7], "-t"]) == 0
    assert capfdbinary.readouterr().out == b"tree\n"
    assert main(["git", "cat-file", str(archive), "0" * 40, "-e"]) == 1
    assert main(["git", "cat-file", str(archive), "0" * 40, "-p"]) == 2
    assert b"no object" in capfdbinary.readouterr().err
    assert main(["git", "cat-file", str(archive), "xyz", "-p"]) == 2


def test_tree_names_are_quoted_like_git(tmp_path: Path) -> None:
    r = Repo(tmp_path / "q")
    r.write("caf\u00e9.txt", "x\n")
    r.write('with"quote', "y\n")
    r.write("tab\there", "z\n")
    r.commit("odd names")
    out = tmp_path / "q.znippy"
    import_repository(r.path, out)
    with open_archive(out) as a:
        tree = bytes.fromhex(r.git("rev-parse", "HEAD^{tree}").strip())
        assert GitObjects(a).pretty(tree) == r.raw("cat-file", "-p", tree.hex())


def test_gc_retires_packs(repo: Repo, tmp_path: Path) -> None:
    """Push the packs as they are, then the pack a ``git gc`` made of all of them and
    tombstones for the old ones: the seal rows only the new pack and matches git."""
    r = Repo.__new__(Repo)
    r.path, r.env, r.clock = tmp_path / "gc", repo.env, repo.clock
    shutil.copytree(repo.path, r.path)
    folder = r.path / ".git" / "objects" / "pack"
    blobs = tmp_path / "objects.pack"
    old = []
    with Receiver(blobs) as rx:
        for p in sorted(folder.glob("*.pack")):
            old.append(rx.push(p.read_bytes())[0])
        r.git("gc", "-q", "--prune=now")
        (new,) = folder.glob("*.pack")
        rx.push(new.read_bytes())
    retire_packs(str(blobs) + ".journal", old)
    with Receiver(blobs) as rx:  # reopened: the live pack is parsed again from the blob file
        report = rx.seal(tmp_path / "gc.znippy")
    assert (report.packs_sealed, report.packs_retired) == (1, 3)
    with open_archive(tmp_path / "gc.znippy") as a:
        assert a.lookup.column("relative_path").to_pylist() == ["objects.pack.3"]
    check_against_git(r, tmp_path / "gc.znippy", rev_list_every=3)


def test_thin_push_resolves_bases_in_earlier_packs(tmp_path: Path) -> None:
    r = Repo(tmp_path / "thin")
    for i in range(4):
        r.write("f.txt", numbers(300 + i))
        r.commit(f"c{i}")
    first = r.git("rev-parse", "HEAD").strip()
    for i in range(3):
        r.write("f.txt", numbers(400 + i))
        r.commit(f"d{i}")
    a = r.raw("pack-objects", "--revs", "--stdout", "-q", input=f"{first}\n".encode())
    b = r.raw("pack-objects", "--revs", "--thin", "--stdout", "-q",
              input=f"HEAD\n^{first}\n".encode())
    with Receiver(tmp_path / "blobs") as rx:
        rx.push(a)
        rx.push(b)
        assert rx.parsed[len(a)].external_bases > 0  # b's REF deltas name objects of a
        rx.seal(tmp_path / "thin.znippy")
    r.git("repack", "-a", "-d", "-q")
    check_against_git(r, tmp_path / "thin.znippy")


def test_reseal_after_more_pushes_equals_one_seal(repo: Repo, tmp_path: Path) -> None:
    packs = [p.read_bytes() for p in sorted((repo.path / ".git/objects/pack").glob("*.pack"))]
    with Receiver(tmp_path / "one") as rx:
        rx.push(packs[0])
        rx.seal(tmp_path / "x.znippy")
        rx.push(packs[1])
        rx.seal(tmp_path / "x.znippy")
    with Receiver(tmp_path / "two") as rx:
        rx.push(packs[0])
        rx.push(packs[1])
        rx.seal(tmp_path / "y.znippy")
    assert (tmp_path / "x.znippy").read_bytes() == (tmp_path / "y.znippy").read_bytes()


def test_import_cli(repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cli.znippy"
    assert main(["git", "import", str(repo.path), "-o", str(out)]) == 0
    line = capsys.readouterr().out
    assert f"{len(repo.objects())} objects" in line and "4 packs" in line
    assert not [p for p in os.listdir(tmp_path) if p != "cli.znippy"]  # staging removed
    assert main(["git", "import", str(tmp_path), "-o", str(tmp_path / "x.znippy")]) == 2
    assert "not a git repository" in capsys.readouterr().err
    assert not (tmp_path / "x.znippy").exists()
    assert main(["git", "import", str(repo.path), "-o", str(tmp_path / "no" / "x.znippy")]) == 2
    assert "staging file" in capsys.readouterr().err and not (tmp_path / "no").exists()


def fast_import_stream(commits: int) -> Iterator[bytes]:
    """A history of ``commits`` commits (a merge every 50), for ``git fast-import``."""
    when = 1_600_000_000
    yield b"reset refs/heads/main\n"
    for i in range(1, commits + 1):
        when += 37
        branch = b"refs/heads/side" if i % 50 == 25 else b"refs/heads/main"
        body = f"file {i % 97} version {i}\n".encode() * (1 + i % 5)
        yield b"blob\nmark :%d\ndata %d\n%s\n" % (2 * i, len(body), body)
        msg = b"commit %d" % i
        yield b"commit %s\nmark :%d\ncommitter C <c@example.com> %d +0000\ndata %d\n%s\n" % (
            branch, 2 * i + 1, when, len(msg), msg)
        if i > 1:
            if i % 50 == 25:
                yield b"from :%d\n" % (2 * (i - 1) + 1)
            elif i % 50 == 26 and i > 26:
                yield b"from :%d\nmerge :%d\n" % (2 * (i - 2) + 1, 2 * (i - 1) + 1)
            else:
                yield b"from :%d\n" % (2 * (i - 1) + 1)
        yield b"M 100644 :%d d%d/f%d.txt\n\n" % (2 * i, i % 13, i % 97)


@pytest.mark.slow
def test_a_repository_of_real_size(tmp_path: Path) -> None:
    r = Repo(tmp_path / "big")
    r.raw("fast-import", "--quiet", input=b"".join(fast_import_stream(5_000)))
    r.git("checkout", "-q", "main")
    assert len(r.commits()) >= 5_000
    out = tmp_path / "big.znippy"
    report = import_repository(r.path, out, mode="one-pack")
    assert report.commits == len(r.commits())
    check_against_git_sample(r, out)


def check_against_git_sample(r: Repo, path: Path) -> None:
    """The object set, generations, ``git log`` of HEAD and 25 commits' reachability."""
    expected = r.objects()
    con = duckdb.connect()
    register(con, path, "g")
    assert dict(con.execute("SELECT lower(hex(oid)), type_name FROM g_git_objects").fetchall()
                ) == {o: k for o, (k, _s) in expected.items()}
    r.git("commit-graph", "write", "--reachable")
    graph = read_commit_graph(str(r.path / r.git("rev-parse", "--git-path",
                                                 "objects/info/commit-graph").strip()))
    assert graph is not None
    assert dict(con.execute("SELECT lower(hex(oid)), generation FROM g_git_commits").fetchall()
                ) == {e.commit_id.decode(): e.generation for e in graph}
    head = r.git("rev-parse", "HEAD").strip()
    assert [o for (o,) in con.execute("SELECT lower(hex(oid)) FROM git_log('g', ?)",
                                      [head]).fetchall()] == r.git("log", "--format=%H").split()
    commits = r.commits()
    for c in commits[:: max(1, len(commits) // 25)]:
        listed = {ln.split(" ")[0] for ln in r.git("rev-list", "--objects", c).splitlines()}
        assert {x for (x,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                          [c]).fetchall()} == listed


def test_import_writes_what_pushing_the_packs_writes(repo: Repo, tmp_path: Path) -> None:
    """``git import`` (packs indexed from their ``.idx``, sealed without a journal) gives the
    bytes the push path gives for the same packs (each parsed and hashed whole)."""
    r = Repo.__new__(Repo)
    r.path, r.env, r.clock = tmp_path / "packed", repo.env, repo.clock
    shutil.copytree(repo.path, r.path)
    r.git("repack", "-a", "-d", "-q")
    out = tmp_path / "import.znippy"
    import_repository(r.path, out)
    from znippy_sql.git.importer import _git, _pack_files, _refs
    from znippy_sql.git.refs import repo_refs
    from znippy_sql.format.schema import GIT_REFS, META
    from znippy_sql.format.sections import ReservedSection

    refs = _refs(str(r.path))
    named = repo_refs(str(r.path), _git).table(_git)
    with Receiver(tmp_path / "blobs") as rx:
        for p in _pack_files(str(r.path / ".git" / "objects")):
            rx.push(Path(p).read_bytes())
        rx.seal(tmp_path / "pushed.znippy",
                [ReservedSection(META, refs), ReservedSection(GIT_REFS, named)],
                prefer={bytes.fromhex(v) for v in refs.column("value").to_pylist()})
    assert out.read_bytes() == (tmp_path / "pushed.znippy").read_bytes()


def test_a_damaged_idx_is_caught_and_the_pack_parsed_whole(repo: Repo, tmp_path: Path
                                                           ) -> None:
    from znippy_sql.corelib import git_index_pack

    def mismatch(idx: bytes, pack: memoryview) -> str | None:
        """Why the core did not take the ``.idx`` (it parsed the pack whole instead)."""
        return git_index_pack(pack, idx, name="p").idx_mismatch

    r = Repo.__new__(Repo)
    r.path, r.env, r.clock = tmp_path / "bad", repo.env, repo.clock
    shutil.copytree(repo.path, r.path)
    r.git("repack", "-a", "-d", "-q")
    (idx,) = (r.path / ".git" / "objects" / "pack").glob("*.idx")
    pack = memoryview(idx.with_suffix(".pack").read_bytes())
    good = idx.read_bytes()
    n = int.from_bytes(good[8 + 255 * 4:8 + 256 * 4], "big")
    assert mismatch(good, pack) is None
    import hashlib

    def forged(at: int) -> bytes:
        data = bytearray(good)
        data[at] ^= 1
        data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()   # its trailer made to match
        return bytes(data)

    names, crcs, offsets = 8 + 1024, 8 + 1024 + 20 * n, 8 + 1024 + 24 * n
    for at, why in ((crcs, "CRC32"), (offsets + 3, "offsets|CRC32"),
                    (len(good) - 21, "another pack"),
                    (len(good) - 1, "own SHA-1"), (5, "version-2")):
        data = forged(at) if at != len(good) - 1 else good[:-1] + bytes([good[-1] ^ 1])
        assert re.search(why, mismatch(data, pack) or ""), why
    idx.chmod(0o644)
    out = tmp_path / "x.znippy"
    kinds = dict(ln.split()[:2] for ln in r.git("cat-file", "--batch-all-objects",
                                                "--batch-check").splitlines())
    ids = [good[names + 20 * i:names + 20 * i + 20].hex() for i in range(n)]
    commit = next(i for i, o in enumerate(ids) if kinds[o] == "commit")
    for damage in (crcs, names + 20 * commit + 19):   # a CRC32; a commit's id: it is hashed
        idx.write_bytes(forged(damage))
        import_repository(r.path, out)   # the pack is whole: parsed instead of the .idx
        idx.write_bytes(good)            # (git itself believes the forged .idx)
        check_against_git(r, out, rev_list_every=5)
        out.unlink()
    # a blob's id is taken from the .idx unhashed (its trailer forged to match): every read
    # of the object hashes it, so the forged id is caught there
    blob = next(i for i, o in enumerate(ids) if kinds[o] == "blob" and i + 1 < n
                and ids[i + 1][:38] != o[:38])
    idx.write_bytes(forged(names + 20 * blob + 19))
    import_repository(r.path, out)
    wrong = bytes.fromhex(ids[blob][:38] + f"{int(ids[blob][38:], 16) ^ 1:02x}")
    with open_archive(out) as a:
        with pytest.raises(ChecksumError, match="does not hash to its id"):
            GitObjects(a).read(wrong)


def test_a_tree_whose_idx_id_is_forged_sends_the_pack_to_the_whole_parse(
        repo: Repo, tmp_path: Path) -> None:
    """Every tree the core inflates from a pack with its ``.idx`` is hashed against its
    ``.idx`` id: a forged one (trailer made to match) is found, and the pack parsed whole
    gives the archive the good ``.idx`` gives."""
    import hashlib

    from znippy_sql.corelib import git_index_pack

    r = Repo.__new__(Repo)
    r.path, r.env, r.clock = tmp_path / "packed", repo.env, repo.clock
    shutil.copytree(repo.path, r.path)
    r.git("repack", "-a", "-d", "-q")
    import_repository(r.path, tmp_path / "here.znippy")
    (idx,) = (r.path / ".git" / "objects" / "pack").glob("*.idx")
    good = idx.read_bytes()
    n = int.from_bytes(good[8 + 255 * 4:8 + 256 * 4], "big")
    kinds = dict(ln.split()[:2] for ln in r.git("cat-file", "--batch-all-objects",
                                                "--batch-check").splitlines())
    names = 8 + 1024
    ids = [good[names + 20 * i:names + 20 * i + 20].hex() for i in range(n)]
    tree = next(i for i, o in enumerate(ids) if kinds[o] == "tree" and i + 1 < n
                and ids[i + 1][:38] != o[:38])
    data = bytearray(good)
    data[names + 20 * tree + 19] ^= 1                   # still ascending: the next differs
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    pack = idx.with_suffix(".pack").read_bytes()
    assert git_index_pack(pack, good, name="p").idx_mismatch is None
    why = git_index_pack(pack, bytes(data), name="p").idx_mismatch
    assert why is not None and "does not hash to its .idx id" in why
    idx.chmod(0o644)
    idx.write_bytes(bytes(data))
    import_repository(r.path, tmp_path / "whole.znippy")   # the pack parsed whole instead
    assert (tmp_path / "whole.znippy").read_bytes() == (tmp_path / "here.znippy").read_bytes()
