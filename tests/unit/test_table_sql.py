"""Flink SQL on the table planner, on the in-process executor.

The key property: a query written in SQL and the same query written with the Table API build
the same plan (``explain()``) and give the same rows, because SQL is converted into Table API
calls. Around it: the parser's DDL and its error positions, the converter's expressions, the
statements (DDL, ``SHOW``, ``DESCRIBE``, ``INSERT``, statement sets), the datagen source, and
every refusal with its position.
"""

from __future__ import annotations

import decimal
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from sqlglot import exp

from cairn.table import (
    DataTypes,
    EnvironmentSettings,
    SqlParserError,
    StatementSet,
    Table,
    TableEnvironment,
    ValidationError,
)
from cairn.table.expressions import coalesce, col, lit
from cairn.table.sql.dialect import FlinkCast, FlinkColumn, TableArg, WatermarkDef
from cairn.table.sql.errors import SqlValidationError
from cairn.table.sql.expressions import parse_expression
from cairn.table.sql.parse import parse_statement
from cairn.table.sql.type_names import parse_type
from cairn.table.udf import AggregateFunction, udaf, udf, udtf

ROWS = [(1, "a", 10), (2, "b", 20), (3, "a", 30), (4, None, 5), (5, "c", None), (6, "b", 40)]


def _t_env(parallelism: int = 1) -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", str(parallelism))
    return t_env


def _with_t(parallelism: int = 1) -> tuple[TableEnvironment, Table]:
    t_env = _t_env(parallelism)
    t = t_env.from_elements(
        ROWS,
        DataTypes.ROW(
            [
                DataTypes.FIELD("id", DataTypes.BIGINT()),
                DataTypes.FIELD("k", DataTypes.STRING()),
                DataTypes.FIELD("v", DataTypes.INT()),
            ]
        ),
    )
    t_env.create_temporary_view("t", t)
    return t_env, t


def _changes(table: Table) -> list[tuple[str, tuple[Any, ...]]]:
    return [(r.get_row_kind().short_string(), tuple(r)) for r in table.execute().collect()]


def _retract_view(changes: list[tuple[str, tuple[Any, ...]]]) -> Counter[tuple[Any, ...]]:
    """The rows left after a changelog: +I/+U add a row, -U/-D retract one that is there."""
    view: Counter[tuple[Any, ...]] = Counter()
    for kind, row in changes:
        if kind in ("+I", "+U"):
            view[row] += 1
        else:
            assert view[row] > 0, f"{kind}{row} retracts a row the view does not hold"
            view[row] -= 1
    return +view


# -- parsing ---------------------------------------------------------------------------------


def test_the_dialect_parses_flinks_ddl_pieces() -> None:
    tree = parse_statement(
        "CREATE TABLE IF NOT EXISTS orders (\n"
        "  id BIGINT NOT NULL,\n"
        "  `price` DECIMAL(10, 2),\n"
        "  tags MAP<STRING, ARRAY<INT>>,\n"
        "  ts TIMESTAMP(3),\n"
        "  proc AS PROCTIME(),\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND,\n"
        "  PRIMARY KEY (id) NOT ENFORCED\n"
        ") WITH ('connector' = 'datagen', 'number-of-rows' = '10')"
    )
    assert isinstance(tree, exp.Create) and tree.args["exists"]
    items = tree.this.expressions
    columns = [i for i in items if isinstance(i, FlinkColumn)]
    assert [(c.name, c.args.get("kind") and c.args["kind"].this) for c in columns] == [
        ("id", "BIGINT NOT NULL"),
        ("price", "DECIMAL(10, 2)"),
        ("tags", "MAP<STRING, ARRAY<INT>>"),
        ("ts", "TIMESTAMP(3)"),
        ("proc", None),
    ]
    assert isinstance(columns[-1].args["computed"], exp.Anonymous)
    (watermark,) = [i for i in items if isinstance(i, WatermarkDef)]
    assert watermark.name == "ts" and isinstance(watermark.expression, exp.Sub)
    (key,) = [i for i in items if isinstance(i, exp.PrimaryKey)]
    assert [k.name for k in key.expressions] == ["id"]
    options = {p.this.this: p.args["value"].this for p in tree.args["properties"].expressions}
    assert options == {"connector": "datagen", "number-of-rows": "10"}


