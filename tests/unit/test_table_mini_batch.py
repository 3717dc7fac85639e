"""``table.exec.mini-batch.*``: a group aggregate that buffers its input and emits one change
per key per bundle, with the same final result as the per-record path; its bundle is emitted
by size, latency, watermark, barrier and end of input, never held in a snapshot; bad option
values fail naming the option; ``explain`` shows Flink's ``MiniBatchAssigner``."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cairn.common.exceptions import ConfigurationError
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment
from cairn.table.analysis import AggCall
from cairn.table.mini_batch_agg import MiniBatchGroupAggFunction
from cairn.table.operators import GroupAggFunction, fields_key

from ._operator_harness import OperatorHarness, snapshot_operator

MINI_BATCH = {
    "table.exec.mini-batch.enabled": "true",
    "table.exec.mini-batch.allow-latency": "2 s",
    "table.exec.mini-batch.size": "7",
}


def _t_env(conf: dict[str, str], parallelism: int = 1) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    for key, value in conf.items():
        t_env.get_config().set(key, value)
    return t_env


def _changes(t_env: TableEnvironment, sql: str, rows: list[tuple[Any, ...]]) -> list[Any]:
    schema = DataTypes.ROW(
        [
            DataTypes.FIELD("id", DataTypes.BIGINT()),
            DataTypes.FIELD("k", DataTypes.STRING()),
            DataTypes.FIELD("v", DataTypes.INT()),
        ]
    )
    t_env.create_temporary_view("t", t_env.from_elements(rows, schema))
    return [(r.get_row_kind().short_string(), tuple(r)) for r in t_env.execute_sql(sql).collect()]


def _folded(changes: list[Any], n_keys: int) -> dict[Any, Any]:
    """The final table of an upsert changelog keyed by its first ``n_keys`` columns."""
    table: dict[Any, Any] = {}
    for kind, row in changes:
        key = row[:n_keys]
        if kind in ("+I", "+U"):
            table[key] = row
        else:
            assert table.pop(key) == row, (kind, row)
    return table


def _rows(n: int, seed: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    keys = ["a", "b", "c", "d", None]
    return [(i, rnd.choice(keys), rnd.choice([None, *range(8)])) for i in range(n)]


# The inner aggregate's -U/+U make the outer one retract: MIN/MAX with retraction, DISTINCT,
# FILTER, AVG, SUM and COUNT all see both kinds.
NESTED = """
SELECT m, COUNT(*) AS n, MIN(s) AS lo, MAX(s) AS hi, SUM(c) AS total,
       COUNT(DISTINCT c) AS dc, AVG(s) FILTER (WHERE c > 2) AS big, MAX(DISTINCT m2) AS mm
