"""The Cairn side of the benchmarks: build each workload's job, run it, measure it.

Invariant: a run returns (and ``main`` prints, as its last stdout line) one JSON object with
the fields of :data:`bench.RESULT_FIELDS` plus :data:`bench.EXTRA_FIELDS`, exactly the shape
``bench/peers/run_peer.py`` prints for the peers; every figure comes from the sinks' files
and the job master's checkpoint statistics, never from the wall time of the whole process.

Run one measurement::

    python -m bench.workloads --workload keyed-sum --records 2000000 --keys 10000 \\
        --checkpoint-interval-ms 1000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import empty_result
from bench.cairn_functions import (
    CoveringKeysGenerator,
    HotKeysGenerator,
    KeyedSum,
    LatencySink,
    ProgressSink,
    TimedKeyedSum,
    TimedKeyedValuesGenerator,
)
from bench.measure import Progress, merge_latency, read_progress, throughput_dip
from cairn.checkpoint.stats import CheckpointStats, CheckpointStatus
from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream import CheckpointingMode, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.ids import CheckpointId

__all__ = ["CairnOptions", "run_workload"]

POLL_S = 0.1
RESTART_DELAY_MS = 100
RECOVERY_MARK_EVERY = 256  # finer marks: a killed worker loses fewer counted records


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


@dataclass
class _Observed:
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


# ---- jobs ---------------------------------------------------------------------------------


def bench_environment(opts: CairnOptions, interval_ms: int, checkpoint_dir: str) -> Any:
    conf = Configuration()
    conf.set_string("cairn.executor", opts.executor)
    if opts.master:
        conf.set_string("cairn.spark.master", opts.master)
    conf.set_string("state.backend.type", opts.state_backend)
    conf.set_string("execution.checkpointing.incremental", str(opts.incremental).lower())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(opts.parallelism)
    if interval_ms > 0:
        env.enable_checkpointing(interval_ms, CheckpointingMode.EXACTLY_ONCE)
        env.get_checkpoint_config().set_checkpoint_storage("file://" + checkpoint_dir)
        if opts.min_pause_ms > 0:
            env.get_checkpoint_config().set_min_pause_between_checkpoints(opts.min_pause_ms)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, RESTART_DELAY_MS))
    return env


def _keyed_sum_job(env: Any, source: DataGeneratorSource, sink: Any, timed: bool) -> None:
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
    on_poll: Callable[[Any, _Observed], None] | None = None,
    timeout_s: float = 1800.0,
) -> _Observed:
    """Submit, poll the job master every ``POLL_S`` until the job ends, return observations."""
    seen = _Observed(submitted=time.time())
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
                size = _dir_size(stats.path) if stats.path else None
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


def _dir_size(url: str) -> int | None:
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(url)
        return int(fs.du(path, total=True))
    except (OSError, ValueError):
        return None  # subsumed and deleted before we looked


# ---- result assembly ----------------------------------------------------------------------


def _base(
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


def _fill_common(result: dict[str, Any], seen: _Observed, progress: Progress, records: int) -> None:
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


def _async_dip(result: dict[str, Any], seen: _Observed, progress: Progress, records: int) -> None:
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


# ---- the workloads ------------------------------------------------------------------------


def keyed_sum(
    records: int, keys: int, interval_ms: int, opts: CairnOptions, work_dir: str
) -> dict[str, Any]:
    """Workload 1: unthrottled keyed sum over ``keys`` uniform keys; steady records/s."""
    result = _base("keyed-sum", records, keys, interval_ms, None, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = _sink_dir(work_dir)
    _keyed_sum_job(
        env, DataGeneratorSource.keyed_values(records, keys), ProgressSink(out), timed=False
    )
    seen = run_job(env, "bench-keyed-sum")
    progress = Progress.of(read_progress(out).values())
    _fill_common(result, seen, progress, records)
    if interval_ms > 0:
        _async_dip(result, seen, progress, records)
    return result


def overhead(
    records: int, keys: int, interval_ms: int, opts: CairnOptions, work_dir: str
) -> dict[str, Any]:
    """Checkpointing's cost: the keyed sum with ``interval_ms`` checkpoints and without,
    in one Spark session after a warm-up job, in the order with, without, without, with (a
    linear drift of a shared machine falls on both alike). ``steady_records_per_s`` is the
    mean of the two checkpointed runs; ``overhead_pct`` = 1 - that / the mean without."""
    result = _base("overhead", records, keys, interval_ms, None, opts)
    started = time.time()
    keyed_sum(max(records // 10, 1), keys, 0, opts, os.path.join(work_dir, "warm-up"))
    rates: dict[bool, list[float]] = {True: [], False: []}
    completed = 0
    for i, checkpoints in enumerate((True, False, False, True)):
        run = keyed_sum(
            records,
            keys,
            interval_ms if checkpoints else 0,
            opts,
            os.path.join(work_dir, f"run-{i}"),
        )
        if run["steady_records_per_s"] is None or run.get("note"):
            result["note"] = f"run {i + 1} of 4: {run.get('note') or 'no steady rate'}"
            return result
        rates[checkpoints].append(run["steady_records_per_s"])
        completed += run["checkpoints_completed"]
    with_cp, without = statistics.mean(rates[True]), statistics.mean(rates[False])
    result.update(
        elapsed_s=round(time.time() - started, 3),
        checkpoints_completed=completed,
        steady_records_per_s=round(with_cp),
        no_checkpoint_records_per_s=round(without),
        overhead_pct=round(100.0 * (1.0 - with_cp / without), 1),
        overhead_runs=" ".join(f"{r:.0f}" for r in (rates[True][0], *rates[False], rates[True][1])),
    )
    return result


def latency(
    records: int,
    keys: int,
    interval_ms: int,
    rate: float,
    opts: CairnOptions,
    work_dir: str,
    warmup_s: float = 1.0,
) -> dict[str, Any]:
    """Workload 2: the keyed sum fed at ``rate`` records/s; end-to-end latency at the sink."""
    result = _base("latency", records, keys, interval_ms, rate, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = _sink_dir(work_dir)
    source = DataGeneratorSource(
        TimedKeyedValuesGenerator(keys, rate), records, RateLimiterStrategy.per_second(rate)
    )
    _keyed_sum_job(env, source, LatencySink(out, warmup_s), timed=True)
    seen = run_job(env, "bench-latency")
    progress = Progress.of(read_progress(out).values())
    _fill_common(result, seen, progress, records)
    _write_checkpoint_timeline(seen, os.path.join(out, "checkpoints.json"))
    summary = merge_latency(out)
    if summary is not None:
        result.update(
            latency_p50_ms=round(summary.p50_ms, 2),
            latency_p99_ms=round(summary.p99_ms, 2),
            latency_max_ms=round(summary.max_ms, 2),
        )
        result["note"] = _join(
            result["note"],
            f"{summary.count:,} records timed, first "
            f"{summary.skipped:,} ({warmup_s:g} s warm-up) not",
        )
    return result


def _write_checkpoint_timeline(seen: _Observed, path: str) -> None:
    """Each completed checkpoint's trigger/end and per-subtask phases, beside the sinks'
    latency timelines (kept with ``--keep-dir``: what a latency tail coincides with)."""
    rows = []
    for cid, stats in sorted(seen.checkpoints.items()):
        rows.append(
            {
                "id": cid,
                "trigger_ms": stats.trigger_ms,
                "end_ms": stats.end_ms,
                "subtasks": [
                    {
                        "task": str(key),
                        "ack_ms": sub.ack_ms,
                        "start_delay_ms": sub.metrics.start_delay_ms,
                        "alignment_ms": sub.metrics.alignment_duration_ms,
                        "sync_ms": sub.metrics.sync_duration_ms,
                        "async_ms": sub.metrics.async_duration_ms,
                    }
                    for key, sub in stats.subtasks.items()
                ],
            }
        )
    with open(path, "w", encoding="ascii") as f:
        json.dump(rows, f)


def recovery(
    records: int,
    keys: int,
    interval_ms: int,
    rate: float,
    opts: CairnOptions,
    work_dir: str,
    kill_at: float = 0.4,
) -> dict[str, Any]:
    """Workload 3: SIGKILL one worker after ``kill_at`` of the input (and >= 2 completed
    checkpoints); time until output resumes, and records processed twice."""
    if opts.executor != "spark":
        raise ValueError("recovery kills a worker process: it needs the Spark executor")
    result = _base("recovery", records, keys, interval_ms, rate, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = _sink_dir(work_dir)
    source = DataGeneratorSource.keyed_values(
        records, keys, rate_limiter_strategy=RateLimiterStrategy.per_second(rate)
    )
    _keyed_sum_job(env, source, ProgressSink(out, RECOVERY_MARK_EVERY), timed=False)

    def maybe_kill(master: Any, seen: _Observed) -> None:
        if seen.killed_at is not None or len(seen.checkpoints) < 2:
            return
        sources = set(master.plan.source_tasks)
        emitted = sum(m.records_out for t, m in dict(master.metrics).items() if t in sources)
        pids = dict(master.worker_pids)
        if emitted >= kill_at * records and len(pids) == opts.parallelism:
            victim = pids[max(pids)]
            seen.killed_at = time.time()
            os.kill(victim, signal.SIGKILL)

    seen = run_job(env, "bench-recovery", maybe_kill)
    files = read_progress(out)
    first_attempt = Progress.of(m for (_, a), m in files.items() if a == 0)
    _fill_common(result, seen, first_attempt, records)
    result["note"] = None
    if seen.killed_at is None:
        result["note"] = "no worker was killed (the job ended first)"
        return result
    later = [m for (_, a), m in files.items() if a > 0]
    resumed = Progress.of(later).first_output if later else None
    result["recovery_s"] = None if resumed is None else round(resumed - seen.killed_at, 3)
    processed = sum(m[-1][1] for m in files.values() if m)
    result["replayed_records"] = processed - records
    result["note"] = _join(
        _recovery_phases(seen, resumed),
        f"replayed counted to +-{RECOVERY_MARK_EVERY * opts.parallelism}",
    )
    return result


def _recovery_phases(seen: _Observed, resumed: float | None) -> str:
    kill = seen.killed_at or 0.0
    restart = next((t for t, e, _ in seen.events if e == "restart" and t >= kill), None)
    running = next((t for t, e, p in seen.events if e == "running" and p and p > 0), None)
    parts = []
    if restart is not None:
        parts.append(f"failure detected after {restart - kill:.2f} s")
    if running is not None and restart is not None:
        parts.append(f"redeployed and restored {running - restart:.2f} s later")
    if running is not None and resumed is not None:
        parts.append(f"first output {max(0.0, resumed - running):.2f} s after that")
    return "; ".join(parts)


def state_size(
    keys: int,
    records: int,
    interval_ms: int,
    opts: CairnOptions,
    work_dir: str,
    hot_fraction: float | None = None,
) -> dict[str, Any]:
    """Workload 4: every key touched (record ``i`` has key ``i % keys``); checkpoint
    duration, bytes on disk, and the throughput dip while asynchronous parts run.

    With ``hot_fraction`` the records after the first ``keys`` update only that fraction of
    the keys (``HotKeysGenerator``): what an incremental checkpoint adds per interval when
    1 % of the state changes, against the full state size, and the synchronous phase."""
    result = _base("state-size", records, keys, interval_ms, None, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = _sink_dir(work_dir)
    gen = (
        CoveringKeysGenerator(keys)
        if hot_fraction is None
        else HotKeysGenerator(keys, hot_fraction)
    )
    _keyed_sum_job(env, DataGeneratorSource(gen, records), ProgressSink(out), timed=False)
    seen = run_job(env, f"bench-state-size-{keys}", on_poll=_sample_rss)
    progress = Progress.of(read_progress(out).values())
    _fill_common(result, seen, progress, records)
    if seen.worker_rss_peak:
        result["worker_rss_peak_bytes"] = seen.worker_rss_peak
    if interval_ms > 0:
        _async_dip(result, seen, progress, records)
    if hot_fraction is not None:
        result["hot_fraction"] = hot_fraction
        _growth(result, seen, progress.time_reaching(keys))
    return result


def _growth(result: dict[str, Any], seen: _Observed, filled: float | None) -> None:
    """Checkpoints triggered after every key was written once: what each added (the
    checkpointed size) as a share of the full state size (p50, max, mean and each one in
    trigger order), and their synchronous phases."""
    after = sorted(
        (
            c
            for c in seen.checkpoints.values()
            if filled is not None and c.trigger_ms / 1000.0 > filled and c.state_size
        ),
        key=lambda c: c.trigger_ms,
    )
    if not after:
        return
    added = [c.checkpointed_size / c.state_size * 100 for c in after]
    sync = [
        max((x.metrics.sync_duration_ms for x in c.subtasks.values()), default=0) for c in after
    ]
    result["hot_checkpoints"] = len(after)
    result["added_pct_p50"] = round(statistics.median(added), 2)
    result["added_pct_max"] = round(max(added), 2)
    # The mean is what a long run uploads per checkpoint: compaction spikes count in full.
    result["added_pct_mean"] = round(statistics.mean(added), 2)
    result["added_pct_series"] = [round(a, 1) for a in added]
    result["hot_sync_p50_ms"] = statistics.median(sync)
    result["hot_sync_max_ms"] = max(sync)


def _sample_rss(master: Any, seen: _Observed) -> None:
    """The largest resident set of a Python process below this one (Spark's Python workers,
    where the state lives), or of this process with the in-process executor."""
    import psutil

    me = psutil.Process()
    procs = [p for p in me.children(recursive=True) if "python" in p.name().lower()] or [me]
    for p in procs:
        try:
            seen.worker_rss_peak = max(seen.worker_rss_peak, p.memory_info().rss)
        except psutil.Error:
            continue


# ---- entry points -------------------------------------------------------------------------


def run_workload(
    workload: str,
    records: int,
    keys: int,
    interval_ms: int,
    rate: float | None = None,
    opts: CairnOptions | None = None,
    warmup_s: float = 1.0,
    hot_fraction: float | None = None,
) -> dict[str, Any]:
    """Run one Cairn measurement in this process and return its result object.

    >>> run_workload("keyed-sum", 20_000, 100, 1000)["steady_records_per_s"] > 0  # doctest: +SKIP
    True
    """
    opts = opts or CairnOptions()
    work_dir = opts.keep_dir or tempfile.mkdtemp(prefix=f"cairn-bench-{workload}-")
    os.makedirs(work_dir, exist_ok=True)
    try:
        result = _run_one(
            workload, records, keys, interval_ms, rate, opts, warmup_s, work_dir, hot_fraction
        )
        if opts.min_pause_ms > 0 and interval_ms > 0:
            result["note"] = _join(
                result.get("note"), f"min pause between checkpoints {opts.min_pause_ms} ms"
            )
        return result
    finally:
        if opts.keep_dir is None:
            shutil.rmtree(work_dir, ignore_errors=True)


def _run_one(
    workload: str,
    records: int,
    keys: int,
    interval_ms: int,
    rate: float | None,
    opts: CairnOptions,
    warmup_s: float,
    work_dir: str,
    hot_fraction: float | None = None,
) -> dict[str, Any]:
    if workload == "keyed-sum":
        return keyed_sum(records, keys, interval_ms, opts, work_dir)
    if workload == "overhead":
        return overhead(records, keys, interval_ms or 1000, opts, work_dir)
    if workload == "latency":
        return latency(
            records, keys, interval_ms, _need_rate(rate, workload), opts, work_dir, warmup_s
        )
    if workload == "recovery":
        return recovery(
            records, keys, interval_ms or 1000, _need_rate(rate, workload), opts, work_dir
        )
    if workload == "state-size":
        return state_size(keys, records, interval_ms, opts, work_dir, hot_fraction)
    raise ValueError(f"unknown workload {workload!r}")


def _need_rate(rate: float | None, workload: str) -> float:
    if not rate or rate <= 0:
        raise ValueError(f"the {workload} workload needs --rate > 0")
    return rate


def _sink_dir(work_dir: str) -> str:
    path = os.path.join(work_dir, "sink")
    os.makedirs(path, exist_ok=True)
    return path


def _join(*parts: str | None) -> str | None:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.workloads",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workload",
        required=True,
        choices=["keyed-sum", "overhead", "latency", "recovery", "state-size"],
    )
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument(
        "--checkpoint-interval-ms", type=int, default=1000, help="0 disables checkpointing"
    )
    parser.add_argument("--rate", type=float, default=0.0, help="records/s (latency, recovery)")
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument(
        "--latency-warmup-s",
        type=float,
        default=1.0,
        help="latency: records created this long after the first are not timed",
    )
    parser.add_argument("--executor", choices=["spark", "inprocess"], default="spark")
    parser.add_argument("--master", default=None, help="Spark master (default: local[N])")
    parser.add_argument("--keep-dir", default=None, help="keep sink files and checkpoints")
    parser.add_argument(
        "--min-pause-ms",
        type=int,
        default=0,
        help="min pause between checkpoints (quiet windows for the async dip)",
    )
    parser.add_argument("--state-backend", choices=["hashmap", "rocksdb"], default="hashmap")
    parser.add_argument(
        "--incremental", action="store_true", help="incremental checkpoints (RocksDB backend)"
    )
    parser.add_argument(
        "--hot-fraction",
        type=float,
        default=None,
        help="state-size: after the first --keys records, update only this fraction of keys",
    )
    args = parser.parse_args(argv)
    opts = CairnOptions(
        args.parallelism,
        args.executor,
        args.master,
        args.keep_dir,
        args.min_pause_ms,
        args.state_backend,
        args.incremental,
    )
    # Start-up is measured from submission, which includes creating the Spark session.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        result = run_workload(
            args.workload,
            args.records,
            args.keys,
            args.checkpoint_interval_ms,
            args.rate or None,
            opts,
            args.latency_warmup_s,
            args.hot_fraction,
        )
    except Exception as exc:  # report, don't crash: the runner records the reason
        result = empty_result("cairn", args.workload, args.records)
        result["note"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        print(json.dumps(result), flush=True)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
