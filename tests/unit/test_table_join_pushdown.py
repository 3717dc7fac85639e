"""Filters and projections over a join move below it only where the join's result stays the
same: a preserved side's filters go down, a NULL-padded side's stay above, and the join
keeps only the columns read above it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from cairn.table import EnvironmentSettings, Table, TableEnvironment

PEOPLE = [(1, "Flink", "DE"), (2, "hello", "CN"), (3, "world", "US"), (5, None, "US")]
AGES = [(1, 18), (2, 30), (4, 10), (5, None)]


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    t_env.create_temporary_view("people", t_env.from_elements(PEOPLE, ["id", "name", "country"]))
    t_env.create_temporary_view("ages", t_env.from_elements(AGES, ["id", "age"]))
    return t_env


def _view(table: Table) -> Counter[tuple[Any, ...]]:
    view: Counter[tuple[Any, ...]] = Counter()
    for r in table.execute().collect():
        view[tuple(r)] += 1 if r.get_row_kind().short_string() in ("+I", "+U") else -1
    return +view


def _expected(join_type: str, where: Any) -> Counter[tuple[Any, ...]]:
    """The join of PEOPLE and AGES on id, then ``where`` (a Python predicate), by hand."""
    rows = []
    for p in PEOPLE:
        matches = [a for a in AGES if a[0] == p[0]]
        rows += [(*p, *a) for a in matches]
        if not matches and join_type in ("LEFT", "FULL"):
            rows.append((*p, None, None))
    for a in AGES:
        if join_type in ("RIGHT", "FULL") and not any(p[0] == a[0] for p in PEOPLE):
            rows.append((None, None, None, *a))
    return Counter(r for r in rows if where(r))


def _join_inputs(plan: str) -> list[str]:
    """The lines of the join's two inputs in ``explain`` text."""
    lines = plan.splitlines()
    column = next(line.index("Join(") for line in lines if "Join(" in line)
    return [
        line
        for line in lines
        if line[column : column + 3] == "+- " and not line[:column].strip(" :")
    ]


CASES = [
    # (join type, WHERE, the same in Python, pushed to the left, pushed to the right)
    ("INNER", "p.country = 'US' AND a.age > 5", lambda r: r[2] == "US" and (r[4] or 0) > 5, 1, 1),
    ("LEFT", "a.age IS NULL", lambda r: r[4] is None, 0, 0),
    ("LEFT", "p.country <> 'CN' AND a.age IS NULL", lambda r: r[2] != "CN" and r[4] is None, 1, 0),
    ("RIGHT", "p.name IS NULL AND a.age < 20", lambda r: r[1] is None and (r[4] or 99) < 20, 0, 1),
    ("FULL", "p.country = 'US'", lambda r: r[2] == "US", 0, 0),
]


@pytest.mark.parametrize(("join_type", "where", "check", "left", "right"), CASES)
def test_filters_move_below_a_join_only_to_a_side_it_does_not_pad(
    join_type: str, where: str, check: Any, left: int, right: int
) -> None:
    t_env = _t_env()
    query = t_env.sql_query(
        f"SELECT p.id, p.name, p.country, a.id AS aid, a.age FROM people AS p "
        f"{join_type} JOIN ages AS a ON p.id = a.id WHERE {where}"
    )
    plan = query.explain().split("== Optimized Logical Plan ==")[1].split("advice")[0]
    assert [("where=" in side) for side in _join_inputs(plan)] == [bool(left), bool(right)], plan
    assert _view(query) == _expected(join_type, check)


def test_a_join_keeps_only_the_columns_read_above_it() -> None:
    t_env = _t_env()
    query = t_env.sql_query(
        "SELECT p.name, a.age FROM people AS p JOIN ages AS a ON p.id = a.id WHERE p.id > 1"
    )
    plan = query.explain().split("== Optimized Logical Plan ==")[1]
    assert "select=[id, name, id0, age]" in plan, plan  # country is not in the join's state
    assert _view(query) == Counter([("hello", 30), (None, None)])
