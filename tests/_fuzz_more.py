"""Fuzz families beyond archive tails (issue 23 §7): git archives (their sections and packs),
the git push journal, and a catalog warehouse's Iceberg metadata.

Each family is ``(base, mutate, run)``: a real base made once (a repository made with the git
CLI and imported; a blob file and journal written by ``SafeWriter``; a warehouse with two
archives added), a seeded mutation of its bytes, and every read path over the result. An
outcome is ``ok`` (the paths worked and every byte they returned is the original's), ``refused``
(a ``ZnippyError``, or a CLI exit of 1 or 2 with one line and no traceback), ``wrong`` (bytes
returned that are not the original's) or ``bad`` (any other exception, a traceback).
Used by ``tests/test_fuzz.py`` (a time budget) and ``bench/fuzz.py --family`` (the campaign).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _splice import rebuild, sections

FAMILIES = ("git", "journal", "catalog")
GIT_MUTATIONS = ("flip-forged", "rows", "schema", "splice", "pack-forged", "truncate")


@dataclass
class Outcome:
    kind: str  # ok, refused, wrong, bad
    what: str = ""


@dataclass
class Bases:
    work: Path
    git: bytes = b""
    git_objects: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # oid → (type, body)
    blobs: bytes = b""
    journal: bytes = b""
    warehouse: Path | None = None
    archives: list[Path] = field(default_factory=list)


# -- bases -----------------------------------------------------------------------------------
def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = dict(os.environ, GIT_AUTHOR_NAME="f", GIT_AUTHOR_EMAIL="f@e", GIT_COMMITTER_NAME="f",
               GIT_COMMITTER_EMAIL="f@e", GIT_AUTHOR_DATE="2020-01-01T00:00:00Z",
               GIT_COMMITTER_DATE="2020-01-01T00:00:00Z")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          env=env, input=stdin).stdout


def make_bases(work: Path) -> Bases:
    from znippy_sql import Entry, write_archive
    from znippy_sql.catalog import open_catalog
    from znippy_sql.git import SafeWriter
    from znippy_sql.git.importer import import_repository

    work.mkdir(parents=True, exist_ok=True)
    out = Bases(work)
    repo = work / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    rng = random.Random(5)
    for i in range(4):
        (repo / f"f{i % 2}.txt").write_bytes(b"line %d\n" % i * (50 + 40 * i))
        (repo / "d").mkdir(exist_ok=True)
        (repo / "d" / "g.bin").write_bytes(rng.randbytes(300 + i))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"c{i}")
        if i == 1:
            _git(repo, "tag", "-a", "v1", "-m", "tag one")
            _git(repo, "repack", "-q", "-d")  # two packs, deltas in them
    _git(repo, "repack", "-q")
    archive = work / "git.znippy"
    import_repository(repo, archive)
    out.git = archive.read_bytes()
    listing = _git(repo, "cat-file", "--batch-all-objects", "--batch-check").decode().split("\n")
    for line in filter(None, listing):
        oid, kind, _ = line.split()
        out.git_objects[oid] = (kind, _git(repo, "cat-file", kind, oid))

    blobs = work / "objects.pack"
    with SafeWriter(blobs) as w:
        for n in (40, 0, 300, 7):
            w.append(rng.randbytes(n))
    out.blobs = blobs.read_bytes()
    out.journal = Path(str(blobs) + ".journal").read_bytes()

    wh = work / "wh"
    for name in ("a", "b"):
        path = work / f"{name}.znippy"
        write_archive(path, [Entry(f"{name}/{i}.txt", data=b"%s %d" % (name.encode(), i),
                                   repo=name) for i in range(3)], fsync=False, workers=1)
        out.archives.append(path)
    open_catalog(wh, create=True).add(out.archives)
    out.warehouse = wh
    return out


# -- mutations -------------------------------------------------------------------------------
def mutate_git(bases: Bases, rng: random.Random) -> tuple[bytes, str]:
    from _fuzz import mutate

    kind = rng.choice(GIT_MUTATIONS)
    data = bases.git
    if kind != "pack-forged":
        out, text = mutate(data, kind, rng)
        return out, f"git {text}"
    return _forge_pack(data, rng)


def _forge_pack(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Bytes of one stored pack changed and its chunk's BLAKE3 (and the section digests)
    recomputed: the checksums hold, only the git readers' own checks stand."""
    import blake3
    import pyarrow as pa

    secs = sections(data)
    groups = [n for n in secs if not n.startswith("__")]
    name = rng.choice(groups)
    table = pa.ipc.open_stream(pa.py_buffer(secs[name])).read_all()
    rows = table.to_pylist()
    raw = [i for i, r in enumerate(rows) if not r["compressed"] and r["blob_size"] > 0]
    if not raw:
        return data, "pack-forged: no stored chunk"
    i = rng.choice(raw)
    row = rows[i]
    blob = bytearray(data[row["blob_offset"] : row["blob_offset"] + row["blob_size"]])
    what = []
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(blob))
        blob[at] ^= rng.randint(1, 255)
        what.append(str(at))
    digest = blake3.blake3(bytes(blob)).digest()
    body = bytearray(data)
    body[row["blob_offset"] : row["blob_offset"] + row["blob_size"]] = blob
    replace = {}
    rows[i]["checksum"] = digest
    replace[name] = _stream(pa.Table.from_pylist(rows, schema=table.schema))
    if "__lookup__" in secs:
        lk = pa.ipc.open_stream(pa.py_buffer(secs["__lookup__"])).read_all()
        lrows = lk.to_pylist()
        for r in lrows:
            if r["relative_path"] == row["relative_path"] and r["chunk_seq"] == row["chunk_seq"]:
                r["checksum"] = digest
        replace["__lookup__"] = _stream(pa.Table.from_pylist(lrows, schema=lk.schema))
    return rebuild(bytes(body), replace), \
        f"git pack-forged {row['relative_path']}#{row['chunk_seq']}@{','.join(what)}"