def test_window_tvfs_lateral_tables_and_statement_sets_parse() -> None:
    tvf = parse_statement(
        "SELECT * FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '5' MINUTES))"
    )
    assert any(isinstance(n, TableArg) for n in tvf.walk())
    lateral = parse_statement("SELECT a, s FROM t, LATERAL TABLE(split(a)) AS T(s)")
    calls = [n for n in lateral.walk() if isinstance(n, exp.Anonymous)]
    assert "split" in [str(c.this) for c in calls]  # a user function, not sqlglot's Split
    block = parse_statement(
        "EXECUTE STATEMENT SET BEGIN\n"
        "INSERT INTO a SELECT * FROM b;\n"
        "INSERT INTO c SELECT * FROM b;\n"
        "END;"
    )
    assert [type(s) for s in block.expressions] == [exp.Insert, exp.Insert]
    cast = parse_statement("SELECT TRY_CAST(x AS TIMESTAMP(3) WITH LOCAL TIME ZONE) FROM t")
    (node,) = [n for n in cast.walk() if isinstance(n, FlinkCast)]
    assert node.args["safe"] and str(parse_type(node.args["to"].this)) == "TIMESTAMP_LTZ(3)"


@pytest.mark.parametrize(
    ("sql", "token", "line", "column"),
    [
        ("SELECT FROM t", "FROM", 1, 8),
        ("SELECT a, FROM t", "FROM", 1, 11),
        ("SELECT a\nFROM t\nWHERE a >", ">", 3, 9),
        ("SELECT a FROM t WHERE", "WHERE", 1, 17),
        ("CREATE TABLE t (a INT, PRIMARY KEY (a))", ")", 1, 39),
    ],
)
def test_a_parse_error_names_the_token_and_its_line_and_column(
    sql: str, token: str, line: int, column: int
) -> None:
    with pytest.raises(SqlParserError) as caught:
        _t_env().execute_sql(sql)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert f'Encountered "{token}" at line {line}, column {column}.' in str(caught.value)


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("STRING", "STRING"),
        ("VARCHAR(10)", "VARCHAR(10)"),
        ("BIGINT NOT NULL", "BIGINT NOT NULL"),
        ("DECIMAL(10, 2)", "DECIMAL(10, 2)"),
        ("TIMESTAMP(3)", "TIMESTAMP(3)"),
        ("TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ(3)"),
        ("ARRAY<INT>", "ARRAY<INT>"),
        ("MAP<STRING, INT>", "MAP<STRING, INT>"),
        ("ROW<a INT, b STRING>", "ROW<`a` INT, `b` STRING>"),
    ],
)
def test_flink_type_names_become_data_types(text: str, printed: str) -> None:
    assert str(parse_type(text)) == printed


# -- expressions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "dsl"),
    [
        ("a + 1 > b * 2", (col("a") + 1) > (col("b") * 2)),
        ("NOT a OR b AND c", ~col("a") | (col("b") & col("c"))),
        ("a IS NULL AND b IS NOT NULL", col("a").is_null & col("b").is_not_null),
        ("a IN (1, 2) AND b BETWEEN 1 AND 3", col("a").in_(1, 2) & col("b").between(1, 3)),
        ("a NOT BETWEEN 1 AND 3", col("a").not_between(1, 3)),
        ("a LIKE 'x%'", col("a").like("x%")),
        ("ts - INTERVAL '3' SECOND", col("ts") - lit(3).seconds),
        ("UPPER(TRIM(a)) || 'x'", col("a").trim.upper_case._call("concat", "x")),
        ("SUBSTRING(a, 1, 2)", col("a").substring(1, 2)),
        ("CAST(a AS BIGINT)", col("a").cast(DataTypes.BIGINT())),
        ("TRY_CAST(a AS INT)", col("a").try_cast(DataTypes.INT())),
        ("UPPER(CAST(a AS STRING))", col("a").cast(DataTypes.STRING()).upper_case),
        ("COALESCE(a, 'none')", coalesce(col("a"), "none")),
        ("JSON_VALUE(j, '$.a')", col("j").json_value("$.a")),
        (
            "ROUND(x, 2) + ABS(y) + CHAR_LENGTH(s)",
            col("x").round(2) + col("y").abs + col("s").char_length,
        ),
        (
            "CASE WHEN a > 1 THEN 'x' WHEN a > 0 THEN 'y' END",
            (col("a") > 1).if_then_else("x", (col("a") > 0).if_then_else("y", lit(None))),
        ),
        ("CASE a WHEN 1 THEN 'x' ELSE 'z' END", (col("a") == 1).if_then_else("x", "z")),
    ],
)
def test_sql_expressions_are_the_dsls_trees(sql: str, dsl: Any) -> None:
    assert str(parse_expression(sql)) == str(dsl)


