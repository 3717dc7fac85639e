"""TLS options (``security.ssl.*``, Flink's keys, with PEM files instead of Java keystores).

Invariant: every key here is registered on import; TLS is off unless ``enabled`` is set,
and a side turned on needs both its keystore and its truststore (checked when the job is
built, where the files are also loaded once, so a bad file fails before Spark starts).
"""

from __future__ import annotations

from cairn.common.options.define import define, non_empty

SSL = "security.ssl."

SSL_INTERNAL_ENABLED = define(
    SSL + "internal.enabled",
    "bool",
    False,
    "TLS with mutual authentication on every connection between the driver and the workers "
    "and between workers (data and control), under the job's HMAC handshake.",
)
SSL_INTERNAL_KEYSTORE = define(
    SSL + "internal.keystore",
    "str",
    None,
    "PEM file with the certificate chain and private key every Cairn process presents on "
    "the internal wire (Flink: a Java keystore); read on the driver and on every worker host.",
    check=non_empty,
)
SSL_INTERNAL_TRUSTSTORE = define(
    SSL + "internal.truststore",
    "str",
    None,
    "PEM file with the CA certificate(s) a peer's internal certificate must chain to.",
    check=non_empty,
)
SSL_INTERNAL_KEY_PASSWORD = define(
    SSL + "internal.key-password",
    "str",
    None,
    "Password of an encrypted private key in the internal keystore (PEM files have no "
    "keystore or truststore password; Flink's *-password keys for those are not needed).",
    secret=True,
)
SSL_REST_ENABLED = define(
    SSL + "rest.enabled",
    "bool",
    False,
    "Serve the job's control endpoint over HTTPS (the job registry's URL says https).",
)
SSL_REST_KEYSTORE = define(
    SSL + "rest.keystore",
    "str",
    None,
    "PEM file with the control endpoint's certificate chain and private key.",
    check=non_empty,
)
SSL_REST_TRUSTSTORE = define(
    SSL + "rest.truststore",
    "str",
    None,
    "PEM file with the CA certificate(s) clients of the control endpoint trust (the CLI "
    "verifies the endpoint with it) and, with authentication, that client certificates "
    "must chain to.",
    check=non_empty,
)
SSL_REST_KEY_PASSWORD = define(
    SSL + "rest.key-password",
    "str",
    None,
    "Password of an encrypted private key in the REST keystore.",
    secret=True,
)
SSL_REST_AUTHENTICATION = define(
    SSL + "rest.authentication-enabled",
    "bool",
    False,
    "Require a client certificate signed by the REST truststore on the control endpoint "
    "(mutual TLS), on top of the bearer token.",
)
