"""This project's git commands over archives the Rust ``znippy-plugin-git`` 0.2.4 wrote (its
loose-object tier: one entry per object; ``interop/gitloose.py``), with the real ``git`` as
the oracle: every object of each golden is written into a bare repository with
``git hash-object -w`` (its type and payload from the entry's canonical bytes), the refs the
golden's pushes leave are set with ``git update-ref``/``symbolic-ref`` (stated here from the
pushes in tests/data/README.md, not from the reader under test), and ``cat-file`` (``-t``,
``-s``, ``-p``, ``-e``) of every object and every name, ``show-ref`` with each option,
``git log`` of every commit and ref, ``git rev-list --objects`` of every commit and ref and
``rev-list --all`` must print what git prints."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from znippy_sql import ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.git.objects import GitObjects
from znippy_sql.git.revparse import Names

DATA = Path(__file__).parent / "data" / "rust-plugin-git-0.2.4"
MAIN, SIDE = ("760fc6819e5f67b593c222855ffabd03407b49de",
              "5e0889ec4cd0cabf33528e84773a95a3543a3115")
ROOT, TAG = "f46e689bbca4d5f8f7ba87a0d7fe2527a786f918", "3bbac7159ac055dcaca2fd1d48cd9edd8a83c2d6"
#: golden → (its refs after every push, what HEAD names or None)
GOLDENS = {
    "lib-git": ({"refs/heads/main": MAIN, "refs/heads/side": SIDE}, None),
    "lib-git-pushes": ({"refs/heads/main": MAIN, "refs/heads/side": SIDE,
                        "refs/tags/v1": TAG, "refs/tags/v1-bare": TAG,
                        "refs/tags/light": ROOT}, "refs/heads/main"),
}
SHOW_REF = [[], ["--head"], ["-d"], ["--head", "-d"], ["--heads"], ["--tags"], ["-s"],
            ["--tags", "-d", "-s"], ["main"], ["v1"], ["heads/side", "light"], ["nothing"]]


def git(repo: Path, *args: str, check: bool = True, data: bytes | None = None
        ) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent)}
    return subprocess.run(["git", "-C", str(repo), *args], check=check, capture_output=True,
                          input=data, env=env)


def entries(archive: Path) -> dict[str, tuple[str, bytes]]:
    """oid → (type, payload) of every entry (canonical ``<type> <size>\\0<payload>``)."""
    with open_archive(archive) as a:
        out = {}
        for path, data in a.read_many(a.first_paths()):
            head, _, payload = data.partition(b"\0")
            out[path] = (head.split(b" ")[0].decode(), payload)
    return out


@pytest.fixture(scope="module", params=sorted(GOLDENS))
def golden(request: Any, tmp_path_factory: pytest.TempPathFactory
           ) -> tuple[Path, Path, dict[str, tuple[str, bytes]]]:
    """(archive, a bare repository of the same objects and refs, the objects)."""
    name = request.param
    archive = DATA / f"{name}.znippy"
    repo = tmp_path_factory.mktemp(name) / "repo.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    objs = entries(archive)
    for oid, (kind, payload) in objs.items():
        got = git(repo, "hash-object", "-w", "--stdin", "-t", kind, "--literally",
                  data=payload).stdout.decode().strip()
        assert got == oid
    refs, head = GOLDENS[name]
    for ref, oid in refs.items():
        git(repo, "update-ref", ref, oid)
    git(repo, "symbolic-ref", "HEAD", head or "refs/heads/unborn")
    return archive, repo, objs


def ours(capsysbinary: Any, *argv: str) -> tuple[int, bytes]:
    capsysbinary.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:          # argparse
        code = int(e.code or 0)
    return code, capsysbinary.readouterr().out


def names(objs: dict[str, tuple[str, bytes]], refs: dict[str, str]) -> list[str]:
    """Every object id, a 7-digit abbreviation of each, every ref by full and short name,
    and git's suffixes over them."""
    out = [*objs, *(o[:7] for o in objs), *refs, *(r.rsplit("/", 1)[1] for r in refs)]
    out += ["main~1", "main^2", "main^{tree}", "main:sub", "main:sub/s.txt", "side^", "main^0"]
    if "refs/tags/v1" in refs:
        out += ["HEAD", "HEAD~2", "v1^{}", "v1^{commit}", "v1^{tree}", "v1:a.txt", "v1-bare~1"]
    return out


