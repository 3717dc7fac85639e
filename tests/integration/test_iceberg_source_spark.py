"""IcebergSource on real Spark: a job writes an Iceberg table exactly once (IcebergSink),
then a bounded job on Spark reads it back whole, and a streaming job on Spark started at
the first snapshot reads every later append snapshot's rows once, checkpointed, until a
limit: the same rows the table holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cairn.common import WatermarkStrategy
from cairn.datastream.connectors.iceberg_source import IcebergSource
from tests.integration._iceberg_jobs import (
    iceberg_sequence_job,
    load,
    new_table,
    sqlite_catalog,
    table_lines,
)
from tests.integration.jobs import checkpointed_env, exactly_once_problems

pytest.importorskip("pyiceberg")

RECORDS, KEYS = 6_000, 6


@pytest.mark.spark
def test_spark_jobs_read_an_iceberg_table_bounded_and_incrementally(
    spark: Any, tmp_path: Path
) -> None:
    catalog, table = sqlite_catalog(str(tmp_path)), new_table()
    conf = {"cairn.executor": "spark"}
    iceberg_sequence_job(conf, catalog, table, records=RECORDS, keys=KEYS, rate=3_000).execute(
        "write"
    )
    written = table_lines(catalog, table)
    assert exactly_once_problems(written, RECORDS, KEYS) == []

    env = checkpointed_env(conf, parallelism=2)
    bounded = IcebergSource.for_row_data(table, catalog).build()
    with env.from_source(
        bounded, WatermarkStrategy.no_watermarks(), "ice"
    ).execute_and_collect() as rows:
        whole = [f"{r.k},{r.seq},{r.total}" for r in rows]
    assert sorted(whole) == sorted(written)

    snapshots = [s.snapshot_id for s in load(catalog, table).snapshots()]
    assert len(snapshots) > 1, "one snapshot per checkpoint: the run took several"
    first_rows = len(load(catalog, table).scan(snapshot_id=snapshots[0]).to_arrow())
    streaming = (
        IcebergSource.for_row_data(table, catalog)
        .streaming(True)
        .start_snapshot_id(snapshots[1])
        .monitor_interval_ms(200)
        .build()
    )
    env = checkpointed_env(conf, parallelism=2)
    stream = env.from_source(streaming, WatermarkStrategy.no_watermarks(), "ice-incremental")
    later = stream.execute_and_collect(limit=RECORDS - first_rows)
    got = [f"{r.k},{r.seq},{r.total}" for r in later]
    assert len(got) == len(set(got)) == RECORDS - first_rows
    assert set(got) <= set(written)
