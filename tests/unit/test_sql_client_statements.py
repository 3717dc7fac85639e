"""The SQL client's statements and ``WITH``, on the in-process executor: each gives Flink's
rows (``SHOW``, ``EXPLAIN``, ``SET``/``RESET``), changes what Flink changes (``USE``,
``RESET``, ``CREATE TABLE ... LIKE``/``AS SELECT``), and refuses what Cairn lacks naming the
place in the statement."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlParserError, SqlValidationError

SRC = (
    "CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3),"
    " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
    " WITH ('connector' = 'datagen', 'number-of-rows' = '5', 'fields.v.kind' = 'sequence',"
    " 'fields.v.start' = '1', 'fields.v.end' = '5', 'fields.k.length' = '1')"
)


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    t_env.execute_sql(SRC)
    return t_env


def _rows(t_env: TableEnvironment, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in t_env.execute_sql(sql).collect()]


# -- WITH -------------------------------------------------------------------------------------


def test_ctes_see_the_ones_before_them_and_rename_their_columns() -> None:
    t_env = _t_env()
    rows = _rows(
        t_env,
        "WITH a (n) AS (SELECT v FROM src WHERE v > 2),"
        " b AS (SELECT n * 10 AS m FROM a)"
        " SELECT m FROM b UNION ALL SELECT n FROM a",
    )
    assert sorted(rows) == [(3,), (4,), (5,), (30,), (40,), (50,)]


def test_a_cte_hides_a_table_of_its_name_and_is_gone_after_the_query() -> None:
    t_env = _t_env()
    assert _rows(t_env, "WITH src AS (SELECT 7 AS x) SELECT * FROM src") == [(7,)]
    assert t_env.list_tables() == ["src"]
    assert len(_rows(t_env, "SELECT * FROM src")) == 5


def test_with_in_a_view_a_subquery_and_an_insert() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE VIEW big AS WITH b AS (SELECT k, v FROM src WHERE v >= 4) SELECT v FROM b"
    )
    nested = "SELECT * FROM (WITH c AS (SELECT v FROM big) SELECT v FROM c)"
    assert sorted(_rows(t_env, nested)) == [(4,), (5,)]
    t_env.execute_sql("CREATE TABLE out1 (v BIGINT) WITH ('connector' = 'blackhole')")
    t_env.execute_sql("INSERT INTO out1 WITH d AS (SELECT v FROM src) SELECT v FROM d").wait()


@pytest.mark.parametrize(
    ("sql", "message", "column"),
    [
        ("WITH a AS (SELECT 1 AS x) SELECT * FROM b", "Object 'b' not found", 41),
        ("WITH a AS (SELECT 1 AS x), a AS (SELECT 2 AS y) SELECT * FROM a", "Duplicate name", 28),
        ("WITH a (p, q) AS (SELECT 1 AS x) SELECT * FROM a", "same degree as table", 6),
        ("WITH a AS (SELECT * FROM b) SELECT 1", "Object 'b' not found", 26),
    ],
)
def test_with_errors_name_their_place(sql: str, message: str, column: int) -> None:
    with pytest.raises(SqlValidationError, match=message) as caught:
        _t_env().sql_query(sql)
    assert (caught.value.line, caught.value.column) == (1, column)


def test_with_before_insert_is_refused_at_with() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE TABLE out1 (v BIGINT) WITH ('connector' = 'blackhole')")
    with pytest.raises(SqlValidationError, match="WITH comes after INSERT INTO t") as caught:
        t_env.execute_sql("WITH d AS (SELECT v FROM src) INSERT INTO out1 SELECT v FROM d")
    assert (caught.value.line, caught.value.column) == (1, 1)


# -- SHOW -------------------------------------------------------------------------------------


def test_show_lists_the_one_catalog_database_and_module() -> None:
    t_env = _t_env()
    assert _rows(t_env, "SHOW CATALOGS") == [("default_catalog",)]
    assert _rows(t_env, "SHOW CURRENT CATALOG") == [("default_catalog",)]
    assert _rows(t_env, "SHOW DATABASES LIKE 'default%'") == [("default_database",)]
    assert _rows(t_env, "show current database;") == [("default_database",)]
    assert _rows(t_env, "SHOW MODULES") == [("core",)]
    assert _rows(t_env, "SHOW FULL MODULES") == [("core", True)]
    result = t_env.execute_sql("SHOW CURRENT DATABASE")
    assert result.get_table_schema().names == ["current database name"]


def test_show_tables_views_and_functions_with_like() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE VIEW small AS SELECT v FROM src WHERE v < 3")
    t_env.execute_sql("CREATE FUNCTION cc AS 'cairn.table.nexmark_functions.CountChar'")
    assert _rows(t_env, "SHOW TABLES") == [("small",), ("src",)]
    assert _rows(t_env, "SHOW TABLES FROM default_catalog.default_database NOT LIKE 's_c'") == [
        ("small",)
    ]
    assert _rows(t_env, "SHOW VIEWS") == [("small",)]
    assert _rows(t_env, "SHOW USER FUNCTIONS") == [("cc",)]
    functions = [r[0] for r in _rows(t_env, "SHOW FUNCTIONS")]
    assert {"cc", "upper", "count", "tumble", "json_value"} <= set(functions)
    assert functions == sorted(functions)
    assert _rows(t_env, "SHOW FUNCTIONS ILIKE 'UPP%'") == [("upper",)]


def test_show_columns_is_describe_filtered() -> None:
    t_env = _t_env()
    assert _rows(t_env, "SHOW COLUMNS FROM src LIKE '%s'") == [
        ("ts", "TIMESTAMP(3) *ROWTIME*", "TRUE", "", "", "ts - INTERVAL '1' SECOND")
    ]
    assert [r[0] for r in _rows(t_env, "SHOW COLUMNS IN src NOT LIKE 'k'")] == ["v", "ts"]


def test_show_create_table_prints_flinks_ddl() -> None:
    t_env = _t_env()
    t_env.execute_sql(
        "CREATE TEMPORARY TABLE kv (id BIGINT, name STRING, doubled AS id * 2,"
        " part STRING, off BIGINT METADATA FROM 'offset' VIRTUAL, PRIMARY KEY (id) NOT ENFORCED)"
        " PARTITIONED BY (part) WITH ('connector' = 'filesystem', 'path' = '/tmp/x',"
        " 'format' = 'csv')"
    )
    ((src,),) = _rows(t_env, "SHOW CREATE TABLE src")
    assert src == (
        "CREATE TABLE `default_catalog`.`default_database`.`src` (\n"
        "  `k` VARCHAR(2147483647),\n"
        "  `v` BIGINT,\n"
        "  `ts` TIMESTAMP(3),\n"
        "  WATERMARK FOR `ts` AS `ts` - INTERVAL '1' SECOND\n"
        ") WITH (\n"
        "  'connector' = 'datagen',\n"
        "  'number-of-rows' = '5',\n"
        "  'fields.v.kind' = 'sequence',\n"
        "  'fields.v.start' = '1',\n"
        "  'fields.v.end' = '5',\n"
        "  'fields.k.length' = '1'\n"
        ")\n"
    )
    ((kv,),) = _rows(t_env, "SHOW CREATE TABLE default_database.kv")
    assert kv == (
        "CREATE TEMPORARY TABLE `default_catalog`.`default_database`.`kv` (\n"
        "  `id` BIGINT NOT NULL,\n"
        "  `name` VARCHAR(2147483647),\n"
        "  `doubled` AS `id` * 2,\n"
        "  `part` VARCHAR(2147483647),\n"
        "  `off` BIGINT METADATA FROM 'offset' VIRTUAL,\n"
        "  CONSTRAINT `PK_id` PRIMARY KEY (`id`) NOT ENFORCED\n"
        ")\n"
        "PARTITIONED BY (`part`)\n"
        "WITH (\n"
        "  'connector' = 'filesystem',\n"
        "  'path' = '/tmp/x',\n"
        "  'format' = 'csv'\n"
        ")\n"
    )


def test_show_create_view_and_the_wrong_kind_of_object() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE TEMPORARY VIEW low AS SELECT k, v FROM src WHERE v < 3;")
    assert _rows(t_env, "SHOW CREATE VIEW low") == [
        (
            "CREATE TEMPORARY VIEW `default_catalog`.`default_database`.`low` (\n"
            "  `k`,\n  `v`\n)\nAS SELECT k, v FROM src WHERE v < 3\n",
        )
    ]
    with pytest.raises(SqlValidationError, match=r"is a view\. Please use SHOW CREATE VIEW"):
        t_env.execute_sql("SHOW CREATE TABLE low")
    with pytest.raises(SqlValidationError, match=r"is a table\. Please use SHOW CREATE TABLE"):
        t_env.execute_sql("SHOW CREATE VIEW src")


def test_show_jobs_lists_the_jobs_this_environment_started() -> None:
    t_env = _t_env()
    assert _rows(t_env, "SHOW JOBS") == []
    t_env.get_config().set("pipeline.name", "my-query")
    t_env.execute_sql("SELECT * FROM src").wait()
    ((job_id, name, status, started),) = _rows(t_env, "SHOW JOBS")
    assert (name, status) == ("my-query", "FINISHED")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", started)
    assert job_id


@pytest.mark.parametrize(
    ("sql", "error", "message", "column"),
    [
        ("SHOW TABLES FROM other_db", SqlValidationError, "Database other_db does not exist", 18),
        (
            "SHOW COLUMNS FROM nope",
            SqlValidationError,
            "'default_catalog.default_database.nope'",
            19,
        ),
        ("SHOW CREATE TABLE nope", SqlValidationError, "does not exist", 19),
        ("SHOW DATABASES FROM c2", SqlValidationError, "Catalog c2 does not exist", 21),
        ("SHOW PROCEDURES", SqlParserError, 'Encountered "PROCEDURES"', 6),
        ("SHOW TABLES LIKE x", SqlParserError, "the LIKE pattern as a string", 18),
        ("SHOW CURRENT TABLE", SqlParserError, "SHOW CURRENT CATALOG or", 14),
        ("SHOW JOBS now", SqlParserError, "Expected the end of the statement", 11),
    ],
)
def test_show_errors_name_their_place(sql: str, error: type, message: str, column: int) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        _t_env().execute_sql(sql)
    assert (caught.value.line, caught.value.column) == (1, column)


# -- EXPLAIN ----------------------------------------------------------------------------------


def test_explain_of_a_query_is_table_explain() -> None:
    t_env = _t_env()
    expected = t_env.sql_query("SELECT k, COUNT(*) FROM src GROUP BY k").explain()
    for head in ("EXPLAIN", "EXPLAIN PLAN FOR", "EXPLAIN ESTIMATED_COST, CHANGELOG_MODE,"
                 " JSON_EXECUTION_PLAN"):  # fmt: skip
        assert _rows(t_env, f"{head} SELECT k, COUNT(*) FROM src GROUP BY k") == [(expected,)]
    advice = _rows(t_env, "EXPLAIN PLAN_ADVICE SELECT k FROM src")[0][0]
    assert advice.endswith("\nNo available advice...\n")


def test_explain_of_an_insert_puts_the_sink_on_top() -> None:
    t_env = _t_env()
    t_env.execute_sql("CREATE TABLE o (k STRING, n BIGINT) WITH ('connector' = 'blackhole')")
    ((text,),) = _rows(t_env, "EXPLAIN INSERT INTO o SELECT k, v FROM src WHERE v > 1")
    sink = "Sink(table=[default_catalog.default_database.o], fields=[k, v]) changelogMode=[NONE]"
    plain = t_env.sql_query("SELECT k, v FROM src WHERE v > 1").explain()
    assert text.startswith("== Abstract Syntax Tree ==\n" + sink + "\n+- Calc(select=[k, v])")
    assert "== Optimized Logical Plan ==\n" + sink + "\n+- Calc(select=[k, v], where=" in text
    assert text.replace(sink + "\n", "").replace("\n+- ", "\n").replace("\n   ", "\n") == plain
    ((both,),) = _rows(
        t_env,
        "EXPLAIN STATEMENT SET BEGIN INSERT INTO o SELECT k, v FROM src;"
        " INSERT INTO o SELECT k, COUNT(*) FROM src GROUP BY k; END",
    )
    assert both.count("Sink(table=[default_catalog.default_database.o]") == 4
    assert both.split("\n\n")[1].startswith("Sink(table=[default_catalog.default_database.o]")


def test_explain_errors_point_into_its_statement() -> None:
    t_env = _t_env()
    with pytest.raises(SqlValidationError, match="Object 'nope' not found") as caught:
        t_env.execute_sql("EXPLAIN PLAN FOR\nSELECT * FROM nope")
    assert (caught.value.line, caught.value.column) == (2, 15)
    with pytest.raises(SqlParserError, match="EXPLAIN takes a query") as parsed:
        t_env.execute_sql("EXPLAIN")
    assert (parsed.value.line, parsed.value.column) == (1, 8)


# -- USE, RESET, modules ----------------------------------------------------------------------


def test_use_accepts_the_one_catalog_and_database_and_refuses_others() -> None:
    t_env = _t_env()
    for ok in ("USE CATALOG default_catalog", "USE default_database",
               "USE `default_catalog`.`default_database`"):  # fmt: skip
        assert t_env.execute_sql(ok).get_result_kind().name == "SUCCESS"
    with pytest.raises(SqlValidationError, match=r"A catalog with name \[hive\] does not") as c:
        t_env.execute_sql("USE CATALOG hive")
    assert c.value.column == 13
    with pytest.raises(SqlValidationError, match=r"database with name \[db2\]") as d:
        t_env.execute_sql("USE db2")
    assert d.value.column == 5


def test_reset_puts_back_what_the_key_was_before_set() -> None:
    t_env = _t_env()
    env = t_env.get_stream_execution_environment()
    env.configure({"pipeline.name": "env-name", "pipeline.max-parallelism": "64"})
    t_env.execute_sql("SET 'pipeline.name' = 'job'")
    t_env.execute_sql("SET 'pipeline.max-parallelism' = '32'")
    assert env.get_max_parallelism() == 32
    t_env.execute_sql("RESET 'pipeline.max-parallelism'")
    assert env.get_max_parallelism() == 64
    assert _rows(t_env, "SET") == [
        ("cairn.executor", "inprocess"),
        ("parallelism.default", "1"),
        ("pipeline.name", "job"),
    ]
    t_env.execute_sql("RESET;")
    assert _rows(t_env, "SET") == []
    assert env.get_configuration().get_string("pipeline.name", None) == "env-name"
    assert env.get_configuration().get_string("parallelism.default", None) is None
    with pytest.raises(SqlParserError, match="Expected the end of the statement") as caught:
        t_env.execute_sql("RESET 'a' 'b'")
    assert caught.value.column == 11


@pytest.mark.parametrize(
    ("sql", "message", "column"),
    [
        ("LOAD MODULE core", "A module with name 'core' already exists", 13),
        ("LOAD MODULE hive WITH ('hive-version' = '3.1')", "module named 'hive'", 13),
        ("UNLOAD MODULE core", "cannot unload the module core", 15),
        ("UNLOAD MODULE x", "No module with name 'x' exists", 15),
    ],
)
def test_modules_are_refused_with_flinks_reason(sql: str, message: str, column: int) -> None:
    with pytest.raises(SqlValidationError, match=message) as caught:
        _t_env().execute_sql(sql)
    assert (caught.value.line, caught.value.column) == (1, column)
