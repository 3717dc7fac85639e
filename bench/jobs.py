"""The Cairn benchmark jobs' common parts: options, environment, the keyed-sum job, the
driver loop that watches a running job, and the result fields every workload fills.

Invariant: figures come from the sinks' files and the job master's checkpoint statistics,
never from the wall time of the whole process; the checkpoint storage a job writes to is the
one its options name (``file://`` under the work directory, or the S3 root
:mod:`bench.storage` started), and its directories are sized with that storage's options.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bench import empty_result
from bench.cairn_functions import KeyedSum, TimedKeyedSum
from bench.measure import Progress, throughput_dip
from bench.storage import checkpoint_url, fs_options
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import CheckpointingMode, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource
from cairn.ids import CheckpointId

__all__ = [
    "CairnOptions",
    "Observed",
    "base_result",
    "bench_environment",
    "cairn_versions",
    "fill_common",
    "join",
    "keyed_sum_job",
    "run_job",
    "sink_dir",
]

POLL_S = 0.1
RESTART_DELAY_MS = 100


@dataclass(frozen=True)
class CairnOptions:
    """Where and how the Cairn jobs run (parallelism 2 on embedded local Spark by default)."""

    parallelism: int = 2
    executor: str = "spark"  # or "inprocess" (threads; for debugging, no SIGKILL)
    master: str | None = None
    keep_dir: str | None = None  # keep the sinks' files and checkpoints here
    # Flink's min pause between checkpoints: guarantees checkpoint-free stretches, without
    # which the async dip has no quiet windows to compare with once checkpoints outlast the
    # interval (large state). 0: checkpoints may run back to back.
    min_pause_ms: int = 0
    state_backend: str = "hashmap"  # or "rocksdb" (state.backend.type)
    incremental: bool = False  # execution.checkpointing.incremental (RocksDB)
    storage: str = "file"  # checkpoint storage: "file" or "s3" (SeaweedFS, bench.storage)
    # Set by run_workload once the storage is up: the S3 root URL and its s3.* keys.
    storage_root: str | None = None
    storage_config: tuple[tuple[str, str], ...] = ()
    # More configuration keys for the job (``--conf key=value``: e.g. metrics.latency.*).
    config: tuple[tuple[str, str], ...] = ()


@dataclass
class Observed:
    """What the driver saw while the job ran."""

    submitted: float
    ended: float = 0.0
    checkpoints: dict[int, CheckpointStats] = field(default_factory=dict)
    checkpoint_bytes: dict[int, int] = field(default_factory=dict)
    events: list[tuple[float, str, Any]] = field(default_factory=list)
    killed_at: float | None = None
    restarts: int = 0
    p50_ms: int | None = None
    p99_ms: int | None = None
    worker_rss_peak: int = 0  # bytes: the largest Python worker process seen while polling
    # Latency markers' histograms in the tasks' final reports (metrics.latency.interval).
    latency_reports: list[Any] = field(default_factory=list)
    filled_at: float | None = None  # recovery: when the sources had emitted every key once
    # The last restore's phases (the job master's ``last_initialization``), in ms and bytes.
    initialization: dict[str, int] | None = None


# ---- jobs ---------------------------------------------------------------------------------


def bench_environment(opts: CairnOptions, interval_ms: int, checkpoint_dir: str) -> Any:
    """The environment of one benchmark job; checkpoints go to ``checkpoint_dir`` (a local
    directory), or to the same path under the S3 root when the options name one."""
    conf = Configuration()
    conf.set_string("cairn.executor", opts.executor)
    if opts.master:
        conf.set_string("cairn.spark.master", opts.master)
    conf.set_string("state.backend.type", opts.state_backend)
    conf.set_string("execution.checkpointing.incremental", str(opts.incremental).lower())
    for key, value in (*opts.storage_config, *opts.config):
        conf.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(opts.parallelism)
    if interval_ms > 0:
        env.enable_checkpointing(interval_ms, CheckpointingMode.EXACTLY_ONCE)
        env.get_checkpoint_config().set_checkpoint_storage(
            checkpoint_url(opts.storage_root, checkpoint_dir)
        )
        if opts.min_pause_ms > 0:
            env.get_checkpoint_config().set_min_pause_between_checkpoints(opts.min_pause_ms)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, RESTART_DELAY_MS))
    return env


def keyed_sum_job(env: Any, source: DataGeneratorSource, sink: Any, timed: bool) -> None:
    """generator -> key_by(key) -> running sum in ValueState -> measuring (discarding) sink."""
    fields = [Types.STRING(), Types.LONG()] + ([Types.LONG()] if timed else [])
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "generator")
        .uid("generator")
        .key_by(lambda r: r[0], key_type=Types.STRING())
        .process(TimedKeyedSum() if timed else KeyedSum(), output_type=Types.TUPLE(fields))
        .uid("keyed-sum")
        .name("keyed sum")
        .add_sink(sink)
        .uid("discarding-sink")
    )


def run_job(
    env: Any,
    name: str,
    on_poll: Callable[[Any, Observed], None] | None = None,
    timeout_s: float = 1800.0,
    storage_config: Mapping[str, str] | None = None,
) -> Observed:
    """Submit, poll the job master every ``POLL_S`` until the job ends, return observations.

    ``storage_config`` (the ``s3.*`` keys) is what sizing a checkpoint directory on S3 needs.
    """
    seen = Observed(submitted=time.time())
    client = env.execute_async(name)
    master = client.job_master

    def on_event(event: str, payload: Any) -> None:
        seen.events.append((time.time(), event, payload))
        coordinator = master.coordinator
        if event == "checkpoint" and coordinator is not None:
            # Runs on the job master's thread right after completion: a finished job deletes
            # its checkpoints, and a newer one subsumes this one, so size it now.
            stats = coordinator.stats.get(CheckpointId(int(payload)))
            if stats is not None:
                seen.checkpoints[int(payload)] = stats
                size = dir_size(stats.path, storage_config or {}) if stats.path else None
                if size is not None:
                    seen.checkpoint_bytes[int(payload)] = size

    master.listeners.append(on_event)
    deadline = time.monotonic() + timeout_s
    while master.end_ms is None:
        if time.monotonic() > deadline:
            client.cancel()
            break
        if on_poll is not None:
            on_poll(master, seen)
        time.sleep(POLL_S)
    client.get_job_execution_result(timeout=60)
    seen.ended = (master.end_ms or time.time() * 1000) / 1000.0
    seen.restarts = master.restarts
    for report in master.metrics.values():  # ``latency``: absent in older checkouts (A/B)
        seen.latency_reports.extend(getattr(report, "latency", ()))
    init = getattr(master, "last_initialization", None)  # absent in older checkouts (A/B)
    if init is not None:
        seen.initialization = dataclasses.asdict(init)
    coordinator = master.coordinator
    if coordinator is not None:
        snapshot = coordinator.stats.snapshot()
        for stats in snapshot.history:  # completed ones the listener may have missed
            if stats.status is CheckpointStatus.COMPLETED:
                seen.checkpoints.setdefault(int(stats.checkpoint_id), stats)
        summary = snapshot.end_to_end_duration
        if summary.count:
            seen.p50_ms, seen.p99_ms = summary.p50, summary.p99
    return seen


def dir_size(url: str, storage_config: Mapping[str, str]) -> int | None:
    """Bytes under ``url`` (a checkpoint directory), or ``None`` once it is gone."""
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url, **fs_options(url, storage_config))
        return int(fs.du(path, total=True))
    except (OSError, ValueError):
        return None  # subsumed and deleted before we looked


# ---- result assembly ----------------------------------------------------------------------


def base_result(
    workload: str, records: int, keys: int, interval_ms: int, rate: float | None, opts: CairnOptions
) -> dict[str, Any]:
    result = empty_result("cairn", workload, records)
    result.update(
        keys=keys,
        parallelism=opts.parallelism,
        checkpoint_interval_ms=interval_ms,
        rate=rate,
        versions=cairn_versions(),
    )
    return result


def fill_common(result: dict[str, Any], seen: Observed, progress: Progress, records: int) -> None:
    first = progress.first_output
    result["elapsed_s"] = round(seen.ended - seen.submitted, 3)
    result["startup_s"] = None if first is None else round(first - seen.submitted, 3)
    rate = progress.steady_rate(records)
    result["steady_records_per_s"] = None if rate is None else round(rate)
    result["checkpoint_p50_ms"] = seen.p50_ms
    result["checkpoint_p99_ms"] = seen.p99_ms
    result["checkpoints_completed"] = len(seen.checkpoints)
    result["restarts"] = seen.restarts
    if seen.checkpoints:
        last = seen.checkpoints[max(seen.checkpoints)]
        result["checkpoint_last_ms"] = last.end_to_end_duration_ms
        result["state_size_bytes"] = last.state_size
    parts = [
        (
            max((x.metrics.sync_duration_ms for x in c.subtasks.values()), default=0),
            max((x.metrics.async_duration_ms for x in c.subtasks.values()), default=0),
        )
        for c in seen.checkpoints.values()
    ]
    if parts:
        # The slowest subtask's parts, median over checkpoints: where checkpoint time goes.
        result["checkpoint_sync_p50_ms"] = statistics.median(p[0] for p in parts)
        result["checkpoint_async_p50_ms"] = statistics.median(p[1] for p in parts)
    if seen.checkpoint_bytes:
        result["checkpoint_bytes"] = seen.checkpoint_bytes[max(seen.checkpoint_bytes)]
    if progress.total != records and not seen.restarts:
        result["note"] = f"sinks counted {progress.total:,} of {records:,} records"


def async_dip(result: dict[str, Any], seen: Observed, progress: Progress, records: int) -> None:
    """Throughput while checkpoints' asynchronous parts run vs. while no checkpoint runs."""
    busy: list[tuple[float, float]] = []
    paused: list[tuple[float, float]] = []
    for stats in seen.checkpoints.values():
        largest = max((s.metrics.state_size for s in stats.subtasks.values()), default=0)
        for sub in stats.subtasks.values():
            m = sub.metrics
            async_start = (sub.ack_ms - m.async_duration_ms) / 1000.0
            # Trigger -> end of the synchronous part: processing pauses there by design.
            paused.append((stats.trigger_ms / 1000.0, async_start))
            if m.async_duration_ms > 0 and m.state_size * 10 >= largest:
                busy.append((async_start, sub.ack_ms / 1000.0))
    start, end = progress.time_reaching(0.1 * records), progress.time_reaching(0.9 * records)
    if start is None or end is None:
        return
    dip = throughput_dip(progress, busy, paused, start, end)
    if dip is not None:
        result["async_dip_pct"] = round(dip.dip_pct, 1)
        result["async_windows"] = f"{dip.busy_windows} busy / {dip.quiet_windows} quiet"


def sink_dir(work_dir: str) -> str:
    import os

    path = os.path.join(work_dir, "sink")
    os.makedirs(path, exist_ok=True)
    return path


def join(*parts: str | None) -> str | None:
    """Non-empty parts joined by ``"; "``, or ``None``.

    >>> join("a", None, "", "b"), join(None)
    ('a; b', None)
    """
    text = "; ".join(p for p in parts if p)
    return text or None


def cairn_versions() -> dict[str, str]:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    versions = {"python": platform.python_version()}
    for package in ("cairn", "pyspark"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            continue
    return versions