FROM (SELECT k, MAX(v) AS m, SUM(v) AS s, COUNT(v) AS c, MIN(v) AS m2 FROM t GROUP BY k)
GROUP BY m
"""


@pytest.mark.parametrize("seed", [0, 1])
def test_mini_batch_ends_in_the_per_record_result_with_fewer_changes(seed: int) -> None:
    rows = _rows(60, seed)
    plain = _changes(_t_env({}, 2), NESTED, rows)
    batched = _changes(_t_env(MINI_BATCH, 2), NESTED, rows)
    assert _folded(batched, 1) == _folded(plain, 1)
    assert {k for k, _ in batched} >= {"+I", "-U", "+U"}  # retractions reached the outer one
    assert len(batched) < len(plain)


def test_a_flush_emits_at_most_one_change_per_key() -> None:
    """One bundle for the whole input (size and latency far away): one ``+I`` per key."""
    conf = {**MINI_BATCH, "table.exec.mini-batch.size": "100000"}
    rows = _rows(200, 3)
    changes = _changes(_t_env(conf), "SELECT k, COUNT(*), MAX(v) FROM t GROUP BY k", rows)
    assert [kind for kind, _ in changes] == ["+I"] * 5
    assert _folded(changes, 1) == _folded(
        _changes(_t_env({}), "SELECT k, COUNT(*), MAX(v) FROM t GROUP BY k", rows), 1
    )


def _count_max() -> tuple[AggCall, ...]:
    return (
        AggCall("count_star", -1, DataTypes.BIGINT(False)),
        AggCall("max", 1, DataTypes.INT(), DataTypes.INT()),
    )


def _harness(function: Any, restore: OperatorRestore | None = None) -> OperatorHarness:
    return OperatorHarness(function, restore=restore, key_selector=fields_key([0]))


def _mini(size: int = 100) -> MiniBatchGroupAggFunction:
    return MiniBatchGroupAggFunction(_count_max(), (0,), latency_ms=2000, size=size)


def test_the_bundle_goes_out_by_size_latency_and_watermark() -> None:
    h = _harness(_mini(size=4))
    h.op.process_batch([(0, ("a", 1)), (0, ("a", 5)), (0, ("b", 2))])
    assert h.records() == []
    assert h.op.next_timer_ms() == 2000  # the next multiple of the latency (clock at 1000)
    h.op.process_batch([(0, ("a", 3)), (0, ("b", 9))])  # the 4th record fills the bundle
    assert [r for r, _ in h.records()] == [(0, ("a", 3, 5)), (0, ("b", 1, 2))]
    del h.batches[:]
    h.clock.advance(1000)
    h.op.on_processing_time(h.clock.now_ms())  # (b, 9) waited for the latency
    assert [r for r, _ in h.records()] == [(1, ("b", 1, 2)), (2, ("b", 2, 9))]
    assert h.op.next_timer_ms() is None
    del h.batches[:]
    h.op.process_batch([(1, ("a", 5)), (3, ("a", 1)), (0, ("c", 4))])
    h.op.process_watermark(500)
    assert [r for r, _ in h.records()] == [(1, ("a", 3, 5)), (2, ("a", 1, 3)), (0, ("c", 1, 4))]
    assert h.watermarks == [500]


def test_a_retraction_of_every_row_deletes_the_group_and_unseen_retractions_are_ignored() -> None:
    h = _harness(_mini())
    h.op.process_batch([(0, ("a", 1)), (3, ("z", 1))])
    h.op.finish()
    h.op.process_batch([(3, ("a", 1)), (0, ("a", 7)), (3, ("a", 7)), (3, ("a", 7))])
    h.op.finish()
    assert [r for r, _ in h.records()] == [(0, ("a", 1, 1)), (3, ("a", 1, 1))]


def test_a_checkpoint_takes_no_bundle_and_restores_into_either_path() -> None:
    h = _harness(_mini())
    h.op.process_batch([(0, ("a", 1)), (0, ("a", 5)), (0, ("b", 2))])
    h.op.prepare_snapshot_pre_barrier(1)  # before the barrier: the bundle goes out
    assert [r for r, _ in h.records()] == [(0, ("a", 2, 5)), (0, ("b", 1, 2))]
    state, files = snapshot_operator(h.op)
    for function in (_mini(), GroupAggFunction(_count_max(), keys=(0,))):
        again = _harness(function, OperatorRestore(1, {SubtaskIndex(0): state}, files))
        again.op.process_batch([(0, ("a", 9))])
        again.op.finish()
        assert [r for r, _ in again.records()] == [(1, ("a", 2, 5)), (2, ("a", 3, 9))]


def test_explain_shows_the_mini_batch_assigner() -> None:
    t_env = _t_env(MINI_BATCH)
    t_env.execute_sql(
        "CREATE TABLE src (k STRING, v INT, ts TIMESTAMP(3),"
        " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen')"
    )
    plan = t_env.explain_sql("SELECT k, COUNT(*) FROM src GROUP BY k")
    optimized = plan.split("== Optimized Logical Plan ==")[1]
    assert "MiniBatchAssigner(interval=[2000ms], mode=[ProcTime])" in optimized
    lines = [line.strip("+- :") for line in optimized.strip().splitlines()]
    assert lines[0].startswith("GroupAggregate(groupBy=[k]")
    assert lines.index("MiniBatchAssigner(interval=[2000ms], mode=[ProcTime]) changelogMode=[I]")


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"table.exec.mini-batch.size": "5000"}, "allow-latency must be greater than 0 ms"),
        ({"table.exec.mini-batch.allow-latency": "1 s"}, "size must be greater than 0"),
        (
            {"table.exec.mini-batch.allow-latency": "1 s", "table.exec.mini-batch.size": "0"},
            "table.exec.mini-batch.size must be greater than 0",
        ),
    ],
)
def test_mini_batch_without_a_latency_or_a_size_fails_naming_the_option(
    conf: dict[str, str], message: str
) -> None:
    t_env = _t_env({"table.exec.mini-batch.enabled": "true", **conf})
    with pytest.raises(ConfigurationError, match=message):
        _changes(t_env, "SELECT k, COUNT(*) FROM t GROUP BY k", _rows(3, 0))
