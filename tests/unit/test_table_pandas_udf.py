"""Vectorized (pandas) scalar functions in the Table API on the in-process executor: one
``pandas.Series`` per argument, a batch of rows per call (at most
``python.fn-execution.arrow.batch.size``), results checked against the declared type, in
``select``, ``where`` and SQL, next to general functions."""

from __future__ import annotations

import datetime
import re
import traceback
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from cairn.common import Row
from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment, ValidationError
from cairn.table.expressions import col
from cairn.table.udf import ScalarFunction, udf


def _t_env(parallelism: int = 1, batch_size: int | None = None) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    if batch_size is not None:
        t_env.get_config().set("python.fn-execution.arrow.batch.size", str(batch_size))
    return t_env


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in table.execute().collect()]


@udf(result_type=DataTypes.STRING(), func_type="pandas")
def dtype_of(s: pd.Series) -> pd.Series:
    """Each row gets the dtype of the Series its batch arrived in."""
    return pd.Series([str(s.dtype)] * len(s))


def test_ints_with_nulls_stay_ints_in_select_and_where() -> None:
    @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    def plus_one(x: pd.Series) -> pd.Series:
        return x + 1

    table = _t_env().from_elements(
        [(1, "a"), (None, "b"), (3, "c"), (10, "d")],
        DataTypes.ROW(
            [DataTypes.FIELD("a", DataTypes.BIGINT()), DataTypes.FIELD("k", DataTypes.STRING())]
        ),
    )
    result = table.where(plus_one(col("a")) < 5).select(
        col("k"), plus_one(col("a")).alias("p"), dtype_of(col("a")).alias("d")
    )
    rows = sorted(_rows(result))
    # the filter dropped the NULL (plus_one(NULL) < 5 is not TRUE): numpy's int64, as PyFlink
    assert rows == [("a", 2, "int64"), ("c", 4, "int64")]
    assert all(type(r[1]) is int for r in rows)
    everything = sorted(_rows(table.select(col("k"), plus_one(col("a")), dtype_of(col("a")))))
    # a batch with a NULL: pandas' nullable Int64, the NULL kept, no float in between (the
    # source's first batches are small, time-bounded ones: other rows may come without it)
    assert [row[:2] for row in everything] == [("a", 2), ("b", None), ("c", 4), ("d", 11)]
    assert everything[1][2] == "Int64"
    assert {row[2] for row in everything} <= {"Int64", "int64"}
    assert all(type(row[1]) is int for row in everything if row[1] is not None)


def test_strings_doubles_decimals_and_timestamps_round_trip_with_their_types() -> None:
    @udf(result_type=DataTypes.STRING(), func_type="pandas")
    def shout(s: pd.Series) -> pd.Series:
        return s.str.upper() + "!"

    @udf(result_type=DataTypes.DOUBLE(), func_type="pandas")
    def half(x: pd.Series) -> pd.Series:
        return x / 2

    @udf(result_type=DataTypes.DECIMAL(10, 2), func_type="pandas")
    def with_tax(d: pd.Series) -> pd.Series:
        return d.map(lambda v: None if v is None else v * Decimal("1.075"))

    @udf(result_type=DataTypes.TIMESTAMP(3), func_type="pandas")
    def next_hour(ts: pd.Series) -> pd.Series:
        assert str(ts.dtype) == "datetime64[ns]"
        return ts + pd.Timedelta(hours=1)

    t0 = datetime.datetime(2024, 5, 1, 12, 30, 15, 250000)
    schema = DataTypes.ROW(
        [
            DataTypes.FIELD("s", DataTypes.STRING()),
            DataTypes.FIELD("x", DataTypes.DOUBLE()),
            DataTypes.FIELD("d", DataTypes.DECIMAL(10, 2)),
            DataTypes.FIELD("ts", DataTypes.TIMESTAMP(3)),
        ]
    )
    table = _t_env().from_elements(
        [("ab", 3.0, Decimal("10.00"), t0), (None, None, None, None)], schema
    )
    result = table.select(shout(col("s")), half(col("x")), with_tax(col("d")), next_hour(col("ts")))
    assert [str(t) for t in result.get_schema().types] == [
        "STRING",
        "DOUBLE",
        "DECIMAL(10, 2)",
        "TIMESTAMP(3)",
    ]
    rows = _rows(result)
    assert sorted(rows, key=str) == sorted(
        [("AB!", 1.5, Decimal("10.75"), t0 + datetime.timedelta(hours=1)), (None,) * 4],
        key=str,
    )
    full = next(r for r in rows if r[0] is not None)
    assert [type(v) for v in full] == [str, float, Decimal, datetime.datetime]


