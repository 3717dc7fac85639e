"""Group windows of the Table API (``Tumble``, ``Slide``, ``Session``) on the in-process
executor: window assignment as a pure function, and whole jobs whose results are computed
independently from the input, with late rows dropped as Flink drops them."""

from __future__ import annotations

import random
from collections import defaultdict
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
from cairn.table.expressions import col, lit
from cairn.table.group_window import GroupWindowAggFunction
from cairn.table.operators import FieldsKeySelector
from cairn.table.timestamps import timestamp_of_millis
from cairn.table.window import Session, Slide, Tumble, windows_of

from ._operator_harness import OperatorHarness, snapshot_operator

EVENTS = [
    (1000, "Alice", 110.1),
    (4000, "Bob", 30.2),
    (3000, "Alice", 20.0),
    (2000, "Bob", 53.1),
    (5000, "Alice", 13.1),
    (3000, "Bob", 3.1),
    (7000, "Bob", 16.1),
    (10000, "Alice", 20.1),
]


class First(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[0])


def _table(events: list[tuple[int, str, float]], out_of_orderness_ms: int = 3000) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    ds = env.from_collection(events, Types.ROW([Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(out_of_orderness_ms)
    ).with_timestamp_assigner(First())
    table = t_env.from_data_stream(ds.assign_timestamps_and_watermarks(strategy))
    return table.select(
        col("f0").cast(DataTypes.TIMESTAMP(3)).alias("ts"),
        col("f1").alias("name"),
        col("f2").alias("price"),
    )


def _results(table: Any) -> list[tuple[Any, ...]]:
    rows = [(r.get_row_kind().short_string(), tuple(r)) for r in table.execute().collect()]
    assert {kind for kind, _ in rows} == {"+I"}, "a group window emits inserts only"
    return sorted(row for _, row in rows)


def _ms(t: Any) -> int:
    return (
        int(t.timestamp() * 1000)
        if t.tzinfo
        else int((t - t.__class__(1970, 1, 1)).total_seconds() * 1000)
    )


def test_windows_of_assigns_rows_as_flink_does() -> None:
    tumble = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    assert windows_of(tumble, 4999) == [(0, 5000)]
    assert windows_of(tumble, 5000) == [(5000, 10000)]
    slide = Slide.over(lit(5).seconds).every(lit(2).seconds).on(col("ts")).alias("w")
    assert windows_of(slide, 1000) == [(-2000, 3000), (0, 5000)]
    assert windows_of(slide, 4000) == [(0, 5000), (2000, 7000), (4000, 9000)]
    assert windows_of(Session.with_gap(lit(2).seconds).on("ts").alias("w"), 7) == [(7, 2007)]


@pytest.mark.parametrize("kind", ["tumble", "slide"])
def test_tumbling_and_sliding_windows_sum_what_falls_in_them(kind: str) -> None:
    rng = random.Random(kind)
    events = [
        (rng.randint(0, 30_000), rng.choice("abc"), float(rng.randint(1, 9))) for _ in range(300)
    ]
    events.sort()  # in order: no row is late
    table = _table(events)
    if kind == "tumble":
        w = Tumble.over(lit(4).seconds).on(col("ts")).alias("w")
    else:
        w = Slide.over(lit(6).seconds).every(lit(2).seconds).on(col("ts")).alias("w")
    result = (
        table.window(w)
        .group_by(col("name"), col("w"))
        .select(
            col("name"),
            col("price").sum.alias("total"),
            col("price").count.alias("n"),
            col("w").start,
            col("w").end,
        )
    )
    assert result.get_schema().names == ["name", "total", "n", "EXPR$0", "EXPR$1"]
    expected: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    for t, name, price in events:
        for start, end in windows_of(w, t):
            expected[(name, start, end)].append(price)
    got = {(name, _ms(s), _ms(e)): (total, n) for name, total, n, s, e in _results(result)}
    assert got == {k: (sum(v), len(v)) for k, v in expected.items()}


def test_session_windows_merge_rows_closer_than_the_gap() -> None:
    table = _table(EVENTS)
    w = Session.with_gap(lit(2).seconds).on(col("ts")).alias("w")
    result = (
        table.window(w)
        .group_by(table.name, col("w"))
        .select(
            table.name,
            table.price.sum.alias("total"),
            col("w").start.alias("s"),
            col("w").end.alias("e"),
        )
    )
    got = [(name, round(total, 3), _ms(s), _ms(e)) for name, total, s, e in _results(result)]
    # Alice: 1000, 3000, 5000 chain (each within 2 s of the last); 10000 alone.
    # Bob: 2000, 3000, 4000 chain; 7000 alone (3 s after 4000).
    assert got == sorted(
        [
            ("Alice", 143.2, 1000, 7000),
            ("Alice", 20.1, 10000, 12000),
            ("Bob", 86.4, 2000, 6000),
            ("Bob", 16.1, 7000, 9000),
        ]
    )


def _window_harness(w: Any, restore: Any = None) -> OperatorHarness:
    call = AggCall("sum", 2, DataTypes.DOUBLE(), DataTypes.DOUBLE())
    function = GroupWindowAggFunction(w, 0, [call], ["start"])
    return OperatorHarness(function, key_selector=FieldsKeySelector((1,)), restore=restore)


def _row(ms: int, key: str, value: float) -> tuple[int, tuple[Any, ...]]:
    return (0, (timestamp_of_millis(ms), key, value))


def test_a_window_fires_once_the_watermark_passes_and_late_rows_are_dropped() -> None:
    h = _window_harness(Tumble.over(lit(5).seconds).on(col("ts")).alias("w"))
    h.op.process_batch([_row(1000, "a", 1.0), _row(4999, "a", 2.0), _row(5000, "a", 4.0)])
    h.op.process_watermark(4998)
    assert h.records() == [], "[0, 5000) fires at 4999, not before"
    h.op.process_watermark(4999)
    assert [r for r, _ in h.records()] == [(0, ("a", timestamp_of_millis(0), 3.0))]
    h.op.process_batch([_row(4000, "a", 8.0), _row(6000, "a", 16.0)])  # 4000 is late now
    h.op.process_watermark(MAX_WATERMARK)
    assert [r for r, _ in h.records()][1:] == [(0, ("a", timestamp_of_millis(5000), 20.0))]


def test_the_batch_path_keeps_open_windows_across_a_snapshot_and_restore() -> None:
    """Stamped batches run through the generated code and its cache: a snapshot taken while
    windows are open holds them, and the restored operator goes on adding to them."""
    from cairn.runtime.eventtime.stamped import stamp

    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    call = AggCall("sum", 2, DataTypes.DOUBLE(), DataTypes.DOUBLE())

    def harness(restore: Any = None) -> OperatorHarness:
        function = GroupWindowAggFunction(w, 0, [call], ["start"], keys=(1,))
        return OperatorHarness(function, key_selector=FieldsKeySelector((1,)), restore=restore)

    def batch(*rows: tuple[int, str, float]) -> Any:
        return stamp([_row(*r) for r in rows], [r[0] for r in rows])

    h = harness()
    h.op.process_batch(batch((1000, "a", 1.0), (2000, "b", 2.0), (3000, "a", 4.0)))
    h.op.process_batch(batch((4000, "a", 8.0), (6000, "b", 16.0)))
    state, files = snapshot_operator(h.op)
    restored = harness(OperatorRestore(1, {SubtaskIndex(0): state}, files))
    restored.op.process_batch(batch((4500, "b", 32.0), (7000, "a", 64.0)))
    restored.op.process_watermark(MAX_WATERMARK)
    assert sorted(r for r, _ in restored.records()) == [
        (0, ("a", timestamp_of_millis(0), 13.0)),
        (0, ("a", timestamp_of_millis(5000), 64.0)),
        (0, ("b", timestamp_of_millis(0), 34.0)),
        (0, ("b", timestamp_of_millis(5000), 16.0)),
    ]
    assert h.records() == [], "nothing fires before the watermark"


def test_open_windows_survive_a_snapshot_and_restore() -> None:
    w = Session.with_gap(lit(2).seconds).on(col("ts")).alias("w")
    h = _window_harness(w)
    h.op.process_batch([_row(1000, "a", 1.0), _row(2000, "b", 2.0)])
    state, files = snapshot_operator(h.op)
    restored = _window_harness(w, restore=OperatorRestore(1, {SubtaskIndex(0): state}, files))
    restored.op.process_batch([_row(2500, "a", 4.0)])  # merges with the restored [1000, 3000)
    restored.op.process_watermark(MAX_WATERMARK)
    assert sorted(r for r, _ in restored.records()) == [
        (0, ("a", timestamp_of_millis(1000), 5.0)),
        (0, ("b", timestamp_of_millis(2000), 2.0)),
    ]


def test_window_mistakes_fail_when_the_query_is_built() -> None:
    table = _table(EVENTS)
    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    with pytest.raises(ValidationError, match="must be one of the group_by fields"):
        table.window(w).group_by(col("name")).select(col("name"))
    with pytest.raises(ValidationError, match="expects a time attribute"):
        table.window(Tumble.over(lit(5).seconds).on(col("price")).alias("w")).group_by(
            col("w")
        ).select(col("price").sum)
    with pytest.raises(ValidationError, match="needs an alias"):
        table.window(Tumble.over(lit(5).seconds).on(col("ts"))).group_by(col("name")).select(
            col("name")
        )
    with pytest.raises(ValidationError, match="cannot be selected"):
        table.window(w).group_by(col("name"), col("w")).select(col("w"))


def test_a_schema_declares_the_rowtime_and_its_watermark_as_flinks_examples_do() -> None:
    from cairn.common.time import Instant
    from cairn.table import Schema

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    rows = [(Instant.of_epoch_milli(t), name, price) for t, name, price in EVENTS]
    ds = env.from_collection(rows, Types.ROW([Types.INSTANT(), Types.STRING(), Types.FLOAT()]))
    schema = (
        Schema.new_builder()
        .column_by_expression("ts", "CAST(f0 AS TIMESTAMP(3))")
        .column("f1", DataTypes.STRING())
        .column("f2", DataTypes.FLOAT())
        .watermark("ts", "ts - INTERVAL '3' SECOND")
        .build()
    )
    table = t_env.from_data_stream(ds, schema).alias("ts", "name", "price")
    assert [str(t) for t in table.get_schema().types] == ["TIMESTAMP(3)", "STRING", "FLOAT"]
    assert "WatermarkAssigner(rowtime=[ts], watermark=[ts - 3000" in table.explain()
    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    result = table.window(w).group_by(table.name, col("w")).select(table.name, table.price.sum)
    got = [(name, round(total, 3)) for name, total in _results(result)]
    assert sorted(got) == [
        ("Alice", 13.1),
        ("Alice", 20.1),
        ("Alice", 130.1),
        ("Bob", 16.1),
        ("Bob", 86.4),
    ]
    bad = Schema.new_builder().column("f1", DataTypes.STRING()).watermark("f1", "f1").build()
    with pytest.raises(ValidationError, match="must be of type TIMESTAMP"):
        t_env.from_data_stream(ds, bad)
    odd = (
        Schema.new_builder()
        .column_by_expression("ts", "CAST(f0 AS TIMESTAMP(3))")
        .watermark("ts", "ts + INTERVAL '1' SECOND")
        .build()
    )
    with pytest.raises(
        ValidationError, match="Watermark expression 'ts \\+ INTERVAL '1' SECOND' is not"
    ):
        t_env.from_data_stream(ds, odd)


def test_a_window_counts_rows_with_a_literal_as_group_by_does() -> None:
    table = _table(EVENTS)
    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    result = table.window(w).group_by(col("name"), col("w")).select(col("name"), lit(1).count)
    assert _results(result) == [("Alice", 1), ("Alice", 1), ("Alice", 2), ("Bob", 1), ("Bob", 3)]


def test_the_rowtime_metadata_and_source_watermark_window_a_data_stream() -> None:
    """PyFlink's way to keep a DataStream's event time: the records' timestamps as the
    ``rowtime`` metadata column, the stream's own watermarks through ``SOURCE_WATERMARK()``."""
    from cairn.table import Schema

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    ds = env.from_collection(EVENTS, Types.ROW([Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(3000)
    ).with_timestamp_assigner(First())
    schema = (
        Schema.new_builder()
        .column_by_metadata("rowtime", DataTypes.TIMESTAMP_LTZ(3))
        .watermark("rowtime", "SOURCE_WATERMARK()")
        .build()
    )
    table = t_env.from_data_stream(ds.assign_timestamps_and_watermarks(strategy), schema)
    assert table.get_schema().names == ["f0", "f1", "f2", "rowtime"]
    assert "WatermarkAssigner" not in table.explain(), "the stream's watermarks flow on"
    w = Tumble.over(lit(5).seconds).on(col("rowtime")).alias("w")
    result = table.window(w).group_by(col("f1"), col("w")).select(col("f1"), col("f2").sum)
    got = sorted((name, round(total, 3)) for name, total in _results(result))
    assert got == [("Alice", 13.1), ("Alice", 20.1), ("Alice", 130.1), ("Bob", 16.1), ("Bob", 86.4)]
    rows = [tuple(r) for r in table.execute().collect()]
    assert sorted((_ms(r[3]), r[1]) for r in rows) == sorted((t, n) for t, n, _ in EVENTS)

    other = Schema.new_builder().column_by_metadata("offset", DataTypes.BIGINT()).build()
    with pytest.raises(ValidationError, match=r"(?s)Invalid metadata key 'offset'.*rowtime"):
        t_env.from_data_stream(ds, other)
    with pytest.raises(ValidationError, match="SOURCE_WATERMARK"):  # a DDL table has none
        t_env.execute_sql(
            "CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS SOURCE_WATERMARK())"
            " WITH ('connector' = 'datagen')"
        )
        t_env.from_path("t")


def test_the_source_idle_timeout_reaches_every_watermark_assigner() -> None:
    """``table.exec.source.idle-timeout``: each ``WATERMARK``'s strategy marks a subtask idle
    after that long without rows (Flink's key); it is no part of the uid; a bad value fails
    naming the key."""
    from cairn.common.configuration import Configuration
    from cairn.common.exceptions import ConfigurationError
    from cairn.table import EnvironmentSettings, TableEnvironment
    from cairn.table.plan import WatermarkAssigner
    from cairn.table.time_planner import source_idle_timeout_ms, with_idle_timeout
    from cairn.table.timestamps import watermark_strategy
    from cairn.table.translate import plan_uid

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.execute_sql(
        "CREATE TABLE t (ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
        " WITH ('connector' = 'datagen')"
    )
    plan = t_env.from_path("t").plan
    idle = with_idle_timeout(plan, 5000)
    assigners = [n for n in (idle, *idle.inputs) if isinstance(n, WatermarkAssigner)]
    assert [a.idle_timeout_ms for a in assigners] == [5000]
    assert plan_uid(idle) == plan_uid(plan)
    assert watermark_strategy(0, 1000, 5000).idle_timeout_ms == 5000
    assert watermark_strategy(0, 1000).idle_timeout_ms is None
    config = Configuration({"table.exec.source.idle-timeout": "5 s"})
    assert source_idle_timeout_ms(config) == 5000 and source_idle_timeout_ms(None) == 0
    with pytest.raises(ConfigurationError, match=r"table\.exec\.source\.idle-timeout"):
        source_idle_timeout_ms(Configuration({"table.exec.source.idle-timeout": "5 sx"}))
