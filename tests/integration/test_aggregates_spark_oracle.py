"""Grouping sets, DISTINCT and FILTER aggregates on Cairn against Spark SQL over the same
rows: the final multiset of Cairn's changelog (in-process, parallelism 2) must equal Spark's
result rows (``GROUPING_ID`` numbers its bits as Flink's, the first column highest)."""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest

from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment

pytestmark = pytest.mark.spark

_RND = random.Random(23)
ROWS = [
    (
        i,
        _RND.choice(["a", "b", "c", None]),
        _RND.choice([None, 0, 1, 2, 3, 4]),
        _RND.randrange(0, 20_000),
    )
    for i in range(400)
]

AGGREGATES = (
    "COUNT(*), SUM(p), COUNT(v), COUNT(DISTINCT v), SUM(DISTINCT v),"
    " COUNT(*) FILTER (WHERE p < 10000), COUNT(DISTINCT v) FILTER (WHERE p >= 10000),"
    " MIN(p) FILTER (WHERE v IS NULL), MAX(v)"
)
QUERIES = [
    f"SELECT k, v, {AGGREGATES}, GROUPING_ID(k, v) FROM t GROUP BY CUBE (k, v)",
    f"SELECT k, v, {AGGREGATES}, GROUPING(v) FROM t GROUP BY ROLLUP (k, v)",
    f"SELECT k, {AGGREGATES} FROM t GROUP BY GROUPING SETS ((k), ())",
    f"SELECT k, {AGGREGATES} FROM t GROUP BY k",
]


def _cairn(query: str) -> collections.Counter[tuple[Any, ...]]:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    t = t_env.from_elements(
        ROWS,
        DataTypes.ROW(
            [
                DataTypes.FIELD("id", DataTypes.BIGINT()),
                DataTypes.FIELD("k", DataTypes.STRING()),
                DataTypes.FIELD("v", DataTypes.INT()),
                DataTypes.FIELD("p", DataTypes.BIGINT()),
            ]
        ),
    )
    t_env.create_temporary_view("t", t)
    view: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for row in t_env.sql_query(query).execute().collect():
        kind = row.get_row_kind().short_string()
        view[tuple(row)] += 1 if kind in ("+I", "+U") else -1
    return +view


@pytest.fixture(scope="module")
def spark_t(spark: Any) -> Any:
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("k", StringType()),
            StructField("v", IntegerType()),
            StructField("p", LongType()),
        ]
    )
    spark.createDataFrame(ROWS, schema).createOrReplaceTempView("t")
    return spark


@pytest.mark.parametrize("query", QUERIES)
def test_the_aggregate_gives_spark_sqls_rows(spark_t: Any, query: str) -> None:
    expected = collections.Counter(tuple(r) for r in spark_t.sql(query).collect())
    got = _cairn(query)
    assert got == expected
    assert len(got) > 3