# -- SQL and the Table API: one plan, the same rows -------------------------------------------

EQUIVALENT: list[tuple[str, Callable[[Table], Table]]] = [
    (
        "SELECT id, k FROM t WHERE v > 15",
        lambda t: t.filter(col("v") > 15).select(col("id"), col("k")),
    ),
    (
        "SELECT id * 2 AS d, UPPER(k) AS u, COALESCE(k, 'none') AS c FROM t",
        lambda t: t.select(
            (col("id") * 2).alias("d"),
            col("k").upper_case.alias("u"),
            coalesce(col("k"), "none").alias("c"),
        ),
    ),
    (
        "SELECT k, COUNT(*) AS n, SUM(v) AS s, MAX(v) AS m FROM t GROUP BY k",
        lambda t: t.group_by(col("k")).select(
            col("k"), col("*").count.alias("n"), col("v").sum.alias("s"), col("v").max.alias("m")
        ),
    ),
    (
        "SELECT k, SUM(v) AS s FROM t GROUP BY k HAVING SUM(v) > 25",
        lambda t: (
            t.group_by(col("k")).select(col("k"), col("v").sum.alias("s")).filter(col("s") > 25)
        ),
    ),
    ("SELECT DISTINCT k FROM t", lambda t: t.select(col("k")).distinct()),
    (
        "SELECT id, k FROM t WHERE v < 15 UNION ALL SELECT id, k FROM t WHERE v > 35",
        lambda t: (
            t.filter(col("v") < 15)
            .select(col("id"), col("k"))
            .union_all(t.filter(col("v") > 35).select(col("id"), col("k")))
        ),
    ),
    (
        "SELECT k, s FROM (SELECT k, SUM(v) AS s FROM t GROUP BY k) WHERE s > 25",
        lambda t: (
            t.group_by(col("k")).select(col("k"), col("v").sum.alias("s")).filter(col("s") > 25)
        ),
    ),
    (
        "SELECT id, CASE WHEN v > 15 THEN 'big' ELSE 'small' END AS size,"
        " CAST(v AS STRING) AS s FROM default_catalog.default_database.t",
        lambda t: t.select(
            col("id"),
            (col("v") > 15).if_then_else("big", "small").alias("size"),
            col("v").cast(DataTypes.STRING()).alias("s"),
        ),
    ),
]


@pytest.mark.parametrize(("sql", "table_api"), EQUIVALENT, ids=[s for s, _ in EQUIVALENT])
def test_sql_and_the_table_api_build_the_same_plan_and_give_the_same_rows(
    sql: str, table_api: Callable[[Table], Table]
) -> None:
    t_env, t = _with_t(parallelism=2)
    from_sql, from_dsl = t_env.sql_query(sql), table_api(t)
    assert from_sql.explain() == from_dsl.explain()
    assert _retract_view(_changes(from_sql)) == _retract_view(_changes(from_dsl))


def test_unnamed_items_are_named_as_flink_names_them() -> None:
    t_env, _ = _with_t()
    names = t_env.sql_query("SELECT k, COUNT(*), v + 1, k FROM t GROUP BY k, v")
    assert names.get_schema().names == ["k", "EXPR$1", "EXPR$2", "k0"]
    assert t_env.sql_query("SELECT *, id FROM t").get_schema().names == ["id", "k", "v", "id0"]


def test_a_limit_without_order_by_keeps_that_many_rows() -> None:
    t_env, t = _with_t()
    table = t_env.sql_query("SELECT id FROM t LIMIT 2")
    assert table.explain() == t.select(col("id")).limit(2).explain()
    assert len(_changes(table)) == 2


