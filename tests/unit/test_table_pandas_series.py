"""The pure parts of pandas scalar functions: SQL values to ``pandas.Series`` and back by the
declared type (``pandas_series``), and the split of a calc around ``PythonCalc`` nodes
(``pandas_split``, through ``optimize``)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pandas as pd
import pytest

from cairn.common import Row
from cairn.table.analysis import Columns, resolve
from cairn.table.expressions import col
from cairn.table.optimize import optimize
from cairn.table.pandas_series import from_series, to_series
from cairn.table.plan import Calc, PythonCalc, Values
from cairn.table.plan_text import explain
from cairn.table.types import DataTypes
from cairn.table.udf import udf


@pytest.mark.parametrize(
    ("data_type", "values", "dtype"),
    [
        (DataTypes.TINYINT(), [1, 2], "int8"),
        (DataTypes.SMALLINT(), [1, None], "Int16"),
        (DataTypes.INT(), [1, 2], "int32"),
        (DataTypes.BIGINT(), [None, 2], "Int64"),
        (DataTypes.FLOAT(), [1.5, None], "float32"),
        (DataTypes.DOUBLE(), [1.5, None], "float64"),
        (DataTypes.BOOLEAN(), [True, False], "bool"),
        (DataTypes.BOOLEAN(), [True, None], "boolean"),
        (DataTypes.STRING(), ["a", None], "object"),
        (DataTypes.DECIMAL(5, 2), [Decimal("1.25"), None], "object"),
        (DataTypes.DATE(), [datetime.date(2024, 1, 2), None], "object"),
        (DataTypes.TIMESTAMP(3), [datetime.datetime(2024, 1, 2, 3), None], "datetime64[ns]"),
    ],
)
def test_an_argument_column_gets_pyflinks_dtype_and_comes_back_equal(
    data_type: DataTypes, values: list[object], dtype: str
) -> None:
    series = to_series(values, data_type)  # type: ignore[arg-type]
    assert str(series.dtype) == dtype
    back = from_series(series, data_type, "f")  # type: ignore[arg-type]
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]


def test_a_timestamp_beyond_datetime64_stays_a_datetime() -> None:
    far = datetime.datetime(9999, 12, 31, 23, 59)
    series = to_series([far], DataTypes.TIMESTAMP(3))
    assert series.dtype == object and from_series(series, DataTypes.TIMESTAMP(3), "f") == [far]


def test_a_row_argument_is_a_data_frame_and_a_row_result_gives_rows() -> None:
    row = DataTypes.ROW(
        [DataTypes.FIELD("n", DataTypes.STRING()), DataTypes.FIELD("v", DataTypes.INT())]
    )
    frame = to_series([Row("a", 1), None, ("c", 3)], row)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["n", "v"]
    assert str(frame["v"].dtype) == "Int32"
    rows = from_series(frame, row, "f")
    assert [tuple(r) for r in rows] == [("a", 1), (None, None), ("c", 3)]
    assert rows[0].as_dict() == {"n": "a", "v": 1}
    with pytest.raises(TypeError, match="DataFrame of 1 columns for a ROW of 2 fields"):
        from_series(frame[["n"]], row, "f")


def test_results_are_converted_to_the_declared_type_or_refused() -> None:
    bigint = DataTypes.BIGINT()
    assert from_series(pd.Series([1.0, float("nan"), 3.0]), bigint, "f") == [1, None, 3]
    assert from_series(pd.Series([1, None], dtype="Int8"), bigint, "f") == [1, None]
    with pytest.raises(TypeError, match=r"returned 300 \(int\) at row 0, not a TINYINT value"):
        from_series(pd.Series([300]), DataTypes.TINYINT(), "f")
    with pytest.raises(TypeError, match="returned True"):
        from_series(pd.Series([True]), bigint, "f")
    with pytest.raises(TypeError, match=r"returned 'x' \(str\) at row 1, not a DOUBLE value"):
        from_series(pd.Series([1.0, "x"], dtype=object), DataTypes.DOUBLE(), "f")
    assert from_series(pd.Series([float("nan"), 2]), DataTypes.DOUBLE(), "f") == [None, 2.0]
    decimals = from_series(pd.Series([Decimal("1.005"), 2, 0.5]), DataTypes.DECIMAL(4, 2), "f")
    assert decimals == [Decimal("1.01"), Decimal("2.00"), Decimal("0.50")]
    with pytest.raises(TypeError, match="not a DECIMAL"):
        from_series(pd.Series([Decimal("100")]), DataTypes.DECIMAL(4, 2), "f")
    with pytest.raises(TypeError, match=r"returned 1 \(int\) at row 0, not a STRING value"):
        from_series(pd.Series([1]), DataTypes.STRING(), "f")
    aware = pd.Series(pd.to_datetime(["2024-01-01 12:00"]).tz_localize("Europe/Paris"))
    assert from_series(aware, DataTypes.TIMESTAMP(3), "f") == [datetime.datetime(2024, 1, 1, 11)]
    assert from_series(pd.Series([pd.NaT]), DataTypes.TIMESTAMP(3), "f") == [None]
    with pytest.raises(TypeError, match=r"must be pandas\.Series, got ndarray"):
        from_series(pd.Series([1]).to_numpy(), bigint, "f")


def _scan() -> Values:
    cols = Columns.of([("a", DataTypes.BIGINT()), ("b", DataTypes.BIGINT())])
    return Values(((1, 2),), cols)


def test_a_calc_is_split_around_its_pandas_calls_which_are_never_merged() -> None:
    plus = udf(lambda a, b: a + b, result_type=DataTypes.BIGINT(), func_type="pandas", name="plus")
    twice = udf(lambda a: a * 2, result_type=DataTypes.BIGINT(), func_type="pandas", name="twice")
    scan = _scan()
    cols = scan.columns
    lower = Calc(
        columns=Columns.of([("a", DataTypes.BIGINT()), ("c", DataTypes.BIGINT())]),
        input=scan,
        projections=(resolve(col("a"), cols), resolve(col("b") + 1, cols)),
        condition=resolve(col("b") > 0, cols),
    )
    upper_cols = lower.columns
    upper = Calc(
        columns=Columns.of([("x", DataTypes.BIGINT()), ("y", DataTypes.BIGINT())]),
        input=lower,
        projections=(
            resolve(twice(plus(col("a"), col("c"))), upper_cols),
            resolve(plus(col("a"), col("c")), upper_cols),
        ),
        condition=resolve((col("a") < 9) & (twice(col("a")) > 0), upper_cols),
    )
    text = explain(optimize(upper))
    # the second split's filter needs no pandas call any more: checked before twice(f0) runs
    assert text.splitlines() == [
        "Calc(select=[f2 AS x, f0 AS y]) changelogMode=[I]",
        "+- PythonCalc(select=[f0, twice(f0) AS f2]) changelogMode=[I]",
        "   +- Calc(select=[f0], where=[greater_than(f1, 0)]) changelogMode=[I]",
        "      +- PythonCalc(select=[a, c, plus(a, c) AS f0, twice(a) AS f1]) changelogMode=[I]",
        "         +- Calc(select=[a, plus(b, 1) AS c], where=[and(greater_than(b, 0),"
        " less_than(a, 9))]) changelogMode=[I]",
        "            +- Values(tuples=[1 rows], fields=[a, b]) changelogMode=[I]",
    ], text
    optimized = optimize(upper)
    python_calc = optimized.inputs[0].inputs[0].inputs[0]
    assert isinstance(python_calc, PythonCalc) and len(python_calc.calls) == 2  # plus once
    assert optimize(upper, arrow_batch_size=7).inputs[0].batch_size == 7
