"""Storage options (issue 27): checked per scheme before a store is built, the names users
bring accepted, every failure one line naming the URL, no secret ever printed, no panic.

The table runs every command that takes an archive against a closed port on 127.0.0.1 (a
refused connection, nothing outside the machine): each documented key and alias for s3, gs,
az and http, common misspellings, empty values, values of the wrong kind, duplicate keys.
"""

from __future__ import annotations

import ast
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from znippy_sql import ZnippyError, open_archive
from znippy_sql.cli import main
from znippy_sql.remote import configure
from znippy_sql.remote.options import (ALIASES, HTTP_KEYS, STORE_KEYS, canonical_key,
                                       check)
from znippy_sql.remote.url import parse

SECRET = "SeCrEt-7c1f0e-do-not-print"


@pytest.fixture(autouse=True)
def _defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ZNIPPY_SQL_CACHE", str(tmp_path / "tail-cache"))
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                 "AWS_ALLOW_HTTP", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    yield
    configure(storage_options={}, cache=True)


@pytest.fixture(scope="module")
def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


# -- the lists are obstore's own ---------------------------------------------------------------
def _stub_keys(name: str, cls: str) -> set[str]:
    import obstore

    path = Path(obstore.__file__).parent / "_store" / name
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {n.target.id for n in node.body
                    if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    raise AssertionError(f"{cls} not in {path}")


def _stub_env(name: str) -> set[str]:
    import re

    import obstore

    text = (Path(obstore.__file__).parent / "_store" / name).read_text()
    return set(re.findall(r"`((?:AWS|GOOGLE|AZURE)_[A-Z0-9_]+)`", text))


@pytest.mark.parametrize("family,stub,cls", [("s3", "_aws.pyi", "S3Config"),
                                             ("gcs", "_gcs.pyi", "GCSConfig"),
                                             ("azure", "_azure.pyi", "AzureConfig")])
def test_store_keys_are_obstores(family: str, stub: str, cls: str) -> None:
    theirs = _stub_keys(stub, cls)
    assert STORE_KEYS[family] <= theirs
    for key in theirs - STORE_KEYS[family]:  # an alias obstore lists among its keys
        assert canonical_key(key, family) in STORE_KEYS[family], key
    client = _stub_keys("_client.pyi", "ClientConfig") - {"default_headers"}
    assert HTTP_KEYS | {"timeout", "connect_timeout"} == client
    for env in _stub_env(stub):  # every environment variable name obstore documents
        assert canonical_key(env, family) in STORE_KEYS[family], env


ALIAS_CASES = [
    ("s3", "endpoint_url", "endpoint"), ("s3", "aws_endpoint_url", "endpoint"),
    ("s3", "AWS_ENDPOINT_URL", "endpoint"), ("s3", "aws_endpoint", "endpoint"),
    ("s3", "region_name", "region"), ("s3", "AWS_REGION", "region"),
    ("s3", "aws_session_token", "session_token"), ("s3", "key", "access_key_id"),
    ("s3", "secret", "secret_access_key"), ("s3", "aws_allow_http", "allow_http"),
    ("s3", "AWS_SKIP_SIGNATURE", "skip_signature"), ("s3", "anon", "skip_signature"),
    ("gcs", "google_service_account", "service_account"),
    ("gcs", "GOOGLE_SERVICE_ACCOUNT_PATH", "service_account"),
    ("gcs", "endpoint_url", "base_url"), ("gcs", "token", "bearer_token"),
    ("azure", "azure_storage_endpoint", "endpoint"),
    ("azure", "AZURE_STORAGE_ACCOUNT_NAME", "account_name"),
    ("azure", "azure_storage_sas_token", "sas_key"), ("azure", "account_url", "endpoint"),
    ("azure", "azure_allow_http", "allow_http"),
    ("http", "user_agent", "user_agent"), ("http", "timeout", "timeout"),
]


@pytest.mark.parametrize("family,key,name", ALIAS_CASES)
def test_aliases(family: str, key: str, name: str) -> None:
    assert canonical_key(key, family) == name


def test_client_kwargs_json_mapping_and_dotted() -> None:
    for opts in ({"client_kwargs": '{"endpoint_url": "http://h:1", "region_name": "x"}'},
                 {"client_kwargs": {"endpoint_url": "http://h:1", "region_name": "x"}},
                 {"client_kwargs.endpoint_url": "http://h:1", "client_kwargs.region_name": "x"}):
        assert check(opts, "s3", "s3://b/k") == {"endpoint": "http://h:1", "region": "x"}


def test_client_options_reach_the_client_not_the_store() -> None:
    """``allow_http`` in the store's config made obstore panic ("Expected config prefix to
    start with aws_"): it goes to the HTTP client now."""
    t = parse("s3://b/k.znippy", {"aws_allow_http": "true", "user_agent": "me",
                                  "endpoint_url": "https://h"})
    assert t.config == {"endpoint": "https://h"}
    assert t.client_options()["allow_http"] is True and t.client_options()["user_agent"] == "me"


# -- every command, every kind of case ------------------------------------------------------
URLS = {"s3": "s3://bucket/dir/x.znippy", "gs": "gs://bucket/dir/x.znippy",
        "az": "az://container/dir/x.znippy", "http": "http://127.0.0.1:{port}/dir/x.znippy"}


def _cases() -> list[tuple[str, str, dict[str, str], str | None]]:
    """(id, scheme, options, expected words); ``{port}`` is the closed port."""
    ep = "http://127.0.0.1:{port}"
    good: dict[str, list[dict[str, str]]] = {
        "s3": [{"endpoint": ep, "access_key_id": "AK", "secret_access_key": SECRET},
               {"endpoint_url": ep, "aws_access_key_id": "AK", "aws_secret_access_key": SECRET,
                "region_name": "eu-west-1", "aws_session_token": SECRET},
               {"AWS_ENDPOINT_URL": ep, "key": "AK", "secret": SECRET, "aws_allow_http": "true"},
               {"client_kwargs": '{"endpoint_url": "%s"}' % ep, "key": "AK", "secret": SECRET},
               {"client_kwargs.endpoint_url": ep, "skip_signature": "true", "token": SECRET},
               {"aws_endpoint_url": ep, "allow_http": "yes", "virtual_hosted_style_request":
                "false", "secret_access_key": SECRET, "access_key_id": "AK"}],
        "gs": [{"base_url": ep, "skip_signature": "true", "bearer_token": SECRET},
               {"endpoint_url": ep, "google_bearer_token": SECRET, "allow_http": "true"},
               {"service_account_path": "/nonexistent/sa.json", "token": SECRET}],
        "az": [{"account_name": "acct", "endpoint": ep, "account_key": SECRET},
               {"azure_storage_account_name": "acct", "azure_storage_endpoint": ep,
                "azure_storage_account_key": SECRET, "azure_allow_http": "true"},
               {"account_name": "acct", "account_url": ep, "sas_token": SECRET}],
        "http": [{"user_agent": "znippy-test"}, {"allow_invalid_certificates": "false"}],
    }
    bad: dict[str, list[tuple[dict[str, str], str]]] = {
        "s3": [({"aws_endpont": ep, "secret_access_key": SECRET}, "did you mean"),
               ({"endpiont": ep}, "did you mean"), ({"regoin": "x"}, "did you mean"),
               ({"secret_acces_key": SECRET}, "did you mean"),
               ({"acess_key_id": "AK"}, "did you mean"),
               ({"endpoint": ""}, "is empty"), ({"region": " "}, "is empty"),
               ({"aws_allow_http": "maybe", "secret": SECRET}, "not true or false"),
               ({"skip_signature": "perhaps"}, "not true or false"),
               ({"max_retries": "-1"}, "not a count"), ({"timeout": "soon"}, "not a duration"),
               ({"endpoint": ep, "endpoint_url": ep}, "same option"),
               ({"secret": SECRET, "secret_access_key": SECRET}, "same option"),
               ({"client_kwargs": "{not json", "secret": SECRET}, "JSON"),
               ({"backend": "boto"}, "neither obstore nor fsspec")],
        "gs": [({"service_acount": "x"}, "did you mean"), ({"base_url": ""}, "is empty"),
               ({"skip_signature": "maybe"}, "not true or false")],
        "az": [({"acount_name": "x", "account_key": SECRET}, "did you mean"),
               ({"account_name": ""}, "is empty"),
               ({"use_emulator": "sometimes"}, "not true or false"),
               ({"account_name": "a", "azure_storage_account_name": "b"}, "same option")],
        "http": [({"secret_access_key": SECRET}, "unknown storage option"),
                 ({"user_agnet": "x"}, "did you mean"), ({"allow_http": "maybe"}, "true or false")],
    }
    out: list[tuple[str, str, dict[str, str], str | None]] = []
    for scheme, opts in good.items():
        out += [(f"{scheme}-good{i}", scheme, o, None) for i, o in enumerate(opts)]
    for scheme, items in bad.items():
        out += [(f"{scheme}-bad{i}", scheme, o, words) for i, (o, words) in enumerate(items)]
    return out


CASES = _cases()
QUICK = {"max_retries": "0", "connect_timeout": "2s", "timeout": "5s"}


def _fill(opts: dict[str, str], port: int) -> dict[str, str]:
    extra = {k: v for k, v in QUICK.items() if k not in opts}
    return {k: v.replace("{port}", str(port)) for k, v in {**opts, **extra}.items()}


def _cli(tmp: Path) -> dict[str, Callable[[str], list[str]]]:
    return {
        "ls": lambda u: ["ls", u], "ls-l": lambda u: ["ls", "-l", u, "--json"],
        "cat": lambda u: ["cat", u, "a.txt"],
        "extract": lambda u: ["extract", u, "-o", str(tmp / "out")],
        "verify": lambda u: ["verify", u, "--json"], "info": lambda u: ["info", u, "--json"],
        "sql": lambda u: ["sql", u, "SELECT count(*) FROM files"],
        "catalog-add": lambda u: ["catalog", "add", str(tmp / "wh"), u, "--json"],
        "maven": lambda u: ["maven", u, "pom", "org.acme:lib:1.0", "--json"],
        "pypi": lambda u: ["pypi", u, "versions", "requests"],
    }


def _one_line_about(text: str, url: str, words: str | None) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert url in lines[0], text
    assert SECRET not in text and "Panic" not in text and "Traceback" not in text, text
    if words is not None:
        assert words in lines[0], text


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_command_one_line_no_secret(case: tuple[str, str, dict[str, str], str | None],
                                          closed_port: int, tmp_path: Path,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    _id, scheme, opts, words = case
    url = URLS[scheme].replace("{port}", str(closed_port))
    opts = _fill(opts, closed_port)
    flags = [f for k, v in opts.items() for f in ("--storage-option", f"{k}={v}")]
    for name, argv in _cli(tmp_path).items():
        code = main([*argv(url), *flags])
        out, err = capfd.readouterr()
        assert code == 2, (name, out, err)
        _one_line_about(err, url, words)
        assert SECRET not in out, (name, out)
    # the Python faces
    with pytest.raises(ZnippyError) as exc:
        open_archive(url, storage_options=opts, cache=False)
    _one_line_about(str(exc.value), url, words)
    configure(storage_options=opts, cache=False)
    import duckdb

    from znippy_sql.duckdb import register
    from znippy_sql.polars import scan

    for face in (lambda: register(duckdb.connect(), url), lambda: scan(url).collect()):
        with pytest.raises(ZnippyError) as exc:
            face()
        _one_line_about(str(exc.value), url, words)


def test_cli_duplicate_key_and_option_anywhere(closed_port: int, tmp_path: Path,
                                               capfd: pytest.CaptureFixture[str]) -> None:
    url = URLS["s3"]
    ep = f"endpoint=http://127.0.0.1:{closed_port}"
    assert main(["ls", url, "--storage-option", ep, "--storage-option", ep]) == 2
    assert "given twice" in capfd.readouterr().err
    # after a module's or the catalog's sub-command, as after ls
    for argv in (["maven", url, "pom", "a:b:1", "--no-cache", "--storage-option", ep,
                  "--storage-option", "max_retries=0", "--storage-option", "skip_signature=1"],
                 ["catalog", "add", str(tmp_path / "wh"), url, "--storage-option", ep, "--storage-option",
                  "max_retries=0", "--no-cache", "--storage-option", "skip_signature=1"]):
        assert main(argv) == 2
        err = capfd.readouterr().err
        assert "connection failed" in err and "unrecognized" not in err, err


def test_secret_without_its_key_is_not_echoed(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", URLS["s3"], "--storage-option", SECRET]) == 2
    assert SECRET not in capfd.readouterr().err


# -- schemes nobody reads ---------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["ftp", "sftp", "hdfs", "gopher"])
def test_unsupported_scheme_no_connection(scheme: str, capfd: pytest.CaptureFixture[str]) -> None:
    """A listening socket on 127.0.0.1 sees no connection: the scheme is refused first."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(srv.accept())
        except OSError:
            pass

    t = threading.Thread(target=accept)
    t.start()
    url = f"{scheme}://user:pw@127.0.0.1:{port}/x.znippy"
    try:
        assert main(["ls", url]) == 2
        err = capfd.readouterr().err
        t.join()
    finally:
        srv.close()
    assert accepted == []
    assert f"no reader for scheme {scheme}:// (supported: s3://" in err
    assert f"{scheme}://127.0.0.1:{port}/x.znippy" in err and "pw" not in err
    assert err.count("\n") == 1


def test_forced_fsspec_failure_names_the_url(closed_port: int,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    url = f"ftp://127.0.0.1:{closed_port}/x.znippy"
    assert main(["ls", url, "--storage-option", "backend=fsspec"]) == 2
    err = capfd.readouterr().err
    assert url in err and err.count("\n") == 1, err


# -- fuzz: keys and values --------------------------------------------------------------------
def test_fuzz_option_keys_and_values(closed_port: int) -> None:
    """Random keys (near-misses of real ones, junk, unicode) and values (empty, huge,
    wrong kinds, control characters): a RemoteError or a store, never anything else."""
    import random

    from znippy_sql.errors import RemoteError

    rnd = random.Random(27)
    names = sorted({*STORE_KEYS["s3"], *HTTP_KEYS, *ALIASES["s3"], "max_retries", "timeout"})
    values = ["", " ", "true", "maybe", "-1", "0", "1e99", "10s", "\x00", "é" * 300,
              f"http://127.0.0.1:{closed_port}", "{}", "[1]", SECRET]
    for i in range(400):
        key = rnd.choice(names)
        if rnd.random() < 0.5:
            pos = rnd.randrange(len(key) + 1)
            key = key[:pos] + rnd.choice("aeiou_-.XZé\x00 ") + key[pos + 1:]
        opts: dict[str, Any] = {key: rnd.choice([*values, True, 3, 2.5, None, {"a": 1}])}
        opts.update(QUICK)
        try:
            parse(f"{rnd.choice(['s3', 'gs', 'az', 'http'])}://b/k.znippy", opts)
        except RemoteError as exc:
            assert "\n" not in str(exc) and SECRET not in str(exc), (opts, exc)
        t = None
        try:
            t = parse(f"s3://b/k.znippy", {**opts, "endpoint": f"http://127.0.0.1:{closed_port}"})
        except RemoteError:
            continue
        from znippy_sql.remote.client import _store

        try:
            _store(t)
        except RemoteError as exc:
            assert "\n" not in str(exc) and SECRET not in str(exc), (opts, exc)


def test_compact_of_a_url_says_local_only(closed_port: int,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    """It said "no such archive" (it opened the URL as a file name)."""
    url = f"http://127.0.0.1:{closed_port}/x.znippy"
    assert main(["compact", url]) == 2
    err = capfd.readouterr().err
    assert "compact works on local archives only" in err and url in err


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["s3", "gs", "az", "http"])
def test_every_documented_key_builds_a_store_or_one_line(scheme: str) -> None:
    """Each key of the store's list, and each alias, with a value of its kind: a store, or a
    RemoteError line; never a panic (obstore panicked on client keys in the store config)."""
    from znippy_sql.errors import RemoteError
    from znippy_sql.remote.client import _store
    from znippy_sql.remote.options import (BOOL_KEYS, COUNT_KEYS, DURATION_KEYS, FAMILY,
                                           valid_keys)

    family = FAMILY[scheme]
    url = URLS[scheme].replace("{port}", "9")
    base = {"s3": {"skip_signature": "true"}, "gcs": {"skip_signature": "true"},
            "azure": {"account_name": "acct", "skip_signature": "true"}, "http": {}}[family]
    built = refused = 0
    for key in sorted(valid_keys(family) | set(ALIASES[family])):
        name = canonical_key(key, family)
        value = ("true" if name in BOOL_KEYS else "10s" if name in DURATION_KEYS
                 else "1" if name in COUNT_KEYS else "obstore" if name == "backend"
                 else "http://127.0.0.1:9" if "endpoint" in str(name) or name == "base_url"
                 else SECRET)
        opts = {k: v for k, v in base.items() if canonical_key(k, family) != name}
        try:
            _store(parse(url, {**opts, key: value}))
            built += 1
        except RemoteError as exc:
            assert "\n" not in str(exc) and SECRET not in str(exc), (key, exc)
            refused += 1
    assert built > refused, (built, refused)
