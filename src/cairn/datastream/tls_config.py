"""``security.ssl.*`` configuration -> ``SecuritySettings`` (the TLS files of each side).

Invariant: a side is on only when its ``enabled`` key is true, and then names a keystore and
a truststore that are readable files on the driver (absolute paths: workers read the same
paths on their hosts); anything else is a ``ConfigurationError`` before the job starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from cairn.common import config_options as opts
from cairn.common.exceptions import ConfigurationError
from cairn.settings import SecuritySettings, TlsFiles


def security_settings_from(resolved: Mapping[str, Any]) -> SecuritySettings:
    """The TLS settings of validated configuration.

    >>> security_settings_from({})
    SecuritySettings(internal=None, rest=None, rest_authentication=False)
    >>> security_settings_from({"security.ssl.internal.enabled": True})
    Traceback (most recent call last):
    ...
    cairn.common.exceptions.ConfigurationError: security.ssl.internal.enabled needs ...
    """

    def get(option: opts.ConfigOption) -> Any:
        return resolved.get(option.key, option.default)

    internal = None
    if get(opts.SSL_INTERNAL_ENABLED):
        internal = _files(
            "internal",
            get(opts.SSL_INTERNAL_KEYSTORE),
            get(opts.SSL_INTERNAL_TRUSTSTORE),
            get(opts.SSL_INTERNAL_KEY_PASSWORD),
        )
    rest = None
    if get(opts.SSL_REST_ENABLED):
        rest = _files(
            "rest",
            get(opts.SSL_REST_KEYSTORE),
            get(opts.SSL_REST_TRUSTSTORE),
            get(opts.SSL_REST_KEY_PASSWORD),
        )
    authentication = bool(get(opts.SSL_REST_AUTHENTICATION))
    if authentication and rest is None:
        raise ConfigurationError(
            f"{opts.SSL_REST_AUTHENTICATION.key} needs {opts.SSL_REST_ENABLED.key}: true"
        )
    return SecuritySettings(internal=internal, rest=rest, rest_authentication=authentication)


def _files(side: str, keystore: str | None, truststore: str | None, password: Any) -> TlsFiles:
    prefix = f"security.ssl.{side}."
    for key, path, what in (
        ("keystore", keystore, "a PEM file with the certificate chain and private key"),
        ("truststore", truststore, "a PEM file with the CA certificates to trust"),
    ):
        if not path:
            raise ConfigurationError(f"{prefix}enabled needs {prefix}{key} ({what})")
        if not os.path.isfile(path) or not os.access(path, os.R_OK):
            raise ConfigurationError(f"{prefix}{key}: {path} is not a readable file")
    assert keystore is not None and truststore is not None
    return TlsFiles(
        os.path.abspath(keystore),
        os.path.abspath(truststore),
        key_password=str(password) if password else None,
    )
