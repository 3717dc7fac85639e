"""Control endpoint (``rest.*``, ``cairn.rest.*``) and metric reporter options.

Invariant: every key here is registered on import; by default the endpoint listens on the
loopback address only and requires the job's bearer token.
"""

from __future__ import annotations

from cairn.common.options.define import between, define, non_empty

REST_ENABLED = define(
    "cairn.rest.enabled",
    "bool",
    True,
    "Serve the job's control endpoint (HTTP, Flink's REST paths) and list the job in the "
    "per-user job registry that `cairn list`, `cairn savepoint`, `cairn stop` and "
    "`cairn cancel` read.",
)
REST_ADDRESS = define(
    "rest.address",
    "str",
    "127.0.0.1",
    "Host name or address clients use to reach the job's control endpoint.",
    check=non_empty,
)
REST_BIND_ADDRESS = define(
    "rest.bind-address",
    "str",
    "127.0.0.1",
    "Address the control endpoint listens on (0.0.0.0: every interface).",
    check=non_empty,
)
REST_PORT = define(
    "rest.port",
    "int",
    0,
    "Port of the control endpoint; 0 picks a free one (one endpoint per job).",
    check=between(0, 65535, "rest.port"),
)
REST_TOKEN_ENABLED = define(
    "cairn.rest.token.enabled",
    "bool",
    True,
    "Require the job's bearer token (kept in the private job registry) on every request to "
    "the control endpoint; false lets anyone who can reach it control the job.",
)

METRICS_REPORTERS = define(
    "metrics.reporters",
    "str",
    "",
    "Metric reporters to start, comma-separated (Flink's key); 'prom' serves the job's "
    "metrics in Prometheus text format at http://<metrics.reporter.prom.host>:"
    "<metrics.reporter.prom.port>/metrics. The control endpoint serves /metrics either way.",
)
METRICS_PROM_HOST = define(
    "metrics.reporter.prom.host",
    "str",
    "127.0.0.1",
    "Address the Prometheus reporter listens on (0.0.0.0: every interface).",
    check=non_empty,
)
METRICS_PROM_PORT = define(
    "metrics.reporter.prom.port",
    "int",
    9249,
    "Port of the Prometheus reporter (Flink's default 9249); 0 picks a free one.",
    check=between(0, 65535, "metrics.reporter.prom.port"),
)