@pytest.mark.parametrize("seed", [1, 2])
def test_a_retracting_group_by_having_ends_at_the_batch_aggregation(seed: int) -> None:
    rng = random.Random(seed)
    events = [(rng.choice("abcdefg"), rng.randint(-20, 50)) for _ in range(300)]
    t_env = _t_env(parallelism=2)
    t_env.create_temporary_view("events", t_env.from_elements(events, ["k", "v"]))
    result = t_env.execute_sql(
        "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM events GROUP BY k"
        " HAVING SUM(v) > 300 AND MAX(v) > 40"
    )
    changes = [(r.get_row_kind().short_string(), tuple(r)) for r in result.collect()]
    sums: dict[str, int] = defaultdict(int)
    counts: Counter[str] = Counter()
    tops: dict[str, int] = {}
    for k, v in events:
        sums[k] += v
        counts[k] += 1
        tops[k] = max(tops.get(k, v), v)
    expected = Counter((k, sums[k], counts[k]) for k in sums if sums[k] > 300 and tops[k] > 40)
    assert _retract_view(changes) == expected


# -- statements ------------------------------------------------------------------------------


def test_datagen_into_a_print_sink_writes_flinks_lines(capfd: Any) -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT, name STRING, id2 AS id * 2) WITH ("
        " 'connector' = 'datagen', 'number-of-rows' = '100',"
        " 'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100',"
        " 'fields.name.length' = '4')"
    )
    t_env.execute_sql(
        "CREATE TABLE print_sink (id BIGINT, doubled BIGINT) WITH ('connector' = 'print')"
    )
    t_env.execute_sql("INSERT INTO print_sink SELECT id, id2 FROM src WHERE MOD(id, 10) = 0").wait()
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith("+I")]
    assert lines == [f"+I[{i}, {2 * i}]" for i in range(10, 101, 10)]


def test_datagen_random_fields_honour_their_bounds_and_null_rate() -> None:
    t_env = _t_env(parallelism=2)
    t_env.execute_sql(
        "CREATE TABLE g (n INT, s STRING, d DOUBLE) WITH ('connector' = 'datagen',"
        " 'number-of-rows' = '50', 'fields.n.min' = '3', 'fields.n.max' = '7',"
        " 'fields.s.length' = '5', 'fields.s.null-rate' = '0.5')"
    )
    rows = [tuple(r) for r in t_env.execute_sql("SELECT * FROM g").collect()]
    assert len(rows) == 50
    assert all(3 <= n <= 7 for n, _, _ in rows)
    strings = [s for _, s, _ in rows]
    assert all(s is None or len(s) == 5 for s in strings) and None in strings
    assert any(s is not None for s in strings)


def test_an_unknown_datagen_option_fails_with_flinks_message() -> None:
    with pytest.raises(ValidationError) as caught:
        _t_env().execute_sql(
            "CREATE TABLE g (n INT) WITH ('connector' = 'datagen', 'fields.n.kind2' = 'x')"
        )
    message = str(caught.value)
    assert "Unsupported options found for 'datagen'." in message
    assert "Unsupported options:\n\nfields.n.kind2" in message
    assert "fields.n.kind\n" in message and "number-of-rows" in message


def test_a_statement_set_runs_two_inserts_in_one_job(capfd: Any) -> None:
    t_env, t = _with_t()
    for name in ("small", "big"):
        t_env.execute_sql(
            f"CREATE TABLE {name} (id BIGINT) WITH ('connector' = 'print',"
            f" 'print-identifier' = '{name}')"
        )
    statements = t_env.create_statement_set()
    assert isinstance(statements, StatementSet)
    statements.add_insert_sql("INSERT INTO small SELECT id FROM t WHERE v < 15")
    statements.add_insert("big", t.filter(col("v") > 35).select(col("id")))
    result = statements.execute()
    assert result.get_table_schema().names == [
        "default_catalog.default_database.small",
        "default_catalog.default_database.big",
    ]
    result.wait()
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if "+I" in line)
    assert lines == ["big> +I[6]", "small> +I[1]", "small> +I[4]"]
    t_env.execute_sql(
        "EXECUTE STATEMENT SET BEGIN\n"
        "  INSERT INTO small SELECT id FROM t WHERE id = 2;\n"
        "  INSERT INTO big SELECT id FROM t WHERE id = 3;\n"
        "END;"
    ).wait()
    lines = sorted(line for line in capfd.readouterr().out.splitlines() if "+I" in line)
    assert lines == ["big> +I[3]", "small> +I[2]"]


