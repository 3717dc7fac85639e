"""``ORDER BY`` / ``LIMIT`` / ``OFFSET`` in a streaming query: a Top-N over the whole result
with ``LIMIT`` (updating, its final view the sorted prefix), a temporal sort on a rowtime
attribute without (rows in time order, late rows dropped), and Flink's refusals."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import DataTypes, Schema, StreamTableEnvironment
from cairn.table.operators import INSERT
from cairn.table.plan import SortField
from cairn.table.sql.errors import SqlValidationError
from cairn.table.temporal_sort import TemporalSortFunction
from cairn.table.timestamps import epoch_millis
from cairn.testing.changelog import rows_view

from ._operator_harness import OperatorHarness

rng = random.Random(3)
# (key, value, time ms): times shuffled within 1.5 s of each other, all on time (watermark 2 s)
ROWS = [(f"k{i % 4}", rng.randrange(1000), i * 100 + rng.randrange(-700, 700)) for i in range(60)]


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _t_env() -> StreamTableEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    info = Types.ROW([Types.STRING(), Types.LONG(), Types.INSTANT()])
    ds = env.from_collection([(k, v, Instant.of_epoch_milli(t + 1000)) for k, v, t in ROWS], info)
    schema = (
        Schema.new_builder()
        .column("f0", DataTypes.STRING())
        .column("f1", DataTypes.BIGINT())
        .column_by_expression("ts", "CAST(f2 AS TIMESTAMP(3))")
        .watermark("ts", "ts - INTERVAL '2' SECOND")
        .build()
    )
    table = t_env.from_data_stream(ds, schema).select("f0", "f1", "ts").alias("k", "v", "ts")
    t_env.create_temporary_view("t", table)
    return t_env


def test_order_by_limit_offset_is_a_top_n_over_the_whole_result() -> None:
    t_env = _t_env()
    result = t_env.sql_query("SELECT k, v FROM t ORDER BY v DESC, k LIMIT 5 OFFSET 2")
    assert "Rank(" in result.explain()
    view = rows_view(result.execute().collect())
    ranked = sorted(((k, v) for k, v, _ in ROWS), key=lambda r: (-r[1], r[0]))
    assert view == Counter(ranked[2:7])


def test_order_by_rowtime_releases_rows_in_time_order() -> None:
    t_env = _t_env()
    result = t_env.sql_query("SELECT k, v, ts FROM t ORDER BY ts, v DESC")
    assert "TemporalSort(orderBy=[ts ASC, v DESC])" in result.explain()
    got = [(r[0], r[1], epoch_millis(r[2]) - 1000) for r in result.execute().collect()]
    assert got == sorted(ROWS, key=lambda r: (r[2], -r[1]))


def test_what_a_stream_cannot_sort_is_refused_where_it_is_written() -> None:
    t_env = _t_env()
    for sql, message in [
        ("SELECT k, v FROM t ORDER BY v", "Sort on a non-time-attribute field"),
        ("SELECT k, ts FROM t ORDER BY ts DESC", "Sort on a non-time-attribute field"),
        ("SELECT k FROM t LIMIT 3 OFFSET 1", "OFFSET needs ORDER BY"),
        ("SELECT k FROM t ORDER BY nope LIMIT 2", "ORDER BY takes the query's output columns"),
    ]:
        with pytest.raises(SqlValidationError, match=message) as refused:
            t_env.sql_query(sql)
        assert "line 1, column" in str(refused.value)


def test_a_late_row_is_dropped_and_the_state_is_empty_after_the_watermark() -> None:
    h = OperatorHarness(
        TemporalSortFunction(1, [SortField(0, False, False)]), key_selector=lambda r: 0
    )
    h.op.process_batch([(INSERT, ("b", 2_000)), (INSERT, ("a", 1_000)), (INSERT, ("c", 2_000))])
    h.op.process_watermark(1_500)
    h.op.process_batch([(INSERT, ("late", 1_200))])  # at or below the watermark: dropped
    h.op.process_watermark(5_000)
    assert [r for (_, r), _ in h.records()] == [("a", 1_000), ("c", 2_000), ("b", 2_000)]
    backend = h.op.backend  # type: ignore[attr-defined]
    assert len(backend.keys("temporal-sort")) == 0
