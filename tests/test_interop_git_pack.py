"""This project's git commands over the Rust ``znippy-plugin-git`` 0.2.4 *pack tier*
(``GitIndexBuilder::pack_tier``: git's own ``pack-<id>.pack``/``.idx`` as data entries, no
oid section; ``interop/gitpack.py``), with the real ``git`` as the oracle: the golden's two
entries are put, byte for byte, in a bare repository's ``objects/pack``, its refs set with
``git update-ref``/``symbolic-ref`` (stated here from the push in tests/data/README.md, not
from the reader under test); then every object (``cat-file --batch-all-objects``), every
name through ``cat-file``, ``show-ref`` with each option, ``git log`` and
``rev-list --objects`` of every commit and ref, and the SQL macros must answer as git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from znippy_sql import Entry, ZnippyError, open_archive, write_archive
from znippy_sql.cli import main
from znippy_sql.git.objects import GitObjects
from znippy_sql.git.revparse import Names
from znippy_sql.interop.gitpack import PackTier

ARCHIVE = Path(__file__).parent / "data" / "rust-plugin-git-0.2.4" / "lib-git-pack.znippy"
PACK = "pack-852535110e74d1b37bdcfb141374f2a19dc59953"
MAIN, SIDE = ("38027413526a1d39bd2e309c75987e4f12a2fc85",
              "dc5e806f2011c35f65584b0e9e06e5f5e3bb40b9")
LIGHT, TAG = ("708030ccd8e169500530962a9b3ec2b52552c2e8",
              "7ba65097bc21eab6136093e9ece4abde168d5f98")
REFS = {"refs/heads/main": MAIN, "refs/heads/side": SIDE, "refs/tags/light": LIGHT,
        "refs/tags/v1": TAG}
SHOW_REF = [[], ["--head"], ["-d"], ["--head", "-d"], ["--heads"], ["--tags"], ["-s"],
            ["--tags", "-d", "-s"], ["main"], ["v1"], ["heads/side", "light"], ["nothing"]]


def git(repo: Path, *args: str, check: bool = True, data: bytes | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    return subprocess.run(["git", "-C", str(repo), *args], check=check, capture_output=True,
                          input=data, env=env)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bare repository whose only objects are the golden's pack and .idx entries."""
    out = tmp_path_factory.mktemp("pack") / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(out)], check=True)
    with open_archive(ARCHIVE) as a:
        assert sorted(a.first_paths()) == [f"{PACK}.idx", f"{PACK}.pack"]
        for ext in ("idx", "pack"):
            (out / "objects" / "pack" / f"{PACK}.{ext}").write_bytes(a.read(f"{PACK}.{ext}"))
    git(out, "verify-pack", str(out / "objects" / "pack" / f"{PACK}.idx"))
    for ref, oid in REFS.items():
        git(out, "update-ref", ref, oid)
    git(out, "symbolic-ref", "HEAD", "refs/heads/main")
    return out


def all_objects(repo: Path) -> dict[str, tuple[str, bytes]]:
    """oid → (type, content) of every object, from ``git cat-file --batch-all-objects``."""
    raw = git(repo, "cat-file", "--batch-all-objects", "--batch").stdout
    out, pos = {}, 0
    while pos < len(raw):
        nl = raw.index(b"\n", pos)
        oid, kind, size = raw[pos:nl].decode().split()
        out[oid] = (kind, raw[nl + 1:nl + 1 + int(size)])
        pos = nl + 2 + int(size)
    return out


def ours(capsysbinary: Any, *argv: str) -> tuple[int, bytes]:
    capsysbinary.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:          # argparse
        code = int(e.code or 0)
    return code, capsysbinary.readouterr().out


def test_the_archive_opens_and_verifies(capsysbinary: Any) -> None:
    """The tier's archive is a plain sealed archive of two raw-stored entries."""
    assert ours(capsysbinary, "verify", str(ARCHIVE))[0] == 0


def test_every_object_reads_as_git(repo: Path) -> None:
    """All 18 objects (3 of them OFS deltas), type and bytes, and no object more."""
    want = all_objects(repo)
    assert len(want) == 18
    with open_archive(ARCHIVE) as a:
        objects = GitObjects(a)
        assert objects.tier is not None and objects.loose is None
        assert {objects.index.oid(i).hex() for i in range(objects.index.count)} == set(want)
        for oid, (kind, content) in want.items():
            assert objects.read(bytes.fromhex(oid)) == (kind, content), oid
            assert objects.size_of(bytes.fromhex(oid)) == len(content), oid
            assert objects.type_of(bytes.fromhex(oid)) == kind, oid


