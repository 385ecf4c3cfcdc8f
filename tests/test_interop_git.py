"""The Rust git sections (``znippy-plugin-git`` 0.2.4, docs/interop.md "Git sections"), read
from an archive the real library wrote (``tests/data/rust-plugin-git-0.2.4/lib-git.znippy``:
``GitIndexBuilder`` over the loose objects of a four-commit repository with a merge, sealed
by ``HotArchive::seal``; ``tests/data/README.md``). Every expectation is computed here from
the archive's own entries (each a canonical git object named by its SHA-1), never from the
sections under test."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyroaring import BitMap

from znippy_sql import ZnippyError, open_archive
from znippy_sql.duckdb import register
from znippy_sql.interop.gitoid import decode_rust_oid_index

GOLDEN = Path(__file__).parent / "data" / "rust-plugin-git-0.2.4" / "lib-git.znippy"
MAIN, SIDE = ("760fc6819e5f67b593c222855ffabd03407b49de",
              "5e0889ec4cd0cabf33528e84773a95a3543a3115")


def objects() -> dict[str, tuple[str, bytes]]:
    """oid → (type, payload) of every entry, each checked to be the object its name says."""
    out = {}
    with open_archive(GOLDEN) as a:
        for path, data in a.read_many(a.first_paths()):
            assert hashlib.sha1(data).hexdigest() == path
            head, _, payload = data.partition(b"\0")
            kind, size = head.decode().split(" ")
            assert int(size) == len(payload)
            out[path] = (kind, payload)
    return out


def commits(objs: dict[str, tuple[str, bytes]]) -> dict[str, dict[str, Any]]:
    out = {}
    for oid, (kind, payload) in objs.items():
        if kind == "commit":
            text = payload.decode()
            out[oid] = {"tree": re.search(r"^tree (\w+)", text, re.M)[1],  # type: ignore[index]
                        "parents": re.findall(r"^parent (\w+)", text, re.M),
                        "time": int(re.search(r"^committer .* (\d+) [+-]\d{4}$", text,  # type: ignore[index]
                                              re.M)[1])}
    return out


def closure(objs: dict[str, tuple[str, bytes]], commit: str) -> set[str]:
    """Every object reachable from ``commit``: commits, trees, blobs."""
    seen: set[str] = set()
    todo = [commit]
    while todo:
        oid = todo.pop()
        if oid in seen or oid not in objs:
            continue
        seen.add(oid)
        kind, payload = objs[oid]
        if kind == "commit":
            info = commits({oid: (kind, payload)})[oid]
            todo += [info["tree"], *info["parents"]]
        elif kind == "tree":
            at = 0
            while at < len(payload):
                nul = payload.index(b"\0", at)
                todo.append(payload[nul + 1:nul + 21].hex())
                at = nul + 21
    return seen


@pytest.fixture(scope="module")
def con() -> Any:
    c = duckdb.connect()
    register(c, GOLDEN, "g")
    return c


def rows(con: Any, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def test_the_archive_reads_and_verifies() -> None:
    objs = objects()
    assert len(objs) == 12 and {k for k, _ in objs.values()} == {"commit", "tree", "blob"}
    with open_archive(GOLDEN) as a:
        assert a.verify().ok
        assert {"__gunnar_oid__", "__gunnar_graph__", "__gunnar_reach__",
                "__gunnar_refs__"} <= set(a.sections)


def test_git_objects_view(con: Any) -> None:
    """``__gunnar_oid__`` (``ZNPYGOID`` v3): every object once, in oid order, its ordinal
    its rank, its row the first lookup row of the entry named by the oid."""
    objs = objects()
    got = rows(con, "SELECT * FROM g_git_objects")
    assert [r["oid"].hex() for r in got] == sorted(objs)
    assert [r["ordinal"] for r in got] == list(range(len(objs)))
    with open_archive(GOLDEN) as a:
        lookup = a.lookup.to_pylist()
    for r in got:
        assert r["relative_path"] == r["oid"].hex()
        assert lookup[r["lookup_row"]]["relative_path"] == r["oid"].hex()
        assert lookup[r["lookup_row"]]["chunk_seq"] == 0


def test_git_commits_view(con: Any) -> None:
    """``__gunnar_graph__`` in the Rust shape: hex ``oid``/``parents``/``tree``,
    ``committer_time``, ``generation`` (1 for a root, else one more than the highest
    parent's)."""
    info = commits(objects())
    got = {r["oid"]: r for r in rows(con, "SELECT * FROM g_git_commits")}
    assert set(got) == set(info)
    gen: dict[str, int] = {}

    def generation(oid: str) -> int:
        if oid not in gen:
            gen[oid] = 1 + max((generation(p) for p in info[oid]["parents"]), default=0)
        return gen[oid]

    for oid, c in info.items():
        assert got[oid]["parents"] == c["parents"] and got[oid]["tree"] == c["tree"]
        assert got[oid]["committer_time"] == c["time"]
        assert got[oid]["generation"] == generation(oid)


def test_git_reach_view(con: Any) -> None:
    """``__gunnar_reach__``: a Roaring bitmap of object ordinals per commit it keeps; each
    is the commit's closure (commits, trees, blobs), its cardinality the bitmap's."""
    objs = objects()
    order = sorted(objs)
    got = rows(con, "SELECT * FROM g_git_reach")
    assert got and MAIN in {r["commit_oid"] for r in got}
    for r in got:
        bits = BitMap.deserialize(r["bitmap"])
        assert r["cardinality"] == len(bits)
        assert {order[i] for i in bits} == closure(objs, r["commit_oid"])


def test_git_refs_view(con: Any) -> None:
    """``__gunnar_refs__``: one batch per push (``name``, hex ``target``, ``push_seq``)."""
    got = rows(con, "SELECT name, target, peeled, symref_target, push_seq FROM g_git_refs "
                    "ORDER BY name")
    assert got == [
        {"name": "refs/heads/main", "target": MAIN, "peeled": None, "symref_target": None,
         "push_seq": got[0]["push_seq"]},
        {"name": "refs/heads/side", "target": SIDE, "peeled": None, "symref_target": None,
         "push_seq": got[0]["push_seq"]}]


def oid_section() -> bytes:
    with open_archive(GOLDEN) as a:
        return bytes(a.section("__gunnar_oid__"))


@pytest.mark.parametrize(("at", "value", "why"), [
    (8, b"\x02", "version 2"), (13, b"\x20", "do not fit together"),
    (24, b"\x00", "a key is not its oid's")])
def test_a_damaged_oid_index_is_refused(at: int, value: bytes, why: str) -> None:
    data = bytearray(oid_section())
    data[at:at + len(value)] = bytes([data[at] ^ 0xFF]) if at == 24 else value
    with pytest.raises(ZnippyError, match=why):
        decode_rust_oid_index(bytes(data), lookup_rows=12, path="x.znippy")


def test_a_row_past_the_lookup_is_refused() -> None:
    with pytest.raises(ZnippyError, match="past the lookup"):
        decode_rust_oid_index(oid_section(), lookup_rows=3, path="x.znippy")


def test_git_section_shapes_are_the_sources() -> None:
    """The schemas ``graph.rs``, ``reach.rs`` and ``refs.rs`` declare."""
    with open_archive(GOLDEN) as a:
        graph, reach, refs = (a.section(n) for n in ("__gunnar_graph__", "__gunnar_reach__",
                                                     "__gunnar_refs__"))
    assert isinstance(graph, pa.Table) and isinstance(reach, pa.Table)
    assert isinstance(refs, pa.Table)
    assert [(f.name, str(f.type)) for f in graph.schema] == [
        ("oid", "string"), ("parents", "list<item: string>"), ("tree", "string"),
        ("committer_time", "int64"), ("generation", "uint32")]
    assert [(f.name, str(f.type)) for f in reach.schema] == [
        ("commit_oid", "string"), ("cardinality", "uint64"), ("bitmap", "binary")]
    assert refs.schema.names == ["name", "target", "peeled", "symref_target", "push_seq",
                                 "updated_ms"]


PUSHES = GOLDEN.with_name("lib-git-pushes.znippy")


def test_git_secrets_view() -> None:
    """``__gunnar_secrets__`` (``secrets.rs``), written by the library from the three pushes
    of tests/data/README.md: every row as written (``name``, ``ciphertext`` as stored,
    ``recipient``, ``push_seq``), and ``in_force`` only on the row the library's fold keeps
    (the rotated key; the revoked webhook has none)."""
    c = duckdb.connect()
    register(c, PUSHES, "p")
    got = rows(c, "SELECT name, ciphertext, recipient, push_seq, in_force FROM p_git_secrets")
    assert got == [
        {"name": "deploy-key", "ciphertext": bytes.fromhex("a1b2c3d4e5f6"),
         "recipient": "age1deploy", "push_seq": 0, "in_force": False},
        {"name": "webhook", "ciphertext": bytes.fromhex("0badc0ffee"), "recipient": None,
         "push_seq": 0, "in_force": False},
        {"name": "deploy-key", "ciphertext": bytes.fromhex("d00dfeed0001"),
         "recipient": "age1deploy", "push_seq": 1, "in_force": True},
        {"name": "webhook", "ciphertext": None, "recipient": None, "push_seq": 2,
         "in_force": False}]
    assert c.execute("SELECT count(DISTINCT updated_ms) > 0 FROM p_git_secrets").fetchone() \
        == (True,)
    with open_archive(PUSHES) as a:
        secrets = a.section("__gunnar_secrets__")
    assert isinstance(secrets, pa.Table)
    assert [(f.name, str(f.type)) for f in secrets.schema] == [
        ("name", "string"), ("ciphertext", "binary"), ("recipient", "string"),
        ("push_seq", "uint64"), ("updated_ms", "uint64")]


def test_the_secrets_section_is_understood() -> None:
    from znippy_sql.read.foreign import not_understood

    with open_archive(PUSHES) as a:
        assert not_understood(a) == {}


def test_a_secrets_section_of_another_shape_is_refused() -> None:
    from znippy_sql.interop.pushlog import secrets_table

    with open_archive(PUSHES) as a:
        table = a.section("__gunnar_secrets__")
    assert isinstance(table, pa.Table)
    with pytest.raises(ZnippyError, match="columns secrets.rs writes"):
        secrets_table(table.drop_columns(["recipient"]), "x.znippy")


def test_the_refs_log_folds_as_the_library() -> None:
    """``refs.rs`` ``fold``: the last push of a name wins, a row with neither ``target`` nor
    ``symref_target`` deletes it (``refs/heads/gone``), ``HEAD`` is symbolic."""
    from znippy_sql.git.refs import load_refs

    with open_archive(PUSHES) as a:
        refs = load_refs(a)
    tag = bytes.fromhex("3bbac7159ac055dcaca2fd1d48cd9edd8a83c2d6")
    main = bytes.fromhex(MAIN)
    assert {n: (r.target, r.peeled, r.symbolic) for n, r in refs.by_name.items()} == {
        "HEAD": (main, None, "refs/heads/main"),
        "refs/heads/main": (main, None, None),
        "refs/heads/side": (bytes.fromhex(SIDE), None, None),
        "refs/tags/light": (bytes.fromhex("f46e689bbca4d5f8f7ba87a0d7fe2527a786f918"), None,
                            None),
        "refs/tags/v1": (tag, main, None),
        "refs/tags/v1-bare": (tag, None, None)}


@pytest.mark.parametrize("name", ["lib-git", "lib-git-pushes"])
def test_the_push_logs_fold_as_the_library_reads_them(name: str) -> None:
    """``interop/pushlog.py`` ``fold`` against the library's own ``read_refs`` and
    ``read_secrets`` on the same archive: ``<name>.fold.txt`` is what the throwaway program
    ``gread`` (``gread.rs.txt``, tests/data/README.md) printed."""
    from znippy_sql.interop.pushlog import fold

    lines = []
    with open_archive(GOLDEN.with_name(f"{name}.znippy")) as a:
        sections = set(a.sections)
        refs = a.section("__gunnar_refs__")
        assert isinstance(refs, pa.Table)
        rows = refs.to_pylist()
        for n, i in fold(refs, "__gunnar_refs__", live="target,symref_target").items():
            r = rows[i]
            lines.append(" ".join(["ref", n, *(r[c] or "-" for c in
                                               ("target", "peeled", "symref_target")),
                                   str(r["push_seq"])]))
        if "__gunnar_secrets__" in sections:
            secrets = a.section("__gunnar_secrets__")
            assert isinstance(secrets, pa.Table)
            rows = secrets.to_pylist()
            for n, i in fold(secrets, "__gunnar_secrets__", live="ciphertext").items():
                r = rows[i]
                lines.append(f"secret {n} {r['ciphertext'].hex()} {r['recipient'] or '-'} "
                             f"{r['push_seq']}")
    assert lines == GOLDEN.with_name(f"{name}.fold.txt").read_text().splitlines()