def test_cat_file_answers_as_git(golden: Any, capsysbinary: Any) -> None:
    archive, repo, objs = golden
    refs, _head = GOLDENS[archive.stem]
    for name in names(objs, refs):
        for flag in ("-t", "-s", "-p"):
            want = git(repo, "cat-file", flag, name).stdout
            code, got = ours(capsysbinary, "git", "cat-file", str(archive), name, flag)
            assert (code, got) == (0, want), (name, flag)
    for name in ("0000000", "refs/heads/gone", "nothing"):
        assert git(repo, "cat-file", "-e", name, check=False).returncode != 0
        assert ours(capsysbinary, "git", "cat-file", str(archive), name, "-e")[0] == 1


def test_show_ref_answers_as_git(golden: Any, capsysbinary: Any) -> None:
    archive, repo, _objs = golden
    for args in SHOW_REF:
        want = git(repo, "show-ref", *args, check=False)
        code, got = ours(capsysbinary, "git", "show-ref", str(archive), *args)
        assert (code, got) == (want.returncode, want.stdout), args


def test_log_and_rev_list_answer_as_git(golden: Any) -> None:
    """``git log`` and ``git rev-list --objects`` of every commit, ref and tag, and
    ``rev-list --all`` (with ``--objects``): the API behind the ``git_log`` and
    ``git_reachable`` macros."""
    archive, repo, objs = golden
    refs, _head = GOLDENS[archive.stem]
    starts = [o for o, (k, _) in objs.items() if k == "commit"] + list(refs)
    with open_archive(archive) as a:
        objects = GitObjects(a)
        assert objects.loose is not None
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
        all_objects = git(repo, "rev-list", "--objects", "--all").stdout.decode()
        assert every == {ln.split(" ")[0] for ln in all_objects.splitlines()}
        commits = {c.hex() for r in refs for c in named.log(r)}
        assert commits == set(git(repo, "rev-list", "--all").stdout.decode().split())


def test_the_cli_as_a_process(golden: Any) -> None:
    archive, repo, _objs = golden
    cli = Path(sys.executable).parent / "znippy-sql"
    got = subprocess.run([str(cli), "git", "cat-file", str(archive), "-p", "main:sub"],
                         capture_output=True, check=True).stdout
    assert got == git(repo, "cat-file", "-p", "main:sub").stdout


def test_a_damaged_entry_is_refused(tmp_path: Path) -> None:
    """An entry whose bytes are not its oid's object: the read says so, naming the entry."""
    from znippy_sql.interop.gitloose import LooseTier

    with open_archive(DATA / "lib-git.znippy") as a:
        tier = LooseTier(a)
        real = a.read

        def lying(path: str) -> bytes:
            data = real(path)
            return data[:-1] + bytes([data[-1] ^ 1])

        a.read = lying  # type: ignore[method-assign]
        with pytest.raises(ZnippyError, match=f"entry {MAIN} does not hash to its name"):
            tier.read(tier.index.find(bytes.fromhex(MAIN)) or 0)