def _stream(table: Any) -> bytes:
    from _splice import stream

    return stream(table)


def mutate_journal(bases: Bases, rng: random.Random) -> tuple[bytes, bytes, str]:
    """(blobs, journal, description)."""
    from znippy_sql.git.journal import TOMBSTONE, encode_row

    blobs, journal = bases.blobs, bytearray(bases.journal)
    kind = rng.choice(("flip", "truncate", "rows", "blobs-cut"))
    if kind == "flip":
        at = [rng.randrange(len(journal)) for _ in range(rng.randint(1, 3))]
        for i in at:
            journal[i] ^= rng.randint(1, 255)
        return blobs, bytes(journal), f"journal flip {at}"
    if kind == "truncate":
        cut = rng.randrange(len(journal))
        return blobs, bytes(journal[:cut]), f"journal truncate {cut}"
    if kind == "blobs-cut":
        cut = rng.randrange(len(blobs) + 1)
        return blobs[:cut], bytes(journal), f"journal blobs cut {cut}"
    values = (0, 1, 7, 40, len(blobs), len(blobs) + 1, 2**32, 2**63, TOMBSTONE)
    extra = [(rng.choice(values), rng.choice(values)) for _ in range(rng.randint(1, 3))]
    return blobs, bytes(journal) + b"".join(encode_row(o, s) for o, s in extra), \
        f"journal rows {extra}"


