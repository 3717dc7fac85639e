"""HTTPS for the control endpoint (``security.ssl.rest.*``): the server's context and the
context a client of the registry uses to reach an endpoint.

Invariant: an endpoint with REST TLS on is registered with an ``https`` URL and the path of
its truststore, and clients verify the endpoint's certificate (and its name) against that
truststore before sending the job's token; with ``security.ssl.rest.authentication-enabled``
the server refuses a client without a certificate signed by that truststore during the TLS
handshake, before any request is read.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping

from cairn.rest.registry import JobEntry
from cairn.runtime.network.tls import server_context
from cairn.settings import SecuritySettings

CLIENT_CERT_ENV = "CAIRN_REST_CLIENT_CERT"
"""A PEM file (certificate chain and key) the CLI presents to endpoints that require one."""


def server_ssl(security: SecuritySettings) -> ssl.SSLContext | None:
    """The endpoint's server context (None: plain HTTP).

    >>> server_ssl(SecuritySettings()) is None
    True
    """
    if security.rest is None:
        return None
    return server_context(security.rest, require_client_cert=security.rest_authentication)


def client_ssl(entry: JobEntry, environ: Mapping[str, str] = os.environ) -> ssl.SSLContext | None:
    """The context to call ``entry``'s endpoint with (None: it serves plain HTTP).

    Verifies the endpoint against the truststore its registry entry names (the job's
    ``security.ssl.rest.truststore``) and presents ``CAIRN_REST_CLIENT_CERT`` if set.
    """
    if not entry.endpoint.startswith("https:"):
        return None
    context = ssl.create_default_context(cafile=entry.truststore)
    client_cert = environ.get(CLIENT_CERT_ENV)
    if client_cert:
        context.load_cert_chain(client_cert)
    return context
