"""SQL's time windows against the Table API forms they stand for — the same ``explain()``
text and the same rows: window TVFs and legacy group windows (``planner.window_aggregate``,
the window named ``w$`` as Flink's SQL names it) and OVER aggregates
(``planner.over_aggregate``). The source is the
one of Flink's windowing examples: ``from_data_stream`` with a ``Schema`` whose ``ts`` is
a computed column with a watermark."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import DataTypes, Schema, StreamTableEnvironment, Table
from cairn.table.expressions import UNBOUNDED_RANGE, col, lit, row_interval
from cairn.table.sql.errors import SqlValidationError
from cairn.table.window import Over, Session, Slide, Tumble

_RNG = random.Random(11)
EVENTS = [
    (t * 500, _RNG.choice(["Alice", "Bob"]), float(_RNG.randint(1, 99)))
    for t in _RNG.sample(range(40), 40)
]


def _source() -> tuple[StreamTableEnvironment, Table]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    ds = env.from_collection(
        [(Instant.of_epoch_milli(ms), n, p) for ms, n, p in EVENTS],
        type_info=Types.ROW([Types.INSTANT(), Types.STRING(), Types.DOUBLE()]),
    )
    table = t_env.from_data_stream(
        ds,
        Schema.new_builder()
        .column_by_expression("ts", "CAST(f0 AS TIMESTAMP(3))")
        .column("f1", DataTypes.STRING())
        .column("f2", DataTypes.DOUBLE())
        .watermark("ts", "ts - INTERVAL '30' SECOND")
        .build(),
    ).alias("ts", "name", "price")
    t_env.create_temporary_view("t", table)
    return t_env, table


def _rows(table: Table) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in table.execute().collect()), key=str)


def _same(from_sql: Table, from_api: Table) -> list[tuple[Any, ...]]:
    assert from_sql.get_schema().names == from_api.get_schema().names
    assert from_sql.explain() == from_api.explain()
    rows = _rows(from_sql)
    assert rows == _rows(from_api)
    return rows


def test_a_rows_over_window_in_sql_is_the_table_apis_over_window() -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(
        "SELECT name, price, MAX(price) OVER (PARTITION BY name ORDER BY ts"
        " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t"
    )
    w = Over.partition_by(col("name")).order_by(col("ts")).preceding(row_interval(2)).alias("w")
    from_api = t.over_window(w).select(
        col("name"), col("price"), col("price").max.over(col("w")).alias("EXPR$2")
    )
    rows = _same(from_sql, from_api)
    assert len(rows) == len(EVENTS)


def test_a_named_range_window_shared_by_two_aggregates() -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(
        "SELECT name, SUM(price) OVER w AS total, COUNT(*) OVER w FROM t"
        " WINDOW w AS (PARTITION BY name ORDER BY ts"
        " RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW)"
    )
    w = Over.partition_by(col("name")).order_by(col("ts")).preceding(lit(2).seconds).alias("w")
    from_api = t.over_window(w).select(
        col("name"),
        col("price").sum.over(col("w")).alias("total"),
        col("price").count.over(col("w")).alias("EXPR$2"),
    )
    assert from_sql.explain().replace("COUNT(*)", "COUNT(price)") == from_api.explain()
    assert _rows(from_sql) == _rows(from_api)


def test_an_unbounded_over_window_and_flinks_default_frame() -> None:
    t_env, t = _source()
    w = Over.order_by(col("ts")).preceding(UNBOUNDED_RANGE).alias("w")
    from_api = t.over_window(w).select(col("ts"), col("price").min.over(col("w")).alias("m"))
    for frame in ("RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", ""):
        from_sql = t_env.sql_query(f"SELECT ts, MIN(price) OVER (ORDER BY ts {frame}) AS m FROM t")
        _same(from_sql, from_api)


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        (
            "SELECT MAX(price) OVER (ORDER BY ts),\n MIN(price) OVER (PARTITION BY name"
            " ORDER BY ts) FROM t",
            "must use the same window",
            2,
            2,
        ),
        ("SELECT MAX(price) OVER w FROM t", "Window 'w' not found", 1, 8),
        ("SELECT MAX(price) OVER (ORDER BY ts DESC) FROM t", "ordered ascending", 1, 34),
        ("SELECT MAX(price) OVER (PARTITION BY name) FROM t", "ordered by one time", 1, 8),
        (
            "SELECT MAX(price) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM t",
            "ends at CURRENT ROW",
            1,
            66,
        ),
        ("SELECT MAX(price) OVER (ORDER BY name) FROM t", "ordered by a time attribute", 1, 8),
    ],
)
def test_over_windows_cairn_does_not_run_are_refused_with_their_place(
    sql: str, message: str, line: int, column: int
) -> None:
    t_env, _ = _source()
    with pytest.raises(SqlValidationError) as caught:
        t_env.sql_query(sql)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)


def test_a_tumble_tvf_grouped_by_its_window_is_the_table_apis_tumble_window() -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(
        "SELECT window_start, window_end, name, SUM(price), window_time AS wt"
        " FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
        " GROUP BY window_start, window_end, name"
    )
    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w$")
    from_api = (
        t.window(w)
        .group_by(col("w$"), col("name"))
        .select(
            col("w$").start.alias("window_start"),
            col("w$").end.alias("window_end"),
            col("name"),
            col("price").sum.alias("EXPR$3"),
            col("w$").rowtime.alias("wt"),
        )
    )
    rows = _same(from_sql, from_api)
    totals: dict[tuple[int, str], float] = {}
    for ms, name, price in EVENTS:
        totals[(ms // 5000, name)] = totals.get((ms // 5000, name), 0.0) + price
    assert sorted((r[0].second // 5, r[2], r[3]) for r in rows) == sorted(
        (k, n, v) for (k, n), v in totals.items()
    )


def test_a_hop_tvf_takes_its_slide_before_its_size_as_flink_does() -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(
        "SELECT window_start, window_end, COUNT(price) AS n"
        " FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))"
        " GROUP BY window_start, window_end"
    )
    w = Slide.over(lit(6).seconds).every(lit(2).seconds).on(col("ts")).alias("w$")
    from_api = (
        t.window(w)
        .group_by(col("w$"))
        .select(
            col("w$").start.alias("window_start"),
            col("w$").end.alias("window_end"),
            col("price").count.alias("n"),
        )
    )
    rows = _same(from_sql, from_api)
    assert {(r[1] - r[0]).seconds for r in rows} == {6}


@pytest.mark.parametrize(
    ("sql", "window", "properties"),
    [
        (
            "SELECT name, TUMBLE_START(ts, INTERVAL '5' SECOND), COUNT(price) AS n,"
            " TUMBLE_END(ts, INTERVAL '5' SECOND) AS e"
            " FROM t GROUP BY TUMBLE(ts, INTERVAL '5' SECOND), name",
            Tumble.over(lit(5).seconds),
            ("start", "end"),
        ),
        (
            "SELECT name, HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND),"
            " COUNT(price) AS n, HOP_ROWTIME(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS e"
            " FROM t GROUP BY name, HOP(ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND)",
            Slide.over(lit(6).seconds).every(lit(2).seconds),
            ("start", "rowtime"),
        ),
        (
            "SELECT name, SESSION_START(ts, INTERVAL '1' SECOND), COUNT(price) AS n,"
            " SESSION_END(ts, INTERVAL '1' SECOND) AS e"
            " FROM t GROUP BY SESSION(ts, INTERVAL '1' SECOND), name",
            Session.with_gap(lit(1).seconds),
            ("start", "end"),
        ),
    ],
)
def test_legacy_group_windows_and_their_start_end_rowtime_functions(
    sql: str, window: Any, properties: tuple[str, str]
) -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(sql)
    first, last = (getattr(col("w$"), p) for p in properties)
    from_api = (
        t.window(window.on(col("ts")).alias("w$"))
        .group_by(col("w$"), col("name"))
        .select(col("name"), first.alias("EXPR$1"), col("price").count.alias("n"), last.alias("e"))
    )
    rows = _same(from_sql, from_api)
    assert rows


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        (
            "SELECT COUNT(*) FROM TABLE(SESSION(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
            " GROUP BY window_start, window_end, name",
            "groups by the session's PARTITION BY columns: none, got name",
            1,
            83,
        ),
        (
            "SELECT * FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '7' SECOND,"
            " INTERVAL '1' MINUTE))",
            "integral multiple of its step",
            1,
            21,
        ),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t PARTITION BY name, DESCRIPTOR(ts),"
            " INTERVAL '5' SECOND))",
            "TUMBLE takes no PARTITION BY",
            1,
            34,
        ),
        (
            "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(name), INTERVAL '5' SECOND))"
            " GROUP BY window_start, window_end",
            "requires the timecol to be a time attribute",
            1,
            28,
        ),
        (
            "SELECT TUMBLE_START(ts, INTERVAL '5' SECOND), COUNT(*) FROM t GROUP BY name",
            "needs GROUP BY that window",
            1,
            8,
        ),
        (
            "SELECT TUMBLE_START(ts, INTERVAL '9' SECOND) FROM t"
            " GROUP BY TUMBLE(ts, INTERVAL '5' SECOND)",
            "differs from the query's group window",
            1,
            62,
        ),
        ("SELECT COUNT(*) FROM t GROUP BY TUMBLE(ts)", "TUMBLE takes (ts, size)", 1, 33),
        (
            "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
            " WHERE window_end > ts GROUP BY window_start, window_end",
            "window_end is a group window's property: it cannot be used in WHERE",
            1,
            88,
        ),
        (
            "SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE t, ts, INTERVAL '5' SECOND))"
            " GROUP BY window_start, window_end",
            "DESCRIPTOR(ts)",
            1,
            44,
        ),
    ],
)
def test_group_windows_cairn_does_not_run_are_refused_with_their_place(
    sql: str, message: str, line: int, column: int
) -> None:
    t_env, _ = _source()
    with pytest.raises(SqlValidationError) as caught:
        t_env.sql_query(sql)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)


def test_a_create_table_watermark_is_the_time_attribute_of_a_window_tvf() -> None:
    t_env, _ = _source()
    t_env.execute_sql(
        "CREATE TABLE src (k INT, v INT, ts TIMESTAMP(3),"
        " WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)"
        " WITH ('connector' = 'datagen', 'number-of-rows' = '20')"
    )
    query = (
        "SELECT window_start, k, COUNT(*) AS n"
        " FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
        " GROUP BY window_start, window_end, k"
    )
    plan = t_env.explain_sql(query).splitlines()
    assert "TumblingGroupWindow('w$, ts, 5000)" in plan[2]
    assert "WatermarkAssigner(rowtime=[ts], watermark=[ts - 3000" in plan[3]
    assert 0 < sum(r[2] for r in t_env.sql_query(query).execute().collect()) <= 20


def test_having_filters_a_group_windows_rows_as_the_table_apis_filter_does() -> None:
    t_env, t = _source()
    from_sql = t_env.sql_query(
        "SELECT name, TUMBLE_END(ts, INTERVAL '5' SECOND) AS e, SUM(price) AS total FROM t"
        " GROUP BY name, TUMBLE(ts, INTERVAL '5' SECOND) HAVING SUM(price) > 100"
    )
    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w$")
    from_api = (
        t.window(w)
        .group_by(col("name"), col("w$"))
        .select(col("name"), col("w$").end.alias("e"), col("price").sum.alias("total"))
        .filter(col("total") > 100)
    )
    rows = _same(from_sql, from_api)
    assert rows and all(r[2] > 100 for r in rows)
