"""The fault campaign's job, run on the driver host as ``python bench/chaos_job.py <spec.json>``:
paced per-key sequences -> keyed sequence check (per-key sequence numbers and running sums in
keyed state) -> exactly-once files on S3 and an exactly-once JDBC sink into PostgreSQL.

Invariant: the command is the same for every run of one campaign job (a rerun after a driver
loss resumes the lost run); what may change between runs is only the faults file, which the
job reads when it starts (``cairn.testing.faults``).

The spec (JSON): ``out`` (an s3:// URL), ``checkpoints`` (s3:// or hdfs://), ``jdbc`` (url,
user, password, table; absent: no JDBC sink), ``records``, ``keys``, ``rate`` (records/s;
null: unthrottled), ``unaligned``, ``backend`` (``hashmap`` or ``rocksdb``: incremental),
``interval_ms``, ``faults_file``, ``stall`` (``[every_s, for_s]``: the sequence check sleeps
``for_s`` every ``every_s``; absent: never) and ``conf`` (more configuration keys: the
master, S3, HDFS).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from cairn.common import Configuration, Types, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import (
    CheckpointingMode,
    StreamExecutionEnvironment,
)
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.testing.sequence_jobs import SequenceCheck, SequenceGenerator

ROW = Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()])


def to_row(line: str) -> tuple[str, int, int]:
    key, seq, total = line.split(",")
    return key, int(seq), int(total)


class StallingSequenceCheck(SequenceCheck):
    """``SequenceCheck`` that sleeps ``for_s`` every ``every_s`` (a slow call, a GC pause):
    records queue up in front of it meanwhile, so an unaligned barrier overtakes them and
    a restore replays in-flight data (the ``replay`` fault point needs some). It sleeps
    rather than spins: the campaign's machine has no CPU to spare."""

    def __init__(self, every_s: float, for_s: float) -> None:
        self.every_s, self.for_s = every_s, for_s
        self.next_stall = 0.0

    def process_element(self, value: tuple[str, int], ctx: Any) -> Iterator[str]:
        now = time.monotonic()
        if now >= self.next_stall:
            if self.next_stall:
                time.sleep(self.for_s)
            self.next_stall = now + self.every_s
        yield from super().process_element(value, ctx)


def build(spec: dict[str, Any]) -> StreamExecutionEnvironment:
    faults = ""
    if os.path.exists(spec["faults_file"]):
        with open(spec["faults_file"], encoding="utf-8") as f:
            faults = f.read().strip()
    configuration = Configuration()
    conf = {
        **spec["conf"],
        "cairn.testing.faults": faults,
        "state.backend.type": spec["backend"],
        "execution.checkpointing.incremental": str(spec["backend"] == "rocksdb").lower(),
        "execution.checkpointing.dir": spec["checkpoints"],
    }
    for key, value in conf.items():
        configuration.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.enable_checkpointing(spec["interval_ms"], CheckpointingMode.EXACTLY_ONCE)
    cp = env.get_checkpoint_config()
    if spec["unaligned"]:
        cp.enable_unaligned_checkpoints()
    cp.set_checkpoint_timeout(spec.get("checkpoint_timeout_ms", 20_000))
    cp.set_tolerable_checkpoint_failure_number(spec.get("tolerable_failures", 5))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(100_000, 200))
    source = DataGeneratorSource(
        SequenceGenerator(spec["keys"]),
        spec["records"],
        RateLimiterStrategy.per_second(spec["rate"])
        if spec["rate"] is not None
        else RateLimiterStrategy.no_limit(),
    )
    checked = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "sequence")
        .uid("sequence-source")
        .key_by(lambda r: r[0])
        .process(StallingSequenceCheck(*spec["stall"]) if spec.get("stall") else SequenceCheck())
        .uid("sequence-check")
    )
    checked.sink_to(
        FileSink.for_row_format(spec["out"], Encoder.simple_string_encoder()).build()
    ).uid("file-sink")
    jdbc = spec.get("jdbc")
    if jdbc:
        connection = (
            JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url(jdbc["url"])
            .with_driver_name("org.postgresql.Driver")
            .with_user_name(jdbc["user"])
            .with_password(jdbc["password"])
            .build()
        )
        sql = f"INSERT INTO {jdbc['table']} (k, seq, total) VALUES (?, ?, ?)"
        execution = JdbcExecutionOptions.builder().with_batch_size(500).build()
        checked.map(to_row, output_type=ROW).uid("to-row").add_sink(
            JdbcSink.exactly_once_sink(sql, ROW, connection, execution)
        ).uid("jdbc-sink")
    return env


def main(argv: list[str]) -> None:
    # The driver's log (restarts, failed checkpoints) is the campaign's record of a run.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with open(argv[0], encoding="utf-8") as f:
        spec = json.load(f)
    build(spec).execute(spec.get("name", "chaos"))


if __name__ == "__main__":
    main(sys.argv[1:])
