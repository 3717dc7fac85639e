"""Processing-time attributes (``PROCTIME()``, ``col('pt').proctime``) and processing-time
group windows and window TVFs on the in-process executor. No sleep orders the events: the
source sends a batch only once the windows of the previous one fired."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import StreamTableEnvironment, ValidationError
from cairn.table.expressions import col, lit
from cairn.table.schema import Schema
from cairn.table.window import Session, Tumble

from ._proctime_jobs import Signal, WaitingSource, fired_rows

ROW = Types.ROW_NAMED(["name", "v"], [Types.STRING(), Types.INT()])


def _env() -> tuple[StreamExecutionEnvironment, StreamTableEnvironment]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    return env, StreamTableEnvironment.create(env)


def _proctime_table(t_env: StreamTableEnvironment, stream: Any) -> Any:
    schema = Schema.new_builder().column_by_expression("pt", "PROCTIME()").build()
    return t_env.from_data_stream(stream, schema)


def test_proctime_prints_as_flink_and_reads_the_wall_clock(capsys: Any) -> None:
    env, t_env = _env()
    table = _proctime_table(t_env, env.from_collection([("a", 1), ("b", 2)], ROW))
    table.print_schema()
    assert capsys.readouterr().out == (
        "(\n  `name` STRING,\n  `v` INT,\n  `pt` TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*\n)\n"
    )
    by_field = t_env.from_data_stream(
        env.from_collection([("a", 1)], ROW), col("name"), col("pt").proctime
    )
    assert str(by_field.get_schema().columns[1].data_type).endswith("*PROCTIME*")
    before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    rows = list(table.execute().collect())
    after = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    slack = datetime.timedelta(milliseconds=1)
    assert sorted(tuple(r[:2]) for r in rows) == [("a", 1), ("b", 2)]
    assert all(before - slack <= r[2] <= after for r in rows)
    # a computation on it is a plain TIMESTAMP_LTZ(3), no attribute any more
    later = table.select((col("pt") + lit(1).seconds).alias("x"))
    assert str(later.get_schema().columns[0].data_type).startswith("TIMESTAMP_LTZ(3)")
    assert "PROCTIME" not in str(later.get_schema().columns[0].data_type)


def test_proctime_tumbling_windows_fire_on_the_clock(tmp_path: Path) -> None:
    env, t_env = _env()
    signals = str(tmp_path)
    first = [("a", 1), ("a", 2), ("b", 3)]
    second = [("a", 10), ("c", 20)]
    source = env.add_source(WaitingSource([first, second], signals), type_info=ROW)
    table = _proctime_table(t_env, source)
    result = (
        table.window(Tumble.over(lit(300).millis).on(col("pt")).alias("w"))
        .group_by(col("w"), col("name"))
        .select(
            col("name"),
            col("v").count.alias("n"),
            col("v").sum.alias("total"),
            col("w").start.alias("s"),
            col("w").end.alias("e"),
            col("w").proctime.alias("p"),
        )
    )
    assert str(result.get_schema().columns[5].data_type).endswith("*PROCTIME*")
    out = t_env.to_data_stream(result).map(Signal(signals, 1))
    rows = [tuple(r) for r in out.execute_and_collect()]
    assert fired_rows(signals) == 5  # every row was counted by a window that fired
    totals: dict[str, int] = {}
    for name, _, total, s, e, p in rows:
        assert e - s == datetime.timedelta(milliseconds=300)
        assert p == e - datetime.timedelta(milliseconds=1)
        totals[name] = totals.get(name, 0) + total
    assert totals == {"a": 13, "b": 3, "c": 20}
    # the second batch went out after the first batch's windows fired: later windows
    first_ends = [e for name, _, total, s, e, _ in rows if name == "b"]
    second_starts = [s for name, _, total, s, e, _ in rows if name == "c"]
    assert min(second_starts) >= max(first_ends) - datetime.timedelta(milliseconds=1)


def test_pending_proctime_windows_do_not_fire_at_the_end_of_a_bounded_input() -> None:
    env, t_env = _env()
    table = _proctime_table(t_env, env.from_collection([("a", 1), ("b", 2)], ROW))
    hourly = (
        table.window(Tumble.over(lit(1).hours).on(col("pt")).alias("w"))
        .group_by(col("w"), col("name"))
        .select(col("name"), col("v").sum)
    )
    assert list(hourly.execute().collect()) == []  # as Flink: the timers are quiesced
    t_env.create_temporary_view("t", table)
    tvf = t_env.sql_query(
        "SELECT name, COUNT(*) AS n, window_start, window_end, window_time"
        " FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(pt), INTERVAL '1' HOUR))"
        " GROUP BY window_start, window_end, window_time, name"
    )
    types = [str(c.data_type) for c in tvf.get_schema().columns]
    assert types[2:] == [
        "TIMESTAMP(3) NOT NULL",
        "TIMESTAMP(3) NOT NULL",
        "TIMESTAMP_LTZ(3) NOT NULL *PROCTIME*",
    ]
    assert list(tvf.execute().collect()) == []


def test_ddl_proctime_and_what_a_proctime_attribute_refuses(tmp_path: Path) -> None:
    env, t_env = _env()
    t_env.execute_sql(
        "CREATE TABLE g (n INT, pt AS PROCTIME()) WITH ('connector' = 'datagen',"
        " 'number-of-rows' = '3')"
    )
    described = {r[0]: (r[1], r[2], r[4]) for r in t_env.execute_sql("DESCRIBE g").collect()}
    assert described["pt"] == ("TIMESTAMP_LTZ(3) *PROCTIME*", "FALSE", "AS PROCTIME()")
    sessions = (
        t_env.from_path("g")
        .window(Session.with_gap(lit(1).hours).on(col("pt")).alias("w"))
        .group_by(col("w"))
        .select(col("n").count)
    )
    assert list(sessions.execute().collect()) == []  # bounded: the open session never fires
    with pytest.raises(ValidationError, match="processing-time attribute: 'pt'"):
        t_env.execute_sql(
            "CREATE TABLE h (n INT, pt AS PROCTIME(), WATERMARK FOR pt AS pt)"
            " WITH ('connector' = 'datagen')"
        )
    table = _proctime_table(t_env, env.from_collection([("a", 1)], ROW))
    with pytest.raises(ValidationError, match="must not replace an existing field"):
        t_env.from_data_stream(env.from_collection([("a", 1)], ROW), col("name").proctime)
    with pytest.raises(ValidationError, match="no proctime property"):
        t_env.from_data_stream(env.from_collection([("a", 1)], ROW)).add_columns(
            lit(datetime.datetime(2020, 1, 1)).alias("ts")
        ).window(Tumble.over(lit(1).hours).on(col("ts")).alias("w")).group_by(col("w")).select(
            col("w").proctime
        )
    assert table is not None
