"""Event-time interval joins: recognising the time bounds in a join condition (Flink's
``IntervalJoinUtil``), the operator against a brute-force interval join that models the
watermark (late rows, rows forgotten once the watermark passes them, outer rows padded), its
state empty after the final watermark, its output watermark held back, a snapshot restored in
the middle, and whole jobs (Table API and SQL building the same plan) against a brute-force
join of the same rows."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.time import Instant
from cairn.datastream import StreamExecutionEnvironment
from cairn.events import MAX_WATERMARK
from cairn.graph.transformations import OperatorKind
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import DataTypes, Schema, StreamTableEnvironment, ValidationError
from cairn.table.expressions import col, lit
from cairn.table.interval_join import IntervalJoinFunction
from cairn.table.operators import INSERT
from cairn.table.plan import IntervalJoin, Join, StreamScan, WatermarkAssigner
from cairn.table.planner import join
from cairn.table.timestamps import epoch_millis

from ._operator_harness import TwoInputHarness, snapshot_operator

# rows of both sides: (key, time ms, value)
LOWER, UPPER = -3000, 1000  # left.t - right.t in [-3 s, 1 s]


def _function(left_outer: bool = False, right_outer: bool = False) -> IntervalJoinFunction:
    return IntervalJoinFunction(3, 3, 1, 1, LOWER, UPPER, None, left_outer, right_outer)


def _harness(function: IntervalJoinFunction, restore: Any = None) -> TwoInputHarness:
    return TwoInputHarness(
        OperatorKind.KEYED_CO_PROCESS,
        function,
        keyed=True,
        key_selector=lambda r: r[1][0],
        restore=restore,
    )


def _take(h: TwoInputHarness) -> list[tuple[Any, ...]]:
    out = []
    for (kind, row), _ in h.records():
        assert kind == INSERT, "an interval join is insert-only"
        out.append(row)
    h.batches.clear()
    return out


def _state_size(h: TwoInputHarness) -> int:
    backend = h.op.backend  # type: ignore[attr-defined]
    names = ("interval-join-left", "interval-join-right")
    timers = ("interval-join-left-timer", "interval-join-right-timer")
    return sum(len(backend.keys(n)) for n in (*names, *timers)) + backend.num_timers()


N3 = (None, None, None)


def test_outer_rows_are_padded_when_the_watermark_passes_them_and_late_ones_at_once() -> None:
    h = _harness(_function(left_outer=True, right_outer=True))
    h.side(0, [(INSERT, ("k", 10_000, "l1"))])  # joins rights in [9 s, 13 s]
    h.side(1, [(INSERT, ("k", 12_000, "r1"))])  # joins lefts in [9 s, 13 s]
    h.side(1, [(INSERT, ("k", 20_000, "r2"))])
    assert _take(h) == [("k", 10_000, "l1", "k", 12_000, "r1")]
    h.op.process_watermark(12_000)  # l1 may still meet a right row at 12_001..13_000
    assert _take(h) == []
    h.op.process_watermark(13_001)  # l1 and r1 expire; both joined: nothing padded
    assert _take(h) == []
    h.side(0, [(INSERT, ("k", 14_000, "l2"))])  # on time, matches nothing yet
    h.side(0, [(INSERT, ("k", 9_000, "l3"))])  # late: cannot wait, padded at once
    assert _take(h) == [("k", 9_000, "l3", *N3)]
    h.op.process_watermark(21_001)  # l2 expired at 17_001, r2 at 21_001: both unjoined
    assert sorted(_take(h), key=str) == sorted(
        [("k", 14_000, "l2", *N3), (*N3, "k", 20_000, "r2")], key=str
    )
    assert _state_size(h) == 0


def test_the_output_watermark_is_held_back_by_the_longest_wait() -> None:
    h = _harness(_function())
    seen: list[int] = []
    h.op.watermark_output = seen.append
    h.op.process_watermark(10_000)
    h.op.process_watermark(MAX_WATERMARK)
    assert seen == [10_000 - max(-LOWER, UPPER), MAX_WATERMARK]


def _brute_force(
    events: list[tuple[str, Any]], left_outer: bool, right_outer: bool
) -> Counter[tuple[Any, ...]]:
    """The rows the join must emit for ``events`` (``("wm", t)`` or ``(side, row)``): a row
    waits while the watermark is below ``t - LOWER`` (left) / ``t + UPPER`` (right); a row
    arriving meets the other side's earlier rows that waited and were not yet expired (time
    above the watermark then, minus their wait, minus 1); unjoined rows of an outer side are
    padded."""
    relative = {0: -LOWER, 1: UPPER}
    watermark = -(2**63)
    seen: list[tuple[int, tuple[Any, ...], bool, int]] = []  # side, row, waited, index
    joined: set[int] = set()
    out: Counter[tuple[Any, ...]] = Counter()
    for i, (what, value) in enumerate(events):
        if what == "wm":
            watermark = value
            continue
        side = int(what)
        row = value
        for other_side, other, waited, j in seen:
            if other_side == side or other[0] != row[0] or not waited:
                continue
            if other[1] <= watermark - relative[other_side] - 1:
                continue  # expired before this row came
            left, right = (row, other) if side == 0 else (other, row)
            if LOWER <= left[1] - right[1] <= UPPER:
                out[left + right] += 1
                joined.update((i, j))
        seen.append((side, row, watermark < row[1] + relative[side], i))
    for side, row, _, i in seen:
        if i not in joined and (left_outer if side == 0 else right_outer):
            out[row + N3 if side == 0 else N3 + row] += 1
    return out


def _random_events(rng: random.Random, n: int) -> list[tuple[str, Any]]:
    """Rows mostly near a rising watermark, some late, keys a..c, with watermarks; times in
    whole seconds, so rows often sit exactly on a bound or on the watermark."""
    events: list[tuple[str, Any]] = []
    watermark = 0
    for i in range(n):
        if rng.random() < 0.15:
            watermark += rng.randint(0, 3) * 1000
            events.append(("wm", watermark))
        t = watermark + rng.randint(-4, 6) * 1000
        events.append((str(rng.randrange(2)), (rng.choice("abc"), t, f"v{i}")))
    return events


def _run(h: TwoInputHarness, events: list[tuple[str, Any]]) -> list[tuple[Any, ...]]:
    for what, value in events:
        if what == "wm":
            h.op.process_watermark(value)
        else:
            h.side(int(what), [(INSERT, value)])
    return _take(h)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("outer", [(False, False), (True, False), (False, True), (True, True)])
def test_the_operator_equals_a_brute_force_interval_join(
    seed: int, outer: tuple[bool, bool]
) -> None:
    events = _random_events(random.Random(seed), 150)
    h = _harness(_function(*outer))
    got = _run(h, [*events, ("wm", MAX_WATERMARK)])
    assert Counter(got) == _brute_force(events, *outer)
    assert _state_size(h) == 0, "the final watermark leaves no row, no timer"


def test_a_join_restored_in_the_middle_goes_on_as_one_that_ran_through() -> None:
    events = [*_random_events(random.Random(9), 120), ("wm", MAX_WATERMARK)]
    expected = Counter(_run(_harness(_function(True, True)), events))
    first = _harness(_function(True, True))
    before = _run(first, events[:70])
    state, files = snapshot_operator(first.op)
    second = _harness(_function(True, True), OperatorRestore(1, {SubtaskIndex(0): state}, files))
    assert Counter(before + _run(second, events[70:])) == expected


def test_bounds_that_cannot_hold_pad_every_outer_row_at_once() -> None:
    h = _harness(IntervalJoinFunction(3, 3, 1, 1, 10, 5, None, True, False))
    h.side(0, [(INSERT, ("k", 1, "l"))])
    h.side(1, [(INSERT, ("k", 1, "r"))])
    assert _take(h) == [("k", 1, "l", *N3)]
    assert _state_size(h) == 0


# -- planning ---------------------------------------------------------------------------------


def _tables(
    left_rows: list[tuple[str, int, str]],
    right_rows: list[tuple[str, int, str]],
    delay: str = "1 HOUR",
) -> tuple[StreamTableEnvironment, Any, Any]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    amount, unit = delay.split()

    def table(rows: list[tuple[str, int, str]], names: list[str]) -> Any:
        info = Types.ROW([Types.STRING(), Types.INSTANT(), Types.STRING()])
        ds = env.from_collection([(k, Instant.of_epoch_milli(t), v) for k, t, v in rows], info)
        schema = (
            Schema.new_builder()
            .column("f0", DataTypes.STRING())
            .column_by_expression("ts", "CAST(f1 AS TIMESTAMP(3))")
            .column("f2", DataTypes.STRING())
            .watermark("ts", f"ts - INTERVAL '{amount}' {unit}")
            .build()
        )
        return t_env.from_data_stream(ds, schema).alias(*names)

    left = table(left_rows, ["id", "ts", "x"])
    right = table(right_rows, ["rid", "rts", "y"])
    t_env.create_temporary_view("l", left)
    t_env.create_temporary_view("r", right)
    return t_env, left, right


def _rows(table: Any) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for r in table.execute().collect():
        assert r.get_row_kind().short_string() == "+I"
        out[tuple(epoch_millis(v) if hasattr(v, "year") else v for v in r)] += 1
    return out


def test_the_planner_finds_flinks_bound_forms_and_otherwise_joins_regularly() -> None:
    t_env, left, right = _tables([], [])
    keys = col("id") == col("rid")

    def node(predicate: Any) -> Any:
        return left.join(right, keys & predicate).plan

    between = node(col("ts").between(col("rts") - lit(4).hours, col("rts")))
    assert isinstance(between, IntervalJoin)
    assert (between.lower_ms, between.upper_ms) == (-4 * 3600_000, 0)
    # rts > ts - 2 s: ts - rts < 2 s (one ms less); ts > rts - 5 s: ts - rts > -5 s
    strict = node(
        (col("rts") > col("ts") - lit(2).seconds) & (col("ts") > col("rts") - lit(5).seconds)
    )
    assert isinstance(strict, IntervalJoin)
    assert (strict.lower_ms, strict.upper_ms) == (-4999, 1999)
    one_sided = node(col("ts") >= col("rts"))
    assert isinstance(one_sided, Join) and one_sided.condition is not None
    computed = left.select(col("id"), (col("ts") + lit(1).seconds).alias("ts"), col("x"))
    plain = computed.join(right, keys & col("ts").between(col("rts"), col("rts")))
    assert isinstance(plain.plan, Join), "a computed time is no time attribute"
    sql = t_env.sql_query(
        "SELECT * FROM l, r WHERE l.id = r.rid AND l.ts BETWEEN r.rts - INTERVAL '4' HOUR AND r.rts"
    )
    assert (
        sql.explain()
        == left.join(right)
        .where(keys & col("ts").between(col("rts") - lit(4).hours, col("rts")))
        .explain()
    )
    assert "windowBounds=[isRowTime=true, leftLowerBound=-14400000, leftUpperBound=0" in (
        sql.explain()
    )
    assert "advice" not in sql.explain(), "an interval join's state is bounded"
    upserts = StreamScan(left.plan.columns, "upserts", None, insert_only=False)
    updating = WatermarkAssigner(columns=left.plan.columns, input=upserts, time_index=1)
    with pytest.raises(ValidationError, match="An interval join takes insert-only inputs"):
        join(updating, right.plan, keys & col("ts").between(col("rts"), col("rts")), "INNER")


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL"])
def test_jobs_equal_a_brute_force_join_of_the_same_rows(seed: int, kind: str) -> None:
    rng = random.Random(seed)

    def rows(n: int, tag: str) -> list[tuple[str, int, str]]:
        return [(rng.choice("abc"), rng.randrange(0, 60_000), f"{tag}{i}") for i in range(n)]

    lefts, rights = rows(40, "l"), rows(40, "r")
    t_env, _, _ = _tables(lefts, rights)
    sql_kind = {"INNER": "JOIN", "LEFT": "LEFT JOIN", "RIGHT": "RIGHT JOIN", "FULL": "FULL JOIN"}
    result = t_env.sql_query(
        f"SELECT * FROM l {sql_kind[kind]} r ON l.id = r.rid"
        " AND l.ts >= r.rts - INTERVAL '3' SECOND AND l.ts < r.rts + INTERVAL '1' SECOND"
    )
    assert "IntervalJoin" in result.explain()
    expected: Counter[tuple[Any, ...]] = Counter()
    matched: set[tuple[str, ...]] = set()
    for lk, lt, lv in lefts:
        for rk, rt, rv in rights:
            if lk == rk and -3000 <= lt - rt < 1000:
                expected[(lk, lt, lv, rk, rt, rv)] += 1
                matched.update((lv, rv))
    if kind in ("LEFT", "FULL"):
        expected.update((k, t, v, None, None, None) for k, t, v in lefts if v not in matched)
    if kind in ("RIGHT", "FULL"):
        expected.update((None, None, None, k, t, v) for k, t, v in rights if v not in matched)
    assert _rows(result) == expected
