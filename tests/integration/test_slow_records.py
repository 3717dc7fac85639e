"""Barriers between records when records are slow, on real Spark: a map making a synchronous
20 ms call per record, chained to its source, keeps its checkpoints at their 1 s pace (each
within twice the interval) and its output exactly once; a source batch stops growing once
its work passes the batch time budget, so a checkpoint trigger waits for a record or two,
not for a thousand."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cairn.common import WatermarkStrategy
from cairn.datastream.connectors.number_seq import NumberSequenceSource
from cairn.datastream.functions import MapFunction
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jobs import checkpointed_env, file_sink

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("registry_dir")]

RECORDS = 600  # 12 s of 20 ms calls
SLEEP_S = 0.020
INTERVAL_MS = 1_000


class SlowCall(MapFunction):
    """A synchronous call per record (a lookup in a remote service, say)."""

    def map(self, value: int) -> int:
        time.sleep(SLEEP_S)
        return value


def test_a_slow_chained_map_keeps_checkpoints_at_their_pace(spark: Any, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    env = checkpointed_env(
        {"cairn.executor": "spark"},
        parallelism=1,
        interval_ms=INTERVAL_MS,
        checkpoint_dir=str(tmp_path / "chk"),
        restarts=0,
    )
    (
        env.from_source(
            NumberSequenceSource(0, RECORDS - 1), WatermarkStrategy.no_watermarks(), "numbers"
        )
        .uid("numbers")
        .map(SlowCall())
        .uid("slow-call")
        .key_by(lambda v: v % 7)
        .map(str)
        .uid("to-text")
        .sink_to(file_sink(out))
        .uid("sink")
    )
    client = env.execute_async("slow-records")
    client.get_job_execution_result(timeout=180)
    stats = client.get_checkpoint_statistics()
    assert stats is not None
    durations = stats.summary.end_to_end_duration
    # Before time-bounded batches: the first checkpoint waited behind 1,024 x 20 ms batches
    # (about 40 s) and at most one completed in the job's 12 s.
    assert durations.count >= 5, stats.counts
    assert durations.max <= 2 * INTERVAL_MS, durations
    assert stats.counts.failed == 0
    lines = read_visible_lines(out)
    assert sorted(int(line) for line in lines) == list(range(RECORDS)), "each record once"
