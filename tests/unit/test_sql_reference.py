"""``docs/sql.md`` tells the truth: each statement and clause it lists runs a probe here, and
a row marked **built** must plan and run while a row marked **not built** must be refused with
a positioned SQL error; a row without a probe, or a probe without a row, fails the test."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.datastream.stream_execution_environment import reset_context_defaults
from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment
from cairn.table.sql.errors import SqlParserError, SqlValidationError
from cairn.table.udf import udtf

DOC = Path(__file__).resolve().parents[2] / "docs" / "sql.md"

SETUP = [
    "CREATE TABLE src (k STRING, v BIGINT, ts TIMESTAMP(3),"
    " pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)"
    " WITH ('connector' = 'datagen', 'number-of-rows' = '20', 'fields.k.length' = '1')",
    "CREATE TABLE o (k STRING, v BIGINT) WITH ('connector' = 'blackhole')",
    "CREATE TABLE side (key BIGINT, name STRING) WITH ('connector' = 'filesystem',"
    " 'path' = '{tmp}/side', 'format' = 'csv')",
    "CREATE VIEW versioned AS SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER"
    " (PARTITION BY k ORDER BY ts DESC) AS rn FROM src) WHERE rn = 1",
]

#: One probe per row of docs/sql.md.
PROBES = {
    "`CREATE TABLE`": "CREATE TABLE t1 (a INT) WITH ('connector' = 'blackhole')",
    "`CREATE TABLE ... LIKE`": "CREATE TABLE c2 WITH ('number-of-rows' = '3') LIKE src",
    "`CREATE TABLE ... AS SELECT`": (
        "CREATE TABLE ctas WITH ('connector' = 'blackhole') AS SELECT k, v FROM src"
    ),
    "`CREATE VIEW`": "CREATE VIEW vv AS SELECT k FROM src",
    "`CREATE TEMPORARY VIEW`": "CREATE TEMPORARY VIEW vv2 AS SELECT k FROM src",
    "`CREATE FUNCTION`": (
        "CREATE FUNCTION cc AS 'cairn.table.nexmark_functions.CountChar' LANGUAGE PYTHON"
    ),
    "`CREATE CATALOG`": "CREATE CATALOG c WITH ('type' = 'generic_in_memory')",
    "`CREATE DATABASE`": "CREATE DATABASE d",
    "`ALTER TABLE`": "ALTER TABLE o RENAME TO o2",
    "`DROP VIEW`": "DROP VIEW versioned",
    "`DROP TABLE IF EXISTS`": "DROP TABLE IF EXISTS nothere",
    "`SHOW TABLES`": "SHOW TABLES",
    "`SHOW VIEWS`": "SHOW VIEWS",
    "`SHOW FUNCTIONS`": "SHOW FUNCTIONS",
    "`SHOW CATALOGS`": "SHOW CATALOGS",
    "`SHOW DATABASES`": "SHOW DATABASES",
    "`SHOW CREATE TABLE`": "SHOW CREATE TABLE src",
    "`SHOW COLUMNS`": "SHOW COLUMNS FROM src",
    "`SHOW JOBS`": "SHOW JOBS",
    "`SHOW MODULES`": "SHOW MODULES",
    "`DESCRIBE`": "DESCRIBE src",
    "`EXPLAIN`": "EXPLAIN SELECT * FROM src",
    "`USE`": "USE default_database",
    "`LOAD MODULE`": "LOAD MODULE hive",
    "`SET`": "SET 'parallelism.default' = '1'",
    "`RESET`": "RESET 'parallelism.default'",
    "`INSERT INTO`": "INSERT INTO o SELECT k, v FROM src",
    "`INSERT INTO ... VALUES`": "INSERT INTO o VALUES ('a', 1)",
    "`INSERT OVERWRITE`": "INSERT OVERWRITE o SELECT k, v FROM src",
    "`EXECUTE STATEMENT SET`": (
        "EXECUTE STATEMENT SET BEGIN INSERT INTO o SELECT k, v FROM src; END"
    ),
    "`COMPILE PLAN`": "COMPILE PLAN '{tmp}/plan.json' FOR INSERT INTO o SELECT k, v FROM src",
    "`ANALYZE TABLE`": "ANALYZE TABLE src COMPUTE STATISTICS",
    "`TRUNCATE TABLE`": "TRUNCATE TABLE o",
    "`UPDATE`": "UPDATE o SET v = 1",
    "`DELETE`": "DELETE FROM o",
    "`CALL`": "CALL sys.x()",
    "`SELECT ... FROM ... WHERE`": "SELECT k, v FROM src WHERE v > 0",
    "`SELECT` without `FROM`": "SELECT 1 + 1",
    "`VALUES`": "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(a, b)",
    "`WITH`": "WITH x AS (SELECT k FROM src) SELECT * FROM x",
    "`SELECT DISTINCT`": "SELECT DISTINCT k FROM src",
    "`GROUP BY` / `HAVING`": "SELECT k, COUNT(*) FROM src GROUP BY k HAVING COUNT(*) > 1",
    "`GROUPING SETS`": "SELECT k, COUNT(*) FROM src GROUP BY GROUPING SETS ((k), ())",
    "window TVFs": (
        "SELECT window_start, COUNT(*) FROM TABLE(CUMULATE(TABLE src, DESCRIPTOR(ts),"
        " INTERVAL '1' SECOND, INTERVAL '3' SECOND)) GROUP BY window_start, window_end"
    ),
    "`OVER`": (
        "SELECT k, SUM(v) OVER (PARTITION BY k ORDER BY ts"
        " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM src"
    ),
    "`ROW_NUMBER` Top-N": (
        "SELECT * FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC)"
        " AS rn FROM src) WHERE rn <= 2"
    ),
    "`ORDER BY`": "SELECT * FROM src ORDER BY ts",
    "`ORDER BY ... LIMIT`": "SELECT * FROM src ORDER BY v DESC LIMIT 3",
    "`LIMIT`": "SELECT * FROM src LIMIT 3",
    "`OFFSET`": "SELECT * FROM src ORDER BY v DESC LIMIT 3 OFFSET 1",
    "`UNION ALL`": "SELECT k FROM src UNION ALL SELECT k FROM src",
    "`UNION`": "SELECT k FROM src UNION SELECT k FROM src",
    "`INTERSECT`": "SELECT k FROM src INTERSECT SELECT k FROM src",
    "`EXCEPT`": "SELECT k FROM src EXCEPT SELECT k FROM src",
    "`JOIN`": "SELECT a.k, b.v FROM src a FULL JOIN src b ON MOD(a.v, 3) = b.v",
    "interval join": (
        "SELECT a.k FROM src a JOIN src b ON a.k = b.k"
        " AND a.ts BETWEEN b.ts - INTERVAL '1' SECOND AND b.ts"
    ),
    "temporal join": (
        "SELECT s.k, r.v FROM src s JOIN versioned FOR SYSTEM_TIME AS OF s.ts AS r ON s.k = r.k"
    ),
    "lookup join": (
        "SELECT s.k, x.name FROM src s LEFT JOIN side FOR SYSTEM_TIME AS OF s.pt AS x"
        " ON s.v = x.key"
    ),
    "`LATERAL TABLE`": "SELECT k, w FROM src, LATERAL TABLE(letters(k)) AS t(w)",
    "`CROSS JOIN`": "SELECT * FROM src CROSS JOIN (SELECT * FROM src WHERE v < 0) AS n",
    "`CROSS JOIN UNNEST`": (
        "SELECT k, x FROM (SELECT k, ARRAY[1, 2] AS a FROM src) CROSS JOIN UNNEST(a) AS t(x)"
    ),
    "`IN` subquery": "SELECT * FROM src WHERE k NOT IN (SELECT k FROM src WHERE v > 0)",
    "`EXISTS` subquery": ("SELECT * FROM src s WHERE EXISTS (SELECT 1 FROM src t WHERE t.k = s.k)"),
    "scalar subquery": "SELECT k, (SELECT MAX(v) FROM src) FROM src",
    "`MATCH_RECOGNIZE`": (
        "SELECT * FROM src MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.v AS av"
        " PATTERN (A) DEFINE A AS A.v > 0)"
    ),
    "hint `OPTIONS`": "SELECT * FROM src /*+ OPTIONS('number-of-rows' = '2') */",
    "hint `STATE_TTL`": ("SELECT /*+ STATE_TTL('src' = '1d') */ k, COUNT(*) FROM src GROUP BY k"),
}


@udtf(result_types=[DataTypes.STRING()])
def _letters(s: str) -> Iterator[tuple[str]]:
    for c in s:
        yield (c,)


def _rows() -> dict[str, str]:
    """Each documented row's first cell and status."""
    out = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in ("built", "not built"):
            out[cells[0]] = cells[1]
    return out


@pytest.fixture(autouse=True)
def _reset() -> Iterator[None]:
    yield
    reset_context_defaults()


def test_every_row_has_a_probe_and_every_probe_a_row() -> None:
    assert set(_rows()) == set(PROBES)


@pytest.mark.parametrize("row", sorted(PROBES))
def test_the_row_says_what_cairn_does(row: str, tmp_path: Path) -> None:
    (tmp_path / "side").mkdir()
    (tmp_path / "side" / "a.csv").write_text("1,one\n2,two\n")
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    t_env.create_temporary_function("letters", _letters)
    for statement in SETUP:
        t_env.execute_sql(statement.format(tmp=tmp_path))
    probe = PROBES[row].format(tmp=tmp_path)
    if _rows()[row] == "not built":
        with pytest.raises((SqlParserError, SqlValidationError)) as refused:
            t_env.execute_sql(probe)
        assert re.search(r"line \d+, column \d+", str(refused.value)), str(refused.value)
        return
    result = t_env.execute_sql(probe)
    result.wait()
    if result.get_result_kind().name == "SUCCESS_WITH_CONTENT":
        list(result.collect())