def test_ddl_show_and_describe_give_flinks_results() -> None:
    t_env, _ = _with_t()
    t_env.execute_sql(
        "CREATE TABLE src (id BIGINT, ts TIMESTAMP(3), twice AS id * 2,"
        " WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED)"
        " WITH ('connector' = 'datagen', 'number-of-rows' = '3')"
    )
    t_env.execute_sql("CREATE TEMPORARY VIEW big AS SELECT id FROM t WHERE v > 15")
    t_env.execute_sql("CREATE TABLE IF NOT EXISTS src (x INT) WITH ('connector' = 'datagen')")
    shown = [tuple(r) for r in t_env.execute_sql("SHOW TABLES").collect()]
    assert shown == [("big",), ("src",), ("t",)]
    assert [tuple(r) for r in t_env.execute_sql("SHOW VIEWS").collect()] == [("big",), ("t",)]
    described = t_env.execute_sql("DESCRIBE src")
    assert described.get_table_schema().names == [
        "name",
        "type",
        "null",
        "key",
        "extras",
        "watermark",
    ]
    assert [tuple(r) for r in described.collect()] == [
        ("id", "BIGINT", "FALSE", "PRI(id)", "", ""),
        ("ts", "TIMESTAMP(3) *ROWTIME*", "TRUE", "", "", "ts - INTERVAL '5' SECOND"),
        ("twice", "BIGINT", "FALSE", "", "AS id * 2", ""),
    ]
    assert [tuple(r) for r in t_env.execute_sql("SELECT * FROM big").collect()] == [
        (2,),
        (3,),
        (6,),
    ]
    t_env.execute_sql("DROP VIEW big")
    t_env.execute_sql("DROP TABLE IF EXISTS nothing")
    t_env.execute_sql("DROP TABLE src")
    assert [tuple(r) for r in t_env.execute_sql("SHOW TABLES").collect()] == [("t",)]
    with pytest.raises(
        ValidationError,
        match=r"Table with identifier 'default_catalog\.default_database\.src' does not exist",
    ):
        t_env.execute_sql("DROP TABLE src")


def test_str_of_a_table_in_sql_names_an_unnamed_view() -> None:
    t_env, t = _with_t()
    table = t_env.sql_query(f"SELECT k FROM {t} WHERE id > 4")
    assert [tuple(r) for r in table.execute().collect()] == [("c",), ("b",)]


# -- refusals, with their positions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("SELECT a FROM nowhere", "Object 'nowhere' not found", 1, 15),
        ("SELECT id FROM cat.db.t", "Object 'cat.db.t' not found", 1, 16),
        ("SELECT id,\n  x + 1 FROM t", "Column 'x' not found in any table", 2, 3),
        ("SELECT id FROM t WHERE nope > 1", "Column 'nope' not found in any table", 1, 24),
        ("SELECT t2.id FROM t", "Table 't2' not found", 1, 8),
        (
            "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' MINUTES))",
            "Column 'ts' not found",
            1,
            48,
        ),
        ("SELECT k, s FROM t, LATERAL TABLE(nosuch(k)) AS T(s)", "No table function", 1, 35),
        ("SELECT t.id FROM t SEMI JOIN t AS u ON t.id = u.id", "SEMI JOIN is not", 1, 20),
        ("SELECT id, SUM(v) OVER (PARTITION BY k) FROM t", "ordered by one time", 1, 12),
        ("SELECT id FROM t ORDER BY id", "Sort on a non-time-attribute field", 1, 18),
        ("SELECT foo(id) FROM t", "No match found for function signature foo", 1, 8),
        ("SELECT id FROM t GROUP BY k", "Expression 'id' is not being grouped", 1, 8),
    ],
)
def test_what_cairn_does_not_plan_is_refused_naming_it_and_where(
    sql: str, message: str, line: int, column: int
) -> None:
    t_env, _ = _with_t()
    with pytest.raises(SqlValidationError) as caught:
        t_env.sql_query(sql)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert f"From line {line}, column {column}" in str(caught.value)


def test_an_insert_is_checked_before_its_job() -> None:
    t_env, _ = _with_t()
    t_env.execute_sql("CREATE TABLE one (id BIGINT) WITH ('connector' = 'print')")
    with pytest.raises(ValidationError, match="Column types of query result and sink"):
        t_env.execute_sql("INSERT INTO one SELECT id, k FROM t")
    with pytest.raises(SqlValidationError, match="Object 'two' not found"):
        t_env.execute_sql("INSERT INTO two SELECT id FROM t")
    with pytest.raises(SqlParserError, match="sql_query\\(\\) takes only a query"):
        t_env.sql_query("INSERT INTO one SELECT id FROM t")