def test_cat_file_answers_as_git(repo: Path, capsysbinary: Any) -> None:
    objs = all_objects(repo)
    names = [*objs, *(o[:7] for o in objs), *REFS, *(r.rsplit("/", 1)[1] for r in REFS),
             "HEAD", "HEAD~2", "main^2", "main^{tree}", "main:sub", "main:sub/s.txt", "side^",
             "v1^{}", "v1^{commit}", "v1^{tree}", "v1:a.txt", "light~1"]
    for name in names:
        for flag in ("-t", "-s", "-p"):
            want = git(repo, "cat-file", flag, name).stdout
            code, got = ours(capsysbinary, "git", "cat-file", str(ARCHIVE), name, flag)
            assert (code, got) == (0, want), (name, flag)
    for name in ("0000000", "refs/heads/gone", "nothing"):
        assert git(repo, "cat-file", "-e", name, check=False).returncode != 0
        assert ours(capsysbinary, "git", "cat-file", str(ARCHIVE), name, "-e")[0] == 1


def test_show_ref_answers_as_git(repo: Path, capsysbinary: Any) -> None:
    for args in SHOW_REF:
        want = git(repo, "show-ref", *args, check=False)
        code, got = ours(capsysbinary, "git", "show-ref", str(ARCHIVE), *args)
        assert (code, got) == (want.returncode, want.stdout), args


def test_log_and_rev_list_answer_as_git(repo: Path) -> None:
    """``git log`` and ``rev-list --objects`` of every commit and ref, and ``--all``."""
    objs = all_objects(repo)
    starts = [o for o, (k, _) in objs.items() if k == "commit"] + list(REFS)
    with open_archive(ARCHIVE) as a:
        objects = GitObjects(a)
        named = Names(objects)
        every: set[str] = set()
        for start in starts:
            want = git(repo, "log", "--format=%H", start).stdout.decode().split()
            assert [c.hex() for c in named.log(start)] == want, start
            listed = {ln.split(" ")[0] for ln in
                      git(repo, "rev-list", "--objects", start).stdout.decode().splitlines()}
            got = {objects.index.oid(i).hex() for i in named.reachable(start)}
            assert got == listed, start
            every |= got
        assert every == {ln.split(" ")[0] for ln in git(
            repo, "rev-list", "--objects", "--all").stdout.decode().splitlines()}
        assert objects.absent_objects == 0


def test_the_sql_macros_answer_as_git(repo: Path) -> None:
    """``git_log``, ``git_reachable`` and ``git_cat`` through DuckDB."""
    import duckdb

    from znippy_sql.duckdb import register

    objs = all_objects(repo)
    con = duckdb.connect()
    register(con, ARCHIVE, "g")
    for start in [o for o, (k, _) in objs.items() if k == "commit"] + list(REFS):
        want = [ln.split(" ") for ln in
                git(repo, "log", "--format=%H %ct %P", start).stdout.decode().splitlines()]
        got = con.execute("SELECT oid, commit_time, parents FROM git_log('g', ?)",
                          [start]).fetchall()
        assert [[o.hex(), str(t), *(p.hex() for p in ps)] for o, t, ps in got] == \
            [[w for w in ws if w] for ws in want], start
        ids = [ln.split(" ")[0] for ln in git(
            repo, "rev-list", "--objects", start).stdout.decode().splitlines()]
        got_r = con.execute("SELECT lower(hex(oid)), type_name FROM git_reachable('g', ?)",
                            [start]).fetchall()
        assert got_r == sorted((o, objs[o][0]) for o in ids), start
    for oid, (kind, content) in objs.items():
        assert con.execute("SELECT type, size, content FROM git_cat('g', ?)", [oid]
                           ).fetchall() == [(kind, len(content), content)]


def test_the_cli_as_a_process(repo: Path) -> None:
    cli = Path(sys.executable).parent / "znippy-sql"
    got = subprocess.run([str(cli), "git", "cat-file", str(ARCHIVE), "-p", "v1:a.txt"],
                         capture_output=True, check=True).stdout
    assert got == git(repo, "cat-file", "-p", "v1:a.txt").stdout


def _lying(a: Any, name: str, change: Any) -> None:
    real = a.read
    a.read = lambda path: change(real(path)) if path == name else real(path)


