"""Fuzz cases for remote reads and storage options (``tests/test_fuzz_remote.py``,
``bench/fuzz_remote.py``): lying replies of the counting server and random option keys.

A reply case is (seed): a read operation (open, ls, cat, extract, verify, a Polars scan) of an
archive on ``tests/remote_server.py``, with one to three of the server's faults placed on
chosen requests (``none`` faults before them let a fault hit the n-th request): short bodies,
a Content-Range off by one, shifted or halved ranges, other bytes under the same ETag, an
ETag that changes or is missing, a wrong total size, resets, 5xx. The outcome must be the
local archive's answer or one ``ZnippyError`` line naming the URL; any other exception, a
wrong answer or a panic is a finding.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from znippy_sql import ZnippyError, open_archive

REPLY_FAULTS = ("short", "content_range", "shift", "half_range", "garbage", "size", "etag",
                "no_etag", "ignore_range", "reset", "status")
OPERATIONS = ("open", "ls", "cat", "cat_big", "extract", "verify", "scan")


def _operation(name: str, url: str, local: Path, work: Path) -> Callable[[], Any]:
    opts = {"max_retries": "1", "init_backoff": "1ms", "max_backoff": "2ms", "timeout": "5s"}

    def run() -> Any:
        with open_archive(url, storage_options=opts, cache=False) as arc:
            if name == "open":
                return arc.groups
            if name == "ls":
                return arc.select()
            if name == "cat":
                return [arc.read(p) for p in arc.select()[:5]]
            if name == "cat_big":
                big = max(arc.select(), key=lambda p: arc.find(p).size)  # type: ignore[union-attr]
                return arc.read(big)
            if name == "extract":
                out = work / "x"
                import shutil

                shutil.rmtree(out, ignore_errors=True)
                rep = arc.extract(out, glob="*/pkg1*")
                files = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*")
                         if p.is_file()}
                return Partial(rep.ok, files, {f: rep.failed[f] for f in rep.failed})
            if name == "verify":
                rep = arc.verify()
                return Partial(rep.ok, rep.files, {})
            from znippy_sql.polars import scan

            return sorted(scan(arc).collect()["relative_path"].to_list())

    return run


def _expected(name: str, local: Path, work: Path) -> Any:
    return _operation(name, str(local), local, work / "local")()


def reply_case(server: Any, url: str, local: Path, work: Path, seed: int) -> str:
    """One case; returns what happened ("ok", "error: ...") or raises AssertionError."""
    rng = random.Random(seed)
    name = rng.choice(OPERATIONS)
    want = _expected(name, local, work)
    server.reset()
    for _ in range(rng.randint(1, 3)):
        for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3])):
            server.fault("none")
        kind = rng.choice(REPLY_FAULTS)
        server.fault(kind, status=rng.choice([500, 503, 404, 403, 416, 200]))
    try:
        got = _operation(name, url, local, work)()
    except ZnippyError as exc:
        text = str(exc)
        assert "\n" not in text and url.split("//", 1)[1].split("/")[0] in text, text
        return "error: " + text.split(": ", 1)[-1][:160]
    except BaseException as exc:  # noqa: BLE001 (a finding)
        raise AssertionError(f"seed {seed} {name}: {type(exc).__name__}: {exc}") from None
    finally:
        server.reset()
    if isinstance(got, Partial) and not got.ok:  # failures reported, per file
        assert got.failed or name == "verify", f"seed {seed} {name}: not ok, no failure"
        if isinstance(got.value, dict):  # what was written is right
            for path, data in got.value.items():
                assert want.value.get(path) == data, f"seed {seed}: {path} written wrong"
        return "reported"
    assert got == want, f"seed {seed} {name}: a wrong answer under faults"
    return "ok"


@dataclass
class Partial:
    """An extract's or a verify's outcome: failures are reported, not raised."""

    ok: bool
    value: Any
    failed: dict[str, str]


def option_case(seed: int, port: int) -> str:
    """Random storage option keys and values parsed and, when they pass, made into a store:
    a ``RemoteError`` line or a store, never another exception, never a value printed."""
    from znippy_sql.errors import RemoteError
    from znippy_sql.remote.client import _store
    from znippy_sql.remote.options import ALIASES, HTTP_KEYS, STORE_KEYS
    from znippy_sql.remote.url import parse

    rng = random.Random(seed)
    scheme = rng.choice(["s3", "gs", "az", "http"])
    family = {"s3": "s3", "gs": "gcs", "az": "azure", "http": "http"}[scheme]
    names = sorted({*STORE_KEYS[family], *HTTP_KEYS, *ALIASES[family], "max_retries",
                    "timeout", "client_kwargs", "client_kwargs.endpoint_url", "backend"})
    marker = f"VALUE-{seed}-MARK"
    values: list[Any] = ["", " ", "true", "maybe", "-1", "0", "1e99", "10s", "\x00",
                         "é" * 50, f"http://127.0.0.1:{port}", "{}", '{"endpoint_url": 1}',
                         "[1]", marker, True, 3, 2.5, None, {"a": 1}, ["x"]]
    opts: dict[str, Any] = {"max_retries": "0", "connect_timeout": "1s"}
    for _ in range(rng.randint(1, 4)):
        key = rng.choice(names)
        if rng.random() < 0.4:
            pos = rng.randrange(len(key) + 1)
            key = key[:pos] + rng.choice("aeiou_-.XZé\x00 ") + key[pos + 1:]
        if rng.random() < 0.2:
            key = key.upper()
        value = rng.choice(values)
        opts[key] = marker if value == marker else value
    url = f"{scheme}://bucket/k.znippy" if scheme != "http" else f"http://127.0.0.1:{port}/k"
    try:
        target = parse(url, opts)
        _store(target)
    except RemoteError as exc:
        text = str(exc)
        assert "\n" not in text and marker not in text and url.split("?")[0] in text, text
        return "refused"
    except BaseException as exc:  # noqa: BLE001 (a finding)
        raise AssertionError(f"seed {seed}: {type(exc).__name__}: {exc} for {opts!r}") from None
    return "store"
