"""pandas with the Table API: ``from_pandas``/``to_pandas`` and vectorized (pandas) aggregate
functions, in group windows and over a retracting group-by."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.table import (
    DataTypes,
    EnvironmentSettings,
    Schema,
    StreamTableEnvironment,
    TableEnvironment,
)
from cairn.table.expressions import col, lit
from cairn.table.udf import udaf
from cairn.table.window import Tumble


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    return t_env


def test_a_data_frame_round_trips_through_a_table() -> None:
    pdf = pd.DataFrame({"a": [1.5, 2.5, 3.5], "b": ["x", "y", "x"]})
    t_env = _t_env()
    table = t_env.from_pandas(pdf)
    assert [str(t) for t in table.get_schema().types] == ["DOUBLE", "STRING"]
    named = t_env.from_pandas(
        pdf,
        DataTypes.ROW(
            [DataTypes.FIELD("x", DataTypes.DOUBLE()), DataTypes.FIELD("y", DataTypes.STRING())]
        ),
    )
    assert named.get_schema().names == ["x", "y"]
    back = table.to_pandas().sort_values("a").reset_index(drop=True)
    pd.testing.assert_frame_equal(back, pdf)
    totals = table.group_by(col("b")).select(col("b"), col("a").sum.alias("s")).to_pandas()
    assert dict(zip(totals["b"], totals["s"], strict=True)) == {"x": 5.0, "y": 2.5}


def test_a_pandas_aggregate_gets_each_windows_values_as_a_series() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    events = [
        (1000, "Alice", 110.1),
        (4000, "Bob", 30.2),
        (3000, "Alice", 20.0),
        (7000, "Bob", 16.1),
    ]
    ds = env.from_collection(
        [(Instant.of_epoch_milli(t), n, p) for t, n, p in events],
        Types.ROW([Types.INSTANT(), Types.STRING(), Types.DOUBLE()]),
    )
    schema = (
        Schema.new_builder()
        .column_by_expression("ts", "CAST(f0 AS TIMESTAMP_LTZ(3))")
        .column("f1", DataTypes.STRING())
        .column("f2", DataTypes.DOUBLE())
        .watermark("ts", "ts - INTERVAL '3' SECOND")
        .build()
    )
    table = t_env.from_data_stream(ds, schema).alias("ts", "name", "price")
    seen: list[Any] = []

    @udaf(result_type=DataTypes.DOUBLE(), func_type="pandas")
    def mean_udaf(v: pd.Series) -> Any:
        seen.append(type(v))
        return v.mean()

    w = Tumble.over(lit(5).seconds).on(col("ts")).alias("w")
    result = (
        table.window(w).group_by(col("name"), col("w")).select(col("name"), mean_udaf(col("price")))
    )
    rows = sorted(tuple(r) for r in result.execute().collect())
    assert rows == [("Alice", 65.05), ("Bob", 16.1), ("Bob", 30.2)]


def test_a_pandas_aggregate_retracts_over_an_updating_input() -> None:
    t_env = _t_env()
    table = t_env.from_elements([("a", 1), ("a", 5), ("b", 2), ("a", 3)], ["k", "v"])
    latest = table.group_by(col("k")).select(col("k"), col("v").max.alias("top"))
    median = udaf(lambda v: v.median(), result_type=DataTypes.DOUBLE(), func_type="pandas")
    overall = latest.select(median(col("top")).alias("m")).to_pandas()
    assert overall["m"].tolist() == [3.5]  # the median of the final maxima 5 and 2
