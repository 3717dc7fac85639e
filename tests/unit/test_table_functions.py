"""Flink's built-in scalar functions, from the registry (``cairn.table.functions``).

The key property: every registered function has at least one example with Flink's documented
result, and each example, evaluated through SQL (``SELECT <expr>`` on the in-process
executor: parser, converter, analyzer, generated code, runtime), gives that result. Around
it: the generated ``docs/sql-functions.md`` is current, NULL arguments follow Flink's rule,
the DSL reaches the same functions by PyFlink's method names, and bad calls fail naming the
function.
"""

from __future__ import annotations

import decimal
import hashlib
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn.table import DataTypes, EnvironmentSettings, TableEnvironment
from cairn.table.errors import ValidationError
from cairn.table.expressions import col, lit
from cairn.table.functions import doc, registry

ROOT = Path(__file__).resolve().parents[2]

EXAMPLES = [
    pytest.param(sql, expected, id=f"{f.name}:{sql}")
    for f in registry.all_functions()
    for sql, expected in f.examples
]


@pytest.fixture(scope="module")
def t_env() -> TableEnvironment:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("cairn.executor", "inprocess")
    env.get_config().set("parallelism.default", "1")
    return env


def _evaluate(t_env: TableEnvironment, sql: str) -> Any:
    rows = [tuple(r) for r in t_env.execute_sql(f"SELECT {sql}").collect()]
    assert len(rows) == 1 and len(rows[0]) == 1, rows
    return rows[0][0]


def _same(actual: Any, expected: Any) -> bool:
    if isinstance(expected, float) and isinstance(actual, float):
        return math.isclose(actual, expected, rel_tol=1e-12, abs_tol=1e-15)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            _same(tuple(a) if isinstance(e, tuple) else a, e)
            for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(expected, str | bytes):
        return isinstance(actual, type(expected)) and actual == expected
    return type(actual) is type(expected) and actual == expected


@pytest.mark.parametrize(("sql", "expected"), EXAMPLES)
def test_each_example_gives_flinks_documented_result(
    t_env: TableEnvironment, sql: str, expected: Any
) -> None:
    actual = _evaluate(t_env, sql)
    assert _same(actual, expected), f"{sql} gave {actual!r}, Flink documents {expected!r}"


def test_every_function_has_an_example() -> None:
    missing = [f.name for f in registry.all_functions() if not f.examples]
    assert not missing


def test_the_functions_page_is_generated_from_the_registry() -> None:
    written = (ROOT / "docs" / "sql-functions.md").read_text()
    assert written == doc.page(), (
        "docs/sql-functions.md is stale: python -m cairn.table.functions.doc"
        " > docs/sql-functions.md"
    )


def test_the_doc_module_runs_as_a_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "cairn.table.functions.doc"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == doc.page()


STRICT_WITH_ARGUMENTS = [
    f for f in registry.all_functions() if f.strict and f.implementation and f.min_args > 0
]


@pytest.mark.parametrize("function", STRICT_WITH_ARGUMENTS, ids=lambda f: f.name)
def test_a_null_argument_gives_null(function: Any) -> None:
    """Flink's rule for a strict function: NULL in, NULL out, whatever the other arguments."""
    wrapped = registry.RUNTIME[f"_fnn_{function.name}"]
    args = [None] + ["x"] * (function.min_args - 1)
    assert wrapped(*args) is None


def test_nullable_result_follows_nullable_arguments(t_env: TableEnvironment) -> None:
    table = t_env.sql_query("SELECT UPPER(CAST(NULL AS STRING)) AS a, UPPER('x') AS b")
    types = {c.name: c.data_type for c in table.get_schema().columns}
    assert str(types["a"]) == "STRING" and str(types["b"]) == "STRING NOT NULL"


