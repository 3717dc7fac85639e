"""The job of the lakehouse driver-loss test, run as ``cairn run _lake_driver_loss_job.py --
<args>``: per-key sequences (paced) -> keyed sequence check -> a Delta sink (vertices
``delta: Writer``/``delta: Committer``) and an Iceberg sink (``iceberg: ...``), both
exactly-once, on the in-process executor (workers are threads of the driver).

Arguments: checkpoints delta_path catalog_dir iceberg_table faults_file records keys rate.
The job reads ``cairn.testing.faults`` from ``faults_file`` when it starts, so that a test can
aim the next fault at the next run while the command stays the same.
"""

from __future__ import annotations

import os
import sys

from cairn.datastream.connectors.delta import DeltaSink
from cairn.datastream.connectors.iceberg import IcebergSink
from cairn.testing.sequence_jobs import SequenceCheck
from tests.integration._delta_jobs import ROW, to_row
from tests.integration._iceberg_jobs import sqlite_catalog
from tests.integration.jobs import checkpointed_env, sequence_source


def main(argv: list[str]) -> None:
    checkpoints, delta_path, catalog_dir, table, faults_file = argv[:5]
    records, keys, rate = int(argv[5]), int(argv[6]), float(argv[7])
    faults = ""
    if os.path.exists(faults_file):
        with open(faults_file, encoding="utf-8") as f:
            faults = f.read().strip()
    conf = {"cairn.testing.faults": faults, "cairn.executor": "inprocess"}
    env = checkpointed_env(conf, parallelism=2, interval_ms=400, checkpoint_dir=checkpoints)
    rows = (
        sequence_source(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .map(to_row, output_type=ROW)
        .uid("to-row")
    )
    rows.sink_to(DeltaSink.for_row_data(delta_path, ROW).build()).name("delta").uid("delta")
    iceberg = IcebergSink(table, sqlite_catalog(catalog_dir), ROW)
    rows.sink_to(iceberg).name("iceberg").uid("iceberg")
    env.execute("lake-driver-loss")


if __name__ == "__main__":
    main(sys.argv[1:])
