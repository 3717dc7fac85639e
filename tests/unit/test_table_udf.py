"""User-defined functions in the Table API (``udf``, ``udtf``, ``udaf``) on the in-process
executor: called in the operator's own process, opened once per subtask, typed by their
declared result types, and named in the errors they raise."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import Row
from cairn.table import (
    DataTypes,
    EnvironmentSettings,
    Schema,
    TableDescriptor,
    TableEnvironment,
    ValidationError,
)
from cairn.table.expressions import col, lit
from cairn.table.udf import (
    AggregateFunction,
    FunctionContext,
    ScalarFunction,
    udaf,
    udf,
    udtf,
)

PEOPLE = [
    (1, "Flink", "Germany"),
    (2, "hello", "China"),
    (3, "world", "USA"),
    (4, "PyFlink", "China"),
]


def _t_env(parallelism: int = 2) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    return t_env


def _rows(table: Any) -> list[tuple[str, tuple[Any, ...]]]:
    return [(r.get_row_kind().short_string(), tuple(r)) for r in table.execute().collect()]


class Prefix(ScalarFunction):
    """Reads its prefix in ``open``: an unopened function would fail on ``self.prefix``."""

    def open(self, function_context: FunctionContext) -> None:
        self.prefix = function_context.get_job_parameter("prefix", "hi ")

    def eval(self, name: str | None) -> str | None:
        return None if name is None else self.prefix + name


def test_a_scalar_udf_is_opened_typed_and_called_per_row() -> None:
    t_env = _t_env()
    greet = udf(Prefix(), result_type=DataTypes.STRING())
    length = udf(lambda s: len(s), result_type=DataTypes.INT(), name="length")
    table = t_env.from_elements(PEOPLE, ["id", "name", "country"])
    result = table.select(greet(col("name")).alias("greeting"), length(col("name")) * 10).filter(
        col("greeting") != "hi world"
    )
    assert [str(t) for t in result.get_schema().types] == ["STRING", "INT"]
    assert sorted(r[1] for r in _rows(result)) == [
        ("hi Flink", 50),
        ("hi PyFlink", 70),
        ("hi hello", 50),
    ]


def test_a_failing_udf_fails_the_job_naming_the_function_and_its_arguments() -> None:
    @udf(result_type=DataTypes.BIGINT())
    def checked(x: int) -> int:
        if x == 3:
            raise ValueError("three is not allowed")
        return x

    table = _t_env(parallelism=1).from_elements(PEOPLE, ["id", "name", "country"])
    with pytest.raises(Exception) as info:
        _rows(table.select(checked(col("id"))))
    text = "".join(__import__("traceback").format_exception(info.value))
    assert "three is not allowed" in text
    assert "checked(3,)" in text, text[-2000:]


def test_join_lateral_gives_flinks_rows_for_a_row_based_table_function() -> None:
    @udtf(result_types=[DataTypes.STRING()])
    def split(r: Row) -> Any:
        yield from r.name.split("i")

    table = _t_env().from_elements(PEOPLE, ["id", "name", "country"])
    joined = table.join_lateral(split.alias("a"))
    assert joined.get_schema().names == ["id", "name", "country", "a"]
    assert sorted(r[1] for r in _rows(joined)) == [
        (1, "Flink", "Germany", "Fl"),
        (1, "Flink", "Germany", "nk"),
        (2, "hello", "China", "hello"),
        (3, "world", "USA", "world"),
        (4, "PyFlink", "China", "PyFl"),
        (4, "PyFlink", "China", "nk"),
    ]
    assert "Correlate(invocation=[split(id, name, country)]" in joined.explain()


def test_left_outer_join_lateral_keeps_rows_without_results_padded_with_nulls() -> None:
    @udtf(result_types=[DataTypes.STRING(), DataTypes.INT()])
    def letters(name: str) -> Any:
        return [(c, i) for i, c in enumerate(name) if c.isupper()]

    table = _t_env().from_elements(PEOPLE, ["id", "name", "country"])
    inner = table.join_lateral(letters(col("name")).alias("c", "at"))
    outer = table.left_outer_join_lateral(letters(col("name")).alias("c", "at"))
    assert sorted(r[1][0] for r in _rows(inner)) == [1, 4, 4]
    assert sorted((r[1][0], r[1][3]) for r in _rows(outer)) == [
        (1, "F"),
        (2, None),
        (3, None),
        (4, "F"),
        (4, "P"),
    ]


def test_flinks_word_count_with_flat_map_and_a_count_of_a_literal(capfd: Any) -> None:
    t_env = _t_env(parallelism=1)
    lines = ["to be or not to be", "that is the question"]
    tab = t_env.from_elements(
        ((line,) for line in lines), DataTypes.ROW([DataTypes.FIELD("line", DataTypes.STRING())])
    )
    schema = (
        Schema.new_builder().column("word", DataTypes.STRING()).column("count", DataTypes.BIGINT())
    )
    t_env.create_temporary_table(
        "sink", TableDescriptor.for_connector("print").schema(schema.build()).build()
    )

    @udtf(result_types=[DataTypes.STRING()])
    def split(line: Row) -> Any:
        yield from line[0].split()

    counts = (
        tab.flat_map(split).alias("word").group_by(col("word")).select(col("word"), lit(1).count)
    )
    counts.execute_insert("sink").wait()
    printed = [line for line in capfd.readouterr().out.splitlines() if line[:1] in "+-"]
    final: dict[str, int] = {}
    for line in printed:
        word, n = line[3:-1].split(", ")
        if line.startswith(("+I", "+U")):
            final[word] = int(n)
    assert final == {
        "to": 2,
        "be": 2,
        "or": 1,
        "not": 1,
        "that": 1,
        "is": 1,
        "the": 1,
        "question": 1,
    }
    assert printed[:3] == ["+I[to, 1]", "+I[be, 1]", "+I[or, 1]"]
    assert "-U[to, 1]" in printed and "+U[to, 2]" in printed


def test_map_with_a_row_result_gives_its_fields_as_columns() -> None:
    @udf(
        result_type=DataTypes.ROW(
            [
                DataTypes.FIELD("id", DataTypes.BIGINT()),
                DataTypes.FIELD("shout", DataTypes.STRING()),
            ]
        )
    )
    def shout(r: Row) -> Row:
        return Row(r.id * 100, r.name.upper())

    table = _t_env().from_elements(PEOPLE, ["id", "name", "country"]).map(shout)
    assert table.get_schema().names == ["id", "shout"]
    assert sorted(r[1] for r in _rows(table)) == [
        (100, "FLINK"),
        (200, "HELLO"),
        (300, "WORLD"),
        (400, "PYFLINK"),
    ]


class WeightedAvg(AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]  # sum of value * weight, sum of weights

    def accumulate(self, acc: list[int], value: int, weight: int) -> None:
        acc[0] += value * weight
        acc[1] += weight

    def retract(self, acc: list[int], value: int, weight: int) -> None:
        acc[0] -= value * weight
        acc[1] -= weight

    def get_value(self, acc: list[int]) -> int | None:
        return None if acc[1] == 0 else acc[0] // acc[1]


class NoRetract(WeightedAvg):
    retract = AggregateFunction.retract  # type: ignore[assignment]


def test_a_udaf_aggregates_with_two_arguments_and_retracts_an_updating_input() -> None:
    t_env = _t_env()
    avg = udaf(WeightedAvg(), result_type=DataTypes.BIGINT(), name="wavg")
    rows = [("a", 10, 1), ("a", 20, 3), ("b", 5, 2), ("b", 7, 2), ("a", 40, 4)]
    table = t_env.from_elements(rows, ["k", "v", "w"])
    per_key = table.group_by(col("k")).select(col("k"), avg(col("v"), col("w")).alias("avg"))
    final: dict[str, int] = {}
    for kind, (k, value) in _rows(per_key):
        if kind in ("+I", "+U"):
            final[k] = value
    assert final == {"a": (10 + 60 + 160) // 8, "b": (10 + 14) // 4}
    # over an updating input: the per-key sums change, the udaf retracts the old ones
    sums = table.group_by(col("k")).select(
        col("k"), col("v").sum.alias("s"), col("w").sum.alias("w")
    )
    overall = sums.select(avg(col("s"), col("w")).alias("x"))
    changes = _rows(overall)
    assert changes[-1][0] == "+U" and changes[-1][1] == ((70 * 8 + 12 * 4) // 12,)
    no_retract = udaf(NoRetract(), result_type=DataTypes.BIGINT(), name="nr")
    with pytest.raises(ValidationError, match="nr does not implement retract"):
        sums.select(no_retract(col("s"), col("w")))


def test_functions_are_checked_where_they_are_used() -> None:
    table = _t_env().from_elements(PEOPLE, ["id", "name", "country"])
    split = udtf(lambda s: [s], result_types=[DataTypes.STRING()], name="split")
    with pytest.raises(ValidationError, match="Table function split can only be used in"):
        table.select(split(col("name")))
    one_arg = udf(
        lambda x: x, input_types=[DataTypes.BIGINT()], result_type=DataTypes.BIGINT(), name="ident"
    )
    with pytest.raises(ValidationError, match="ident takes 1 arguments"):
        table.select(one_arg(col("id"), col("id")))
    with pytest.raises(ValidationError, match="is a scalar function, not a table function"):
        table.flat_map(one_arg)
    with pytest.raises(ValueError, match="give result_type"):
        udf(lambda x: x)


def test_types_can_be_given_as_flinks_sql_type_strings() -> None:
    from cairn.table.types import parse_data_type

    assert parse_data_type("string") == DataTypes.STRING()
    assert parse_data_type("DECIMAL(10, 2) NOT NULL") == DataTypes.DECIMAL(10, 2).not_null()
    assert parse_data_type("TIMESTAMP(3) WITH LOCAL TIME ZONE") == DataTypes.TIMESTAMP_LTZ(3)
    assert str(parse_data_type("ARRAY<ROW<`a b` INT, c VARCHAR(5)>>")) == (
        "ARRAY<ROW<`a b` INT, `c` VARCHAR(5)>>"
    )
    with pytest.raises(ValueError, match="Unknown type 'STRNG'"):
        parse_data_type("strng")
    words = ["flink", "window"]

    @udf(result_type="string")
    def id_to_word(word_id: int) -> str:
        return words[word_id]

    table = _t_env(parallelism=1).from_elements([(0,), (1,), (0,)], ["word_id"])
    counts = table.select(id_to_word(col("word_id"))).alias("word").group_by(col("word"))
    final = {r[1][0]: r[1][1] for r in _rows(counts.select(col("word"), lit(1).count))}
    assert final == {"flink": 2, "window": 1}


JSON_PEOPLE = [
    (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany"}}'),
    (2, '{"name": "hello", "tel": 135, "addr": {"country": "China"}}'),
    (3, '{"name": "world", "tel": 124, "addr": {"country": "China"}}'),
    (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China"}}'),
]


def _json_people() -> Any:
    from cairn.table.types import DataTypes as T

    table = _t_env().from_elements(JSON_PEOPLE, ["id", "data"])
    return table.add_columns(
        col("data").json_value("$.name", T.STRING()).alias("name"),
        col("data").json_value("$.tel", T.STRING()).alias("tel"),
        col("data").json_value("$.addr.country", T.STRING()).alias("country"),
    )


class CountAndSum(AggregateFunction):
    def get_value(self, accumulator: list[int]) -> Row:
        return Row(accumulator[0], accumulator[1])

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def accumulate(self, accumulator: list[int], input_row: Row) -> None:
        accumulator[0] += 1
        accumulator[1] += int(input_row.tel)

    def retract(self, accumulator: list[int], input_row: Row) -> None:
        accumulator[0] -= 1
        accumulator[1] -= int(input_row.tel)

    def get_result_type(self) -> Any:
        return DataTypes.ROW(
            [DataTypes.FIELD("cnt", DataTypes.BIGINT()), DataTypes.FIELD("sum", DataTypes.BIGINT())]
        )


def test_a_row_based_aggregate_gets_whole_rows_and_its_row_result_becomes_columns() -> None:
    count_sum = udaf(CountAndSum())
    result = (
        _json_people()
        .group_by(col("country"))
        .aggregate(count_sum.alias("cnt", "sum"))
        .select(col("country"), col("cnt"), col("sum"))
    )
    assert result.get_schema().names == ["country", "cnt", "sum"]
    final = {}
    for kind, (country, cnt, total) in _rows(result):
        if kind in ("+I", "+U"):
            final[country] = (cnt, total)
    assert final == {"Germany": (1, 123), "China": (3, 135 + 124 + 32)}


def test_flat_aggregate_retracts_the_rows_it_emitted_before() -> None:
    from cairn.table.udf import TableAggregateFunction, udtaf

    class Top2(TableAggregateFunction):
        def emit_value(self, accumulator: list[Any]) -> Any:
            for v in accumulator:
                if v:
                    yield Row(v)

        def create_accumulator(self) -> list[Any]:
            return [None, None]

        def accumulate(self, accumulator: list[Any], input_row: Row) -> None:
            tel = int(input_row.tel)
            if accumulator[0] is None or tel > accumulator[0]:
                accumulator[1] = accumulator[0]
                accumulator[0] = tel
            elif accumulator[1] is None or tel > accumulator[1]:
                accumulator[1] = tel

        def get_result_type(self) -> Any:
            return DataTypes.ROW([DataTypes.FIELD("tel", DataTypes.BIGINT())])

    top2 = udtaf(Top2())
    result = (
        _json_people()
        .group_by(col("country"))
        .flat_aggregate(top2)
        .select(col("country"), col("tel"))
    )
    view: dict[tuple[Any, ...], int] = {}
    for kind, row in _rows(result):
        view[row] = view.get(row, 0) + (1 if kind == "+I" else -1)
        assert kind in ("+I", "-D") and view[row] >= 0
    assert sorted(r for r, n in view.items() if n) == [
        ("China", 124),
        ("China", 135),
        ("Germany", 123),
    ]
    assert "GroupTableAggregate(groupBy=[country]" in result.explain()


def test_async_scalar_functions_overlap_and_keep_the_input_order() -> None:
    import asyncio

    from cairn.table.udf import AsyncScalarFunction

    class SlowLookup(AsyncScalarFunction):
        def open(self, function_context: FunctionContext) -> None:
            self.in_flight = 0
            self.most = 0

        async def eval(self, key: int) -> str:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            await asyncio.sleep(0.02 * (key % 3))  # later rows may finish first
            self.in_flight -= 1
            return f"v{key}:{self.most > 1}"

    @udf(result_type=DataTypes.BIGINT())
    async def doubled(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    lookup = udf(SlowLookup(), result_type=DataTypes.STRING())
    table = _t_env(parallelism=1).from_elements([(i,) for i in range(12)], ["k"])
    rows = [r[1] for r in _rows(table.select(col("k"), lookup(col("k")), doubled(col("k"))))]
    assert [k for k, _, _ in rows] == list(range(12)), "results leave in input order"
    assert [d for _, _, d in rows] == [2 * k for k in range(12)]
    assert any(v.endswith(":True") for _, v, _ in rows), "lookups overlapped on the event loop"