def test_union_all_widens_its_columns_to_their_common_types() -> None:
    t_env, _ = _with_t()
    table = t_env.sql_query(
        "SELECT id AS n FROM t WHERE id = 1 UNION ALL SELECT v FROM t WHERE id = 2"
    )
    assert str(table.get_schema().types[0]) == "BIGINT"
    assert sorted(tuple(r) for r in table.execute().collect()) == [(1,), (20,)]
    with pytest.raises(SqlValidationError, match="different numbers of columns: 1 and 2"):
        t_env.sql_query("SELECT id FROM t UNION ALL SELECT id, k FROM t")


def test_a_whole_table_aggregate_and_a_filter_string() -> None:
    t_env, t = _with_t()
    table = t_env.sql_query("SELECT COUNT(*), SUM(v) AS s FROM t WHERE v IS NOT NULL")
    assert table.get_schema().names == ["EXPR$0", "s"]
    assert _retract_view(_changes(table)) == Counter({(5, 105): 1})
    assert (
        t.filter("v > 25 AND k <> 'x'").explain()
        == t.filter((col("v") > 25) & (col("k") != "x")).explain()
    )


@pytest.mark.parametrize(
    ("sql", "error", "message"),
    [
        ("SHOW PROCEDURES", SqlParserError, 'Encountered "PROCEDURES" at line 1, column 6'),
        ("ALTER TABLE t RENAME TO u", SqlValidationError, "ALTER statements are not supported"),
        ("CREATE FUNCTION f AS 'x.y'", SqlValidationError, "Cannot import 'x' for function f"),
        ("SELECT 1; SELECT 2", SqlParserError, "Expected one statement, got 2"),
    ],
)
def test_statements_cairn_does_not_run_are_refused(sql: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        _t_env().execute_sql(sql)


def test_decimal_literals_mix_with_doubles_as_in_flink() -> None:
    t_env = _t_env()
    t_env.create_temporary_view("m", t_env.from_elements([(2, 2.0)], ["i", "d"]))
    table = t_env.sql_query("SELECT d + 1.5 AS a, i * 1.5 AS b, d / 0.5 AS c FROM m")
    types = [str(t) for t in table.get_schema().types]
    assert (types[0], types[1].startswith("DECIMAL"), types[2]) == ("DOUBLE", True, "DOUBLE")
    (row,) = table.execute().collect()
    assert tuple(row) == (3.5, decimal.Decimal("3.0"), 4.0)


@pytest.mark.parametrize(
    ("item", "flink_type", "values"),
    [
        ("v * 1.5", "DECIMAL(13, 1)", ["15.0", "30.0"]),
        ("v + 1.25", "DECIMAL(13, 2)", ["11.25", "21.25"]),
        ("v / 1.5", "DECIMAL(17, 6)", ["6.666667", "13.333333"]),
        ("CASE WHEN v > 10 THEN 1 ELSE 2.5 END", "DECIMAL(11, 1) NOT NULL", ["2.5", "1"]),
        ("COALESCE(v, 0.5)", "DECIMAL(11, 1) NOT NULL", ["10", "20"]),
    ],
)
def test_an_int_with_a_decimal_literal_is_typed_and_computed_as_flink_does(
    item: str, flink_type: str, values: list[str]
) -> None:
    t_env, _ = _with_t()
    ints = t_env.sql_query("SELECT CAST(v AS INT) AS v FROM t WHERE id < 3")
    t_env.create_temporary_view("ints", ints)
    table = t_env.sql_query(f"SELECT {item} AS x FROM ints")
    assert str(table.get_schema().types[0]) == flink_type
    rows = [r[0] for r in table.execute().collect()]
    assert all(isinstance(r, decimal.Decimal) for r in rows)
    assert rows == [decimal.Decimal(v) for v in values]


def test_a_union_takes_its_limit_and_refuses_its_order_by() -> None:
    t_env, _ = _with_t()
    table = t_env.sql_query("SELECT id FROM t UNION ALL SELECT id FROM t LIMIT 3")
    assert table.explain().splitlines()[1].startswith("Limit(offset=[0], fetch=[3])")
    assert len(_changes(table)) == 3
    with pytest.raises(SqlValidationError, match="Sort on a non-time-attribute field"):
        t_env.sql_query("SELECT id FROM t UNION ALL SELECT id FROM t ORDER BY id")
    top = t_env.sql_query("SELECT id FROM t UNION ALL SELECT id FROM t ORDER BY id DESC LIMIT 2")
    assert "Rank(" in top.explain()


@pytest.mark.parametrize(
    ("ddl", "message", "column"),
    [
        (
            "CREATE TABLE g (n INT, p AS NO_SUCH_FN()) WITH ('connector' = 'datagen')",
            "NO_SUCH_FN",
            29,
        ),
        ("CREATE TABLE g (n INT, m AS x + 1) WITH ('connector' = 'datagen')", "Column 'x'", 29),
        (
            "CREATE TABLE g (n INT, WATERMARK FOR n AS y) WITH ('connector' = 'datagen')",
            "Column 'y'",
            43,
        ),
    ],
)
def test_ddl_expressions_are_checked_at_their_place(ddl: str, message: str, column: int) -> None:
    with pytest.raises(SqlValidationError, match=re.escape(message)) as caught:
        _t_env().execute_sql(ddl)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_set_changes_the_configuration_checking_it() -> None:
    t_env = _t_env()
    t_env.execute_sql("SET 'parallelism.default' = '3'")
    assert t_env.get_config().get("parallelism.default") == "3"
    listed = dict(tuple(r) for r in t_env.execute_sql("SET").collect())
    assert listed["parallelism.default"] == "3"
    with pytest.raises(SqlValidationError, match="expected an integer"):
        t_env.execute_sql("SET 'parallelism.default' = 'many'")


def test_values_make_constant_rows_for_queries_and_inserts(capfd: Any) -> None:
    t_env = _t_env()
    table = t_env.sql_query(
        "SELECT id, UPPER(name) AS up FROM (VALUES (1, 'a'), (-2, CAST(NULL AS STRING)),"
        " (3 + 4, 'c')) AS v(id, name) WHERE id > 0"
    )
    assert [str(t) for t in table.get_schema().types] == ["INT NOT NULL", "STRING"]
    assert [tuple(r) for r in table.execute().collect()] == [(1, "A"), (7, "C")]
    t_env.execute_sql("CREATE TABLE out (a INT, b STRING) WITH ('connector' = 'print')")
    t_env.execute_sql("INSERT INTO out VALUES (1, 'x'), (2, 'y')").wait()
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith("+I")]
    assert lines == ["+I[1, x]", "+I[2, y]"]
    with pytest.raises(SqlValidationError, match="same arity"):
        t_env.sql_query("SELECT * FROM (VALUES (1, 2), (3))")


