"""The workloads about state: recovery after a SIGKILLed worker, and checkpoint cost vs.
state size.

Invariant: recovery kills a worker only once the state holds every key — the sources have
emitted the first ``keys`` records, which touch each key once, and at least two checkpoints
triggered after that have completed — and once ``kill_at`` of the input is emitted, so the
checkpoint it restores from holds the full state the run is sized by.
"""

from __future__ import annotations

import os
import signal
import statistics
import time
from typing import Any

from bench.cairn_functions import CoveringKeysGenerator, HotKeysGenerator, ProgressSink
from bench.jobs import (
    CairnOptions,
    Observed,
    async_dip,
    base_result,
    bench_environment,
    fill_common,
    join,
    keyed_sum_job,
    run_job,
    sink_dir,
)
from bench.measure import Progress, read_progress
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy

__all__ = ["RECOVERY_MARK_EVERY", "kill_due", "no_kill_note", "recovery", "state_size"]

RECOVERY_MARK_EVERY = 256  # finer marks: a killed worker loses fewer counted records


def kill_due(
    emitted: int, records: int, keys: int, kill_at: float, checkpoints_after_fill: int
) -> bool:
    """Whether the recovery workload kills now: ``kill_at`` of the input is emitted, every
    key has been emitted once (the first ``keys`` records) and two checkpoints triggered
    after that have completed (so the restored state holds every key).

    >>> kill_due(400, 1000, 100, 0.4, 2), kill_due(400, 1000, 100, 0.4, 1)
    (True, False)
    >>> kill_due(500, 1000, 600, 0.4, 2)  # not every key in the state yet
    False
    """
    return emitted >= max(kill_at * records, keys) and checkpoints_after_fill >= 2


