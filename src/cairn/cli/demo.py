"""``cairn demo``: an exactly-once stateful job on local Spark that survives a killed worker.

Invariant: the demo verifies its own output (every key's values arrive as 1, 2, 3, ... exactly
once, and running sums match) and exits non-zero if anything was lost or duplicated.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time

from cairn.checkpoint.stats import CheckpointStatsSnapshot
from cairn.common import Configuration, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.observability.tables import stats_table
from cairn.testing.sequence_jobs import (
    SequenceCheck,
    SequenceGenerator,
    check_sequence_lines,
    read_visible_lines,
)


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(
    records: int,
    keys: int,
    parallelism: int,
    rate: int,
    output: str | None,
    kill: bool,
    master: str | None,
) -> int:
    keys = max(parallelism, keys - keys % parallelism)  # one source subtask per key
    output = output or tempfile.mkdtemp(prefix="cairn-demo-")
    data_dir = os.path.join(output, "data")
    checkpoint_dir = os.path.join(output, "checkpoints")
    conf = Configuration()
    conf.set_string("cairn.progress", "true")
    if master:
        conf.set_string("cairn.spark.master", master)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage("file://" + checkpoint_dir)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))

    source = DataGeneratorSource(
        SequenceGenerator(keys), records, RateLimiterStrategy.per_second(rate)
    )
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "sequence source")
        .uid("sequence-source")
        .key_by(lambda record: record[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .name("per-key sequence check")
        .sink_to(FileSink.for_row_format(data_dir, Encoder.simple_string_encoder()).build())
        .uid("file-sink")
    )
    _say(
        f"Cairn demo: {records:,} records over {keys} keys, parallelism {parallelism}, "
        f"{rate:,} records/s, a checkpoint every second, exactly-once file sink -> {data_dir}"
    )
    _say("Starting local Spark and the job ...")
    from cairn.deploy.job_master_client import job_master_of
    from cairn.deploy.spark_session import get_or_create_spark

    get_or_create_spark(master, parallelism, {}).sparkContext.setLogLevel("FATAL")
    started = time.monotonic()
    client = env.execute_async("cairn-demo")
    master_ = job_master_of(client)
    if kill:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not master_.view.ended:
            view = master_.view
            latest = view.latest_checkpoint_id
            sources = set(master_.plan.source_tasks)
            emitted = sum(m.records_out for t, m in view.metrics.items() if t in sources)
            # Kill mid-run: after a completed checkpoint, with most of the input still to come.
            if (
                latest is not None
                and latest >= 2
                and emitted >= records // 4
                and len(view.worker_pids) == parallelism
            ):
                victim = max(view.worker_pids)
                pid = view.worker_pids[victim]
                if emitted >= records * 0.9:
                    _say("\n>>> the job is almost done; not killing a worker this time")
                    break
                _say(
                    f"\n>>> checkpoint {latest} completed; killing worker {victim} "
                    f"(Spark Python worker pid {pid}) with SIGKILL"
                )
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.1)
    client.get_job_execution_result()
    elapsed = time.monotonic() - started
    print(file=sys.stderr, flush=True)
    report = check_sequence_lines(read_visible_lines(data_dir))
    problems = report.missing_or_duplicated(keys, records)
    snapshot = client.get_checkpoint_statistics() or CheckpointStatsSnapshot.empty()
    _say(f"\nJob finished in {elapsed:.1f} s with {master_.restarts} restart(s).")
    _say(stats_table(snapshot))
    ok = report.ok and not problems and report.lines == records
    _say(
        f"\nOutput: {report.lines:,} lines (expected {records:,}); "
        f"out-of-order or repeated values: {len(report.violations)}; "
        f"wrong running sums: {len(report.bad_sums)}; keys with loss or duplicates: "
        f"{len(problems)}"
    )
    _say(
        "EXACTLY-ONCE VERIFIED: nothing lost, nothing duplicated, per-key order kept."
        if ok
        else "EXACTLY-ONCE VIOLATED: " + "; ".join(problems[:5] + report.violations[:5])
    )
    return 0 if ok else 1
