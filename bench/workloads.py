"""The Cairn side of the benchmarks: build each workload's job, run it, measure it.

Invariant: a run returns (and ``main`` prints, as its last stdout line) one JSON object with
the fields of :data:`bench.RESULT_FIELDS` plus :data:`bench.EXTRA_FIELDS`, exactly the shape
``bench/peers/run_peer.py`` prints for the peers; every figure comes from the sinks' files
and the job master's checkpoint statistics, never from the wall time of the whole process.
The throughput and latency workloads live here; recovery and state size in
:mod:`bench.state_workloads`, the common job parts in :mod:`bench.jobs`, the checkpoint
storage (``file://`` or a SeaweedFS S3 server) in :mod:`bench.storage`.

Run one measurement::

    python -m bench.workloads --workload keyed-sum --records 2000000 --keys 10000 \\
        --checkpoint-interval-ms 1000
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from bench import empty_result
from bench.cairn_functions import LatencySink, ProgressSink, TimedKeyedValuesGenerator
from bench.jobs import (
    CairnOptions,
    Observed,
    async_dip,
    base_result,
    bench_environment,
    cairn_versions,
    fill_common,
    join,
    keyed_sum_job,
    run_job,
    sink_dir,
)
from bench.measure import Progress, merge_latency, read_progress
from bench.state_workloads import RECOVERY_MARK_EVERY, recovery, state_size
from bench.storage import STORAGES, bench_storage
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy

__all__ = [
    "RECOVERY_MARK_EVERY",
    "CairnOptions",
    "bench_environment",
    "cairn_versions",
    "run_job",
    "run_workload",
]


# ---- the throughput and latency workloads -------------------------------------------------


def keyed_sum(
    records: int, keys: int, interval_ms: int, opts: CairnOptions, work_dir: str
) -> dict[str, Any]:
    """Workload 1: unthrottled keyed sum over ``keys`` uniform keys; steady records/s."""
    result = base_result("keyed-sum", records, keys, interval_ms, None, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = sink_dir(work_dir)
    keyed_sum_job(
        env, DataGeneratorSource.keyed_values(records, keys), ProgressSink(out), timed=False
    )
    seen = run_job(env, "bench-keyed-sum", storage_config=dict(opts.storage_config))
    progress = Progress.of(read_progress(out).values())
    fill_common(result, seen, progress, records)
    if interval_ms > 0:
        async_dip(result, seen, progress, records)
    return result


def overhead(
    records: int, keys: int, interval_ms: int, opts: CairnOptions, work_dir: str
) -> dict[str, Any]:
    """Checkpointing's cost: the keyed sum with ``interval_ms`` checkpoints and without,
    in one Spark session after a warm-up job, in the order with, without, without, with (a
    linear drift of a shared machine falls on both alike). ``steady_records_per_s`` is the
    mean of the two checkpointed runs; ``overhead_pct`` = 1 - that / the mean without."""
    result = base_result("overhead", records, keys, interval_ms, None, opts)
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
    result = base_result("latency", records, keys, interval_ms, rate, opts)
    env = bench_environment(opts, interval_ms, os.path.join(work_dir, "checkpoints"))
    out = sink_dir(work_dir)
    source = DataGeneratorSource(
        TimedKeyedValuesGenerator(keys, rate), records, RateLimiterStrategy.per_second(rate)
    )
    keyed_sum_job(env, source, LatencySink(out, warmup_s), timed=True)
    seen = run_job(env, "bench-latency", storage_config=dict(opts.storage_config))
    progress = Progress.of(read_progress(out).values())
    fill_common(result, seen, progress, records)
    _write_checkpoint_timeline(seen, os.path.join(out, "checkpoints.json"))
    summary = merge_latency(out)
    if summary is not None:
        result.update(
            latency_p50_ms=round(summary.p50_ms, 2),
            latency_p99_ms=round(summary.p99_ms, 2),
            latency_p999_ms=round(summary.p999_ms, 2),
            latency_max_ms=round(summary.max_ms, 2),
        )
        result["note"] = join(
            result["note"],
            f"{summary.count:,} records timed, first "
            f"{summary.skipped:,} ({warmup_s:g} s warm-up) not",
        )
    _marker_figures(result, seen)
    return result


def _marker_figures(result: dict[str, Any], seen: Observed) -> None:
    """With ``--conf metrics.latency.interval=N``: the latency markers' figures at the sink
    (source emission -> sink, skipping the functions), the largest over its subtasks; with
    ``metrics.latency.history-size`` above the markers a run sends, over the whole run."""
    sink = [r for r in seen.latency_reports if r.scope.operator_id == "discarding-sink"]
    if sink:
        result.update(
            marker_p50_ms=round(max(r.stats.median for r in sink), 2),
            marker_p99_ms=round(max(r.stats.p99 for r in sink), 2),
            marker_max_ms=round(max(r.stats.max for r in sink), 2),
        )


def _write_checkpoint_timeline(seen: Observed, path: str) -> None:
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
    """Run one Cairn measurement in this process and return its result object; with
    ``opts.storage == "s3"`` a SeaweedFS server holds the checkpoints for the run.

    >>> run_workload("keyed-sum", 20_000, 100, 1000)["steady_records_per_s"] > 0  # doctest: +SKIP
    True
    """
    opts = opts or CairnOptions()
    work_dir = opts.keep_dir or tempfile.mkdtemp(prefix=f"cairn-bench-{workload}-")
    os.makedirs(work_dir, exist_ok=True)
    try:
        with bench_storage(opts.storage, work_dir) as target:
            opts = dataclasses.replace(opts, storage_root=target.root, storage_config=target.config)
            result = _run_one(
                workload, records, keys, interval_ms, rate, opts, warmup_s, work_dir, hot_fraction
            )
        result["storage"] = opts.storage
        if opts.min_pause_ms > 0 and interval_ms > 0:
            result["note"] = join(
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
            records,
            keys,
            interval_ms or 1000,
            _need_rate(rate, workload),
            opts,
            work_dir,
            hot_fraction=hot_fraction,
        )
    if workload == "state-size":
        return state_size(keys, records, interval_ms, opts, work_dir, hot_fraction, rate)
    raise ValueError(f"unknown workload {workload!r}")


def _need_rate(rate: float | None, workload: str) -> float:
    if not rate or rate <= 0:
        raise ValueError(f"the {workload} workload needs --rate > 0")
    return rate


def _key_value(text: str) -> tuple[str, str]:
    """``--conf`` text as a pair.

    >>> _key_value("metrics.latency.interval=1000")
    ('metrics.latency.interval', '1000')
    """
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--conf needs KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


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
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="records/s (latency, recovery; state-size: paced, else unthrottled)",
    )
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
        help="state-size, recovery: after the first --keys records (every key once), "
        "update only this fraction of the keys",
    )
    parser.add_argument(
        "--storage",
        choices=STORAGES,
        default="file",
        help="checkpoint storage: file:// under the work dir, or a server started for the run "
        "(s3: SeaweedFS, hdfs: MiniDFSCluster, gcs: fake-gcs-server, azure: Azurite)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a configuration key of the job (repeatable), e.g. metrics.latency.interval=1000",
    )
    args = parser.parse_args(argv)
    opts = CairnOptions(
        config=tuple(_key_value(c) for c in args.conf),
        parallelism=args.parallelism,
        executor=args.executor,
        master=args.master,
        keep_dir=args.keep_dir,
        min_pause_ms=args.min_pause_ms,
        state_backend=args.state_backend,
        incremental=args.incremental,
        storage=args.storage,
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