def recovery(
    records: int,
    keys: int,
    interval_ms: int,
    rate: float,
    opts: CairnOptions,
    work_dir: str,
    kill_at: float = 0.4,
    hot_fraction: float | None = None,
) -> dict[str, Any]:
    """Workload 3: SIGKILL one worker once the state holds every key and ``kill_at`` of the
    input is emitted (see :func:`kill_due`); time until output resumes, its phases, and
    records processed twice.

    The first ``keys`` records touch every key once (``CoveringKeysGenerator``); with
    ``hot_fraction`` the records after them update only that fraction of the keys
    (``HotKeysGenerator``, which keeps no list of every key: use it for large states)."""
    if opts.executor != "spark":
        raise ValueError("recovery kills a worker process: it needs the Spark executor")
    if records <= keys:
        raise ValueError(f"recovery needs --records > --keys ({records:,} <= {keys:,})")
    result = base_result("recovery", records, keys, interval_ms, rate, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = sink_dir(work_dir)
    gen = (
        CoveringKeysGenerator(keys)
        if hot_fraction is None
        else HotKeysGenerator(keys, hot_fraction)
    )
    source = DataGeneratorSource(gen, records, RateLimiterStrategy.per_second(rate))
    keyed_sum_job(env, source, ProgressSink(out, RECOVERY_MARK_EVERY), timed=False)
    state_at_kill: list[int] = []

    def maybe_kill(master: Any, seen: Observed) -> None:
        if seen.killed_at is not None:
            return
        sources = set(master.plan.source_tasks)
        emitted = sum(m.records_out for t, m in dict(master.metrics).items() if t in sources)
        if seen.filled_at is None:
            if emitted < keys:
                return
            seen.filled_at = time.time()
        after_fill = [
            c for c in list(seen.checkpoints.values()) if c.trigger_ms / 1000.0 > seen.filled_at
        ]
        pids = dict(master.worker_pids)
        if kill_due(emitted, records, keys, kill_at, len(after_fill)) and (
            len(pids) == opts.parallelism
        ):
            victim = pids[max(pids)]
            latest = max(seen.checkpoints.values(), key=lambda c: c.trigger_ms)
            state_at_kill.append(latest.state_size)
            seen.killed_at = time.time()
            os.kill(victim, signal.SIGKILL)

    seen = run_job(env, "bench-recovery", maybe_kill, storage_config=dict(opts.storage_config))
    files = read_progress(out)
    first_attempt = Progress.of(m for (_, a), m in files.items() if a == 0)
    fill_common(result, seen, first_attempt, records)
    result["note"] = None
    if hot_fraction is not None:
        result["hot_fraction"] = hot_fraction
    if seen.killed_at is None:
        result["note"] = no_kill_note(seen)
        return result
    result["state_size_at_kill_bytes"] = state_at_kill[0] if state_at_kill else None
    later = [m for (_, a), m in files.items() if a > 0]
    resumed = Progress.of(later).first_output if later else None
    result["recovery_s"] = None if resumed is None else round(resumed - seen.killed_at, 3)
    result.update(recovery_phases(seen, resumed))
    result["restore_initialization"] = seen.initialization
    processed = sum(m[-1][1] for m in files.values() if m)
    result["replayed_records"] = processed - records
    result["note"] = join(
        phases_note(result), f"replayed counted to +-{RECOVERY_MARK_EVERY * opts.parallelism}"
    )
    return result


def no_kill_note(seen: Observed) -> str:
    """Why no worker was killed, in figures: when the sources had emitted every key, and
    how many checkpoints triggered after that completed before the job ended.

    >>> seen = Observed(submitted=100.0, ended=110.0, filled_at=103.0)
    >>> print(no_kill_note(seen))  # doctest: +NORMALIZE_WHITESPACE
    no worker was killed (the job ended first): job ran 10.0 s, every key emitted at 3.0 s,
    0 checkpoints completed (0 triggered after that) of the 2 the kill waits for
    """
    filled = seen.filled_at
    after = [
        c for c in seen.checkpoints.values() if filled is not None and c.trigger_ms / 1e3 > filled
    ]
    fill = "never seen" if filled is None else f"at {filled - seen.submitted:.1f} s"
    return (
        f"no worker was killed (the job ended first): job ran {seen.ended - seen.submitted:.1f} s,"
        f" every key emitted {fill}, {len(seen.checkpoints)} checkpoints completed"
        f" ({len(after)} triggered after that) of the 2 the kill waits for"
    )


def recovery_phases(seen: Observed, resumed: float | None) -> dict[str, float]:
    """Seconds from the kill to: the failure detected (the job master restarts the job),
    every worker of the new attempt restored and running, and the first output of the new
    attempt — where seen. A worker that restored first may output before the last one runs.
    """
    kill = seen.killed_at or 0.0
    restart = next((t for t, e, _ in seen.events if e == "restart" and t >= kill), None)
    running = next(
        (t for t, e, p in seen.events if e == "running" and p and p > 0 and t >= kill), None
    )
    phases: dict[str, float] = {}
    if restart is not None:
        phases["recovery_detected_s"] = round(restart - kill, 3)
    if running is not None:
        phases["recovery_running_s"] = round(running - kill, 3)
    if resumed is not None:
        phases["recovery_first_output_s"] = round(resumed - kill, 3)
    return phases


def phases_note(result: dict[str, Any]) -> str | None:
    """The phases in words, each counted from the kill.

    >>> phases_note({"recovery_detected_s": 0.1, "recovery_running_s": 1.75,
    ...              "recovery_first_output_s": 1.6})
    'after the kill: failure detected 0.10 s, first output 1.60 s, all running 1.75 s'
    """
    phases = [
        ("failure detected", result.get("recovery_detected_s")),
        ("first output", result.get("recovery_first_output_s")),
        ("all running", result.get("recovery_running_s")),
    ]
    seen = sorted((t, name) for name, t in phases if t is not None)
    if not seen:
        return None
    return "after the kill: " + ", ".join(f"{name} {t:.2f} s" for t, name in seen)


def state_size(
    keys: int,
    records: int,
    interval_ms: int,
    opts: CairnOptions,
    work_dir: str,
    hot_fraction: float | None = None,
    rate: float | None = None,
) -> dict[str, Any]:
    """Workload 4: every key touched (record ``i`` has key ``i % keys``); checkpoint
    duration, bytes on the storage, and the throughput dip while asynchronous parts run.

    With ``hot_fraction`` the records after the first ``keys`` update only that fraction of
    the keys (``HotKeysGenerator``): what an incremental checkpoint adds per interval when
    1 % of the state changes, against the full state size, and the synchronous phase.
    With ``rate`` the source is paced at that many records/s (unthrottled otherwise): each
    interval then carries the same load, so checkpoint durations compare across storages."""
    result = base_result("state-size", records, keys, interval_ms, rate, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = sink_dir(work_dir)
    gen = (
        CoveringKeysGenerator(keys)
        if hot_fraction is None
        else HotKeysGenerator(keys, hot_fraction)
    )
    limit = RateLimiterStrategy.per_second(rate) if rate else RateLimiterStrategy.no_limit()
    keyed_sum_job(env, DataGeneratorSource(gen, records, limit), ProgressSink(out), timed=False)
    seen = run_job(
        env,
        f"bench-state-size-{keys}",
        on_poll=_sample_rss,
        storage_config=dict(opts.storage_config),
    )
    progress = Progress.of(read_progress(out).values())
    fill_common(result, seen, progress, records)
    if seen.worker_rss_peak:
        result["worker_rss_peak_bytes"] = seen.worker_rss_peak
    if interval_ms > 0:
        async_dip(result, seen, progress, records)
    if hot_fraction is not None:
        result["hot_fraction"] = hot_fraction
        _growth(result, seen, progress.time_reaching(keys))
    return result


def _growth(result: dict[str, Any], seen: Observed, filled: float | None) -> None:
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
    # Each one in trigger order: end-to-end ms, full state bytes, bytes this one added.
    result["hot_series"] = [
        [c.end_to_end_duration_ms, c.state_size, c.checkpointed_size] for c in after
    ]


def _sample_rss(master: Any, seen: Observed) -> None:
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
