"""Control endpoint (``rest.*``, ``cairn.rest.*``) and metric reporter options.

Invariant: every key here is registered on import; by default the endpoint listens on the
loopback address only and requires the job's bearer token.
"""

from __future__ import annotations

from cairn.common.options.define import (
    between,
    define,
    filesystem_url,
    non_empty,
    positive,
    spellings,
)

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
JOB_ARCHIVE_DIR = define(
    "jobmanager.archive.fs.dir",
    "str",
    None,
    "Directory (local path or filesystem URL) where the driver writes each ended job's final "
    "REST views (<job id>.json) for /jobs/overview and `cairn list --all` of every driver; "
    "default: the private 'archive' folder of the per-user job registry.",
    check=filesystem_url,
)
ARCHIVE_RETAINED_JOBS = define(
    "historyserver.archive.retained-jobs",
    "int",
    100,
    "How many job archives the directory keeps: writing one removes the oldest beyond it "
    "(-1: no limit; Flink's default is -1, its HistoryServer removes them).",
    check=lambda v: None if v == -1 or v >= 1 else f"must be -1 or >= 1, got {v}",
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

METRICS_LATENCY_INTERVAL = define(
    "metrics.latency.interval",
    "duration",
    0,
    "Latency tracking (Flink's key): every source subtask emits a latency marker this often "
    "(ms); markers travel with the records, skip user functions, and every operator reports "
    "the histogram 'latency' of their age. 0 (the default) turns tracking off.",
)
METRICS_LATENCY_GRANULARITY = define(
    "metrics.latency.granularity",
    "enum",
    "operator",
    "What latency histograms tell apart: 'single' (per operator subtask), 'operator' "
    "(also per source operator, the default) or 'subtask' (also per source subtask).",
    choices=spellings(("single",), ("operator",), ("subtask",)),
)
METRICS_LATENCY_HISTORY_SIZE = define(
    "metrics.latency.history-size",
    "int",
    128,
    "How many of the latest latencies each latency histogram keeps (its sliding window).",
    check=positive,
)
