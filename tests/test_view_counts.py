"""Every view counts its rows in every engine as DuckDB does, with no column asked for too
(``count(*)``, Daft's ``count_rows``, Spark's ``count``, Polars' ``len``): a zero-column batch keeps its
length. Two archives hold every built-in view between them: a signed one with ``__meta__``
facts and Maven module columns, and a git import (git sections, refs); the real Rust git
library's pushes golden adds ``git_secrets`` (our writer has no secrets). Ray's count is in
test_engines_ray.py (solo)."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from _engines import duck
from test_git import Repo, numbers
from znippy_sql import Entry, open_archive, views, write_archive
from znippy_sql.engines.parts import Scan
from znippy_sql.git.importer import import_repository
from znippy_sql.provenance.sign import Signer
from znippy_sql.views.registry import BUILTIN


def _signer() -> Signer:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "count signer")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30)).sign(key, hashes.SHA256()))
    return Signer(key, cert)


def _entries() -> list[Entry]:
    out = [Entry(f"src/f{i}.txt", data=f"line {i}\n".encode() * (i + 1), repo="src")
           for i in range(7)]
    out.append(Entry("src/big.bin", data=bytes(range(256)) * 40, repo="src"))  # chunks
    for j in range(5):
        base = f"com/acme/lib{j}/1.{j}/lib{j}-1.{j}"
        out.append(Entry(base + ".pom", data=f"<project><artifactId>lib{j}</artifactId>"
                         f"<version>1.{j}</version></project>\n".encode(),
                         pkg_type="maven", repo="central"))
        out.append(Entry(base + ".jar", data=bytes(range(j + 1)) * 99, pkg_type="maven",
                         repo="central"))
    return out


#: the views our writer cannot make (``git_secrets``) come from it; for the others its git
#: columns are the Rust library's (hex text oids), which no engine unions with ours
RUST_GIT = str(Path(__file__).parent / "data" / "rust-plugin-git-0.2.4" / "lib-git-pushes.znippy")


def every_view_archives(root: Path) -> list[str]:
    """Archives holding every built-in view between them."""
    plain = root / "plain.znippy"
    write_archive(plain, _entries(), block_size=1024, fsync=False, workers=1,
                  signer=_signer(), meta={"release": "1", "team": "x"})
    r = Repo(root / "repo")
    for i in range(4):
        r.write(f"d{i % 2}/f{i}.txt", numbers(20, str(i)))
        r.commit(f"c{i}")
    r.git("tag", "-a", "v1", "-m", "one")
    r.git("branch", "side", "HEAD~2")
    git = root / "git.znippy"
    import_repository(r.path, git)
    return [str(plain), str(git), RUST_GIT]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return every_view_archives(tmp_path_factory.mktemp("counts"))


def present(archives: list[str]) -> dict[str, list[str]]:
    """view → the archives that have it."""
    out: dict[str, list[str]] = {}
    for p in archives:
        with open_archive(p) as a:
            for name in views.names():
                if p == RUST_GIT and name in out:
                    continue
                if views.present(a, name):
                    out.setdefault(name, []).append(p)
    return out


def duck_count(paths: list[str], name: str) -> int:
    return int(duck(paths, f"SELECT count(*) FROM f_{name}")[0][0])


def test_every_built_in_view_is_in_the_test_archives(archives: list[str]) -> None:
    assert set(present(archives)) >= set(BUILTIN)


def test_an_empty_projection_counts_as_duckdb_in_every_view(archives: list[str]) -> None:
    for name, paths in present(archives).items():
        for p in paths:
            want = duck_count([p], name)
            assert want > 0, name
            got = views.batches(p, name, [])
            assert got.schema.names == []
            assert sum(b.num_rows for b in got) == want, name
            assert views.table(p, name, []).num_rows == want, name
        want = duck_count(paths, name)
        assert sum(b.num_rows for b in views.batches_many(paths, name, [])) == want, name
        scan = Scan(tuple(paths), name, min_parts=1)
        schema = scan.schema()
        assert sum(b.num_rows for part in scan.plan() for b in scan.read(part, schema, [])) \
            == want, name


def test_daft_count_rows_equals_duckdb_in_every_view(archives: list[str]) -> None:
    import znippy_sql.daft as zdaft

    for name, paths in present(archives).items():
        assert zdaft.read_archives(paths, view=name).count_rows() == \
            duck_count(paths, name), name


def test_polars_len_equals_duckdb_in_every_view(archives: list[str]) -> None:
    import polars as pl

    from znippy_sql.polars import scan

    for name, paths in present(archives).items():
        assert scan(paths, name).select(pl.len()).collect().item() == \
            duck_count(paths, name), name


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from _engines import java_or_skip

    java_or_skip()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import znippy_sql.spark

    s = (SparkSession.builder.master("local[1]").appName("znippy-counts")
         .config("spark.ui.enabled", "false").getOrCreate())
    znippy_sql.spark.register(s)
    yield s
    s.stop()


@pytest.mark.slow
def test_spark_count_equals_duckdb_in_every_view(spark: object,
                                                 archives: list[str]) -> None:
    for name, paths in present(archives).items():
        df = spark.read.format("znippy").option("view", name).load(paths)  # type: ignore[attr-defined]
        assert df.count() == duck_count(paths, name), name
        assert df.select().count() == duck_count(paths, name), name

