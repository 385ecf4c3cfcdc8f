"""Names and refs of a git archive answered as git answers them: what ``git rev-parse`` takes
(full id, abbreviation, branch, tag, ``HEAD``) for ``git_log``, ``git_reachable``, ``git_cat``
and ``git cat-file``; the refs stored at import (``__gunnar_refs__``), the ``_git_refs`` view
and ``git show-ref``, checked against the real git on repositories with branches, lightweight
and annotated tags and a shallow clone. Also: ``git import -o URL`` and ``ls -l`` of packs."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest
from test_git import Repo, build

from znippy_sql import open_archive
from znippy_sql.cli import main
from znippy_sql.duckdb import register
from znippy_sql.errors import ZnippyError
from znippy_sql.format.schema import GIT_REFS, META
from znippy_sql.format.sections import ReservedSection
from znippy_sql.git.importer import import_repository
from znippy_sql.git.objects import GitObjects
from znippy_sql.git.refs import load_refs
from znippy_sql.git.revparse import Names


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    return build(tmp_path_factory.mktemp("refs") / "repo")


@pytest.fixture(scope="module")
def archive(repo: Repo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("arc") / "repo.znippy"
    import_repository(repo.path, out)
    return out


def test_import_to_a_url_is_refused_in_one_line(repo: Repo, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    for url in ("s3://bucket/x.znippy", "http://127.0.0.1:1/x.znippy", "gs://b/x.znippy"):
        assert main(["git", "import", str(repo.path), "-o", url]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "git import writes local files only" in err, err
        assert "staging" not in err
    assert not os.listdir(tmp_path)
    local = tmp_path / "x.znippy"
    assert main(["git", "import", str(repo.path), "-o", local.as_uri()]) == 0  # file:// is local
    assert local.exists()


def test_ls_long_shows_packs_read_only(archive: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "-l", str(archive)]) == 0
    lines = capsys.readouterr().out.splitlines()
    packs = [ln for ln in lines if "objects.pack." in ln]
    assert len(packs) == 4
    assert all(ln.startswith("-r--r--r-- ") for ln in packs), packs


# -- refs stored, the view, show-ref ------------------------------------------------------------
SHOW_REF_ARGS = ([], ["--head"], ["-d"], ["--head", "-d"], ["--tags"], ["--heads"], ["-s"],
                 ["main"], ["-d", "v1"], ["tagtag", "-d"], ["nomatch"], ["--tags", "-d", "-s"])


def check_refs(r: Repo, archive: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """The ``_git_refs`` view and ``git show-ref`` of ``archive`` against git's own."""
    con = duckdb.connect()
    register(con, archive, "g")
    view = {name: (t, p, s) for name, t, p, s in con.execute(
        "SELECT name, lower(hex(target)), lower(hex(peeled)), symbolic FROM g_git_refs "
        "WHERE name <> 'shallow'").fetchall()}
    want = {}
    for ln in r.git("for-each-ref", "--format=%(refname) %(objectname) %(objecttype) "
                    "%(symref)").splitlines():
        name, oid, kind, *sym = ln.split(" ")
        peeled = r.git("rev-parse", f"{name}^{{}}").strip() if kind == "tag" else None
        want[name] = (oid, peeled, sym[0] or None if sym else None)
    head = subprocess.run(["git", "-C", str(r.path), "symbolic-ref", "-q", "HEAD"],
                          capture_output=True, env=r.env).stdout.decode().strip() or None
    want["HEAD"] = (r.git("rev-parse", "HEAD").strip(), None, head)
    assert view == want
    shallow = r.path / ".git" / "shallow"
    boundary = sorted(shallow.read_text().split()) if shallow.exists() else []
    assert [o for (o,) in con.execute("SELECT lower(hex(target)) FROM g_git_refs WHERE "
                                      "name = 'shallow' ORDER BY 1").fetchall()] == boundary
    for args in SHOW_REF_ARGS:
        code = main(["git", "show-ref", str(archive), *args])
        git = subprocess.run(["git", "-C", str(r.path), "show-ref", *args], capture_output=True,
                             env=r.env)
        assert (code, capfdbinary.readouterr().out) == (git.returncode, git.stdout), args


