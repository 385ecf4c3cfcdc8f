"""Archive URLs: which scheme, which store, which object; the options a user gives.

``s3://bucket/key``, ``gs://bucket/key``, ``az://container/key`` (also ``abfs``/``abfss``),
``http(s)://host/path`` go to ``obstore``; ``file://`` is a local path (memory-mapped);
``memory://`` goes to fsspec, any other scheme is refused before anything is contacted unless
``backend=fsspec`` sends it to fsspec. ``storage_options`` are checked and given their one
name by ``options.py``: the client's own keys, obstore's HTTP client keys and the store's
configuration (``endpoint``, ``region``, ``access_key_id``, ``skip_signature``, ...).
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
from .options import CLIENT_KEYS, DURATION_KEYS, FAMILY, HTTP_KEYS, check, scrubber

OBSTORE_SCHEMES = frozenset(FAMILY)
#: other schemes read through fsspec without asking (any other: ``backend=fsspec``)
FSSPEC_SCHEMES = frozenset({"memory"})
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
    #: obstore's HTTP client options given (``allow_http``, ``proxy_url``, ...)
    http: dict[str, Any] = field(default_factory=dict, repr=False)

    def scrub(self, text: str) -> str:
        """``text`` without the values of the secret options."""
        return scrubber({**self.config, **self.http})(text)

    def retry_config(self) -> dict[str, Any]:
        return {"max_retries": int(self.client["max_retries"]),
                "retry_timeout": duration(self.client["retry_timeout"], "retry_timeout"),
                "backoff": {"init_backoff": duration(self.client["init_backoff"], "init_backoff"),
                            "max_backoff": duration(self.client["max_backoff"], "max_backoff"),
                            "base": 2}}

    def client_options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timeout": self.client["timeout"],
                               "connect_timeout": self.client["connect_timeout"]}
        endpoint = str(self.config.get("endpoint") or self.config.get("base_url")
                       or os.environ.get("AWS_ENDPOINT_URL")
                       or os.environ.get("AWS_ENDPOINT") or "")
        if (self.scheme == "http" or endpoint.startswith("http://")
                or os.environ.get("AWS_ALLOW_HTTP", "").lower() == "true"):
            out["allow_http"] = True  # (options given here replace the ones of the env)
        out.update(self.http)
        return out


def parse(url: str, storage_options: Mapping[str, Any] | None = None, *,
          defaults: Mapping[str, Any] | None = None) -> Target:
    """Check ``url`` and ``storage_options`` (``remote/options.py``); nothing is contacted.
    ``defaults``: the process's (:func:`~znippy_sql.remote.configure`), under the given ones
    (a key given under another name of the same option replaces the default)."""
    given = dict(storage_options or {})
    opts = {**(defaults or {}), **given}
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    shown_url = shown(url)
    forced = str(opts.get("backend", "")).strip().lower()
    if forced and forced not in ("obstore", "fsspec"):
        raise RemoteError("storage option backend is neither obstore nor fsspec",
                          path=shown_url)
    backend = forced or ("obstore" if scheme in OBSTORE_SCHEMES else "fsspec")
    if backend == "fsspec" and not forced and scheme not in FSSPEC_SCHEMES:
        raise RemoteError(f"no reader for scheme {scheme}:// (supported: "
                          f"{', '.join(s + '://' for s in SUPPORTED)}; another scheme fsspec "
                          f"has: --storage-option backend=fsspec)", path=shown_url)
    if backend == "obstore":
        if scheme not in OBSTORE_SCHEMES:
            raise RemoteError(f"obstore has no store for {scheme}:// (backend=fsspec?)",
                              path=shown_url)
        opts = {**check(defaults or {}, scheme, shown_url),
                **check(given, scheme, shown_url)}
        config = {k: v for k, v in opts.items() if k not in CLIENT_KEYS and k not in HTTP_KEYS}
        http = {k: v for k, v in opts.items() if k in HTTP_KEYS}
    else:
        config = {str(k): _value(v) for k, v in opts.items() if k not in CLIENT_KEYS}
        http = {}
    client = {**DEFAULTS, **{k: str(v) for k, v in opts.items() if k in CLIENT_KEYS}}
    client.pop("backend", None)
    try:
        if int(client["max_retries"]) < 0:
            raise ValueError
    except ValueError:
        raise RemoteError("storage option max_retries is not a count (0, 1, 2, ...)",
                          path=shown_url) from None
    for key in ("retry_timeout", "timeout", "connect_timeout", "init_backoff", "max_backoff"):
        duration(client[key], key, url=shown_url)
    for key in DURATION_KEYS:
        if key in http:
            duration(str(http[key]), key, url=shown_url)
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
    return Target(shown_url, scheme, root, key, backend, client, config, http)


#: what the messages list as readable
SUPPORTED = ("s3", "gs", "az", "abfs", "abfss", "http", "https", "file", "memory")


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
        raise RemoteError(f"storage option {key} is not a duration (10s, 250ms, 2m)", path=url)
    return timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2) or "s"])


def parse_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` of ``--storage-option``."""
    key, sep, value = text.partition("=")
    if not sep:  # (the text may be a secret given without its key: never shown)
        raise ValueError("a --storage-option without '=': expected KEY=VALUE")
    if not key.strip():
        raise ValueError("a --storage-option with no KEY: expected KEY=VALUE")
    return key.strip(), value

