"""Archive URLs: which scheme, which store, which object; the options a user gives.

``s3://bucket/key``, ``gs://bucket/key``, ``az://container/key`` (also ``abfs``/``abfss``),
``http(s)://host/path`` go to ``obstore``; ``file://`` is a local path (memory-mapped); any
other scheme fsspec knows (``memory://``, ``ftp://``, ...) goes to fsspec. ``storage_options``
are strings (``--storage-option KEY=VALUE``): the client's own keys below, everything else
is passed to the store as its configuration (``endpoint``, ``region``, ``access_key_id``,
``skip_signature``, ...).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import RemoteError

OBSTORE_SCHEMES = frozenset({"s3", "s3a", "gs", "az", "abfs", "abfss", "azure", "adl",
                             "http", "https"})
#: ``storage_options`` keys read by this package, not passed to the store
CLIENT_KEYS = frozenset({"backend", "max_retries", "retry_timeout", "timeout",
                         "connect_timeout", "init_backoff", "max_backoff"})
#: defaults [documented in docs/remote.md]: a request gets 10 s to connect and 120 s in all;
#: a 5xx or a dropped connection is tried again 3 times (0.1 s, 0.2 s, 0.4 s ... up to 2 s
#: apart), for at most 60 s from the first try
DEFAULTS = {"max_retries": "3", "retry_timeout": "60s", "timeout": "120s",
            "connect_timeout": "10s", "init_backoff": "100ms", "max_backoff": "2s"}
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def is_url(path: object) -> bool:
    """True for ``scheme://...`` strings (a Windows drive letter is a path, not a scheme)."""
    if not isinstance(path, str):
        return False
    m = _SCHEME.match(path)
    return m is not None and len(m.group(1)) > 1


def local_path(url: str) -> str | None:
    """The local path of a ``file://`` URL, or None for any other URL."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        raise RemoteError("a file:// URL names no host (file:///absolute/path)", path=url)
    return unquote(parts.path)


def shown(url: str) -> str:
    """``url`` as it may appear in messages: no credentials, no query string."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return f"{parts.scheme}://{netloc}{parts.path}"


@dataclass(frozen=True)
class Target:
    """Where an object is: its scheme, the store's root URL and the key under it."""

    url: str        # as shown in messages
    scheme: str
    root: str       # what the store is built from
    key: str
    backend: str    # "obstore" | "fsspec"
    client: dict[str, str] = field(default_factory=dict)  # CLIENT_KEYS, defaults filled
    #: the store's own options (credentials among them: never in a repr)
    config: dict[str, Any] = field(default_factory=dict, repr=False)

    def retry_config(self) -> dict[str, Any]:
        return {"max_retries": int(self.client["max_retries"]),
                "retry_timeout": duration(self.client["retry_timeout"], "retry_timeout"),
                "backoff": {"init_backoff": duration(self.client["init_backoff"], "init_backoff"),
                            "max_backoff": duration(self.client["max_backoff"], "max_backoff"),
                            "base": 2}}

    def client_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timeout": self.client["timeout"],
                               "connect_timeout": self.client["connect_timeout"]}
        endpoint = str(self.config.get("endpoint") or os.environ.get("AWS_ENDPOINT_URL")
                       or os.environ.get("AWS_ENDPOINT") or "")
        if (self.scheme == "http" or endpoint.startswith("http://")
                or os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true"):
            out["allow_http"] = True  # (options given here replace the ones of the env)
        return out


def parse(url: str, storage_options: Mapping[str, Any] | None = None) -> Target:
    """Check ``url`` and split ``storage_options``; nothing is contacted."""
    opts = {str(k): v for k, v in (storage_options or {}).items()}
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    shown_url = shown(url)
    client = {**DEFAULTS, **{k: str(v) for k, v in opts.items() if k in CLIENT_KEYS}}
    config = {k: _value(v) for k, v in opts.items() if k not in CLIENT_KEYS}
    try:
        if int(client["max_retries"]) < 0:
            raise ValueError
    except ValueError:
        raise RemoteError(f"storage option max_retries={client['max_retries']!r} is not a "
                          f"count", path=shown_url) from None
    for key in ("retry_timeout", "timeout", "connect_timeout", "init_backoff", "max_backoff"):
        duration(client[key], key, url=shown_url)
    backend = client.pop("backend", "") or ("obstore" if scheme in OBSTORE_SCHEMES else "fsspec")
    if backend not in ("obstore", "fsspec"):
        raise RemoteError(f"storage option backend={backend!r}: use obstore or fsspec",
                          path=shown_url)
    if scheme in ("http", "https"):
        if not parts.netloc:
            raise RemoteError("the URL names no host", path=shown_url)
        root, key = f"{scheme}://{parts.netloc}/", unquote(parts.path.lstrip("/"))
    elif backend == "obstore":
        if not parts.netloc:
            raise RemoteError("the URL names no bucket (scheme://bucket/key)", path=shown_url)
        root, key = f"{scheme}://{parts.netloc}", unquote(parts.path.lstrip("/"))
    else:
        root, key = "", url
    if backend == "obstore" and (not key or key.endswith("/")):
        raise RemoteError("the URL names no object (it ends at a bucket or a folder)",
                          path=shown_url)
    return Target(shown_url, scheme, root, key, backend, client, config)


def _value(v: Any) -> Any:
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)?\s*$")


def duration(text: str, key: str, *, url: str | None = None) -> timedelta:
    """``"250ms"``, ``"10s"``, ``"2m"`` or plain seconds as a ``timedelta``."""
    m = _DURATION.match(text)
    if m is None:
        raise RemoteError(f"storage option {key}={text!r} is not a duration (10s, 250ms, 2m)",
                          path=url)
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2) or "s"])


def parse_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--storage-option``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--storage-option {text!r}: expected KEY=VALUE")
    return key.strip(), value

