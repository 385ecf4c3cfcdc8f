"""What the three engines share, without any engine: which archives an argument names, the
predicates turned into a Where, a Scan's plan and rows with content."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from _engines import duck
from _fleet import write_fleet
from znippy_sql import ZnippyError
from znippy_sql.engines.parts import Scan, contents
from znippy_sql.engines.predicates import merge, where_kwargs, where_of
from znippy_sql.engines.sources import expand
from znippy_sql.views import Where


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_fleet(str(tmp_path_factory.mktemp("fleet")))


def test_expand_paths_globs_lists(fleet: list[str], tmp_path: Path) -> None:
    root = str(Path(fleet[0]).parent)
    assert expand(f"{root}/*.znippy") == sorted(fleet)
    assert expand([fleet[1], f"{root}/c*.znippy"]) == [fleet[1], fleet[0]]  # once each
    with pytest.raises(ZnippyError, match="no archive matches this pattern"):
        expand(str(tmp_path / "*.znippy"))
    with pytest.raises(ValueError, match="no archive given"):
        expand([])
    with pytest.raises(TypeError):
        expand([3])  # type: ignore[list-item]


def test_conjuncts_become_a_where() -> None:
    w = where_of([("repo", "in", ("a", "b")), ("repo", "in", ("b",)), ("size", "in", (3,)),
                  ("relative_path", "prefix", ("x/",)), ("pkg_type_name", "in", ("maven",)),
                  ("module_name", "in", (1,))])
    assert (w.repo, w.path_prefix, w.module_name) == (("b",), ("x/",), None)
    assert w.pkg_type == (1,)
    assert where_of([("pkg_type_name", "in", ("no-such-type",))]) == Where()
    nested = merge(Where(path_prefix="a/"), Where(path_prefix=("a/b/", "c/")))
    assert nested.path_prefix == ("a/b/",)
    assert merge(Where(repo="a"), Where(repo="b")).repo == ()
    assert where_kwargs(Where(repo="a"), repo=("a", "b"), path=None).repo == ("a",)


def test_scan_plans_prunes_and_reads_content(fleet: list[str]) -> None:
    scan = Scan(tuple(fleet), content=True, target_bytes=1)
    assert pickle.loads(pickle.dumps(scan)) == scan
    assert len(scan.plan()) == 7  # a part per data group
    assert len(Scan(tuple(fleet), min_parts=1).plan()) == 1  # a small fleet: one part
    assert len(Scan(tuple(fleet)).plan()) >= 4  # cut finer: fewer parts than MIN_PARTS
    parts = scan.plan(Where(repo="docs"))
    assert [p.archives for p in parts] == [(fleet[3],)]
    schema = scan.schema()
    assert schema.names[0] == "archive" and schema.names[-1] == "content"
    rows = [r for p in parts for b in scan.read(p, schema, ["relative_path", "content"])
            for r in b.to_pylist()]
    want = duck(fleet, "SELECT relative_path FROM f_files WHERE repo = 'docs'")
    assert sorted((r["relative_path"],) for r in rows) == want
    assert all(r["content"].startswith(b"mixed docs line") for r in rows)
    got = contents([fleet[3], None], ["docs/pkg0/mod0.txt", None]).to_pylist()
    assert got[0].startswith(b"mixed docs line 0") and got[1] is None
    with pytest.raises(ValueError, match="content is read for the files view"):
        Scan(tuple(fleet), view="groups", content=True)