def mutate_catalog(bases: Bases, case: Path, rng: random.Random) -> str:
    """Damage one Iceberg metadata or manifest file of the base warehouse in place (its files
    name each other by absolute path: a copy would still read the originals); the warehouse
    as it was is kept in ``case`` and put back by :func:`restore_catalog`."""
    assert bases.warehouse is not None
    shutil.rmtree(case, ignore_errors=True)
    shutil.copytree(bases.warehouse, case)
    files = sorted(p for p in bases.warehouse.rglob("*") if p.is_file()
                   and (p.name.endswith(".metadata.json") or p.suffix == ".avro"))
    newest: dict[Path, Path] = {}  # each table's current metadata (the one a reader loads)
    for p in files:
        if p.name.endswith(".metadata.json"):
            if p.parent not in newest or p.name > newest[p.parent].name:
                newest[p.parent] = p
    target = rng.choice(list(newest.values()) if newest and rng.random() < 0.6 else files)
    data = bytearray(target.read_bytes())
    rel = target.relative_to(bases.warehouse)
    if target.suffix == ".json" and rng.random() < 0.6:
        doc = json.loads(data)
        path, parent, key = _pick(doc, rng)
        choice = rng.random()
        value: Any = rng.choice((None, -1, 0, 2**63, "x", [], {}, True, 1.5, "s3://nowhere/x"))
        if choice < 0.3 and isinstance(parent, dict):
            del parent[key]
            text = f"del {path}"
        else:
            parent[key] = value
            text = f"{path}={value!r}"
        target.write_text(json.dumps(doc))
        return f"catalog json {rel} {text}"[:200]
    kind = rng.choice(("flip", "truncate"))
    if kind == "flip":
        at = [rng.randrange(len(data)) for _ in range(rng.randint(1, 4))]
        for i in at:
            data[i] ^= rng.randint(1, 255)
        target.write_bytes(bytes(data))
        return f"catalog flip {rel} {at}"
    cut = rng.randrange(len(data))
    target.write_bytes(bytes(data[:cut]))
    return f"catalog truncate {rel} {cut}"


def restore_catalog(warehouse: Path, keep: Path) -> None:
    shutil.rmtree(warehouse)
    shutil.copytree(keep, warehouse)


def _pick(doc: Any, rng: random.Random) -> tuple[str, Any, Any]:
    """A random (path, container, key) inside a JSON document."""
    path, parent, key = "", None, None
    node = doc
    while isinstance(node, (dict, list)) and node and (parent is None or rng.random() < 0.7):
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        k = rng.choice(keys)
        parent, key, path = node, k, f"{path}/{k}"
        node = node[k]
    if parent is None:
        return "/", doc, next(iter(doc))
    return path, parent, key


# -- read paths ------------------------------------------------------------------------------
def _classify(fn: Any, *args: Any, path: str) -> Outcome | Any:
    from znippy_sql.errors import ZnippyError

    try:
        return fn(*args)
    except ZnippyError as exc:
        if exc.path is None and path not in str(exc):
            return Outcome("bad", f"{type(exc).__name__} not naming the file: {exc}"[:300])
        return Outcome("refused", str(exc)[:200])
    except Exception as exc:  # noqa: BLE001  (what the fuzzer is for)
        import duckdb

        if isinstance(exc, duckdb.Error) and "Error:" in str(exc) and path in str(exc):
            return Outcome("refused", str(exc)[:200])  # ours, carried through DuckDB
        return Outcome("bad", f"{type(exc).__name__}: {exc}"[:300])


def _cli(*argv: str) -> tuple[int, str, str] | Outcome:
    from znippy_sql.cli import main

    raw = io.BytesIO()
    out, err = io.TextIOWrapper(raw, encoding="utf-8", errors="replace"), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
            out.flush()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    except Exception as exc:  # noqa: BLE001
        return Outcome("bad", f"CLI {argv[:2]} raised {type(exc).__name__}: {exc}"[:300])
    text = err.getvalue()
    if "Traceback" in text or code not in (0, 1, 2):
        return Outcome("bad", f"CLI {argv[:2]} exit {code}: {text[-300:]}")
    return code, raw.getvalue().decode("utf-8", "replace"), text


def worst(outcomes: list[Outcome]) -> Outcome:
    order = ("bad", "wrong", "refused", "ok")
    return min(outcomes or [Outcome("ok")], key=lambda o: order.index(o.kind))


