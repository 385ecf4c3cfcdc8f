"""What the engine tests share: the DuckDB answer to compare with, rows made comparable,
Java found or a clear skip."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from remote_server import ACCESS_KEY, SECRET_KEY

#: the S3 test server's bucket (tests/remote_server.py Seaweed)
BUCKET = "fleet"
#: the columns every engine is compared on (the files view)
COLUMNS = ("archive", "relative_path", "repo", "pkg_type", "module_name", "size", "digest",
           "maven_artifact_id")


def duck(paths: Sequence[str], sql: str) -> list[tuple[Any, ...]]:
    """``sql`` over the fleet registered in DuckDB as ``f`` (views ``f_files``, ...)."""
    import duckdb

    from znippy_sql.duckdb import register

    con = duckdb.connect()
    try:
        register(con, list(paths), name="f")
        return canon(con.sql(sql).fetchall())
    finally:
        con.close()


def canon(rows: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of plain values (bytes for binaries, ints for integers)."""
    out = []
    for r in rows:
        values = r.values() if isinstance(r, dict) else r
        out.append(tuple(bytes(v) if isinstance(v, (bytearray, memoryview)) else v
                         for v in values))
    return sorted(out, key=lambda t: tuple("" if v is None else str(v) for v in t))


def pydict_rows(d: dict[str, list[Any]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return canon(zip(*(d[c] for c in columns)))


def java_or_skip() -> str:
    """The java binary, or a skip saying why (CI installs default-jdk-headless: it runs
    there)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        if os.environ.get("CI"):
            pytest.fail("Spark needs Java 17+: .ci/run installs default-jdk-headless")
        pytest.skip("Spark needs Java 17+ and no java is on PATH or in JAVA_HOME")
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    return out.splitlines()[0] if out else java


def storage(weed: Any) -> dict[str, str]:
    return {"endpoint": weed.endpoint, "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY, "region": "us-east-1"}


def upload(weed: Any, local: list[str], prefix: str) -> list[str]:
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=weed.endpoint, access_key_id=ACCESS_KEY,
                    secret_access_key=SECRET_KEY, region="us-east-1",
                    client_options={"allow_http": True})
    urls = []
    for p in local:
        key = f"{prefix}/{Path(p).name}"
        obstore.put(store, key, Path(p).read_bytes())
        urls.append(f"s3://{BUCKET}/{key}")
    return urls
