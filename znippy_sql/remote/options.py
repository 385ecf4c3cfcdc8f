"""Storage options, checked per scheme before any store is built (docs/remote.md, "Options").

A key is the store's own name (obstore's ``S3Config``, ``GCSConfig``, ``AzureConfig``, its
``ClientConfig``; the lists below, which ``tests/test_storage_options.py`` compares with the
installed obstore), this package's client keys (``max_retries``, ``timeout``, ...), or an
alias users bring: the environment variable names (``AWS_ENDPOINT_URL``, any case), boto3 and
s3fs (``endpoint_url``, ``region_name``, ``aws_session_token``, ``key``, ``secret``,
``client_kwargs={"endpoint_url": ...}``), gcsfs and adlfs. Every key becomes its one
canonical name; an unknown key gets the closest valid names; an empty value, a value of the
wrong kind (``allow_http=maybe``) or two keys for one option are refused. No value is
ever part of a message of ours, and the values of options outside ``SHOWN_KEYS`` are removed
from what a store says.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from ..errors import RemoteError

#: the store each obstore scheme builds
FAMILY = {"s3": "s3", "s3a": "s3", "gs": "gcs", "az": "azure", "abfs": "azure",
          "abfss": "azure", "azure": "azure", "adl": "azure", "http": "http", "https": "http"}

#: obstore's configuration keys per store (its S3Config, GCSConfig, AzureConfig TypedDicts)
STORE_KEYS: dict[str, frozenset[str]] = {
    "s3": frozenset({
        "access_key_id", "bucket", "checksum_algorithm", "conditional_put",
        "container_credentials_relative_uri", "container_credentials_full_uri",
        "container_authorization_token_file", "copy_if_not_exists", "default_region",
        "disable_tagging", "disable_bulk_delete", "endpoint", "metadata_endpoint", "region",
        "request_payer", "role_arn", "role_session_name", "secret_access_key",
        "server_side_encryption", "session_token", "skip_signature", "sse_bucket_key_enabled",
        "sse_kms_key_id", "sts_endpoint", "unsigned_payload", "virtual_hosted_style_request",
        "web_identity_token_file", "imdsv1_fallback", "s3_express",
        "sse_customer_key_base64"}),
    "gcs": frozenset({"service_account", "service_account_key", "base_url", "bearer_token",
                      "bucket", "application_credentials", "skip_signature"}),
    "azure": frozenset({
        "account_name", "account_key", "client_id", "client_secret", "credential_type",
        "tenant_id", "authority_host", "sas_key", "token", "use_emulator",
        "use_fabric_endpoint", "encryption_key", "endpoint", "msi_endpoint", "object_id",
        "msi_resource_id", "federated_token_file", "use_azure_cli", "skip_signature",
        "container_name", "disable_tagging", "fabric_token_service_url",
        "fabric_workload_host", "fabric_session_token", "fabric_cluster_identifier"}),
    "http": frozenset(),
}
#: obstore's ClientConfig keys (every store; passed as its ``client_options``)
HTTP_KEYS = frozenset({"allow_http", "allow_invalid_certificates", "default_content_type",
                       "pool_idle_timeout", "pool_max_idle_per_host", "proxy_url",
                       "proxy_ca_certificate", "proxy_excludes", "root_certificate",
                       "randomize_addresses", "read_timeout", "user_agent", "http1_only",
                       "http2_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
                       "http2_keep_alive_while_idle"})
#: read by this package (retries and timeouts are handed to obstore in its own shapes)
CLIENT_KEYS = frozenset({"backend", "max_retries", "retry_timeout", "timeout",
                         "connect_timeout", "init_backoff", "max_backoff"})

#: other names for a key: environment variables (lower-cased), boto3, s3fs, gcsfs, adlfs
ALIASES: dict[str, dict[str, str]] = {
    "s3": {"aws_endpoint_url": "endpoint", "aws_endpoint_url_s3": "endpoint",
           "endpoint_url": "endpoint", "aws_endpoint": "endpoint",
           "region_name": "region", "aws_default_region": "default_region",
           "aws_session_token": "session_token", "aws_token": "session_token",
           "token": "session_token", "key": "access_key_id", "secret": "secret_access_key",
           "aws_bucket_name": "bucket", "bucket_name": "bucket",
           "anon": "skip_signature"},
    "gcs": {"google_service_account_path": "service_account",
            "service_account_path": "service_account", "google_bucket_name": "bucket",
            "bucket_name": "bucket", "endpoint_url": "base_url", "endpoint": "base_url",
            "token": "bearer_token", "anon": "skip_signature"},
    "azure": {"azure_storage_access_key": "account_key", "access_key": "account_key",
              "master_key": "account_key",
              "azure_storage_sas_token": "sas_key", "sas_token": "sas_key",
              "azure_storage_authority_id": "tenant_id", "authority_id": "tenant_id",
              "azure_identity_endpoint": "msi_endpoint", "account_url": "endpoint",
              "endpoint_url": "endpoint", "anon": "skip_signature"},
    "http": {},
}
#: prefixes the environment variables (and object_store) put before a store key
PREFIXES = {"s3": ("aws_",), "gcs": ("google_",), "azure": ("azure_storage_", "azure_"),
            "http": ()}

BOOL_KEYS = frozenset({"allow_http", "allow_invalid_certificates", "randomize_addresses",
                       "disable_tagging", "disable_bulk_delete", "skip_signature",
                       "sse_bucket_key_enabled", "unsigned_payload",
                       "virtual_hosted_style_request", "imdsv1_fallback", "s3_express",
                       "use_emulator", "use_fabric_endpoint", "use_azure_cli", "http1_only",
                       "http2_only", "http2_keep_alive_while_idle"})
DURATION_KEYS = frozenset({"retry_timeout", "timeout", "connect_timeout", "init_backoff",
                           "max_backoff", "pool_idle_timeout", "read_timeout",
                           "http2_keep_alive_interval", "http2_keep_alive_timeout"})
COUNT_KEYS = frozenset({"max_retries", "pool_max_idle_per_host"})
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def valid_keys(family: str) -> frozenset[str]:
    return STORE_KEYS[family] | HTTP_KEYS | CLIENT_KEYS


def canonical_key(key: str, family: str) -> str | None:
    """The one name of ``key`` for this store, or None when it is none of its keys."""
    k = key.strip().lower().replace("-", "_")
    names = valid_keys(family)
    if k in names:
        return k
    if k in ALIASES[family]:
        return ALIASES[family][k]
    for prefix in PREFIXES[family]:
        if k.startswith(prefix):
            rest = k[len(prefix):]
            if rest in names:
                return rest
            if rest in ALIASES[family]:
                return ALIASES[family][rest]
    return None


def flatten(options: Mapping[str, Any], url: str) -> list[tuple[str, Any]]:
    """``(key, value)`` pairs as given, with s3fs's ``client_kwargs`` (a mapping, its JSON,
    or dotted keys ``client_kwargs.endpoint_url``) opened up."""
    out: list[tuple[str, Any]] = []
    for key, value in options.items():
        key = str(key)
        base, dot, sub = key.partition(".")
        if base.strip().lower() in ("client_kwargs", "config_kwargs"):
            if dot:
                out.append((sub, value))
                continue
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise RemoteError(f"storage option {base} is not a JSON object "
                                      f"({base}={{\"endpoint_url\": ...}})", path=url) from None
            if not isinstance(value, Mapping):
                raise RemoteError(f"storage option {base} is not a mapping of options",
                                  path=url)
            out.extend((str(k), v) for k, v in value.items())
            continue
        out.append((key, value))
    return out


def check(options: Mapping[str, Any], scheme: str, url: str) -> dict[str, Any]:
    """The options under their canonical names, each value checked (see the module doc)."""
    family = FAMILY[scheme]
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in flatten(options, url):
        if not key.strip():
            raise RemoteError("a storage option has an empty key (KEY=VALUE)", path=url)
        name = canonical_key(key, family)
        if name is None:
            raise RemoteError(unknown(key, family, scheme), path=url)
        if name in given:
            raise RemoteError(f"storage options {given[name]} and {key} set the same option "
                              f"({name}): give one", path=url)
        given[name] = key
        out[name] = value_of(name, key, value, url)
    return out


def unknown(key: str, family: str, scheme: str) -> str:
    names = sorted(valid_keys(family) | set(ALIASES[family])
                   | {p + k for p in PREFIXES[family][:1] for k in STORE_KEYS[family]})
    near = difflib.get_close_matches(key.strip().lower(), names, n=3, cutoff=0.6)
    hint = (f": did you mean {' or '.join(f'`{n}`' for n in near)}?" if near
            else " (docs/remote.md lists the keys)")
    return f"unknown storage option {key!r} for {scheme}://{hint}"


def value_of(name: str, key: str, value: Any, url: str) -> Any:
    """``value`` checked for option ``name`` (given as ``key``): a bool, a count, a duration
    or a non-empty string."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RemoteError(f"storage option {key} is empty", path=url)
    if name in BOOL_KEYS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise RemoteError(f"storage option {key} is not true or false", path=url)
    if name in COUNT_KEYS:
        try:
            n = int(str(value).strip())
            if n < 0 or isinstance(value, bool) or isinstance(value, float):
                raise ValueError
        except ValueError:
            raise RemoteError(f"storage option {key} is not a count (0, 1, 2, ...)", path=url) from None
        return str(n)
    if name in DURATION_KEYS:
        if isinstance(value, timedelta):
            return f"{value.total_seconds()}s"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise RemoteError(f"storage option {key} is not a duration (10s, 250ms, "
                              f"2m)", path=url)
        return value.strip()
    if name == "backend":
        return str(value).strip().lower()
    if isinstance(value, (bool, int, float)):
        return str(value).lower() if isinstance(value, bool) else str(value)
    if not isinstance(value, str):
        raise RemoteError(f"storage option {key} is a {type(value).__name__}, not a string",
                          path=url)
    return value


#: keys whose values may appear in messages (where a store echoes them): every other value
#: is removed from any text shown, in case a secret was given under the wrong key
SHOWN_KEYS = frozenset({"endpoint", "base_url", "region", "default_region", "bucket",
                        "container_name", "account_name", "proxy_url", "user_agent",
                        "backend", *BOOL_KEYS, *DURATION_KEYS, *COUNT_KEYS})


def scrubber(options: Mapping[str, Any]) -> Callable[[str], str]:
    """A function removing the values of ``options`` (canonical names) from a text, except
    those of :data:`SHOWN_KEYS`."""
    values = sorted({str(v) for k, v in options.items() if k not in SHOWN_KEYS
                     and isinstance(v, str) and len(v) >= 3}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for v in values:
            text = text.replace(v, "***")
        return text

    return scrub
