"""The job of the driver-loss tests, run as ``cairn run driver_loss_job.py -- <args>``: per-key
sequences (paced) -> keyed sequence check -> the exactly-once file sink and the exactly-once
JDBC sink into PostgreSQL.

Arguments: out_dir checkpoints jdbc_url user password table faults_file records keys rate
[master, or ``inprocess`` for the in-process executor]; a jdbc_url of ``-`` leaves the JDBC
sink out.
The job reads ``cairn.testing.faults`` from ``faults_file`` when it starts, so that a test can
aim the next fault at the next run while the command stays the same.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from cairn.common import Types
from cairn.common.serialization import Encoder
from cairn.datastream.connectors.file_system import FileSink
from cairn.datastream.connectors.jdbc import (
    JdbcConnectionOptions,
    JdbcExecutionOptions,
    JdbcSink,
)
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration.jobs import checkpointed_env, sequence_source

ROW = Types.ROW([Types.STRING(), Types.LONG(), Types.LONG()])


def to_row(line: str) -> tuple[str, int, int]:
    key, seq, total = line.split(",")
    return key, int(seq), int(total)


def main(argv: list[str]) -> None:
    out_dir, checkpoints, url, user, password, table, faults_file = argv[:7]
    records, keys, rate = int(argv[7]), int(argv[8]), float(argv[9])
    faults = ""
    if os.path.exists(faults_file):
        with open(faults_file, encoding="utf-8") as f:
            faults = f.read().strip()
    conf = {"cairn.testing.faults": faults}
    if len(argv) > 10 and argv[10] == "inprocess":  # workers as threads of the driver
        conf["cairn.executor"] = "inprocess"
    elif len(argv) > 10:
        conf["cairn.spark.master"] = argv[10]
    env = checkpointed_env(
        conf,
        parallelism=2,
        interval_ms=400,
        checkpoint_dir=checkpoints,
    )
    checked = (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
    )
    checked.sink_to(FileSink.for_row_format(out_dir, Encoder.simple_string_encoder()).build()).uid(
        "file-sink"
    )
    if url != "-":
        _to_postgres(checked, url, user, password, table)
    env.execute("driver-loss")


def _to_postgres(checked: Any, url: str, user: str, password: str, table: str) -> None:
    connection = (
        JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
        .with_url(url)
        .with_driver_name("org.postgresql.Driver")
        .with_user_name(user)
        .with_password(password)
        .build()
    )
    sql = f"INSERT INTO {table} (k, seq, total) VALUES (?, ?, ?)"
    execution = JdbcExecutionOptions.builder().with_batch_size(500).build()
    checked.map(to_row, output_type=ROW).uid("to-row").add_sink(
        JdbcSink.exactly_once_sink(sql, ROW, connection, execution)
    ).uid("jdbc-sink")


if __name__ == "__main__":
    main(sys.argv[1:])
