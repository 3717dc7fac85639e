"""Right and full outer regular joins: the exact changelog Flink's ``StreamingJoinOperator``
emits (hand-checked sequences on the operator, with retractions and updates of both sides),
random updating inputs whose joined changelog ends at the outer join of their final views (a
pure Python oracle), a join restored from a snapshot taken in the middle, and the plan and
its state advice in ``explain()``."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from cairn.graph.transformations import OperatorKind
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import EnvironmentSettings, ExplainDetail, TableEnvironment
from cairn.table.analysis import Columns, resolve
from cairn.table.codegen import CompiledCalc, calc_source
from cairn.table.expressions import col
from cairn.table.join import JoinFunction
from cairn.table.operators import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from cairn.table.types import DataTypes
from cairn.testing.changelog import rows_view

from ._operator_harness import TwoInputHarness, snapshot_operator

N = (None, None)


def _harness(function: JoinFunction, restore: OperatorRestore | None = None) -> TwoInputHarness:
    return TwoInputHarness(
        OperatorKind.KEYED_CO_PROCESS,
        function,
        keyed=True,
        key_selector=lambda r: r[1][0],
        restore=restore,
    )


def _full() -> JoinFunction:
    return JoinFunction(2, True, None, right_outer=True, left_arity=2)


def _take(h: TwoInputHarness) -> list[tuple[int, tuple[Any, ...]]]:
    out = [r for r, _ in h.records()]
    h.batches.clear()
    return out


def test_a_full_outer_join_emits_flinks_changelog() -> None:
    h = _harness(_full())
    h.side(0, [(INSERT, ("k", "l1"))])
    assert _take(h) == [(INSERT, ("k", "l1", *N))]
    h.side(1, [(INSERT, ("k", "r1"))])  # l1's first match: its padded row goes
    assert _take(h) == [(DELETE, ("k", "l1", *N)), (INSERT, ("k", "l1", "k", "r1"))]
    h.side(1, [(INSERT, ("k", "r2"))])
    assert _take(h) == [(INSERT, ("k", "l1", "k", "r2"))]
    h.side(0, [(DELETE, ("k", "l1"))])  # r1 and r2 lose their only match: padded again
    assert _take(h) == [
        (DELETE, ("k", "l1", "k", "r1")),
        (INSERT, (*N, "k", "r1")),
        (DELETE, ("k", "l1", "k", "r2")),
        (INSERT, (*N, "k", "r2")),
    ]
    h.side(0, [(UPDATE_AFTER, ("k", "l2"))])  # an update joins as an insert (+I/-D only)
    assert _take(h) == [
        (DELETE, (*N, "k", "r1")),
        (INSERT, ("k", "l2", "k", "r1")),
        (DELETE, (*N, "k", "r2")),
        (INSERT, ("k", "l2", "k", "r2")),
    ]
    h.side(1, [(UPDATE_BEFORE, ("k", "r1"))])  # l2 still matches r2: no padded row
    assert _take(h) == [(DELETE, ("k", "l2", "k", "r1"))]
    h.side(1, [(DELETE, ("k", "r2"))])  # l2's last match
    assert _take(h) == [(DELETE, ("k", "l2", "k", "r2")), (INSERT, ("k", "l2", *N))]
    h.side(1, [(DELETE, ("k", "r9"))])  # a retraction of a row never seen: nothing
    assert _take(h) == []


def test_a_right_outer_join_pads_right_rows_only() -> None:
    h = _harness(JoinFunction(2, False, None, right_outer=True, left_arity=2))
    h.side(0, [(INSERT, ("k", "l0"))])  # an inner side's row alone: nothing
    h.side(1, [(INSERT, ("j", "r1"))])
    h.side(0, [(INSERT, ("j", "l1"))])
    h.side(0, [(UPDATE_BEFORE, ("j", "l1"))])
    h.side(1, [(DELETE, ("j", "r1"))])
    assert _take(h) == [
        (INSERT, (*N, "j", "r1")),
        (DELETE, (*N, "j", "r1")),
        (INSERT, ("j", "l1", "j", "r1")),
        (DELETE, ("j", "l1", "j", "r1")),
        (INSERT, (*N, "j", "r1")),
        (DELETE, (*N, "j", "r1")),
    ]


def test_duplicate_rows_and_a_condition_count_matches_per_row() -> None:
    # full join on k AND l.v < r.v: a pair failing the condition is no match
    cols = Columns.of(
        [(n, DataTypes.INT()) for n in ("k", "v")] + [(n, DataTypes.INT()) for n in ("rk", "rv")]
    )
    functions: list[Any] = []
    rex = resolve(col("v") < col("rv"), cols)
    condition = CompiledCalc(calc_source(None, rex, functions), functions)
    h = _harness(JoinFunction(2, True, condition, right_outer=True, left_arity=2))
    h.side(0, [(INSERT, (1, 5)), (INSERT, (1, 5))])  # the same row twice
    h.side(1, [(INSERT, (1, 3))])  # 5 < 3 fails: padded alone
    h.side(1, [(INSERT, (1, 9))])
    assert _take(h) == [
        (INSERT, (1, 5, *N)),
        (INSERT, (1, 5, *N)),
        (INSERT, (*N, 1, 3)),
        (DELETE, (1, 5, *N)),
        (DELETE, (1, 5, *N)),
        (INSERT, (1, 5, 1, 9)),
        (INSERT, (1, 5, 1, 9)),
    ]
    h.side(0, [(DELETE, (1, 5))])  # one copy goes; the other still matches (1, 9)
    assert _take(h) == [(DELETE, (1, 5, 1, 9))]


def test_a_row_with_a_null_key_matches_nothing() -> None:
    h = _harness(_full())
    h.side(0, [(INSERT, (None, "l"))])
    h.side(1, [(INSERT, (None, "r"))])
    h.side(0, [(DELETE, (None, "l"))])
    assert _take(h) == [
        (INSERT, (None, "l", *N)),
        (INSERT, (*N, None, "r")),
        (DELETE, (None, "l", *N)),
    ]


def test_a_join_restored_from_a_snapshot_in_the_middle_goes_on_as_one_that_ran_through() -> None:
    rng = random.Random(3)
    changes = _random_changes(rng, 120)
    whole = _harness(_full())
    for side, change in changes:
        whole.side(side, [change])
    expected = _take(whole)
    first = _harness(_full())
    for side, change in changes[:60]:
        first.side(side, [change])
    before = _take(first)
    state, files = snapshot_operator(first.op)
    second = _harness(_full(), OperatorRestore(1, {SubtaskIndex(0): state}, files))
    for side, change in changes[60:]:
        second.side(side, [change])
    assert before + _take(second) == expected


def _random_changes(rng: random.Random, n: int) -> list[tuple[int, tuple[int, tuple[Any, ...]]]]:
    """Inserts and retractions of live rows on both sides, keys 0..3."""
    live: list[list[tuple[Any, ...]]] = [[], []]
    out: list[tuple[int, tuple[int, tuple[Any, ...]]]] = []
    for _ in range(n):
        side = rng.randrange(2)
        if live[side] and rng.random() < 0.4:
            row = live[side].pop(rng.randrange(len(live[side])))
            out.append((side, (rng.choice([DELETE, UPDATE_BEFORE]), row)))
        else:
            row = (rng.randrange(4), rng.randrange(3))
            live[side].append(row)
            out.append((side, (rng.choice([INSERT, UPDATE_AFTER]), row)))
    return out


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    return t_env


def _view(table: Any) -> Counter[tuple[Any, ...]]:
    """The multiset of rows the changelog leaves; a retraction must retract a live row."""
    return rows_view(table.execute().collect())


def _outer_join(
    left: dict[str, int], right: dict[str, int], keep_left: bool, keep_right: bool
) -> Counter[tuple[Any, ...]]:
    """The outer join of two final views (name → value) on the name, in pure Python."""
    out: Counter[tuple[Any, ...]] = Counter()
    for k, v in left.items():
        if k in right:
            out[(k, v, k, right[k])] += 1
        elif keep_left:
            out[(k, v, None, None)] += 1
    if keep_right:
        for k, v in right.items():
            if k not in left:
                out[(None, None, k, v)] += 1
    return out


@pytest.mark.parametrize("seed", [1, 7, 42])
def test_outer_joins_of_updating_tables_end_at_the_join_of_their_final_views(seed: int) -> None:
    rng = random.Random(seed)
    orders = [(rng.randint(1, 30), rng.choice("abcdg"), rng.randint(1, 9)) for _ in range(150)]
    users = [(rng.choice("abcdef"), rng.randint(0, 3)) for _ in range(50)]
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
    totals: dict[str, int] = {}
    for _, user, amount in orders:
        totals[user] = totals.get(user, 0) + amount
    top: dict[str, int] = {}
    for name, tier in users:
        top[name] = max(top.get(name, tier), tier)
    on = col("user") == col("name")
    assert _view(per_user.full_outer_join(tiers, on)) == _outer_join(totals, top, True, True)
    assert _view(per_user.right_outer_join(tiers, on)) == _outer_join(totals, top, False, True)


def test_explain_names_the_join_type_and_warns_of_state_without_ttl() -> None:
    t_env = _t_env()
    a = t_env.from_elements([(1, "x")], ["id", "x"])
    b = t_env.from_elements([(1, "y")], ["rid", "y"])
    full = a.full_outer_join(b, col("id") == col("rid"))
    text = full.explain()
    assert "Join(joinType=[FullOuterJoin], where=[id = rid]" in text
    assert "advice[1]: [WARNING] Join(joinType=[FullOuterJoin]" in text
    assert "left and right side's rows in state without a TTL" in text
    assert "RightOuterJoin" in a.right_outer_join(b, "id = rid").explain()
    t_env.get_config().set("table.exec.state.ttl", "1 h")
    assert "advice" not in full.explain()
    assert "No available advice" in full.explain(ExplainDetail.PLAN_ADVICE)
