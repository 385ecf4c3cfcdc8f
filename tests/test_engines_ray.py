"""Ray Data on a local 2-node cluster (``ray.cluster_utils.Cluster``: two raylets, workers in
separate processes importing the installed package), and Daft on Ray's runner: the same
rows as DuckDB, predicate and projection pushdown, content, errors."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

import ray  # a dev extra: the suite runs Ray, never skips it for want of it
from _engines import COLUMNS, canon, duck  # noqa: E402
from _fleet import write_fleet  # noqa: E402

# solo: run after the parallel part of the suite, alone (a Ray node that starts next to a
# busy test worker misses Ray's start-up timeout on 2 cores)
pytestmark = [pytest.mark.slow, pytest.mark.solo]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ports() -> dict[str, int]:
    """Fixed agent ports: a raylet given them does not wait for the agents' port files
    (on a loaded machine an agent may take longer to write them than the raylet waits)."""
    return {"metrics_agent_port": _port(), "metrics_export_port": _port(),
            "runtime_env_agent_port": _port(), "dashboard_agent_listen_port": _port()}


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    from ray.cluster_utils import Cluster

    try:
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False, **_ports()})
    except Exception as exc:  # noqa: BLE001
        if "timed out during startup" not in str(exc):
            raise
        # the raylet waits a fixed time for its agents' port files; on a 2-core machine
        # running several test suites at once (load > 15) the agents start later than that
        pytest.skip(f"Ray could not start a node on this machine: {exc}")
    try:
        c.add_node(num_cpus=1, **_ports())
        ray.init(address=c.address, log_to_driver=False)
        c.wait_for_nodes()
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return write_fleet(str(tmp_path_factory.mktemp("fleet")))


def test_two_nodes_same_rows_as_duckdb(cluster, fleet: list[str]) -> None:
    import znippy_sql.ray as zray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    glob = os.path.join(os.path.dirname(fleet[0]), "*.znippy")
    ds = zray.read_archives(glob, target_bytes=1)  # one task per group: both nodes work
    got = canon(tuple(r[c] for c in COLUMNS) for r in ds.take_all())
    assert got == duck(fleet, f"SELECT {', '.join(COLUMNS)} FROM f_files")
    groups = zray.read_archives(fleet, view="groups").take_all()
    assert canon((r["archive"], r["repo"], r["row_count"]) for r in groups) == duck(
        fleet, "SELECT archive, repo, row_count FROM f_groups")


def test_pushdown_and_content(cluster, fleet: list[str]) -> None:
    from ray.data.expressions import col

    import znippy_sql.ray as zray
    from znippy_sql.engines.predicates import where_of
    from znippy_sql.engines.ray import conjuncts

    expr = (col("repo") == "src") & col("relative_path").is_in(["src/pkg1/mod1.txt"])
    assert where_of(conjuncts(expr)).repo == ("src",)
    ds = zray.read_archives(fleet, content=True).filter(expr=expr).select_columns(
        ["archive", "relative_path", "content"])
    got = ds.take_all()
    assert canon((r["archive"], r["relative_path"]) for r in got) == duck(
        fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'src' AND "
               "relative_path = 'src/pkg1/mod1.txt'")
    for r in got:
        assert bytes(r["content"]).startswith(f"{Path(r['archive']).stem} src line 1".encode())
    by_repo = zray.read_archives(fleet, repo=("docs", "central")).groupby("repo").count()
    assert canon((r["repo"], r["count()"]) for r in by_repo.take_all()) == duck(
        fleet, "SELECT repo, count(*) FROM f_files WHERE repo IN ('docs', 'central') "
               "GROUP BY ALL")


def test_count_equals_duckdb_in_every_view(cluster, tmp_path: Path) -> None:
    """``count()`` of every view (tests/test_view_counts.py's archives) is DuckDB's."""
    import znippy_sql.ray as zray
    from test_view_counts import duck_count, every_view_archives, present

    for name, paths in present(every_view_archives(tmp_path)).items():
        ds = zray.read_archives(paths, view=name)
        assert ds.count() == duck_count(paths, name), name
        assert ds.select_columns([]).count() == duck_count(paths, name), name


def test_errors_keep_our_message(cluster, fleet: list[str], tmp_path: Path) -> None:
    import znippy_sql.ray as zray
    from znippy_sql import ZnippyError

    bad = tmp_path / "bad.znippy"
    bad.write_bytes(b"not an archive" * 20)
    with pytest.raises(ZnippyError) as info:
        zray.read_archives([fleet[0], str(bad)])
    assert str(bad) in str(info.value)


def test_daft_on_the_ray_runner(cluster, fleet: list[str], tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from znippy_sql.catalog import open_catalog

    wh = tmp_path / "wh"
    open_catalog(wh, create=True).add(fleet)
    # a runner is chosen once per process: Daft on Ray runs in a child attached to the cluster
    code = (
        "import json, daft; from daft import col; import znippy_sql.daft as zd\n"
        f"daft.set_runner_ray(address={cluster.address!r})\n"
        f"df = zd.read_archives({fleet!r}, target_bytes=1)\n"
        "d = df.where(col('repo') == 'central').with_column('content', zd.read_bytes("
        "col('archive'), col('relative_path'))).select('archive', 'relative_path', 'content')"
        ".to_pydict()\n"
        "print(json.dumps(sorted(zip(d['archive'], d['relative_path'], "
        "[len(c) for c in d['content']]))))\n"
        "n = df.groupby('repo').agg(col('size').sum().alias('s')).to_pydict()\n"
        "print(json.dumps(sorted(zip(n['repo'], n['s']))))\n"
        f"c = zd.read_catalog({str(wh)!r}).where(col('relative_path').endswith('.pom'))"
        ".groupby('repo').agg(col('size').count().alias('n')).to_pydict()\n"
        "print(json.dumps(sorted(zip(c['repo'], c['n']))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    content, sizes, poms = (json.loads(line) for line in out.stdout.strip().splitlines()[-3:])
    assert canon(map(tuple, content)) == duck(fleet, "SELECT archive, relative_path, size "
                                                     "FROM f_files WHERE repo = 'central'")
    assert canon(map(tuple, sizes)) == duck(fleet, "SELECT repo, sum(size) FROM f_files "
                                                   "GROUP BY ALL")
    assert canon(map(tuple, poms)) == duck(fleet, "SELECT repo, count(*) FROM f_files WHERE "
                                                  "ends_with(relative_path, '.pom') GROUP BY ALL")


def test_archives_on_s3(cluster, fleet: list[str], tmp_path: Path) -> None:
    """Archives on SeaweedFS, credentials as storage options, read by Ray's workers."""
    import znippy_sql.ray as zray
    from remote_server import Seaweed
    from _engines import BUCKET, storage, upload

    weed = Seaweed(tmp_path / "weed")
    try:
        urls = upload(weed, fleet, "ray")
        ds = zray.read_archives(f"s3://{BUCKET}/ray/*.znippy", storage_options=storage(weed),
                                content=True, repo="src")
        got = ds.take_all()
        assert canon((fleet[urls.index(r["archive"])], r["relative_path"]) for r in got) == \
            duck(fleet, "SELECT archive, relative_path FROM f_files WHERE repo = 'src'")
        assert all(bytes(r["content"]).startswith(
            f"{Path(r['archive']).stem} src line".encode()) for r in got)
    finally:
        weed.close()
