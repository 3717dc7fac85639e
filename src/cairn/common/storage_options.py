"""fsspec storage options from Flink's filesystem configuration keys (``s3.*``, ``gs.*``,
``fs.azure.*``; for HDFS ``env.hadoop.conf.dir`` and ``flink.hadoop.*``).

Invariant: options are derived only for the scheme they belong to (``s3``/``s3a``; ``gs``/
``gcs``; ``abfs``/``abfss``/``az``; ``hdfs``/``viewfs``), so credentials configured for one
store never reach another filesystem; options the user passed explicitly
(``FileSystemCheckpointStorage(path, storage_options=...)``) win over derived ones, key by
key; secrets are never part of a ``repr``. Every derived S3 and HDFS configuration has a
bounded retry policy (and S3 bounded timeouts), so an unreachable endpoint or NameNode fails
instead of hanging. A filesystem Cairn opens (``url_to_fresh_fs``) never answers a listing,
``exists`` or ``isdir`` from a cached listing: its processes read directories that other
processes write (a driver lists the shared files its workers uploaded after it last looked).

>>> opts = s3_storage_options({"s3.endpoint": "http://127.0.0.1:8333",
...                            "s3.path.style.access": True})
>>> opts["client_kwargs"]["endpoint_url"], opts["config_kwargs"]["s3"]
('http://127.0.0.1:8333', {'addressing_style': 'path'})
>>> opts["config_kwargs"]["retries"]
{'max_attempts': 5, 'mode': 'standard'}
>>> storage_options_for("file:///tmp/x", {"s3.access-key": "k"})
{}
>>> storage_options_for("gs://b/x", {"gs.storage.root.url": "http://127.0.0.1:4443",
...                                  "gs.auth.type": "UNAUTHENTICATED"})
{'endpoint_url': 'http://127.0.0.1:4443', 'token': 'anon'}
>>> storage_options_for("hdfs://nn:9000/cp", {"flink.hadoop.dfs.replication": "2"})
{'dfs.client.failover.max.attempts': '4', ..., 'dfs.replication': '2'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.common.exceptions import ConfigurationError
from cairn.common.hadoop_config import read_hadoop_conf_dir
from cairn.common.options.hadoop import HADOOP_CONF_DIR, HADOOP_KEY_PREFIX

__all__ = [
    "AZURE_SCHEMES",
    "GCS_SCHEMES",
    "HDFS_SCHEMES",
    "S3_SCHEMES",
    "azure_account_of",
    "azure_storage_options",
    "gcs_storage_options",
    "hdfs_storage_options",
    "merge_storage_options",
    "redact_storage_options",
    "s3_storage_options",
    "storage_options_for",
    "url_to_fresh_fs",
]

S3_SCHEMES = frozenset({"s3", "s3a"})
GCS_SCHEMES = frozenset({"gs", "gcs"})
AZURE_SCHEMES = frozenset({"abfs", "abfss", "az"})
HDFS_SCHEMES = frozenset({"hdfs", "viewfs"})

# Bounded by default: botocore's "standard" retry mode retries throttling and transient
# errors with exponential backoff; five attempts in all. Connecting must not take forever.
_DEFAULT_RETRIES = {"max_attempts": 5, "mode": "standard"}
_DEFAULT_CONNECT_TIMEOUT_S = 10
_DEFAULT_READ_TIMEOUT_S = 120
_SECRET_KEYS = frozenset(
    {
        "secret",
        "token",
        "password",
        "aws_secret_access_key",
        "account_key",
        "connection_string",
        "sas_token",
        "client_secret",
    }
)
# gcs-connector's fs.gs.auth.type -> gcsfs's token argument (a key file: its path).
_GCS_TOKENS = {
    "APPLICATION_DEFAULT": "google_default",
    "COMPUTE_ENGINE": "cloud",
    "UNAUTHENTICATED": "anon",
}
_AZURE_ACCOUNT_KEY_PREFIX = "fs.azure.account.key."
_AZURE_HOSTS = (".blob.core.windows.net", ".dfs.core.windows.net")
# HDFS: a NameNode that does not answer fails an operation after about 5 s (Hadoop's client
# defaults, 15 attempts up to 15 s apart, wait minutes); a failed checkpoint is retried by the
# next one, and a NameNode HA failover needs a longer budget set in the Hadoop configuration.
_HDFS_DEFAULTS = {
    "dfs.client.failover.max.attempts": "4",
    "dfs.client.failover.sleep.base.millis": "500",
    "dfs.client.failover.sleep.max.millis": "4000",
}


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else "file"


def s3_storage_options(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """s3fs options from the canonical ``s3.*`` keys in ``resolved`` (key -> parsed value).

    Keys not set are left to s3fs/botocore, which read the usual ``AWS_*`` environment
    variables and ``~/.aws`` files.
    """
    options: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    config_kwargs: dict[str, Any] = {
        "retries": dict(_DEFAULT_RETRIES),
        "connect_timeout": _DEFAULT_CONNECT_TIMEOUT_S,
        "read_timeout": _DEFAULT_READ_TIMEOUT_S,
    }
    if resolved.get("s3.access-key"):
        options["key"] = str(resolved["s3.access-key"])
    if resolved.get("s3.secret-key"):
        options["secret"] = str(resolved["s3.secret-key"])
    if resolved.get("s3.endpoint"):
        client_kwargs["endpoint_url"] = str(resolved["s3.endpoint"])
    if resolved.get("s3.region"):
        client_kwargs["region_name"] = str(resolved["s3.region"])
    if resolved.get("s3.path.style.access"):
        config_kwargs["s3"] = {"addressing_style": "path"}
    options["client_kwargs"] = client_kwargs
    options["config_kwargs"] = config_kwargs
    return options


def gcs_storage_options(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """gcsfs options from the canonical ``gs.*`` keys in ``resolved``.

    >>> gcs_storage_options({"gs.auth.service.account.json.keyfile": "/k.json",
    ...                      "gs.project.id": "p"})
    {'project': 'p', 'token': '/k.json'}
    """
    options: dict[str, Any] = {}
    if resolved.get("gs.storage.root.url"):
        options["endpoint_url"] = str(resolved["gs.storage.root.url"]).rstrip("/")
    if resolved.get("gs.project.id"):
        options["project"] = str(resolved["gs.project.id"])
    auth = resolved.get("gs.auth.type")
    keyfile = resolved.get("gs.auth.service.account.json.keyfile")
    if auth in _GCS_TOKENS:
        options["token"] = _GCS_TOKENS[auth]
    elif keyfile:  # SERVICE_ACCOUNT_JSON_KEYFILE, or a key file alone
        options["token"] = str(keyfile)
    return options


def azure_account_of(url: str) -> str | None:
    """The storage account a URL names in Hadoop's form, ``<container>@<account>.<host>``.

    >>> azure_account_of("abfs://c@acct.dfs.core.windows.net/x"), azure_account_of("az://c/x")
    ('acct', None)
    """
    authority = url.split("://", 1)[1].split("/", 1)[0] if "://" in url else ""
    host = authority.rpartition("@")[2] if "@" in authority else ""
    for suffix in _AZURE_HOSTS:
        if host.endswith(suffix):
            return host[: -len(suffix)] or None
    return None


def azure_storage_options(url: str, resolved: Mapping[str, Any]) -> dict[str, Any]:
    """adlfs options for ``url`` from ``fs.azure.*`` keys in ``resolved``.

    The account is the URL's (``container@account.dfs.core.windows.net``), else the only one
    with a configured key; with ``fs.azure.blob.endpoint`` the key and endpoint become a
    connection string (how the Azure SDK reaches an emulator).

    >>> key = "fs.azure.account.key.acct.blob.core.windows.net"
    >>> azure_storage_options("abfs://c/x", {key: "S2V5"})
    {'account_name': 'acct', 'account_key': 'S2V5'}
    >>> azure_storage_options("az://c/x", {key: "S2V5",
    ...     "fs.azure.blob.endpoint": "http://127.0.0.1:10000/acct"})["connection_string"]
    'DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=S2V5;BlobEndpoint=http://127.0.0.1:10000/acct;'
    """
    keys: dict[str, str] = {}
    for name, value in resolved.items():
        if name.startswith(_AZURE_ACCOUNT_KEY_PREFIX) and value:
            host = name[len(_AZURE_ACCOUNT_KEY_PREFIX) :]
            for suffix in _AZURE_HOSTS:
                if host.endswith(suffix) and len(host) > len(suffix):
                    keys.setdefault(host[: -len(suffix)], str(value))
    account = azure_account_of(url) or (next(iter(keys)) if len(keys) == 1 else None)
    options: dict[str, Any] = {}
    if account is not None:
        options["account_name"] = account
    key = keys.get(account) if account is not None else None
    endpoint = resolved.get("fs.azure.blob.endpoint")
    if key is not None and endpoint:
        protocol = str(endpoint).split("://", 1)[0] if "://" in str(endpoint) else "https"
        options["connection_string"] = (
            f"DefaultEndpointsProtocol={protocol};AccountName={account};AccountKey={key};"
            f"BlobEndpoint={str(endpoint).rstrip('/')};"
        )
    elif key is not None:
        options["account_key"] = key
    return options


def hdfs_storage_options(resolved: Mapping[str, Any]) -> dict[str, str]:
    """The HDFS client's Hadoop keys: bounded retries, overlaid with the site files of
    ``env.hadoop.conf.dir`` (read here, on the driver, so workers need no copy), overlaid
    with the ``flink.hadoop.*`` keys.

    Without ``env.hadoop.conf.dir`` the client reads ``HADOOP_CONF_DIR`` (or
    ``HADOOP_HOME/etc/hadoop``) itself, in each process.
    """
    directory = resolved.get(HADOOP_CONF_DIR.key)
    options = dict(_HDFS_DEFAULTS)
    try:
        options.update(read_hadoop_conf_dir(str(directory)) if directory else {})
    except ValueError as exc:
        raise ConfigurationError(f"{HADOOP_CONF_DIR.key}: {exc}") from None
    for key, value in resolved.items():
        if key.startswith(HADOOP_KEY_PREFIX) and len(key) > len(HADOOP_KEY_PREFIX):
            options[key[len(HADOOP_KEY_PREFIX) :]] = str(value)
    return options


# Object stores whose fsspec filesystems cache directory listings (and answer ``exists``,
# ``isdir`` and ``info`` from them) for as long as the instance lives.
_LISTINGS_CACHED = S3_SCHEMES | GCS_SCHEMES | AZURE_SCHEMES


def url_to_fresh_fs(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``fsspec.core.url_to_fs(url, **storage_options)``, with the listings cache off for
    object stores: s3fs, gcsfs and adlfs keep the first listing of a directory and answer
    later listings, ``exists`` and ``isdir`` from it, so a file another process wrote since
    is reported missing (a driver verifying the checkpoint its workers just uploaded).

    >>> fs, path = url_to_fresh_fs("file:///tmp/x")
    >>> path
    '/tmp/x'
    """
    from fsspec.core import url_to_fs

    options = dict(storage_options or {})
    if _scheme(url) in _LISTINGS_CACHED:
        options.setdefault("use_listings_cache", False)
    fs, path = url_to_fs(url, **options)
    return fs, path


