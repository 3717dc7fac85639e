"""An aggregate reads only the input columns it uses: the plan narrows its input, and its
keys, arguments and FILTER columns still point at the right columns."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cairn.table import EnvironmentSettings, TableEnvironment

ROWS = [
    ("x", 1, "a", 10, True),
    ("y", 2, "a", 20, False),
    ("z", 3, "b", 30, True),
    ("w", 4, "b", 30, True),
    ("v", 5, "a", 10, None),
]


def _view(rows: Any) -> Counter[tuple[Any, ...]]:
    view: Counter[tuple[Any, ...]] = Counter()
    for r in rows:
        view[tuple(r)] += 1 if r.get_row_kind().short_string() in ("+I", "+U") else -1
    return +view


def test_an_aggregate_over_some_columns_narrows_its_input_and_keeps_its_results() -> None:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    t_env.create_temporary_view("t", t_env.from_elements(ROWS, ["note", "id", "grp", "v", "flag"]))
    query = t_env.sql_query(
        "SELECT grp, COUNT(DISTINCT v) AS d, SUM(v) FILTER (WHERE flag) AS s, MAX(id) AS m "
        "FROM t GROUP BY grp"
    )
    plan = query.explain().split("== Optimized Logical Plan ==")[1]
    assert "Calc(select=[id, grp, v, flag])" in plan, plan  # note is never shuffled
    assert _view(query.execute().collect()) == Counter([("a", 2, 10, 5), ("b", 1, 60, 4)])
