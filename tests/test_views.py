"""The view catalog (znippy_sql.views): one definition per view, the same rows for every engine.

Each view's rows through ``views.batches`` equal the DuckDB view of the same name; projection,
group pruning (proved by bytes read) and the Where predicates are applied there; plans are
manifest-only and picklable; a plain archive loads no git code.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from _query_expect import RawView, by_path, corpus
from test_duckdb import META, git_sections
from znippy_sql import ReservedSection, ZnippyError, open_archive, views, write_archive
from znippy_sql.duckdb import register


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("v") / "full.znippy"
    write_archive(out, corpus(), block_size=256, workers=1, fsync=False,
                  reserved_sections=[ReservedSection("__meta__", META), *git_sections()])
    return out


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("v") / "plain.znippy"
    write_archive(out, corpus(), workers=1, fsync=False)
    return out


def _rows(reader: pa.RecordBatchReader) -> list[dict[str, Any]]:
    return reader.read_all().to_pylist()


def _key(row: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in row.items()))


def test_names_and_every_view_equals_duckdb(full: Path) -> None:
    assert views.names()[:10] == ["files", "chunks", "groups", "manifest", "lookup", "meta",
                                  "signatures", "git_objects", "git_commits", "git_reach"]
    con = duckdb.connect()
    register(con, full, "f")
    with open_archive(full) as a:
        have = [n for n in views.names() if views.present(a, n)]
    assert "signatures" not in have and len(have) == 9
    for name in have:
        schema = views.schema(str(full), name)
        got = views.batches(str(full), name)
        assert got.schema.equals(schema), name
        mine = _rows(got)
        theirs = con.sql(f"SELECT * FROM f_{name}").to_arrow_table()
        assert theirs.column_names == schema.names, name
        assert sorted(map(_key, mine)) == sorted(map(_key, theirs.to_pylist())), name
    assert by_path(_rows(views.batches(full, "files"))) == RawView(full).files()


def test_projection_where_and_pruning_by_bytes_read(full: Path) -> None:
    raw = RawView(full)
    with open_archive(full) as a:
        views.schema(a, "files")  # the schema (stream heads) first, then count the rows' bytes
        before = a.source.bytes_read
        got = _rows(views.batches(a, "files", ["size", "relative_path"],
                                  views.Where(repo="local")))
        read = a.source.bytes_read - before
    want = [f for f in raw.files() if f["repo"] == "local"]
    assert sorted(got, key=lambda r: r["relative_path"]) == sorted(
        ({"size": f["size"], "relative_path": f["relative_path"]} for f in want),
        key=lambda r: r["relative_path"])
    assert list(got[0]) == ["size", "relative_path"]
    assert read == sum(r["index_len"] for r in raw.rows if r["pkg_type"] != -1
                       and r["repo"] == "local")
    # IN, pkg_type by name, module_name, prefix
    files = raw.files()
    where = views.Where(repo=("local", "central"), pkg_type="maven")
    got = _rows(views.batches(full, "files", ["relative_path"], where))
    assert sorted(r["relative_path"] for r in got) == sorted(
        f["relative_path"] for f in files if f["pkg_type"] == 1)
    prefix = files[0]["relative_path"].split("/")[0] + "/"
    got = _rows(views.batches(full, "chunks", ["relative_path", "chunk_seq"],
                              views.Where(path_prefix=prefix)))
    assert got and all(r["relative_path"].startswith(prefix) for r in got)
    mods = {f["module_name"] for f in files}
    for m in mods:
        got = _rows(views.batches(full, "files", ["module_name"], views.Where(module_name=m)))
        assert {r["module_name"] for r in got} == {m}


def test_path_equality_goes_through_the_trie(full: Path) -> None:
    one = RawView(full).files()[3]
    got = _rows(views.batches(full, "files", None, views.Where(path=one["relative_path"])))
    assert got == [one]
    with open_archive(full) as a:
        views.schema(a, "files")
        before = a.source.bytes_read
        assert _rows(views.batches(a, "files", where=views.Where(path="no/such/file"))) == []
        groups = sum(a.manifest_row(k).index_len for k in a.groups)
        assert a.source.bytes_read - before < groups  # no sub-index was read


def test_many_archives_plan_and_parts(full: Path, plain: Path) -> None:
    both = [str(full), str(plain)]
    many = views.batches_many(both, "files", ["archive", "relative_path", "size"]).read_all()
    assert many.schema.names == ["archive", "relative_path", "size"]
    assert set(many.column("archive").to_pylist()) == set(both)
    assert many.num_rows == 2 * len(RawView(full).files())
    # meta: only one of them has it; the other adds no rows
    meta = views.batches_many(both, "meta").read_all()
    assert set(meta.column("archive").to_pylist()) == {str(full)}
    # plans: whole small archives batched, or one part per group; same rows either way
    for target in (1, 1 << 30):
        parts = views.plan(both, "files", target_bytes=target)
        assert parts == pickle.loads(pickle.dumps(parts))
        schema = views.schema_many(both, "files")
        rows = [r for p in parts for r in _rows(views.read_part(p, "files", schema=schema))]
        assert sorted(map(_key, rows)) == sorted(map(_key, views.batches_many(
            both, "files").read_all().to_pylist()))
    assert len(views.plan(both, "files", target_bytes=1 << 30)) == 1
    with open_archive(full) as a:
        assert len(views.plan(both, "files", target_bytes=1)) == len(a.groups) + \
            len(open_archive(plain).groups)
    pruned = views.plan(both, "files", views.Where(repo="local"), target_bytes=1)
    assert all(k.repo == "local" for p in pruned for _, keys in p.items for k in keys or ())


def test_bad_requests(full: Path, plain: Path) -> None:
    with pytest.raises(ValueError, match="unknown view"):
        views.batches(full, "nope")
    with pytest.raises(ValueError, match="no column 'nope'"):
        views.batches(full, "files", ["nope"])
    with pytest.raises(ValueError, match="no column 'repo'"):
        views.batches(full, "lookup", where=views.Where(repo="x"))
    with pytest.raises(ZnippyError, match="no git_commits section"):
        views.batches(plain, "git_commits")
    with pytest.raises(ZnippyError, match="unknown pkg_type"):
        views.Where(pkg_type="no-such-type")


def test_plain_archive_imports_no_git_code(tmp_path: Path) -> None:
    from znippy_sql import Entry

    plain = tmp_path / "three.znippy"
    write_archive(plain, [Entry(f"f{i}.txt", data=b"x" * i) for i in range(3)], fsync=False)
    code = (
        "import sys, duckdb\n"
        "import znippy_sql.duckdb as zd\n"
        "from znippy_sql import views\n"
        f"con = duckdb.connect(); zd.register(con, {str(plain)!r}, 'p')\n"
        "con.execute('SELECT count(*) FROM p_files').fetchall()\n"
        f"views.batches({str(plain)!r}, 'files').read_all()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('znippy_sql.git',\n"
        "      'znippy_sql.modules.maven', 'znippy_sql.udfs.git', 'znippy_sql.udfs.module'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_register_imports_no_pandas(tmp_path: Path) -> None:
    """pyarrow's Python converters and ``to_numpy`` import pandas where it is installed (~40 MB,
    ~1 s on the first call): ``register`` and the first scans of its views go without them
    (format/build.py)."""
    pytest.importorskip("pandas", reason="without pandas installed there is no pandas import "
                        "to avoid")
    from znippy_sql import Entry

    rich = tmp_path / "rich.znippy"
    write_archive(rich, [Entry("org/x/y/1.0/y-1.0.pom", data=b"<project/>", pkg_type="auto"),
                         Entry("plain.txt", data=b"plain", repo="r")],
                  meta={"k": "v"}, fsync=False)
    code = (
        "import sys, duckdb\n"
        "import znippy_sql.duckdb as zd\n"
        f"con = duckdb.connect(); zd.register(con, {str(rich)!r}, 'p')\n"
        "print(con.execute('SELECT count(*), sum(files) FROM p_groups').fetchall(),\n"
        "      con.execute('SELECT archive FROM p__archive').fetchall(),\n"
        "      [con.execute(f'SELECT count(*) FROM p_{v}').fetchall()[0][0]\n"
        "       for v in ('files', 'chunks', 'lookup', 'manifest', 'meta')],\n"
        "      'pandas' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == f"[(2, 2)] [({str(rich)!r},)] [2, 2, 2, 5, 3] False"


def test_remote_archive_gives_the_same_rows(full: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from remote_server import RangeServer

    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))
    srv = RangeServer()
    try:
        srv.put("full.znippy", full.read_bytes())
        url = f"{srv.url}/full.znippy"
        for name in ("files", "chunks", "groups", "lookup", "meta", "git_objects"):
            remote = views.batches(url, name).read_all()
            local = views.batches(full, name).read_all()
            assert remote.equals(local), name
        got = views.batches_many([url], "files", ["archive", "relative_path"],
                                 views.Where(repo="local")).read_all()
        assert set(got.column("archive").to_pylist()) == {url}
        parts = views.plan([url, str(full)], "files", target_bytes=1)
        assert {a for p in parts for a in p.archives} == {url, str(full)}
    finally:
        srv.close()