class _WeightedAvg(AggregateFunction):
    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def accumulate(self, acc: list[int], value: int, weight: int) -> None:
        acc[0] += value * weight
        acc[1] += weight

    def retract(self, acc: list[int], value: int, weight: int) -> None:
        acc[0] -= value * weight
        acc[1] -= weight

    def get_value(self, acc: list[int]) -> int | None:
        return None if acc[1] == 0 else acc[0] // acc[1]


def test_registered_functions_are_called_by_name_as_in_the_table_api() -> None:
    t_env, t = _with_t(parallelism=2)
    twice = udf(lambda x: None if x is None else 2 * x, result_type=DataTypes.BIGINT())
    wavg = udaf(_WeightedAvg(), result_type=DataTypes.BIGINT(), name="wavg")
    split = udtf(lambda s: [(s,)], result_types=[DataTypes.STRING()])
    t_env.create_temporary_function("twice", twice)
    t_env.create_temporary_system_function("WAVG", wavg)
    t_env.create_temporary_function("split", split)
    from_sql = t_env.sql_query(
        "SELECT k, Twice(SUM(v)) AS s, wavg(id, v) AS w FROM t WHERE v IS NOT NULL GROUP BY k"
    )
    from_dsl = (
        t.filter(col("v").is_not_null)
        .group_by(col("k"))
        .select(
            col("k"),
            twice(col("v").sum).alias("s"),
            wavg(col("id"), col("v")).alias("w"),
        )
    )
    assert from_sql.explain() == from_dsl.explain()
    assert _retract_view(_changes(from_sql)) == _retract_view(_changes(from_dsl))
    with pytest.raises(SqlValidationError, match="Table function split is called in FROM"):
        t_env.sql_query("SELECT split(k) FROM t")
    assert t_env.list_user_defined_functions() == ["split", "twice", "wavg"]
