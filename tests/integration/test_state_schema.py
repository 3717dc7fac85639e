"""Restoring checks each keyed state against the new job's descriptor (``cairn.state.schema``).

A job keeps a running sum in ``ValueState`` of ``Types.LONG()`` and stops with a savepoint,
whose metadata records the state's kind and type. Restored into a job declaring the state as
``Types.STRING()`` or as map state, the job fails at restore with one clear error naming the
operator uid, the state and both types; an untyped descriptor (pickled values) restores and
the sums continue.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.handles import KeyedStateSchema
from cairn.checkpoint.storage import load_checkpoint
from cairn.common import Configuration
from cairn.common.exceptions import JobExecutionException
from cairn.common.job_status import JobStatus
from cairn.common.restart_strategy import RestartStrategies
from cairn.common.typeinfo import Types
from cairn.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from cairn.datastream.state import MapStateDescriptor, StateDescriptor, ValueStateDescriptor
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.jobs import check_to_files, sequence_source
from tests.integration.waits import committed_lines

RECORDS, KEYS = 20_000, 20


class RunningSum(KeyedProcessFunction):  # type: ignore[type-arg]
    def __init__(self, descriptor: StateDescriptor) -> None:
        self.descriptor = descriptor

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.descriptor, MapStateDescriptor):
            self.sum = runtime_context.get_map_state(self.descriptor)
        else:
            self.sum = runtime_context.get_state(self.descriptor)

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
        total = (self.sum.value() or 0) + value[1]
        self.sum.update(total)
        yield f"{value[0]},{value[1]},{total}"


def _job(out: str, descriptor: StateDescriptor, rate: int | None, savepoint: str | None) -> Any:
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    if savepoint:
        conf.set_string("execution.savepoint.path", savepoint)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.set_restart_strategy(RestartStrategies.no_restart())
    check_to_files(
        sequence_source(env, KEYS, RECORDS, rate), RunningSum(descriptor), "running-sum", out
    )
    return env


@pytest.mark.timeout(300)
def test_incompatible_state_fails_at_restore_naming_uid_state_and_types(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    client = _job(out, ValueStateDescriptor("sum", Types.LONG()), 5_000, None).execute_async("v1")
    assert client.wait_for_status(JobStatus.RUNNING, 60)
    committed_lines(out, interval=0.05)
    savepoint = client.stop_with_savepoint(False, str(tmp_path / "sp")).result(timeout=120)
    op = load_checkpoint(savepoint).metadata.operators["running-sum"]
    schemas = [s.keyed_schema for s in op.subtasks.values() if s.keyed]
    assert schemas and all(s == {"sum": KeyedStateSchema("value", ("Long",))} for s in schemas)

    for descriptor, why in [
        (ValueStateDescriptor("sum", Types.STRING()), "the value type is Long in the snapshot"),
        (MapStateDescriptor("sum", Types.STRING(), Types.LONG()), "value state of Long in the"),
    ]:
        with pytest.raises(JobExecutionException) as err:
            _job(str(tmp_path / "bad"), descriptor, None, savepoint).execute("v2-bad")
        message = str(err.value)
        assert "operator 'running-sum': keyed state 'sum' cannot be restored" in message
        assert why in message, message

    _job(out, ValueStateDescriptor("sum", None), None, savepoint).execute("v2-untyped")
    last: dict[str, tuple[int, int]] = {}
    for line in read_visible_lines(out):
        key, seq, total = line.split(",")
        last[key] = max(last.get(key, (0, 0)), (int(seq), int(total)))
    per_key = RECORDS // KEYS
    assert set(last.values()) == {(per_key, per_key * (per_key + 1) // 2)}