def run_git(archive: Path, objects: dict[str, tuple[str, bytes]]) -> Outcome:
    import duckdb

    path = str(archive)
    outs: list[Outcome] = []
    sample = sorted(objects)[:: max(1, len(objects) // 6)]  # the CLI on a few, the API on all
    for oid in sample:
        kind, body = objects[oid]
        got = _cli("git", "cat-file", path, oid, "-t")
        if isinstance(got, Outcome):
            outs.append(got)
            continue
        code, out, _ = got
        if code == 0 and out.strip() != kind:
            outs.append(Outcome("wrong", f"{oid} -t: {out.strip()!r}, git says {kind}"))
        else:
            outs.append(Outcome("refused" if code else "ok"))
    got = _classify(_api_objects, path, objects, path=path)
    outs.extend([got] if isinstance(got, Outcome) else got)
    con = duckdb.connect()
    try:
        got = _classify(_views, con, path, path=path)
        outs.append(got if isinstance(got, Outcome) else Outcome("ok"))
    finally:
        con.close()
    return worst(outs)


def _api_objects(path: str, objects: dict[str, tuple[str, bytes]]) -> list[Outcome]:
    from znippy_sql import open_archive
    from znippy_sql.git.objects import GitObjects

    outs: list[Outcome] = []
    with open_archive(path) as archive:
        store = GitObjects(archive)
        for oid, (kind, body) in objects.items():
            got = _classify(store.read, bytes.fromhex(oid), path=path)
            if isinstance(got, Outcome):
                outs.append(got)
            elif (got[0], bytes(got[1])) != (kind, body):
                outs.append(Outcome("wrong", f"{oid}: {got[0]} {bytes(got[1])[:40]!r}, "
                                             f"git says {kind} {body[:40]!r}"))
            else:
                outs.append(Outcome("ok"))
    return outs


def _views(con: Any, path: str) -> None:
    from znippy_sql.duckdb import register

    register(con, path, "g")
    names = [r[0] for r in con.sql("SELECT view_name FROM duckdb_views() "
                                   "WHERE view_name LIKE 'g_git%'").fetchall()]
    for name in names:
        con.sql(f'SELECT * FROM "{name}"').fetchall()


def run_journal(work: Path, blobs: bytes, journal: bytes) -> Outcome:
    from znippy_sql.git import read_journal, seal_generation_zero

    work.mkdir(parents=True, exist_ok=True)
    bpath = work / "objects.pack"
    bpath.write_bytes(blobs)
    jpath = Path(str(bpath) + ".journal")
    jpath.write_bytes(journal)
    outs: list[Outcome] = []
    sealed = work / "sealed.znippy"
    for step in (lambda: read_journal(jpath),
                 lambda: seal_generation_zero(bpath, jpath, sealed, git=False),
                 lambda: _reopen(bpath)):
        got = _classify(step, path=str(work))
        outs.append(got if isinstance(got, Outcome) else Outcome("ok"))
    if sealed.exists():  # what a seal made must be a sound archive
        got = _classify(_verify, sealed, path=str(sealed))
        outs.append(got if isinstance(got, Outcome) else
                    Outcome("ok") if got else Outcome("wrong", "the sealed archive fails verify"))
    return worst(outs)


def _verify(path: Path) -> bool:
    from znippy_sql import open_archive

    with open_archive(path) as archive:
        return bool(archive.verify().ok)


def _reopen(blobs: Path) -> None:
    from znippy_sql.git import SafeWriter

    with SafeWriter(blobs) as w:
        w.append(b"more")


def run_catalog(wh: Path, archives: list[Path]) -> Outcome:
    outs: list[Outcome] = []
    for argv in (("catalog", "ls", str(wh)),
                 ("catalog", "sql", str(wh), "SELECT count(*) FROM files"),
                 ("catalog", "verify", str(wh)),
                 ("catalog", "add", str(wh), *map(str, archives))):
        got = _cli(*argv)
        outs.append(got if isinstance(got, Outcome) else
                    Outcome("ok" if got[0] == 0 else "refused", got[2][:200]))
    return worst(outs)


def run_case(bases: Bases, family: str, seed: int, work: Path) -> tuple[str, Outcome]:
    """Case ``seed`` of ``family``: its description and outcome."""
    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    if family == "git":
        data, text = mutate_git(bases, rng)
        path = work / "fuzz.znippy"
        path.write_bytes(data)
        return text, run_git(path, bases.git_objects)
    if family == "journal":
        blobs, journal, text = mutate_journal(bases, rng)
        return text, run_journal(work, blobs, journal)
    if family == "catalog":
        assert bases.warehouse is not None
        keep = work / "wh-before"
        text = mutate_catalog(bases, keep, rng)
        try:
            return text, run_catalog(bases.warehouse, bases.archives)
        finally:
            restore_catalog(bases.warehouse, keep)
    raise ValueError(family)
