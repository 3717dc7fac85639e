"""SQL joins and ``LATERAL TABLE`` against the Table API forms they stand for: the same
``explain()`` text and the same rows; what Cairn does not join is refused with its place."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from cairn.table import DataTypes, EnvironmentSettings, Table, TableEnvironment
from cairn.table.expressions import col
from cairn.table.sql.errors import SqlValidationError
from cairn.table.udf import udtf

PEOPLE = [(1, "Flink", "Germany"), (2, "hello", "China"), (3, "world", "USA")]
AGES = [(1, 18), (2, 30), (4, 10)]


@udtf(result_types=[DataTypes.STRING(), DataTypes.INT()])
def _letters(s: str) -> Any:
    for i, c in enumerate(s[:2]):
        yield c, i


def _t_env() -> tuple[TableEnvironment, Table, Table]:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
    people = t_env.from_elements(PEOPLE, ["id", "name", "country"])
    ages = t_env.from_elements(AGES, ["id", "age"])
    t_env.create_temporary_view("people", people)
    t_env.create_temporary_view("ages", ages)
    t_env.create_temporary_function("letters", _letters)
    return t_env, people, ages


def _view(table: Table) -> Counter[tuple[Any, ...]]:
    view: Counter[tuple[Any, ...]] = Counter()
    for r in table.execute().collect():
        view[tuple(r)] += 1 if r.get_row_kind().short_string() in ("+I", "+U") else -1
    return +view


def _same(from_sql: Table, from_api: Table) -> None:
    assert from_sql.get_schema().names == from_api.get_schema().names
    assert from_sql.explain() == from_api.explain()
    assert _view(from_sql) == _view(from_api)


def test_an_inner_join_renames_the_right_sides_clashing_columns_as_calcite_does() -> None:
    t_env, people, ages = _t_env()
    from_sql = t_env.sql_query("SELECT * FROM people JOIN ages ON people.id = ages.id")
    from_api = people.join(ages.alias("id0", "age"), col("id") == col("id0"))
    _same(from_sql, from_api)
    assert from_sql.get_schema().names == ["id", "name", "country", "id0", "age"]
    assert sorted(_view(from_sql)) == [(1, "Flink", "Germany", 1, 18), (2, "hello", "China", 2, 30)]


def test_aliases_qualified_stars_and_a_condition_beside_the_equality() -> None:
    t_env, people, ages = _t_env()
    from_sql = t_env.sql_query(
        "SELECT p.*, a.age FROM people AS p INNER JOIN ages a ON p.id = a.id AND a.age > 20"
    )
    from_api = people.join(
        ages.alias("id0", "age"), (col("id") == col("id0")) & (col("age") > 20)
    ).select(col("id"), col("name"), col("country"), col("age"))
    _same(from_sql, from_api)
    assert sorted(_view(from_sql)) == [(2, "hello", "China", 30)]


def test_a_self_join_names_a_qualified_column_by_its_own_name_as_flink_does() -> None:
    t_env, people, _ = _t_env()
    from_sql = t_env.sql_query(
        "SELECT u.id, t.id, u.name FROM people AS t JOIN people AS u ON t.id = u.id"
    )
    right = people.alias("id0", "name0", "country0")
    from_api = people.join(right, col("id") == col("id0")).select(
        col("id0").alias("id"), col("id").alias("id0"), col("name0").alias("name")
    )
    _same(from_sql, from_api)
    assert sorted(_view(from_sql)) == [(1, 1, "Flink"), (2, 2, "hello"), (3, 3, "world")]


def test_a_left_outer_join_keeps_unmatched_rows_with_nulls() -> None:
    t_env, people, ages = _t_env()
    from_sql = t_env.sql_query(
        "SELECT p.name, a.age FROM people p LEFT OUTER JOIN ages a ON a.id = p.id"
    )
    from_api = people.left_outer_join(ages.alias("id0", "age"), col("id0") == col("id")).select(
        col("name"), col("age")
    )
    _same(from_sql, from_api)
    assert sorted(_view(from_sql), key=str) == [("Flink", 18), ("hello", 30), ("world", None)]


def test_lateral_table_calls_a_registered_table_function_per_row() -> None:
    t_env, people, _ = _t_env()
    from_sql = t_env.sql_query("SELECT * FROM people, LATERAL TABLE(letters(name)) t(c, i)")
    from_api = people.join_lateral(_letters(col("name")).alias("c", "i"))
    _same(from_sql, from_api)
    assert len(list(from_sql.execute().collect())) == 6
    joined = t_env.sql_query(
        "SELECT id, c FROM people JOIN LATERAL TABLE(letters(country)) AS T(c, i) ON TRUE"
    )
    api = people.join_lateral(_letters(col("country")).alias("c", "i")).select(col("id"), col("c"))
    _same(joined, api)
    assert (
        t_env.explain_sql(
            "SELECT id, c FROM people JOIN LATERAL TABLE(letters(country)) AS T(c, i) ON TRUE"
        )
        == api.explain()
    )


def test_a_left_join_lateral_keeps_rows_the_function_yields_nothing_for() -> None:
    t_env, _, _ = _t_env()
    t_env.create_temporary_view("empty_named", t_env.from_elements([(9, "")], ["id", "name"]))
    from_sql = t_env.sql_query(
        "SELECT id, c FROM empty_named LEFT JOIN LATERAL TABLE(letters(name)) AS T(c, i) ON TRUE"
    )
    assert sorted(_view(from_sql)) == [(9, None)]
    assert "joinType=[LEFT]" in from_sql.explain()


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("SELECT * FROM people SEMI JOIN ages ON people.id = ages.id", "SEMI JOIN", 1, 22),
        ("SELECT * FROM people LEFT JOIN ages", "LEFT JOIN needs ON", 1, 22),
        ("SELECT * FROM people JOIN people ON id = id", "Duplicate relation name", 1, 27),
        ("SELECT id FROM people JOIN ages ON people.id = ages.id", "'id' is ambiguous", 1, 8),
        ("SELECT p.age FROM people p JOIN ages a ON p.id = a.id", "'age' not found in", 1, 8),
        (
            "SELECT * FROM people\nJOIN LATERAL TABLE(letters(name)) AS T(c, i) ON id = 1",
            "ON TRUE only",
            2,
            49,
        ),
        ("SELECT * FROM people, LATERAL TABLE(upper(name)) AS T(c)", "No table function", 1, 37),
    ],
)
def test_joins_cairn_does_not_run_are_refused_with_their_place(
    sql: str, message: str, line: int, column: int
) -> None:
    t_env, _, _ = _t_env()
    with pytest.raises(SqlValidationError) as caught:
        t_env.sql_query(sql)
    assert message in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)


@pytest.mark.parametrize("join", ["JOIN", "LEFT JOIN", "FULL JOIN"])
def test_an_expression_key_is_computed_below_the_join_and_dropped_after_it(join: str) -> None:
    t_env, _, _ = _t_env()
    sql = (
        f"SELECT people.id, name, age FROM people {join} ages"
        " ON MOD(people.id + 1, 3) = ages.id - 1 AND age > 15"
    )
    table = t_env.sql_query(sql)
    assert table.get_schema().names == ["id", "name", "age"]
    plan = table.explain()
    assert "mod(plus(id, 1), 3) AS $left_key0" in plan and "minus(id0, 1) AS $right_key0" in plan
    expected: Counter[tuple[Any, ...]] = Counter()  # the join computed here, row by row
    matched_ages = set()
    for pid, name, _ in PEOPLE:
        hits = [(aid, age) for aid, age in AGES if (pid + 1) % 3 == aid - 1 and age > 15]
        matched_ages |= set(hits)
        for _, age in hits:
            expected[(pid, name, age)] += 1
        if not hits and join != "JOIN":
            expected[(pid, name, None)] += 1
    if join == "FULL JOIN":
        for aid, age in AGES:
            if (aid, age) not in matched_ages:
                expected[(None, None, age)] += 1
    assert _view(table) == expected
    assert len(expected) >= 2  # rows that matched through the expression keys
