"""Side-by-side benchmarks of Cairn and its peers (PyFlink, Spark Structured Streaming, Bytewax).

Invariant: every system's run is reported as one flat JSON object with the keys of
:data:`RESULT_FIELDS` (``None`` where a value does not apply), so the runner treats all alike.

Run ``python -m bench --help``; see ``bench/README.md``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EXTRA_FIELDS", "RESULT_FIELDS", "WORKLOADS", "empty_result"]

WORKLOADS = ("keyed-sum", "overhead", "latency", "recovery", "state-size", "skew", "window")

# The fields every system reports (shared with bench/peers/run_peer.py).
RESULT_FIELDS = (
    "system",
    "workload",
    "records",
    "elapsed_s",
    "startup_s",
    "steady_records_per_s",
    "checkpoint_p50_ms",
    "checkpoint_p99_ms",
    "latency_p50_ms",
    "latency_p99_ms",
    "latency_max_ms",
    "versions",
    "unsupported",
    "note",
)

# Optional fields of the recovery and state-size workloads (and the run's parameters).
EXTRA_FIELDS = (
    "latency_p999_ms",
    "marker_p50_ms",
    "marker_p99_ms",
    "marker_max_ms",
    "keys",
    "parallelism",
    "checkpoint_interval_ms",
    "rate",
    "checkpoints_completed",
    "recovery_s",
    "replayed_records",
    "restarts",
    "checkpoint_last_ms",
    "checkpoint_sync_p50_ms",
    "checkpoint_async_p50_ms",
    "checkpoint_bytes",
    "state_size_bytes",
    "async_dip_pct",
    "async_windows",
    "no_checkpoint_records_per_s",
    "overhead_pct",
    "overhead_runs",
    "worker_rss_peak_bytes",
    "hot_fraction",
    "hot_checkpoints",
    "added_pct_p50",
    "added_pct_max",
    "added_pct_mean",
    "added_pct_series",
    "hot_sync_p50_ms",
    "hot_sync_max_ms",
    "storage",
    "state_size_at_kill_bytes",
    "recovery_detected_s",
    "recovery_running_s",
    "recovery_first_output_s",
    "restore_initialization",
)


def empty_result(system: str, workload: str, records: int) -> dict[str, Any]:
    """A result with every shared field present and nothing measured yet.

    >>> r = empty_result("cairn", "keyed-sum", 10)
    >>> r["system"], r["steady_records_per_s"], r["unsupported"]
    ('cairn', None, None)
    """
    result: dict[str, Any] = dict.fromkeys(RESULT_FIELDS)
    result.update(system=system, workload=workload, records=records, versions={})
    return result
