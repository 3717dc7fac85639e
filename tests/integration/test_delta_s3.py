"""The Delta sink on S3 (a real SeaweedFS): workers killed between the checkpoint's
completion and the commit and right after it; the table read back by a DeltaSource job
equals the failure-free output, each checkpoint one version."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from cairn.common import WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.delta_source import DeltaSource
from tests.integration._delta_jobs import delta_sequence_job, seaweed_options, table_lines
from tests.integration.jobs import GLOBAL_COMMIT_KILLS, exactly_once_problems

pytest.importorskip("deltalake")
pytestmark = [pytest.mark.s3, pytest.mark.slow]

RECORDS, KEYS = 120_000, 20
_tables = itertools.count()


def test_exactly_once_into_a_delta_table_on_s3(seaweed: Any) -> None:
    path = seaweed.url(f"delta-{next(_tables)}")
    options = seaweed_options(seaweed)
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": GLOBAL_COMMIT_KILLS,
    }
    env = delta_sequence_job(conf, path, records=RECORDS, keys=KEYS, storage_options=options)
    client = env.execute_async("delta-s3")
    client.get_job_execution_result(timeout=300)
    assert client.job_master.restarts == 3
    assert exactly_once_problems(table_lines(path, options), RECORDS, KEYS) == []

    from deltalake import DeltaTable

    history = DeltaTable(path, storage_options=options).history()
    checkpoints = [h["cairn.checkpoint"] for h in history if "cairn.checkpoint" in h]
    assert len(checkpoints) == len(set(checkpoints))

    read = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    read.set_parallelism(1)
    source = DeltaSource.for_bounded_row_data(path).with_storage_options(options).build()
    with read.from_source(
        source, WatermarkStrategy.no_watermarks(), "delta"
    ).execute_and_collect() as rows:
        lines = [f"{r.k},{r.seq},{r.total}" for r in rows]
    assert exactly_once_problems(lines, RECORDS, KEYS) == []