def test_two_pandas_functions_and_a_general_one_in_one_select_nested_both_ways() -> None:
    @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    def add(i: pd.Series, j: pd.Series) -> pd.Series:
        return i + j

    @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    def square(i: pd.Series) -> pd.Series:
        return i * i

    @udf(result_type=DataTypes.BIGINT())
    def negate(i: int) -> int:
        assert isinstance(i, int)  # a general function gets one value per call
        return -i

    table = _t_env(parallelism=2).from_elements([(1, 2), (3, 4), (5, 6)], ["a", "b"])
    result = table.select(
        add(col("a"), col("b")),
        square(col("a")),
        negate(col("b")),
        square(negate(col("a"))),
        negate(add(col("a"), square(col("b")))),
    )
    assert sorted(_rows(result)) == [
        (3, 1, -2, 1, -5),
        (7, 9, -4, 9, -19),
        (11, 25, -6, 25, -41),
    ]
    plan = result.explain().split("== Optimized Logical Plan ==")[1]
    assert plan.count("PythonCalc(") == 2  # square(b) before the add that reads it
    assert "Calc(select=" in plan.splitlines()[1]


def test_a_batch_is_cut_into_chunks_of_the_arrow_batch_size() -> None:
    @udf(result_type=DataTypes.INT(), func_type="pandas")
    def chunk_length(x: pd.Series) -> pd.Series:
        return pd.Series([len(x)] * len(x))

    rows = [(i,) for i in range(100)]
    table = _t_env(batch_size=3).from_elements(rows, ["a"])
    lengths = [r[0] for r in _rows(table.select(chunk_length(col("a"))))]
    assert len(lengths) == 100
    assert max(lengths) == 3  # chunks of 3 from each batch the source polled, never more
    # whole chunks: each row carries its chunk's length, so a length L occurs k * L times
    assert all(lengths.count(n) % n == 0 for n in set(lengths))
    default = _t_env().from_elements(rows, ["a"]).select(chunk_length(col("a")))
    whole = [r[0] for r in _rows(default)]  # 10000 by default: each polled batch whole
    assert max(whole) > 3 and all(whole.count(n) % n == 0 for n in set(whole))
    with pytest.raises(Exception, match=r"arrow\.batch\.size must be a positive integer"):
        _rows(_t_env(batch_size=0).from_elements(rows, ["a"]).select(chunk_length(col("a"))))


def test_sql_calls_a_registered_pandas_function_in_select_and_where() -> None:
    class Scale(ScalarFunction):
        def eval(self, x: pd.Series, factor: pd.Series) -> pd.Series:
            return x * factor

    t_env = _t_env(parallelism=2)
    scale = udf(Scale(), result_type=DataTypes.DOUBLE(), func_type="pandas", name="scale")
    t_env.create_temporary_function("scale", scale)
    t_env.create_temporary_view(
        "nums", t_env.from_elements([(1.5, "x"), (2.0, "y"), (4.0, "z")], ["v", "k"])
    )
    result = t_env.sql_query("SELECT k, scale(v, 2) AS s FROM nums WHERE scale(v, 3) > 5")
    assert sorted(_rows(result)) == [("y", 4.0), ("z", 8.0)]


def test_a_row_argument_arrives_as_a_data_frame() -> None:
    @udf(result_type=DataTypes.STRING(), func_type="pandas")
    def describe(person: pd.DataFrame) -> pd.Series:
        assert list(person.columns) == ["name", "age"]
        return person["name"] + ":" + person["age"].astype(str)

    schema = DataTypes.ROW(
        [
            DataTypes.FIELD(
                "p",
                DataTypes.ROW(
                    [
                        DataTypes.FIELD("name", DataTypes.STRING()),
                        DataTypes.FIELD("age", DataTypes.INT()),
                    ]
                ),
            )
        ]
    )
    table = _t_env().from_elements([(Row("ann", 31),), (Row("bob", 42),)], schema)
    assert sorted(_rows(table.select(describe(col("p"))))) == [("ann:31",), ("bob:42",)]