def storage_options_for(url: str, resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The options configuration implies for ``url``'s filesystem (``{}`` for other
    schemes)."""
    scheme = _scheme(url)
    if scheme in S3_SCHEMES:
        return s3_storage_options(resolved)
    if scheme in GCS_SCHEMES:
        return gcs_storage_options(resolved)
    if scheme in AZURE_SCHEMES:
        return azure_storage_options(url, resolved)
    if scheme in HDFS_SCHEMES:
        return dict(hdfs_storage_options(resolved))
    return {}


def merge_storage_options(
    derived: Mapping[str, Any], explicit: Mapping[str, Any]
) -> dict[str, Any]:
    """``derived`` overlaid with ``explicit``; nested dicts (client/config kwargs) merge too.

    >>> merge_storage_options({"client_kwargs": {"a": 1}, "key": "k"},
    ...                       {"client_kwargs": {"b": 2}, "key": "x"})
    {'client_kwargs': {'a': 1, 'b': 2}, 'key': 'x'}
    """
    merged: dict[str, Any] = {
        k: (dict(v) if isinstance(v, Mapping) else v) for k, v in derived.items()
    }
    for key, value in explicit.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge_storage_options(merged[key], value)
        else:
            merged[key] = value
    return merged


def redact_storage_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` safe to log: secret values replaced by ``'***'``.

    >>> redact_storage_options({"key": "AK", "secret": "s", "client_kwargs": {"x": 1}})
    {'key': 'AK', 'secret': '***', 'client_kwargs': {'x': 1}}
    """
    return {
        k: "***"
        if k in _SECRET_KEYS
        else (redact_storage_options(v) if isinstance(v, Mapping) else v)
        for k, v in options.items()
    }