@pytest.mark.parametrize(("entry", "change", "problem"), [
    (f"{PACK}.pack", lambda d: b"JUNK" + d[4:], "is not a git pack"),
    (f"{PACK}.pack", lambda d: d[:len(d) // 2], f"pack {PACK}.pack: object 6 at offset 754"),
    (f"{PACK}.pack", lambda d: d[:300] + bytes([d[300] ^ 1]) + d[301:],
     "object 2 at offset 295: bad zlib stream"),
    (f"{PACK}.idx", lambda d: b"\xfftOc\x00\x00\x00\x01" + d[8:], "not a git pack index"),
    (f"{PACK}.idx", lambda d: d[:100] + bytes([d[100] ^ 1]) + d[101:], "does not describe"),
])
def test_a_damaged_pack_entry_is_refused(entry: str, change: Any, problem: str) -> None:
    """Bytes that are not the pack (or its index) the entry's name says: refused, naming
    the archive, before any command answers (or, a damaged object, when it is read)."""
    with open_archive(ARCHIVE) as a:
        _lying(a, entry, change)
        with pytest.raises(ZnippyError, match=problem) as err:
            objects = GitObjects(a)
            for i in range(objects.index.count):
                objects.read(objects.index.oid(i))
        assert err.value.path == str(ARCHIVE) or str(ARCHIVE) in str(err.value)


def test_the_cli_refuses_a_damaged_pack_with_one_line(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """An archive (written here) whose pack entry is not a pack: exit 2, one line."""
    bad = tmp_path / "bad.znippy"
    write_archive(bad, [Entry(f"{PACK}.pack", data=b"PACK\0\0\0\2garbage" * 4)], workers=1,
                  fsync=False)
    capsys.readouterr()
    assert main(["git", "cat-file", str(bad), "-t", MAIN]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "bad zlib stream" in err, err


def test_a_sha256_pack_is_refused(tmp_path: Path) -> None:
    """A SHA-256 pack name: the commands hash with SHA-1, so the tier says so."""
    bad = tmp_path / "sha256.znippy"
    write_archive(bad, [Entry(f"pack-{'a' * 64}.pack", data=b"PACK")], workers=1, fsync=False)
    with open_archive(bad) as a, pytest.raises(ZnippyError, match="SHA-256"):
        PackTier(a)


def test_two_packs_under_a_folder(repo: Path, tmp_path: Path, capsysbinary: Any) -> None:
    """The tier's names under a folder, two packs (the second added by an incremental
    ``git repack``): every object and the log as git has them. Written by this project's
    writer: the tier is told by its entries' names and magic, not by who wrote them."""
    work = tmp_path / "two.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(work)], check=True)
    blob = git(work, "hash-object", "-w", "--stdin", data=b"four\n").stdout.decode().strip()
    new_tree = git(work, "mktree", data=f"100644 blob {blob}\tfour.txt\n".encode()
                   ).stdout.decode().strip()
    env = {"GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "A",
           "GIT_COMMITTER_EMAIL": "a@x", "GIT_AUTHOR_DATE": "1700000600 +0000",
           "GIT_COMMITTER_DATE": "1700000600 +0000"}
    head = subprocess.run(["git", "-C", str(work), "commit-tree", new_tree, "-p", MAIN, "-m",
                           "four"], check=True, capture_output=True, env={**os.environ, **env}
                          ).stdout.decode().strip()
    git(work, "update-ref", "refs/heads/main", head)   # repack packs what refs reach
    git(work, "repack", "-d", "-q")
    packs = sorted((work / "objects" / "pack").glob("pack-*.*"))
    entries = [Entry(f"objects/pack/{p.name}", data=p.read_bytes()) for p in packs
               if p.suffix in (".pack", ".idx")]
    assert len(entries) == 4
    out = tmp_path / "two.znippy"
    write_archive(out, entries, workers=1, fsync=False)
    want = all_objects(work)
    with open_archive(out) as a:
        objects = GitObjects(a)
        assert objects.index.count == len(want) == 21
        for oid, (kind, content) in want.items():
            assert objects.read(bytes.fromhex(oid)) == (kind, content), oid
        log = git(work, "log", "--format=%H", head).stdout.decode().split()
        assert [c.hex() for c in objects.log(bytes.fromhex(head))] == log
    # no push log: no refs (show-ref lists none, a ref name is not found), ids answer
    assert ours(capsysbinary, "git", "show-ref", str(out)) == (1, b"")
    assert ours(capsysbinary, "git", "cat-file", str(out), "main", "-e")[0] == 1
    assert ours(capsysbinary, "git", "cat-file", str(out), head[:7], "-t") == (0, b"commit\n")


def test_an_archive_without_files_has_no_packs() -> None:
    """An empty lookup's column has no chunks, on which pyarrow's ``indices_nonzero``
    crashed the process (every DuckDB registration asks this of an archive without git
    sections)."""
    import pyarrow as pa

    from znippy_sql.interop.gitpack import pack_entries

    empty = pa.table({"relative_path": pa.chunked_array([], pa.utf8())})
    assert pack_entries(empty) == []