def test_refs_and_show_ref_match_git(repo: Repo, archive: Path,
                                     capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """Two branches, a lightweight tag, annotated tags of a commit, a blob and a tag."""
    check_refs(repo, archive, capfdbinary)
    with open_archive(archive) as a:
        names = [r.key.module_name for r in a.manifest_rows]
    assert names.index("__gunnar_reach__") < names.index("__gunnar_refs__") \
        < names.index("__meta__")  # FORMAT §4: with the git sections, before __meta__


def test_polars_refs_equal_the_view(archive: Path) -> None:
    from znippy_sql.polars import scan

    con = duckdb.connect()
    register(con, archive, "g")
    frame = scan(archive, "git_refs").collect()
    assert frame.columns == ["name", "target", "peeled", "symbolic"]
    assert frame.rows() == con.execute("SELECT * FROM g_git_refs ORDER BY name").fetchall()


def test_shallow_clone_refs_log_and_reach(repo: Repo, tmp_path: Path,
                                          capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    r = Repo.__new__(Repo)
    r.path, r.env = tmp_path / "shallow", repo.env
    subprocess.run(["git", "clone", "-q", "--depth", "3", "--no-single-branch",
                    (repo.path / ".git").as_uri(), str(r.path)], check=True, env=r.env,
                   capture_output=True)
    assert (r.path / ".git" / "shallow").exists()
    out = tmp_path / "shallow.znippy"
    import_repository(r.path, out)
    check_refs(r, out, capfdbinary)  # refs/remotes/origin/HEAD is symbolic here
    con = duckdb.connect()
    register(con, out, "g")
    for c in r.commits():
        want = r.git("log", "--format=%H %P", c).splitlines()  # boundary: no parents
        got = con.execute("SELECT lower(hex(oid)), list_transform(parents, lambda p: "
                          "lower(hex(p))) FROM git_log('g', ?)", [c]).fetchall()
        assert [f"{o} {' '.join(p)}".rstrip() for o, p in got] == [w.rstrip() for w in want]
        listed = {ln.split(" ")[0] for ln in r.git("rev-list", "--objects", c).splitlines()}
        assert {x for (x,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                          [c]).fetchall()} == listed, c
    boundary = (r.path / ".git" / "shallow").read_text().split()
    with open_archive(out) as a:
        names = Names(GitObjects(a))
        for name in ("origin", "origin/main", "remotes/origin/side", "refs/remotes/origin/HEAD"):
            assert names.resolve(name).hex() == r.git("rev-parse", name).strip(), name
        for c in boundary:  # git: no parent past the boundary, even if it is in the archive
            assert subprocess.run(["git", "-C", str(r.path), "rev-parse", "-q", "--verify",
                                   f"{c}~1"], capture_output=True, env=r.env).returncode != 0
            with pytest.raises(ZnippyError, match="a shallow boundary"):
                names.resolve(f"{c}~1")


def test_detached_head_and_a_repository_without_refs(repo: Repo, tmp_path: Path,
                                                     capfdbinary: pytest.CaptureFixture[bytes]
                                                     ) -> None:
    r = Repo.__new__(Repo)
    r.path, r.env = tmp_path / "detached", repo.env
    shutil.copytree(repo.path, r.path)
    r.git("checkout", "-q", "--detach", "HEAD~1")
    out = tmp_path / "detached.znippy"
    import_repository(r.path, out)
    check_refs(r, out, capfdbinary)
    with open_archive(out) as a:
        assert load_refs(a).by_name["HEAD"].symbolic is None


def test_head_on_an_unborn_branch(tmp_path: Path,
                                  capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    r = Repo(tmp_path / "orphan")
    r.write("a.txt", "a\n")
    r.commit("one")
    r.git("checkout", "-q", "--orphan", "fresh")
    out = tmp_path / "orphan.znippy"
    import_repository(r.path, out)
    with open_archive(out) as a:
        head = load_refs(a).by_name["HEAD"]
        assert (head.target, head.symbolic) == (None, "refs/heads/fresh")
        with pytest.raises(ZnippyError, match="refs/heads/fresh, which has no commit yet"):
            Names(GitObjects(a)).resolve("HEAD")
    for args in (["--head"], ["--head", "-d"]):
        code = main(["git", "show-ref", str(out), *args])
        git = subprocess.run(["git", "-C", str(r.path), "show-ref", *args], capture_output=True,
                             env=r.env)
        assert (code, capfdbinary.readouterr().out) == (git.returncode, git.stdout)


# -- names as git rev-parse takes them -----------------------------------------------------------
def names_of(r: Repo) -> list[str]:
    objects = r.objects()
    some = [[o for o, (k, _s) in objects.items() if k == kind][:3]
            for kind in ("commit", "tree", "blob", "tag")]
    ids = [o for group in some for o in group]
    return ["HEAD", "main", "side", "v1", "light", "blobtag", "tagtag", "refs/heads/side",
            "heads/side", "tags/v1", "refs/tags/light", *ids, *(o[:7] for o in ids),
            *(o[:12].upper() for o in ids[:2])]


def test_names_resolve_as_git_rev_parse(repo: Repo, archive: Path,
                                        capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    con = duckdb.connect()
    register(con, archive, "g")
    with open_archive(archive) as a:
        names = Names(GitObjects(a))
        for name in names_of(repo):
            oid = repo.git("rev-parse", name).strip()
            assert names.resolve(name).hex() == oid, name
            kind, content = repo.raw("cat-file", "-t", oid).decode().strip(), \
                repo.raw("cat-file", repo.raw("cat-file", "-t", oid).decode().strip(), oid)
            assert con.execute("SELECT type, content FROM git_cat('g', ?)", [name]
                               ).fetchall() == [(kind, content)], name
    for name in ("HEAD", "v1", "blobtag", "side"):
        for flag in ("-t", "-p"):
            assert main(["git", "cat-file", str(archive), name, flag]) == 0
            assert capfdbinary.readouterr().out == repo.raw("cat-file", flag, name), name
        assert main(["git", "cat-file", str(archive), name, "-e"]) == 0


SUFFIXED = ("HEAD~1", "HEAD~3", "HEAD^", "HEAD~4^2", "HEAD^1~2", "HEAD^0", "HEAD~0", "v1~2",
            "v1^{}", "v1^{commit}", "v1^{tree}", "tagtag^{tag}", "tagtag^{}", "blobtag^{blob}",
            "HEAD^{tree}", "HEAD:README", "HEAD:src/pkg", "HEAD:src/pkg/mod1.py", "side~1:",
            "HEAD~2^{object}", "main~3^^2~1")


def test_suffixes_resolve_as_git_rev_parse(repo: Repo, archive: Path) -> None:
    with open_archive(archive) as a:
        names = Names(GitObjects(a))
        for name in SUFFIXED:
            assert names.resolve(name).hex() == repo.git("rev-parse", name).strip(), name
        for name, why in (("HEAD^3", "has no parent 3"), ("HEAD~999", "has no parent 1"),
                          ("HEAD:nosuch", "not in the archive's tree"),
                          ("blobtag^{commit}", "is a blob, not a commit"),
                          ("HEAD^{tag}", "is a commit, not a tag"),
                          ("HEAD^{thing}", "unknown object type")):
            assert subprocess.run(["git", "-C", str(repo.path), "rev-parse", "--verify", "-q",
                                   name], capture_output=True, env=repo.env).returncode != 0
            with pytest.raises(ZnippyError, match=why):
                names.resolve(name)


def test_a_name_too_long_is_refused_before_parsing(archive: Path) -> None:
    with open_archive(archive) as a:
        with pytest.raises(ZnippyError, match="at most 4096"):
            Names(GitObjects(a)).resolve("HEAD" + "~" * 100_000 + "x")


def test_log_peels_tags_and_refuses_what_is_not_a_commit(repo: Repo, archive: Path) -> None:
    con = duckdb.connect()
    register(con, archive, "g")

    def log(name: str) -> list[str]:
        return [f"{o} {' '.join(p)}".rstrip() for o, p in con.execute(
            "SELECT lower(hex(oid)), list_transform(parents, lambda p: lower(hex(p))) "
            "FROM git_log('g', ?)", [name]).fetchall()]

    v1 = repo.git("rev-parse", "v1").strip()
    for name in ("v1", v1, v1[:8], "tagtag", "light", "HEAD", "side", "main", "HEAD~2"):
        assert log(name) == [w.rstrip() for w in repo.git("log", "--format=%H %P", name)
                             .splitlines()], name
    tree = repo.git("rev-parse", "HEAD^{tree}").strip()
    blob = repo.git("rev-parse", "HEAD:README").strip()
    for name, what in ((tree, f"tree {tree}"), (blob, f"blob {blob}"), ("blobtag", "a blob")):
        with pytest.raises(duckdb.Error, match=f"names a .*{what}.*not a commit"):
            log(name)


def test_reachable_lists_tags_trees_and_blobs_as_rev_list(repo: Repo, archive: Path) -> None:
    con = duckdb.connect()
    register(con, archive, "g")
    tree = repo.git("rev-parse", "HEAD~1^{tree}").strip()
    blob = repo.git("rev-parse", "HEAD:README").strip()
    for name in ("v1", "tagtag", "blobtag", "light", tree, blob, "HEAD"):
        listed = {ln.split(" ")[0] for ln in repo.git("rev-list", "--objects", name)
                  .splitlines()}
        got = {x for (x,) in con.execute("SELECT lower(hex(oid)) FROM git_reachable('g', ?)",
                                         [name]).fetchall()}
        assert got == listed, name


def test_a_name_not_in_the_archive_is_an_error_naming_it(archive: Path,
                                                         capfdbinary: pytest.CaptureFixture[
                                                             bytes]) -> None:
    con = duckdb.connect()
    register(con, archive, "g")
    for name in ("0" * 40, "nosuchbranch", "abcdef0"):
        for macro in ("git_log", "git_reachable", "git_cat"):
            with pytest.raises(duckdb.Error, match=f"{name}.* in the archive"):
                con.execute(f"SELECT * FROM {macro}('g', ?)", [name]).fetchall()
        assert main(["git", "cat-file", str(archive), name, "-t"]) == 2
        err = capfdbinary.readouterr().err.decode()
        assert name in err and err.count("\n") == 1
        assert main(["git", "cat-file", str(archive), name, "-e"]) == 1


def test_an_ambiguous_abbreviation_lists_its_candidates(tmp_path: Path,
                                                        capfdbinary: pytest.CaptureFixture[
                                                            bytes]) -> None:
    seen: dict[str, bytes] = {}
    for i in range(100_000):  # two blobs whose ids share their first 4 hex digits
        body = b"ambiguous %d\n" % i
        oid = hashlib.sha1(b"blob %d\0%s" % (len(body), body)).hexdigest()
        if oid[:4] in seen:
            pair = [seen[oid[:4]], body]
            break
        seen[oid[:4]] = body
    r = Repo(tmp_path / "amb")
    r.commit("root")
    ids = [r.git("hash-object", "-w", "--stdin", input=b).strip() for b in pair]
    prefix = ids[0][:4]
    assert ids[1][:4] == prefix
    assert subprocess.run(["git", "-C", str(r.path), "rev-parse", prefix], capture_output=True,
                          env=r.env).returncode != 0  # git: ambiguous too
    out = tmp_path / "amb.znippy"
    import_repository(r.path, out)
    with open_archive(out) as a:
        with pytest.raises(ZnippyError, match="ambiguous") as err:
            Names(GitObjects(a)).resolve(prefix)
        assert all(f"{i} blob" in str(err.value) for i in ids)
        assert Names(GitObjects(a)).resolve(ids[0][:12]).hex() == ids[0]
    assert main(["git", "cat-file", str(out), prefix, "-p"]) == 2
    err_text = capfdbinary.readouterr().err
    assert all(i.encode() in err_text for i in ids) and err_text.count(b"\n") == 1
    con = duckdb.connect()
    register(con, out, "g")
    with pytest.raises(duckdb.Error, match=f"{prefix} is ambiguous"):
        con.execute("SELECT * FROM git_cat('g', ?)", [prefix]).fetchall()


def test_an_archive_without_the_refs_section_keeps_reading(repo: Repo, tmp_path: Path,
                                                            capfdbinary: pytest.CaptureFixture[
                                                                bytes]) -> None:
    """Sealed as before ``__gunnar_refs__``: refs only in ``__meta__``. Names still resolve,
    show-ref still answers (peeling tags from the objects), there is no ``_git_refs`` view."""
    from znippy_sql.git.importer import _refs
    from znippy_sql.git.push import Receiver

    out = tmp_path / "old.znippy"
    with Receiver(tmp_path / "blobs") as rx:
        rx.push(repo.raw("pack-objects", "--revs", "--all", "--stdout", "-q", input=b""))
        rx.seal(out, [ReservedSection(META, _refs(str(repo.path)))])
    with open_archive(out) as a:
        assert not a.has_section(GIT_REFS)
        names = Names(GitObjects(a))
        for name in ("HEAD", "v1", "side", "tags/light"):
            assert names.resolve(name).hex() == repo.git("rev-parse", name).strip()
    for args in (["-d"], ["--tags"]):
        assert main(["git", "show-ref", str(out), *args]) == 0
        assert capfdbinary.readouterr().out == repo.raw("show-ref", *args)
    con = duckdb.connect()
    register(con, out, "g")
    assert not con.execute("SELECT * FROM duckdb_views() WHERE view_name = 'g_git_refs'"
                           ).fetchall()


def test_a_refs_section_of_another_schema_is_refused_naming_it(
        repo: Repo, tmp_path: Path, capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    import pyarrow as pa

    from znippy_sql.errors import FormatError
    from znippy_sql.git.push import Receiver

    out = tmp_path / "odd.znippy"
    with Receiver(tmp_path / "blobs") as rx:
        rx.push(repo.raw("pack-objects", "--revs", "--all", "--stdout", "-q", input=b""))
        rx.seal(out, [ReservedSection(GIT_REFS, pa.table({"name": ["HEAD"], "x": [1]}))])
    with open_archive(out) as a:
        with pytest.raises(FormatError, match="__gunnar_refs__ does not have the refs schema"):
            load_refs(a)
    assert main(["git", "show-ref", str(out)]) == 2
    err = capfdbinary.readouterr().err
    assert b"__gunnar_refs__" in err and err.count(b"\n") == 1
    assert main(["git", "cat-file", str(out), "HEAD", "-t"]) == 2
