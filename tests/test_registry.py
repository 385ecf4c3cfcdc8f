"""Package-type names resolve through the module registry alone: a third-party module
registered through an entry point (a dist-info on sys.path, as pip installs one) is used by its
name wherever a built-in name works: the writer, select/index, views.Where, DuckDB (views and
znippy_ls), Polars, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PLUGIN = '''
import pyarrow as pa

class ThirdModule:
    name = "thirdkind"
    pkg_type = 42
    fields = (pa.field("thirdkind_stem", pa.utf8()),)

    def claims(self, relative_path):
        return relative_path.endswith(".third")

    def columns(self, relative_path, read):
        return {"thirdkind_stem": relative_path.rsplit("/", 1)[-1][:-len(".third")]}
'''

SCRIPT = r'''
import json, os, sys
import duckdb, polars as pl
from znippy_sql import Entry, open_archive, views, write_archive
from znippy_sql.cli import main
import znippy_sql.duckdb as zd
from znippy_sql.polars import scan

out = sys.argv[1]
a1 = os.path.join(out, "named.znippy")
write_archive(a1, [Entry("x/a.third", data=b"a", pkg_type="thirdkind"),
                   Entry("x/b.txt", data=b"b")], fsync=False)
a2 = os.path.join(out, "auto.znippy")
write_archive(a2, [Entry("y/c.third", data=b"c"), Entry("y/d.txt", data=b"d")],
              pkg_type="auto", fsync=False)
res = {}
with open_archive(a2) as a:
    res["groups"] = sorted([k.pkg_type, k.module_name] for k in a.groups)
    res["select"] = a.select(pkg_type="thirdkind")
    res["index"] = a.index(pkg_type="thirdkind").column("relative_path").to_pylist()
    res["views"] = views.batches(a, "files", ["relative_path", "pkg_type_name",
                                              "thirdkind_stem"],
                                 views.Where(pkg_type="thirdkind")).read_all().to_pylist()
with open_archive(a1) as a:
    res["named"] = a.select(pkg_type="thirdkind")
con = duckdb.connect()
zd.register(con, a2, "t")
res["duckdb"] = con.sql("SELECT relative_path, pkg_type, pkg_type_name FROM t_files "
                        "WHERE pkg_type_name = 'thirdkind'").fetchall()
res["ls_macro"] = con.sql("SELECT relative_path FROM znippy_ls('t', pkg_type := 'thirdkind')"
                          ).fetchall()
res["polars"] = scan(a2).filter(pl.col("pkg_type_name") == "thirdkind").select(
    "relative_path", "thirdkind_stem").collect().rows()
sys.stdout.flush()
print("RESULT " + json.dumps(res))
'''


def _plugin(root: Path) -> Path:
    site = root / "site"
    dist = site / "thirdmod-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "thirdmod.py").write_text(PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdmod\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[znippy_sql.modules]\nthirdkind = thirdmod:ThirdModule\n")
    return site


def test_third_party_module_by_name_everywhere(tmp_path: Path) -> None:
    site = _plugin(tmp_path)
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True,
                         text=True, env=env, check=True)
    res = json.loads(run.stdout.split("RESULT ", 1)[1])
    assert res["groups"] == [[0, ""], [42, "thirdkind"]]
    assert res["select"] == ["y/c.third"] and res["index"] == ["y/c.third"]
    assert res["named"] == ["x/a.third"]
    assert res["views"] == [{"relative_path": "y/c.third", "pkg_type_name": "thirdkind",
                             "thirdkind_stem": "c"}]
    assert res["duckdb"] == [["y/c.third", 42, "thirdkind"]]
    assert res["ls_macro"] == [["y/c.third"]]
    assert res["polars"] == [["y/c.third", "c"]]
    # the CLI: create with the name, ls and info by it
    src = tmp_path / "src"
    (src / "p").mkdir(parents=True)
    (src / "p" / "e.third").write_bytes(b"e")
    cli = [sys.executable, "-c", "import sys; from znippy_sql.cli import main; sys.exit(main())"]
    out = tmp_path / "cli.znippy"
    subprocess.run([*cli, "create", str(src), "-o", str(out), "--pkg-type", "thirdkind"],
                   env=env, check=True, capture_output=True)
    ls = subprocess.run([*cli, "ls", "--json", "--pkg-type", "thirdkind", str(out)], env=env,
                        check=True, capture_output=True, text=True)
    rows = json.loads(ls.stdout)
    assert [(r["relative_path"], r["pkg_type_name"], r["thirdkind_stem"]) for r in rows] == [
        ("p/e.third", "thirdkind", "e")]
    info = subprocess.run([*cli, "info", str(out)], env=env, check=True, capture_output=True,
                          text=True)
    assert "thirdkind" in info.stdout
