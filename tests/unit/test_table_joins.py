"""Regular equi-joins of the Table API on the in-process executor: Flink's example rows, and
random changelogs on both sides whose joined changelog, applied to a view, equals the join of
the two inputs' final views."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from cairn.table import EnvironmentSettings, TableEnvironment, ValidationError
from cairn.table.expressions import col
from cairn.testing.changelog import rows_view

PEOPLE = [
    (1, "Flink", "Germany"),
    (2, "hello", "China"),
    (3, "world", "USA"),
    (4, "PyFlink", "China"),
]
AGES = [(1, 18), (2, 30), (3, 25), (4, 10)]


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    return t_env


def _view(table: Any) -> Counter[tuple[Any, ...]]:
    """The multiset of rows the changelog leaves; a retraction must retract a live row."""
    return rows_view(table.execute().collect())


def test_flinks_join_example() -> None:
    t_env = _t_env()
    people = t_env.from_elements(PEOPLE, ["id", "name", "country"])
    ages = t_env.from_elements(AGES, ["id", "age"]).rename_columns(col("id").alias("r_id"))
    joined = people.join(ages, col("id") == col("r_id"))
    assert joined.get_schema().names == ["id", "name", "country", "r_id", "age"]
    assert sorted(_view(joined)) == [
        (1, "Flink", "Germany", 1, 18),
        (2, "hello", "China", 2, 30),
        (3, "world", "USA", 3, 25),
        (4, "PyFlink", "China", 4, 10),
    ]
    assert "changelogMode=[I]" in joined.explain().splitlines()[1]
    where = people.join(ages).where((col("id") == col("r_id")) & (col("age") > 20))
    assert sorted(r[0] for r in _view(where)) == [2, 3]


def test_joins_of_updating_tables_end_at_the_join_of_their_final_views() -> None:
    rng = random.Random(7)
    orders = [(rng.randint(1, 30), rng.choice("abcd"), rng.randint(1, 9)) for _ in range(200)]
    users = [(rng.choice("abcdef"), rng.randint(0, 3)) for _ in range(60)]
    t_env = _t_env()
    per_user = (
        t_env.from_elements(orders, ["o", "user", "amount"])
        .group_by(col("user"))
        .select(col("user"), col("amount").sum.alias("total"))
    )
    tiers = (
        t_env.from_elements(users, ["name", "tier"])
        .group_by(col("name"))
        .select(col("name"), col("tier").max.alias("tier"))
    )
    inner = per_user.join(tiers, col("user") == col("name"))
    outer = per_user.left_outer_join(tiers, col("user") == col("name"))
    totals: dict[str, int] = {}
    for _, user, amount in orders:
        totals[user] = totals.get(user, 0) + amount
    top: dict[str, int] = {}
    for name, tier in users:
        top[name] = max(top.get(name, tier), tier)
    expected_inner = Counter((u, t, u, top[u]) for u, t in totals.items() if u in top)
    assert _view(inner) == expected_inner
    expected_outer = Counter((u, t, u if u in top else None, top.get(u)) for u, t in totals.items())
    assert _view(outer) == expected_outer


def test_join_mistakes_fail_when_the_query_is_built() -> None:
    t_env = _t_env()
    people = t_env.from_elements(PEOPLE, ["id", "name", "country"])
    ages = t_env.from_elements(AGES, ["id", "age"])
    with pytest.raises(ValidationError, match="duplicate column names: id"):
        people.join(ages, col("id") == col("id"))
    renamed = ages.rename_columns(col("id").alias("r_id"))
    with pytest.raises(ValidationError, match="needs an equality between a column of each"):
        people.join(renamed, col("id") > col("r_id"))