def test_a_wrong_result_fails_naming_the_function() -> None:
    table = _t_env().from_elements([(1,), (2,), (3,)], ["a"])
    short = udf(
        lambda x: x.iloc[:1], result_type=DataTypes.BIGINT(), func_type="pandas", name="short"
    )
    with pytest.raises(Exception, match="result length 1 of pandas function short is not equal"):
        _rows(table.select(short(col("a"))))
    as_list = udf(lambda x: list(x), result_type=DataTypes.BIGINT(), func_type="pandas", name="lst")
    with pytest.raises(Exception, match=r"type of pandas function lst must be pandas\.Series"):
        _rows(table.select(as_list(col("a"))))
    texts = udf(
        lambda x: x.astype(str), result_type=DataTypes.BIGINT(), func_type="pandas", name="txt"
    )
    with pytest.raises(Exception, match=r"pandas function txt returned '1' \(str\) at row 0"):
        _rows(table.select(texts(col("a"))))


def test_an_exception_in_a_pandas_function_names_it_with_the_users_frames_first() -> None:
    @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    def picky(x: pd.Series) -> pd.Series:
        if (x > 2).any():
            raise ValueError("no values above two")
        return x

    table = _t_env().from_elements([(3,), (1,)], ["a"])
    with pytest.raises(Exception) as info:
        _rows(table.select(picky(col("a"))))
    text = "".join(traceback.format_exception(info.value))
    # the innermost frame is the user's, then the error and the note naming the function
    # (over the source's first batch: one record, batches start small)
    assert re.search(
        r", in picky\n.*raise ValueError.*\nValueError: no values above two\n"
        r"in pandas user-defined function picky over 1 rows?, the first with arguments \(3,\)",
        text,
    ), text[-2000:]


def test_pandas_functions_are_refused_where_flink_refuses_them() -> None:
    with pytest.raises(ValueError, match="func_type is 'general' or 'pandas'"):
        udf(lambda x: x, result_type=DataTypes.BIGINT(), func_type="arrow")

    async def later(x: Any) -> Any:
        return x

    with pytest.raises(ValueError, match="a pandas function cannot be async"):
        udf(later, result_type=DataTypes.BIGINT(), func_type="pandas")
    old_name = udf(lambda x: x, result_type=DataTypes.BIGINT(), udf_type="pandas", name="old")
    assert old_name.func_type == "pandas"
    t_env = _t_env()
    left = t_env.from_elements([(1, 2)], ["a", "b"])
    right = t_env.from_elements([(1, 5)], ["c", "d"])
    same = udf(lambda x: x, result_type=DataTypes.BIGINT(), func_type="pandas", name="same")
    joined = left.join(right).where((col("a") == col("c")) & (same(col("b")) < col("d")))
    with pytest.raises(ValidationError, match="pandas function same can only be called in"):
        _rows(joined)
    to_row = udf(
        lambda x: x,
        result_type=DataTypes.ROW([DataTypes.FIELD("x", DataTypes.BIGINT())]),
        func_type="pandas",
        name="to_row",
    )
    with pytest.raises(ValidationError, match="map with the pandas function to_row"):
        left.map(to_row(col("a")))


def test_a_pandas_function_feeds_an_aggregate_over_retractions() -> None:
    @udf(result_type=DataTypes.BIGINT(), func_type="pandas")
    def tenfold(x: pd.Series) -> pd.Series:
        return x * 10

    table = _t_env(parallelism=2).from_elements(
        [("a", 1), ("b", 2), ("a", 3), ("b", None)], ["k", "v"]
    )
    totals = table.group_by(col("k")).select(col("k"), tenfold(col("v")).sum.alias("t"))
    final: dict[str, Any] = {}
    for r in totals.execute().collect():
        kind = r.get_row_kind().short_string()
        if kind in ("+I", "+U"):
            final[r[0]] = r[1]
    assert final == {"a": 40, "b": 20}
