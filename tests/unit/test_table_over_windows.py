"""Over windows of the Table API on the in-process executor and on an operator driven with
explicit watermarks: ROWS and RANGE frames, peers, late rows, and a snapshot in between."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cairn.common import Types, WatermarkStrategy
from cairn.common.time import Duration
from cairn.common.watermark_strategy import TimestampAssigner
from cairn.datastream import StreamExecutionEnvironment
from cairn.events import MAX_WATERMARK
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import DataTypes, StreamTableEnvironment, ValidationError
from cairn.table.analysis import AggCall
from cairn.table.expressions import CURRENT_ROW, UNBOUNDED_ROW, col, lit, row_interval
from cairn.table.operators import FieldsKeySelector
from cairn.table.over_window import OverAggFunction
from cairn.table.timestamps import timestamp_of_millis
from cairn.table.window import Over

from ._operator_harness import OperatorHarness, snapshot_operator


class First(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[0])


def _table(events: list[tuple[int, str, float]]) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    ds = env.from_collection(events, Types.ROW([Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(100_000)  # nothing is late: every row waits for the end of input
    ).with_timestamp_assigner(First())
    return t_env.from_data_stream(ds.assign_timestamps_and_watermarks(strategy)).select(
        col("f0").cast(DataTypes.TIMESTAMP(3)).alias("ts"),
        col("f1").alias("name"),
        col("f2").alias("price"),
    )


def _expected_rows(events: list[tuple[int, str, float]], preceding: int) -> list[tuple[str, float]]:
    out = []
    for name in {e[1] for e in events}:
        mine = sorted((e for e in events if e[1] == name), key=lambda e: e[0])
        for i in range(len(mine)):
            frame = mine[max(0, i - preceding) : i + 1]
            out.append((name, max(p for _, _, p in frame)))
    return sorted(out)


def test_a_rows_over_window_takes_each_rows_predecessors_in_event_time_order() -> None:
    rng = random.Random(3)
    events = [
        (t * 10, rng.choice("ab"), float(rng.randint(1, 99))) for t in rng.sample(range(500), 120)
    ]
    table = _table(events)
    w = (
        Over.partition_by(col("name"))
        .order_by(col("ts"))
        .preceding(row_interval(2))
        .following(CURRENT_ROW)
        .alias("w")
    )
    result = table.over_window(w).select(col("name"), col("price").max.over(col("w")))
    assert result.get_schema().names == ["name", "EXPR$0"]
    rows = [(r.get_row_kind().short_string(), tuple(r)) for r in result.execute().collect()]
    assert {k for k, _ in rows} == {"+I"}
    assert sorted(r for _, r in rows) == _expected_rows(events, 2)


def _over_harness(window: Any, restore: Any = None) -> OperatorHarness:
    calls = [
        AggCall("sum", 2, DataTypes.DOUBLE(), DataTypes.DOUBLE()),
        AggCall("count_star", -1, DataTypes.BIGINT(False)),
    ]
    function = OverAggFunction(window, 0, calls)
    return OperatorHarness(function, key_selector=FieldsKeySelector((1,)), restore=restore)


def _row(ms: int, key: str, value: float) -> tuple[int, tuple[Any, ...]]:
    return (0, (timestamp_of_millis(ms), key, value))


def _values(h: OperatorHarness) -> list[tuple[int, float, int]]:
    return [(_ms(r[1][0]), r[1][3], r[1][4]) for r, _ in h.records()]


def _ms(t: Any) -> int:
    return int((t - timestamp_of_millis(0)).total_seconds() * 1000)


def test_a_range_frame_gives_peers_one_result_and_drops_late_rows() -> None:
    w = Over.partition_by(col("k")).order_by(col("ts")).preceding(lit(1).seconds).alias("w")
    h = _over_harness(w)
    h.op.process_batch([_row(1000, "a", 1.0), _row(2000, "a", 2.0), _row(2000, "a", 4.0)])
    h.op.process_batch([_row(2500, "a", 8.0)])
    h.op.process_watermark(1999)
    assert _values(h) == [(1000, 1.0, 1)], "2000's rows wait for the watermark"
    h.op.process_watermark(2000)
    # peers at 2000 see each other and 1000 (within 1 s): 1 + 2 + 4
    assert _values(h)[1:] == [(2000, 7.0, 3), (2000, 7.0, 3)]
    h.op.process_batch([_row(1500, "a", 100.0)])  # behind the watermark: late
    h.op.process_watermark(MAX_WATERMARK)
    # 2500: the frame [1500, 2500] holds 2000's two rows and itself; 1000 left it
    assert _values(h)[3:] == [(2500, 14.0, 3)]


def test_an_unbounded_rows_frame_survives_a_snapshot() -> None:
    w = Over.partition_by(col("k")).order_by(col("ts")).preceding(UNBOUNDED_ROW).alias("w")
    h = _over_harness(w)
    h.op.process_batch([_row(1000, "a", 1.0), _row(2000, "a", 2.0)])
    h.op.process_watermark(1500)
    state, files = snapshot_operator(h.op)
    again = _over_harness(w, restore=OperatorRestore(1, {SubtaskIndex(0): state}, files))
    again.op.process_batch([_row(3000, "a", 4.0)])
    again.op.process_watermark(MAX_WATERMARK)
    assert _values(again) == [(2000, 3.0, 2), (3000, 7.0, 3)]


def test_over_window_mistakes_fail_when_the_query_is_built() -> None:
    table = _table([(1000, "a", 1.0)])
    w = Over.partition_by(col("name")).order_by(col("ts")).preceding(row_interval(2)).alias("w")
    with pytest.raises(ValidationError, match="needs an over window here"):
        table.over_window(w).select(col("price").max)
    with pytest.raises(ValidationError, match="Over window 'v' is not defined"):
        table.over_window(w).select(col("price").max.over(col("v")))
    by_price = Over.partition_by(col("name")).order_by(col("price")).preceding(row_interval(2))
    with pytest.raises(ValidationError, match="ordered by a time attribute"):
        table.over_window(by_price.alias("w")).select(col("price").max.over(col("w")))