def test_nexmark_functions_over_a_table(t_env: TableEnvironment) -> None:
    rows = [
        (1, "https://www.nexmark.com/a/b/item.htm?query=1&channel_id=7", "Apple"),
        (2, "https://www.nexmark.com/c/d/item.htm?query=1", "other"),
        (3, None, None),
    ]
    t_env.create_temporary_view(
        "urls",
        t_env.from_elements(
            rows,
            DataTypes.ROW(
                [
                    DataTypes.FIELD("id", DataTypes.INT()),
                    DataTypes.FIELD("url", DataTypes.STRING()),
                    DataTypes.FIELD("channel", DataTypes.STRING()),
                ]
            ),
        ),
    )
    result = t_env.execute_sql(
        "SELECT id, SPLIT_INDEX(url, '/', 3), REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2),"
        " lower(channel) FROM urls"
    )
    assert [tuple(r) for r in result.collect()] == [
        (1, "a", "7", "apple"),
        (2, "c", None, "other"),
        (3, None, None, None),
    ]


def test_the_dsl_reaches_the_registry_by_pyflink_names(t_env: TableEnvironment) -> None:
    table = t_env.from_elements([("Hello,World", -2.5)], ["s", "x"])
    result = table.select(
        col("s").split_index(",", 1),
        col("s").regexp_extract("(H)(e)", 2),
        col("s").md5,
        col("x").sign,
        col("s").init_cap,
        lit(4).bin,
    )
    assert [tuple(r) for r in result.execute().collect()] == [
        ("World", "e", hashlib.md5(b"Hello,World").hexdigest(), -1.0, "Hello,World", "100")
    ]


def test_an_unknown_method_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_function"):
        _ = col("a").no_such_function


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SPLIT_INDEX('a')", "Invalid number of arguments to function 'SPLIT_INDEX': 1"),
        ("UPPER(1)", "argument 1 must be a character string, got <INT NOT NULL>"),
        ("EXTRACT(FORTNIGHT FROM DATE '2020-01-01')", "Unsupported time unit FORTNIGHT"),
        ("DATE '2020-13-01'", "Illegal DATE literal '2020-13-01'"),
    ],
)
def test_bad_calls_fail_naming_the_function(
    t_env: TableEnvironment, sql: str, message: str
) -> None:
    with pytest.raises((ValidationError, ValueError), match=re.escape(message)):
        _evaluate(t_env, sql)


def test_decimal_results_keep_their_type(t_env: TableEnvironment) -> None:
    assert _evaluate(t_env, "TRUNCATE(42.324, 2)") == decimal.Decimal("42.32")
    assert isinstance(_evaluate(t_env, "ROUND(1.25, 1)"), decimal.Decimal)


def test_create_function_registers_a_python_function_by_its_path(
    t_env: TableEnvironment,
) -> None:
    t_env.execute_sql(
        "CREATE TEMPORARY SYSTEM FUNCTION IF NOT EXISTS count_char"
        " AS 'cairn.table.nexmark_functions.CountChar' LANGUAGE PYTHON"
    )
    assert _evaluate(t_env, "count_char('abcabc', 'c')") == 2
    t_env.execute_sql("CREATE FUNCTION IF NOT EXISTS count_char AS 'x.y'")  # kept, not resolved
    t_env.execute_sql("DROP TEMPORARY SYSTEM FUNCTION count_char")
    with pytest.raises(ValidationError, match="count_char"):
        _evaluate(t_env, "count_char('a', 'a')")
    t_env.execute_sql("DROP FUNCTION IF EXISTS count_char")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE FUNCTION f AS 'com.example.F' LANGUAGE JAVA", "LANGUAGE JAVA is not supported"),
        ("CREATE FUNCTION f AS 'no_such_module_x.F'", "Cannot import 'no_such_module_x'"),
        ("CREATE FUNCTION f AS 'cairn.table.nexmark_functions.Nope'", "has no attribute 'Nope'"),
        ("CREATE FUNCTION f AS 'math.pi'", "must be what udf(), udtf() or udaf() returns"),
        ("DROP FUNCTION no_such_f", "Function no_such_f does not exist"),
    ],
)
def test_function_ddl_refusals(t_env: TableEnvironment, sql: str, message: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(message)):
        t_env.execute_sql(sql)