def test_the_sql_macros_answer_as_git(golden: Any) -> None:
    """``git_log`` (ids, parents, committer times), ``git_reachable`` (ids and types) and
    ``git_cat`` (type, size, payload) through DuckDB, for every commit, ref and object."""
    import duckdb

    from znippy_sql.duckdb import register

    archive, repo, objs = golden
    refs, _head = GOLDENS[archive.stem]
    con = duckdb.connect()
    register(con, archive, "g")
    for start in [o for o, (k, _) in objs.items() if k == "commit"] + list(refs):
        want = [ln.split(" ") for ln in
                git(repo, "log", "--format=%H %ct %P", start).stdout.decode().splitlines()]
        got = con.execute("SELECT oid, commit_time, parents FROM git_log('g', ?)",
                          [start]).fetchall()
        assert [[o.hex(), str(t), *(p.hex() for p in ps)] for o, t, ps in got] == \
            [[w for w in ws if w] for ws in want], start
        listed = git(repo, "rev-list", "--objects", start).stdout.decode()
        ids = [ln.split(" ")[0] for ln in listed.splitlines()]
        kinds = git(repo, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                    data="\n".join(ids).encode()).stdout.decode().split()
        got_r = con.execute("SELECT lower(hex(oid)), type_name FROM git_reachable('g', ?)",
                            [start]).fetchall()
        assert got_r == sorted(zip(kinds[::2], kinds[1::2])), start
    for oid, (kind, payload) in objs.items():
        assert con.execute("SELECT type, size, content FROM git_cat('g', ?)", [oid]
                           ).fetchall() == [(kind, len(payload),
                                             git(repo, "cat-file", kind, oid).stdout)]


def test_a_non_canonical_entry_is_refused() -> None:
    from znippy_sql.interop.gitloose import LooseTier

    with open_archive(DATA / "lib-git.znippy") as a:
        tier = LooseTier(a)
        a.read = lambda path: b"blob 99\0short"  # type: ignore[method-assign]
        with pytest.raises(ZnippyError, match="is not a canonical git object"):
            tier.read(0)


def test_an_index_row_naming_another_entry_is_refused_by_the_cli(
        tmp_path: Path, capsys: Any) -> None:
    """``__gunnar_oid__`` row of ordinal 0 changed to ordinal 1's (the Rust writer keeps no
    section digest, so only the reader can catch it): one line, exit 2."""
    data = bytearray((DATA / "lib-git-pushes.znippy").read_bytes())
    with open_archive(DATA / "lib-git-pushes.znippy") as a:
        section = bytes(a.section("__gunnar_oid__"))
    at = data.index(section)
    rows = at + 24 + 8 * 13
    data[rows:rows + 8] = data[rows + 8:rows + 16]
    bad = tmp_path / "bad.znippy"
    bad.write_bytes(bytes(data))
    oid = sorted(entries(DATA / "lib-git-pushes.znippy"))[0]
    code = main(["git", "cat-file", str(bad), "-p", oid])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"object {oid} points at lookup row" in err and str(bad) in err


def test_damaged_push_logs_and_graphs_are_refused() -> None:
    import pyarrow as pa

    from znippy_sql.interop.gitloose import corrected_dates
    from znippy_sql.interop.pushlog import RUST_REFS_COLUMNS, rust_refs

    def log(*rows: tuple[str, str | None, str | None]) -> pa.Table:
        return pa.table({"name": [r[0] for r in rows], "target": [r[1] for r in rows],
                         "peeled": [None] * len(rows), "symref_target": [r[2] for r in rows],
                         "push_seq": [0] * len(rows), "updated_ms": [0] * len(rows)},
                        schema=pa.schema(list(RUST_REFS_COLUMNS.items())))

    with pytest.raises(ZnippyError, match="form a loop"):
        rust_refs(log(("HEAD", None, "refs/heads/a"), ("refs/heads/a", None, "HEAD")), "x")
    with pytest.raises(ZnippyError, match="not a 40-digit hex id"):
        rust_refs(log(("refs/heads/a", "XYZ", None)), "x")
    with pytest.raises(ZnippyError, match="its parent"):
        corrected_dates(["a", "b"], [[], ["a"]], [1, 2], [2, 1], path="x")


def test_a_bitmap_naming_an_ordinal_past_the_objects_is_refused() -> None:
    from pyroaring import BitMap

    with open_archive(DATA / "lib-git.znippy") as a:
        objects = GitObjects(a)
        objects.__dict__["_bitmaps"] = {bytes.fromhex(MAIN): BitMap([1, 999]).serialize()}
        with pytest.raises(ZnippyError, match="ordinal 999 of 12"):
            Names(objects).reachable_array_of(bytes.fromhex(MAIN))
        with pytest.raises(ZnippyError, match="ordinal 999 of 12"):
            Names(objects).reachable(MAIN)
