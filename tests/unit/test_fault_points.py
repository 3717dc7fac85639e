"""The ``alignment`` fault point: it fires while a task holds a barrier from some of its
input channels and not yet from all, and the job restarts from the last checkpoint exactly
once (in-process executor, aligned and unaligned checkpoints)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.common import Configuration, WatermarkStrategy
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.serialization import Encoder
from cairn.datastream import CheckpointingMode, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.connectors.file_system import FileSink
from cairn.testing.sequence_jobs import read_visible_lines


@pytest.mark.parametrize("unaligned", [False, True])
def test_a_kill_during_alignment_restarts_the_job_exactly_once(
    tmp_path: Path, unaligned: bool
) -> None:
    marker, out = tmp_path / "fired", tmp_path / "out"
    configuration = Configuration()
    configuration.set_string("cairn.executor", "inprocess")
    configuration.set_string(
        "cairn.testing.faults", f"point=alignment,attempt=0,subtask=1,marker={marker}"
    )
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    env.enable_checkpointing(100, CheckpointingMode.EXACTLY_ONCE)
    if unaligned:
        env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 50))
    n = 400
    source = DataGeneratorSource(lambda i: i, n, RateLimiterStrategy.per_second(4000))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .uid("src")
        .key_by(lambda i: i % 7)
        .map(lambda i: str(i))
        .uid("map")
        .sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
        .uid("sink")
    )
    client = env.execute_async("alignment fault")
    client.get_job_execution_result(timeout=120)
    assert client.job_master.restarts == 1
    landed = marker.read_text()
    # Two source subtasks feed each keyed subtask: the second barrier was still to come.
    assert landed.startswith("alignment of ") and "#1 " in landed, landed
    assert "(checkpoint None)" not in landed, landed  # the checkpoint being aligned
    assert sorted(read_visible_lines(str(out)), key=int) == [str(i) for i in range(n)]
