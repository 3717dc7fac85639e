"""The Table API on the in-process executor: planning, Flink's changelog semantics, results.

Every job here runs on Cairn's runtime (threads in this process); the same plans run on local
Spark in ``tests/integration/test_table_spark.py``. A group aggregate's changelog is checked
row by row against Flink's (the example of ``basic_operations.py``), and its final view
against a recomputation over random inputs with retractions.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from typing import Any

import pytest

from cairn.common.types import RowKind
from cairn.table import (
    DataTypes,
    EnvironmentSettings,
    Schema,
    StreamTableEnvironment,
    TableDescriptor,
    TableEnvironment,
    ValidationError,
)
from cairn.table.aggregates import accumulator_for
from cairn.table.analysis import AggCall, Columns, resolve
from cairn.table.calc_runtime import java_double_text
from cairn.table.codegen import CompiledCalc, calc_source
from cairn.table.expressions import col, concat, if_then_else, lit
from cairn.table.result import tableau
from cairn.table.translate import plan_uid, to_data_stream

JSON_ROWS = [
    (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany", "city": "Berlin"}}'),
    (2, '{"name": "hello", "tel": 135, "addr": {"country": "China", "city": "Shanghai"}}'),
    (3, '{"name": "world", "tel": 124, "addr": {"country": "USA", "city": "NewYork"}}'),
    (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China", "city": "Hangzhou"}}'),
]


def _t_env(streaming: bool = True, parallelism: int = 2) -> TableEnvironment:
    settings = (
        EnvironmentSettings.in_streaming_mode()
        if streaming
        else EnvironmentSettings.in_batch_mode()
    )
    t_env = TableEnvironment.create(settings)
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    return t_env


def _rows(result: Any) -> list[tuple[str, tuple[Any, ...]]]:
    return [(r.get_row_kind().short_string(), tuple(r)) for r in result.collect()]


def _people(t_env: TableEnvironment) -> Any:
    table = t_env.from_elements(JSON_ROWS, ["id", "data"])
    return table.add_columns(
        col("data").json_value("$.name", DataTypes.STRING()).alias("name"),
        col("data").json_value("$.tel", DataTypes.STRING()).alias("tel"),
        col("data").json_value("$.addr.country", DataTypes.STRING()).alias("country"),
    ).drop_columns(col("data"))


# -- types, names and errors at planning ----------------------------------------------------


def test_data_types_print_as_flink_summarizes_them() -> None:
    row = DataTypes.ROW(
        [
            DataTypes.FIELD("id", DataTypes.BIGINT().not_null()),
            DataTypes.FIELD("tags", DataTypes.ARRAY(DataTypes.STRING())),
            DataTypes.FIELD("m", DataTypes.MAP(DataTypes.STRING(), DataTypes.DECIMAL(10, 2))),
            DataTypes.FIELD("ts", DataTypes.TIMESTAMP(3)),
        ]
    )
    assert str(row) == (
        "ROW<`id` BIGINT NOT NULL, `tags` ARRAY<STRING>, `m` MAP<STRING, DECIMAL(10, 2)>,"
        " `ts` TIMESTAMP(3)>"
    )
    assert DataTypes.VARCHAR(10) != DataTypes.STRING()
    with pytest.raises(ValueError, match="precision must be between 0 and 9"):
        DataTypes.TIMESTAMP(10)
    with pytest.raises(ValueError, match="duplicates: \\['a'\\]"):
        DataTypes.ROW(
            [DataTypes.FIELD("a", DataTypes.INT()), DataTypes.FIELD("a", DataTypes.INT())]
        )


def test_columns_get_flinks_names_and_schemas_print_as_flink_prints_them(capsys: Any) -> None:
    t_env = _t_env()
    table = _people(t_env)
    grouped = table.group_by(col("country")).select(
        col("country"),
        col("id").count,
        col("tel").cast(DataTypes.BIGINT()).max,
        col("id").sum.alias("s"),
    )
    assert grouped.get_schema().names == ["country", "EXPR$0", "EXPR$1", "s"]
    grouped.print_schema()
    assert capsys.readouterr().out == (
        "(\n  `country` STRING,\n  `EXPR$0` BIGINT NOT NULL,\n  `EXPR$1` BIGINT,\n  `s` BIGINT\n)\n"
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda t: t.select(col("nope")),
            r"Cannot resolve field \[nope\], input field list:\[id, data\]",
        ),
        (lambda t: t.filter(col("id") + 1), "Filter operator requires a boolean expression"),
        (lambda t: t.select(col("data") + 1), "Cannot apply 'plus' to arguments of type <STRING>"),
        (lambda t: t.filter(col("id").sum > 1), "Aggregate .* is not allowed here"),
        (
            lambda t: t.group_by(col("id")).select(col("data")),
            "Expression 'data' is not being grouped",
        ),
        (lambda t: t.select(col("id"), col("id")), "Ambiguous column name: id"),
        (lambda t: t.alias("a"), "Aliasing more fields than we actually have"),
    ],
)
def test_a_bad_query_fails_when_it_is_built_naming_what_is_wrong(build: Any, message: str) -> None:
    table = _t_env().from_elements(JSON_ROWS, ["id", "data"])
    with pytest.raises(ValidationError, match=message):
        build(table)


def test_unknown_connectors_and_options_fail_with_flinks_messages() -> None:
    t_env = _t_env()
    with pytest.raises(ValidationError, match="Could not find any factory for identifier 'kafak'"):
        t_env.create_temporary_table("s", TableDescriptor.for_connector("kafak").build())
    with pytest.raises(ValidationError, match="Unsupported options:\n\nprint-identifer"):
        t_env.create_temporary_table(
            "s", TableDescriptor.for_connector("print").option("print-identifer", "x").build()
        )


def test_a_sink_whose_schema_does_not_match_the_query_is_refused_before_the_job() -> None:
    t_env = _t_env()
    schema = Schema.new_builder().column("a", DataTypes.STRING()).build()
    t_env.create_temporary_table(
        "sink", TableDescriptor.for_connector("print").schema(schema).build()
    )
    table = t_env.from_elements([(1, "x")], ["id", "name"])
    with pytest.raises(ValidationError, match="Column types of query result and sink"):
        table.execute_insert("sink")


def test_names_not_built_yet_are_refused_at_import_naming_them() -> None:
    with pytest.raises(
        ImportError, match=r"cairn\.table\.CsvTableSource: not in Cairn's Table API"
    ):
        from cairn.table import CsvTableSource  # noqa: F401


# -- expressions: SQL's NULL semantics in generated code ------------------------------------


def _calc(expression: Any, row: tuple[Any, ...], columns: Columns) -> Any:
    compiled = CompiledCalc(calc_source([resolve(expression, columns)], None))
    return compiled(row)[0]


def test_generated_expressions_follow_sql_null_and_java_arithmetic() -> None:
    cols = Columns.of(
        [
            ("a", DataTypes.INT()),
            ("b", DataTypes.INT()),
            ("s", DataTypes.STRING()),
            ("f", DataTypes.BOOLEAN()),
        ]
    )
    assert _calc(col("a") + col("b"), (1, None, "x", True), cols) is None
    assert _calc(col("a") / col("b"), (-7, 2, "x", True), cols) == -3  # truncated, as Java
    assert _calc(col("a") % col("b"), (-7, 2, "x", True), cols) == -1  # sign of the dividend
    assert _calc((col("a") > 1) & col("f"), (None, 0, "x", False), cols) is False
    assert _calc((col("a") > 1) & col("f"), (None, 0, "x", True), cols) is None
    assert _calc((col("a") > 1) | col("f"), (None, 0, "x", True), cols) is True
    assert _calc(col("s").like("a%c"), (0, 0, "abbc", True), cols) is True
    assert _calc(concat(col("s"), "-", col("a")), (4, 0, "x", True), cols) == "x-4"
    assert _calc(concat(col("s"), col("a")), (None, 0, "x", True), cols) is None
    assert _calc(if_then_else(col("a") > 2, "big", "small"), (None, 0, "x", True), cols) == "small"
    assert _calc(col("s").try_cast(DataTypes.INT()), (0, 0, "12x", True), cols) is None
    assert _calc(col("s").cast(DataTypes.INT()), (0, 0, " 12 ", True), cols) == 12
    with pytest.raises(ValueError, match="Cannot cast '12x' to INT"):
        _calc(col("s").cast(DataTypes.INT()), (0, 0, "12x", True), cols)
    assert (
        _calc(lit('{"a": [1, {"b": true}]}').json_value("$.a[1].b"), (0, 0, "", True), cols)
        == "true"
    )


def test_a_filter_keeps_a_row_only_when_its_condition_is_true() -> None:
    cols = Columns.of([("a", DataTypes.INT())])
    keep = CompiledCalc(calc_source(None, resolve(col("a") > 1, cols)))
    assert [keep((v,)) for v in (2, 1, None)] == [(2,), None, None]


def test_doubles_print_as_java_prints_them() -> None:
    assert [java_double_text(x) for x in (1e7, 0.001, 1e-4, 123.5, 3.0)] == [
        "1.0E7",
        "0.001",
        "1.0E-4",
        "123.5",
        "3.0",
    ]


# -- aggregates with retraction --------------------------------------------------------------


@pytest.mark.parametrize(
    "function", ["count", "count_star", "sum", "avg", "min", "max", "count_distinct"]
)
def test_an_accumulator_after_any_changelog_equals_one_over_the_rows_left(function: str) -> None:
    rng = random.Random(function)
    t = DataTypes.BIGINT()
    call = AggCall(
        function,
        0,
        t if function not in ("count", "count_star", "count_distinct") else DataTypes.BIGINT(False),
        t,
    )
    agg = accumulator_for(call)
    for _ in range(50):
        acc, alive = agg.create(), []
        for _ in range(rng.randint(1, 40)):
            if alive and rng.random() < 0.4:
                v = alive.pop(rng.randrange(len(alive)))
                acc = agg.retract(acc, v)
            else:
                v = rng.choice([None, *range(-5, 6)])
                alive.append(v)
                acc = agg.add(acc, v)
        fresh = agg.create()
        for v in alive:
            fresh = agg.add(fresh, v)
        assert agg.result(acc) == agg.result(fresh), (function, alive)


# -- jobs on the in-process executor ---------------------------------------------------------


def test_flinks_basic_operations_give_flinks_changelog() -> None:
    t_env = _t_env()
    table = _people(t_env)
    assert sorted(_rows(table.execute())) == [
        ("+I", (1, "Flink", "123", "Germany")),
        ("+I", (2, "hello", "135", "China")),
        ("+I", (3, "world", "124", "USA")),
        ("+I", (4, "PyFlink", "32", "China")),
    ]
    assert len(_rows(table.limit(3).execute())) == 3
    assert [r[1][0] for r in _rows(table.filter(col("id") != 3).execute())] == [1, 2, 4]
    changes = _rows(
        table.group_by(col("country"))
        .select(col("country"), col("id").count, col("tel").cast(DataTypes.BIGINT()).max)
        .execute()
    )
    china = [c for c in changes if c[1][0] == "China"]
    assert china == [
        ("+I", ("China", 1, 135)),
        ("-U", ("China", 1, 135)),
        ("+U", ("China", 2, 135)),
    ]
    assert sorted(c for c in changes if c[1][0] != "China") == [
        ("+I", ("Germany", 1, 123)),
        ("+I", ("USA", 1, 124)),
    ]
    distinct = _rows(table.select(col("country")).distinct().execute())
    assert sorted(distinct) == [("+I", ("China",)), ("+I", ("Germany",)), ("+I", ("USA",))]


def _final_view(changes: list[tuple[str, tuple[Any, ...]]], keys: int) -> dict[Any, Any]:
    """Apply a changelog to an upserted view keyed by its first ``keys`` columns."""
    view: dict[Any, Any] = {}
    for kind, row in changes:
        key = row[:keys]
        if kind in ("+I", "+U"):
            view[key] = row[keys:]
        elif kind == "-D":
            assert view.pop(key) == row[keys:], "a delete retracts the row the view holds"
        else:
            assert view[key] == row[keys:], "an update-before retracts the row the view holds"
    return view


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_retracting_group_by_ends_at_the_batch_aggregation_of_its_input(seed: int) -> None:
    """Two aggregates stacked: the inner one retracts, the outer consumes its retractions."""
    rng = random.Random(seed)
    events = [(rng.choice("abcdefg"), rng.randint(-20, 50)) for _ in range(400)]
    t_env = _t_env(parallelism=2)
    table = t_env.from_elements(events, ["k", "v"])
    per_key = table.group_by(col("k")).select(
        col("k"), col("v").sum.alias("total"), col("v").count.alias("n"), col("v").max.alias("top")
    )
    by_total_sign = (
        per_key.add_columns((col("total") > 100).alias("big"))
        .group_by(col("big"))
        .select(col("big"), col("k").count.alias("keys"), col("n").sum.alias("rows"))
    )
    inner = _final_view(_rows(per_key.execute()), 1)
    sums: dict[str, int] = defaultdict(int)
    counts: Counter[str] = Counter()
    tops: dict[str, int] = {}
    for k, v in events:
        sums[k] += v
        counts[k] += 1
        tops[k] = max(tops.get(k, v), v)
    assert inner == {(k,): (sums[k], counts[k], tops[k]) for k in sums}
    outer = _final_view(_rows(by_total_sign.execute()), 1)
    expected: dict[tuple[bool], tuple[int, int]] = {}
    for k in sums:
        big = sums[k] > 100
        keys, rows = expected.get((big,), (0, 0))
        expected[(big,)] = (keys + 1, rows + counts[k])
    assert outer == expected


def test_batch_mode_emits_each_groups_final_result_once() -> None:
    t_env = _t_env(streaming=False)
    table = t_env.from_elements([("a", 1), ("b", 2), ("a", 3)], ["k", "v"])
    rows = _rows(table.group_by(col("k")).select(col("k"), col("v").sum).execute())
    assert sorted(rows) == [("+I", ("a", 4)), ("+I", ("b", 2))]


def test_changelog_streams_carry_row_kinds_and_to_data_stream_refuses_updates() -> None:
    from cairn.datastream import StreamExecutionEnvironment
    from cairn.table import TableException

    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(env)
    table = t_env.from_elements([("a", 1), ("a", 2)], ["k", "v"])
    summed = table.group_by(col("k")).select(col("k"), col("v").sum.alias("s"))
    with pytest.raises(TableException, match="doesn't support consuming update changes"):
        t_env.to_data_stream(summed)
    rows = t_env.to_changelog_stream(summed).execute_and_collect(limit=3)
    assert [(r.get_row_kind(), r.k, r.s) for r in rows] == [
        (RowKind.INSERT, "a", 1),
        (RowKind.UPDATE_BEFORE, "a", 1),
        (RowKind.UPDATE_AFTER, "a", 3),
    ]


def test_a_data_stream_becomes_a_table_and_back() -> None:
    from cairn.common import Types
    from cairn.datastream import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.configure({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    t_env = StreamTableEnvironment.create(env)
    ds = env.from_collection(
        [("Alice", 3), ("Bob", 5)],
        Types.ROW_NAMED(["name", "score"], [Types.STRING(), Types.INT()]),
    )
    table = t_env.from_data_stream(ds)
    assert str(table.get_schema().types[1]) == "INT"
    doubled = table.select(col("name"), (col("score") * 2).alias("double"))
    rows = t_env.to_data_stream(doubled).execute_and_collect(limit=2)
    assert [(r.name, r.double) for r in rows] == [("Alice", 6), ("Bob", 10)]


def test_the_print_connector_writes_each_change_as_flink_does(capfd: Any) -> None:
    t_env = _t_env(parallelism=1)
    t_env.create_temporary_table(
        "sink",
        TableDescriptor.for_connector("print")
        .schema(
            Schema.new_builder()
            .column("k", DataTypes.STRING())
            .column("n", DataTypes.BIGINT())
            .build()
        )
        .build(),
    )
    table = t_env.from_elements([("a", 1.5), ("a", 2.0)], ["k", "v"])
    table.group_by(col("k")).select(col("k"), col("v").count).execute_insert("sink").wait()
    out = capfd.readouterr().out.splitlines()
    assert [line for line in out if line.startswith(("+", "-"))] == [
        "+I[a, 1]",
        "-U[a, 1]",
        "+U[a, 2]",
    ]


def test_uids_are_stable_across_plans_of_the_same_query() -> None:
    t_env = _t_env()

    def plan() -> Any:
        table = t_env.from_elements([("a", 1)], ["k", "v"])
        return table.group_by(col("k")).select(col("k"), col("v").sum).plan

    first, second = plan(), plan()
    assert plan_uid(first) == plan_uid(second)
    other = t_env.from_elements([("a", 1)], ["k", "v"]).select(col("k")).plan
    assert plan_uid(other) != plan_uid(first)
    assert to_data_stream(first, t_env.get_stream_execution_environment()) is not None


# -- printing --------------------------------------------------------------------------------


def test_tableau_printing_truncates_wide_values_and_shows_empty_sets() -> None:
    cols = Columns.of([("s", DataTypes.STRING()), ("b", DataTypes.BOOLEAN())])
    printed = tableau(cols, [(3, ("x" * 40, True))], streaming=True).splitlines()
    assert printed[3] == "| -D | " + "x" * 27 + "... |   TRUE |"
    assert tableau(cols, [], streaming=True) == "Empty set"
    batch = tableau(cols, [(0, ("ab", None))], streaming=False).splitlines()
    assert batch == [
        "+----+--------+",
        "|  s |      b |",
        "+----+--------+",
        "| ab | <NULL> |",
        "+----+--------+",
        "1 row in set",
    ]


def test_pipeline_name_names_a_table_job_as_in_flink(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table job is ``insert-into_<sinks>`` unless ``pipeline.name`` is set."""
    t_env = _t_env(parallelism=1)
    env = t_env.get_stream_execution_environment()
    names: list[str] = []
    run = env.execute_async
    monkeypatch.setattr(env, "execute_async", lambda name: names.append(name) or run(name))
    t_env.execute_sql("CREATE TABLE out (a INT) WITH ('connector' = 'blackhole')")
    table = t_env.from_elements([(1,)], ["a"])
    table.execute_insert("out").wait()
    t_env.get_config().set("pipeline.name", "nightly-totals")
    table.execute_insert("out").wait()
    assert names == ["insert-into_default_catalog.default_database.out", "nightly-totals"]
