"""The remote part of the fuzz campaign (issue 23 section 7, issue 27): lying replies of the
counting server under every read operation, random storage options (``_fuzz_remote``).
``bench/fuzz_remote.py`` runs the same cases for a given time."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from _fuzz_remote import option_case, reply_case
from conftest import random_bytes, text_bytes
from remote_server import RangeServer, free_port
from znippy_sql import Entry, write_archive


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RangeServer, str, Path]]:
    work = tmp_path_factory.mktemp("fuzz-remote")
    local = work / "a.znippy"
    entries = [Entry(f"r{r}/pkg{i % 5}/f{i}.txt",
                     data=random_bytes(300 + i, seed=i) if i % 3 else text_bytes(500 + i, seed=i),
                     repo=f"r{r}") for r in range(3) for i in range(40)]
    entries.append(Entry("r0/big.bin", data=random_bytes(600_000, seed=9), repo="r0"))
    write_archive(local, entries, block_size=64 << 10, workers=1, fsync=False)
    srv = RangeServer()
    srv.put("a.znippy", local.read_bytes())
    yield srv, f"{srv.url}/a.znippy", local
    srv.close()


def test_fuzz_remote_replies(served: tuple[RangeServer, str, Path], tmp_path: Path) -> None:
    srv, url, local = served
    seen = Counter(reply_case(srv, url, local, tmp_path, seed).split(":")[0]
                   for seed in range(150))
    assert seen["ok"] and seen["error"], seen  # both outcomes were met


def test_fuzz_storage_options() -> None:
    port = free_port()
    # 4947: a value under http2_keep_alive_interval was echoed by the store ("failed to parse
    # ... as Duration"): every duration key is checked before the store sees it
    seen = Counter(option_case(seed, port) for seed in (*range(300), 4947))
    assert seen["refused"] and seen["store"], seen
