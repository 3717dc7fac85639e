"""Deduplication and Top-N from ``ROW_NUMBER()``: the changelogs of Flink's functions on
hand-checked sequences (driven as one operator subtask, on a manual clock for state TTL),
final views equal to a batch computation on random rows, snapshots restored (and rescaled) in
the middle, the SQL planning and its errors, and jobs on the in-process executor."""

from __future__ import annotations

import datetime
import random
from collections import Counter
from typing import Any

import pytest

from cairn.common import Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.state.key_groups import assign_to_key_group, subtask_for_key_group
from cairn.table import (
    EnvironmentSettings,
    StreamTableEnvironment,
    TableEnvironment,
    ValidationError,
)
from cairn.table.analysis import Columns
from cairn.table.deduplicate import DeduplicateFunction
from cairn.table.operators import fields_key
from cairn.table.plan import Deduplicate, Rank, SortField, StreamScan, Values
from cairn.table.plan_uids import state_layout
from cairn.table.rank import RankFunction
from cairn.table.rank_planner import rank_plan
from cairn.table.schema import Schema
from cairn.table.sql.errors import SqlValidationError
from cairn.table.state_ttl import with_state_ttl
from cairn.table.time_attributes import PROCTIME_TYPE
from cairn.table.types import DataTypes

from ._operator_harness import OperatorHarness, snapshot_operator
from ._rank_oracle import changelog_view, ranked, top_n

#: the record kinds: +I, -U, +U, -D
IN, UB, UA, D = 0, 1, 2, 3
TTL = 100
V_DESC = (SortField(1, ascending=False, nulls_first=False),)
V_ASC = (SortField(1, ascending=True, nulls_first=True),)


def _harness(
    function: Any, backend_kind: str = "heap", parallelism: int = 1, index: int = 0, **kw: Any
) -> OperatorHarness:
    return OperatorHarness(
        function,
        parallelism=parallelism,
        index=index,
        key_selector=fields_key((0,)),
        backend_kind=backend_kind,
        **kw,
    )


def _feed(h: OperatorHarness, *records: tuple[int, tuple[Any, ...]]) -> list[Any]:
    before = len(h.records())
    h.op.process_batch(list(records))
    return [r for r, _ in h.records()[before:]]


def _ts(second: int) -> datetime.datetime:
    return datetime.datetime(2024, 1, 1, 0, 0, second)


# -- deduplication: Flink's changelogs ---------------------------------------------------------


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
def test_keep_first_on_proctime_is_insert_only(backend_kind: str) -> None:
    h = _harness(DeduplicateFunction(False, None), backend_kind)
    assert _feed(h, (IN, ("a", 1))) == [(IN, ("a", 1))]
    assert _feed(h, (IN, ("a", 2)), (IN, ("b", 3))) == [(IN, ("b", 3))]


def test_keep_last_on_proctime_updates_and_skips_an_equal_row_unless_a_ttl_is_set() -> None:
    h = _harness(DeduplicateFunction(True, None))
    assert _feed(h, (IN, ("a", 1))) == [(IN, ("a", 1))]
    assert _feed(h, (IN, ("a", 2))) == [(UB, ("a", 1)), (UA, ("a", 2))]
    assert _feed(h, (IN, ("a", 2))) == []  # the same row: nothing changes
    with_ttl = _harness(DeduplicateFunction(True, None, TTL))
    _feed(with_ttl, (IN, ("a", 2)))
    # with a TTL Flink emits the pair anyway, refreshing the state downstream
    assert _feed(with_ttl, (IN, ("a", 2))) == [(UB, ("a", 2)), (UA, ("a", 2))]


def test_rowtime_deduplication_replaces_on_later_or_strictly_earlier_time() -> None:
    last = _harness(DeduplicateFunction(True, 1))
    assert _feed(last, (IN, ("a", _ts(5), 1))) == [(IN, ("a", _ts(5), 1))]
    assert _feed(last, (IN, ("a", _ts(2), 2))) == []  # earlier: the last row stays
    assert _feed(last, (IN, ("a", _ts(5), 3))) == [
        (UB, ("a", _ts(5), 1)),
        (UA, ("a", _ts(5), 3)),
    ], "keep last: the same time replaces (>=)"
    first = _harness(DeduplicateFunction(False, 1))
    assert _feed(first, (IN, ("a", _ts(5), 1))) == [(IN, ("a", _ts(5), 1))]
    assert _feed(first, (IN, ("a", _ts(5), 2)), (IN, ("a", _ts(9), 3))) == []
    assert _feed(first, (IN, ("a", _ts(2), 4))) == [
        (UB, ("a", _ts(5), 1)),
        (UA, ("a", _ts(2), 4)),
    ], "keep first on rowtime updates when an earlier row arrives late"


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
def test_an_idle_deduplicated_key_starts_again_after_the_ttl(backend_kind: str) -> None:
    h = _harness(DeduplicateFunction(False, None, TTL), backend_kind)
    _feed(h, (IN, ("a", 1)))
    h.clock.advance(TTL - 1)
    assert _feed(h, (IN, ("a", 2))) == []
    h.clock.advance(2)  # a was written TTL + 1 ago (reads do not refresh it)
    assert _feed(h, (IN, ("a", 3))) == [(IN, ("a", 3))]


def test_deduplicate_refuses_changes() -> None:
    h = _harness(DeduplicateFunction(True, None))
    with pytest.raises(ValueError, match="insert-only"):
        _feed(h, (D, ("a", 1)))


# -- Top-N: Flink's changelogs ----------------------------------------------------------------


def test_append_top_n_with_the_rank_number_updates_every_shifted_rank() -> None:
    h = _harness(RankFunction("append", V_DESC, 1, 2, True))
    assert _feed(h, (IN, ("a", 10))) == [(IN, ("a", 10, 1))]
    assert _feed(h, (IN, ("a", 30))) == [(UB, ("a", 10, 1)), (UA, ("a", 30, 1)), (IN, ("a", 10, 2))]
    assert _feed(h, (IN, ("a", 20))) == [(UB, ("a", 10, 2)), (UA, ("a", 20, 2))]
    assert _feed(h, (IN, ("a", 5))) == []  # not among the top 2
    # a tie ranks after the rows it ties with
    assert _feed(h, (IN, ("a", 30))) == [(UB, ("a", 20, 2)), (UA, ("a", 30, 2))]
    assert _feed(h, (IN, ("b", 1))) == [(IN, ("b", 1, 1))]


def test_append_top_n_without_the_rank_number_emits_only_the_rows_in_and_out() -> None:
    h = _harness(RankFunction("append", V_DESC, 1, 2, False))
    assert _feed(h, (IN, ("a", 10)), (IN, ("a", 30))) == [(IN, ("a", 10)), (IN, ("a", 30))]
    assert _feed(h, (IN, ("a", 20))) == [(D, ("a", 10)), (IN, ("a", 20))]
    assert _feed(h, (IN, ("a", 5))) == []
    assert _feed(h, (IN, ("a", 30))) == [(D, ("a", 20)), (IN, ("a", 30))]


def test_a_rank_range_with_an_offset_emits_only_its_ranks() -> None:
    h = _harness(RankFunction("append", V_ASC, 2, 3, True))
    assert _feed(h, (IN, ("a", 5))) == []  # rank 1: outside 2..3
    assert _feed(h, (IN, ("a", 3))) == [(IN, ("a", 5, 2))]
    assert _feed(h, (IN, ("a", 4))) == [(UB, ("a", 5, 2)), (UA, ("a", 4, 2)), (IN, ("a", 5, 3))]
    assert _feed(h, (IN, ("a", 1))) == [
        (UB, ("a", 4, 2)),
        (UA, ("a", 3, 2)),
        (UB, ("a", 5, 3)),
        (UA, ("a", 4, 3)),
    ]
    # ascending puts nulls first (Flink's default)
    assert _feed(h, (IN, ("a", None))) == [
        (UB, ("a", 3, 2)),
        (UA, ("a", 1, 2)),
        (UB, ("a", 4, 3)),
        (UA, ("a", 3, 3)),
    ]


def test_top_1_updates_only_for_a_strictly_better_row() -> None:
    h = _harness(RankFunction("top-1", V_DESC, 1, 1, False))
    assert _feed(h, (IN, ("a", 1))) == [(IN, ("a", 1))]
    assert _feed(h, (IN, ("a", 1)), (IN, ("a", 0))) == []
    assert _feed(h, (IN, ("a", 2))) == [(UB, ("a", 1)), (UA, ("a", 2))]


def test_first_n_on_proctime_inserts_the_first_rows_only() -> None:
    order = (SortField(2),)
    h = _harness(RankFunction("first-n", order, 1, 2, True))
    rows = [(IN, ("a", v, None)) for v in (7, 8, 9)]
    assert _feed(h, *rows) == [(IN, ("a", 7, None, 1)), (IN, ("a", 8, None, 2))]


def test_retractable_top_n_with_the_rank_number() -> None:
    h = _harness(RankFunction("retract", V_DESC, 1, 2, True))
    assert _feed(h, (IN, ("a", 10))) == [(IN, ("a", 10, 1))]
    assert _feed(h, (IN, ("a", 20))) == [(UB, ("a", 10, 1)), (UA, ("a", 20, 1)), (IN, ("a", 10, 2))]
    assert _feed(h, (IN, ("a", 15))) == [(UB, ("a", 10, 2)), (UA, ("a", 15, 2))]
    assert _feed(h, (D, ("a", 20))) == [
        (UB, ("a", 20, 1)),
        (UA, ("a", 15, 1)),
        (UB, ("a", 15, 2)),
        (UA, ("a", 10, 2)),
    ], "the row below the top 2 moves back in"
    assert _feed(h, (UB, ("a", 15))) == [(UB, ("a", 15, 1)), (UA, ("a", 10, 1)), (D, ("a", 10, 2))]
    assert _feed(h, (UA, ("a", 12))) == [(UB, ("a", 10, 1)), (UA, ("a", 12, 1)), (IN, ("a", 10, 2))]
    assert _feed(h, (D, ("a", 99))) == []  # a row never seen


def test_retractable_top_n_without_the_rank_number() -> None:
    h = _harness(RankFunction("retract", V_DESC, 1, 2, False))
    assert _feed(h, (IN, ("a", 10)), (IN, ("a", 20))) == [(IN, ("a", 10)), (IN, ("a", 20))]
    assert _feed(h, (IN, ("a", 15))) == [(D, ("a", 10)), (IN, ("a", 15))]
    assert _feed(h, (D, ("a", 20))) == [(D, ("a", 20)), (IN, ("a", 10))]
    assert _feed(h, (UB, ("a", 15))) == [(D, ("a", 15))]
    assert _feed(h, (UA, ("a", 12))) == [(IN, ("a", 12))]


def test_an_append_only_top_n_refuses_changes() -> None:
    h = _harness(RankFunction("append", V_DESC, 1, 2, False))
    with pytest.raises(ValueError, match="insert-only"):
        _feed(h, (D, ("a", 1)))


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
def test_an_idle_partition_of_a_top_n_starts_again_after_the_ttl(backend_kind: str) -> None:
    h = _harness(RankFunction("append", V_DESC, 1, 2, True, TTL), backend_kind)
    _feed(h, (IN, ("a", 10)), (IN, ("a", 9)))
    h.clock.advance(TTL - 1)
    assert _feed(h, (IN, ("a", 1))) == []  # not admitted, nothing written
    h.clock.advance(2)
    assert _feed(h, (IN, ("a", 1))) == [(IN, ("a", 1, 1))]


# -- Top-N: random rows against a batch computation ---------------------------------------------

_KINDS = [
    # (function kind, order, start, end, with rank number)
    ("append", V_DESC, 1, 3, True),
    ("append", V_DESC, 1, 3, False),
    ("append", (SortField(1), SortField(2, False, False)), 2, 4, True),
    ("append", V_ASC, 2, 3, False),
    ("top-1", V_DESC, 1, 1, False),
    ("retract", V_DESC, 1, 3, True),
    ("retract", V_DESC, 1, 3, False),
    ("retract", (SortField(1), SortField(2, False, False)), 2, 4, True),
]


def _random_events(seed: int, retracting: bool, n: int = 300) -> list[tuple[int, tuple[Any, ...]]]:
    rng = random.Random(seed)
    events: list[tuple[int, tuple[Any, ...]]] = []
    present: list[tuple[Any, ...]] = []
    for _ in range(n):
        if retracting and present and rng.random() < 0.4:
            row = present.pop(rng.randrange(len(present)))
            if rng.random() < 0.5:
                events.append((D, row))
            else:  # an update: the old row, then its new value
                new = (row[0], rng.choice([None, *range(8)]), rng.randrange(3))
                events += [(UB, row), (UA, new)]
                present.append(new)
            continue
        row = (rng.choice("abc"), rng.choice([None, *range(8)]), rng.randrange(3))
        events.append((IN, row))
        present.append(row)
    return events


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize(("kind", "order", "start", "end", "numbered"), _KINDS)
def test_a_top_n_view_is_the_batch_top_n(
    kind: str, order: Any, start: int, end: int, numbered: bool, seed: int
) -> None:
    events = _random_events(seed, kind == "retract")
    h = _harness(RankFunction(kind, order, start, end, numbered))
    changes = _feed(h, *events)
    oracle = top_n(
        events, 0, [(f.index, f.ascending, f.nulls_first) for f in order], start, end, numbered
    )
    assert changelog_view(changes) == oracle
    assert oracle, "the ranks hold rows"


def test_the_oracle_ranks_ties_in_arrival_order_and_nulls_by_direction() -> None:
    rows = [("a", 2, 0), ("a", None, 1), ("a", 2, 2), ("a", 3, 3)]
    assert [r[2] for r in ranked(rows, [(1, False, False)])] == [3, 0, 2, 1]
    assert [r[2] for r in ranked(rows, [(1, True, True)])] == [1, 0, 2, 3]


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
@pytest.mark.parametrize("kind", ["append", "retract"])
def test_a_snapshot_in_the_middle_restores_the_same_changelog(kind: str, backend_kind: str) -> None:
    events = _random_events(7, kind == "retract")
    function = RankFunction(kind, V_DESC, 1, 3, True)
    whole = _feed(_harness(function, backend_kind), *events)
    before = _harness(RankFunction(kind, V_DESC, 1, 3, True), backend_kind)
    first = _feed(before, *events[:150])
    state, files = snapshot_operator(before.op)
    restore = OperatorRestore(1, {SubtaskIndex(0): state}, files)
    after = _harness(RankFunction(kind, V_DESC, 1, 3, True), backend_kind, restore=restore)
    assert first + _feed(after, *events[150:]) == whole


def test_a_top_n_snapshot_rescales_to_two_subtasks() -> None:
    events = _random_events(11, True)
    before = _harness(RankFunction("retract", V_DESC, 1, 2, False))
    first = _feed(before, *events[:150])
    state, files = snapshot_operator(before.op)
    restore = OperatorRestore(1, {SubtaskIndex(0): state}, files)
    subtasks = [
        _harness(
            RankFunction("retract", V_DESC, 1, 2, False), parallelism=2, index=i, restore=restore
        )
        for i in range(2)
    ]
    rest: list[Any] = []
    for record in events[150:]:
        owner = subtask_for_key_group(128, 2, assign_to_key_group((record[1][0],), 128))
        rest += _feed(subtasks[owner], record)
    assert changelog_view(first + rest) == top_n(events, 0, [(1, False, False)], 1, 2, False)


# -- planning ---------------------------------------------------------------------------------

_COLUMNS = Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT()), ("pt", PROCTIME_TYPE)])


def test_rank_plan_picks_deduplicate_or_rank_as_flink_does() -> None:
    scan = Values((), _COLUMNS)
    first = rank_plan(scan, (0,), (SortField(2),), 1, 1, False)
    assert isinstance(first, Deduplicate) and not first.keep_last
    last = rank_plan(scan, (0,), (SortField(2, False, False),), 1, 1, False)
    assert isinstance(last, Deduplicate) and last.keep_last
    # a plain column, or the rank number kept, or more ranks: a Rank
    assert isinstance(rank_plan(scan, (0,), V_DESC, 1, 1, False), Rank)
    assert isinstance(rank_plan(scan, (0,), (SortField(2),), 1, 2, False), Rank)
    updating = StreamScan(_COLUMNS, "u", None, insert_only=False)
    assert rank_plan(updating, (0,), V_DESC, 1, 3, False).strategy == "RetractStrategy"  # type: ignore[attr-defined]
    with pytest.raises(ValidationError, match="Deduplicate doesn't support consuming update"):
        rank_plan(updating, (0,), (SortField(2),), 1, 1, False)
    with pytest.raises(ValidationError, match="empty"):
        rank_plan(scan, (0,), V_DESC, 3, 2, False)


def test_the_state_ttl_reaches_ranks_and_their_state_layout_names_the_function() -> None:
    scan = Values((), _COLUMNS)
    rank = rank_plan(scan, (0,), V_DESC, 1, 3, True)
    dedup = rank_plan(scan, (0,), (SortField(2),), 1, 1, False)
    assert with_state_ttl(rank, 5).state_ttl_ms == 5  # type: ignore[attr-defined]
    assert with_state_ttl(dedup, 5).state_ttl_ms == 5  # type: ignore[attr-defined]
    assert (
        state_layout(rank)
        == "keys=[STRING], rows=[STRING, BIGINT, TIMESTAMP_LTZ(3) *PROCTIME*], function=append"
    )
    assert state_layout(dedup) == (
        "keys=[STRING], rows=[STRING, BIGINT, TIMESTAMP_LTZ(3) *PROCTIME*], keep=first"
    )


# -- SQL --------------------------------------------------------------------------------------

ROWS = [
    (1, "a", 10),
    (2, "b", 20),
    (3, "a", 30),
    (4, None, 5),
    (5, "c", None),
    (6, "b", 40),
    (7, "a", 20),
]


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "1")
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
    return t_env


def _changes(table: Any) -> list[tuple[str, tuple[Any, ...]]]:
    return [(r.get_row_kind().short_string(), tuple(r)) for r in table.execute().collect()]


TOP2 = (
    "SELECT {} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn"
    " FROM t) WHERE {}"
)


def test_sql_top_n_selecting_rn_updates_the_shifted_ranks() -> None:
    t_env = _t_env()
    table = t_env.sql_query(TOP2.format("*", "rn <= 2"))
    plan = table.explain().split("== Optimized Logical Plan ==")[1]
    assert (
        "Rank(strategy=[AppendFastStrategy], rankType=[ROW_NUMBER], rankRange=[rankStart=1,"
        " rankEnd=2], partitionBy=[k], orderBy=[v DESC], select=[id, k, v, rn])"
        " changelogMode=[I,UB,UA,D]" in plan
    )
    assert _changes(table) == [
        ("+I", (1, "a", 10, 1)),
        ("+I", (2, "b", 20, 1)),
        ("-U", (1, "a", 10, 1)),
        ("+U", (3, "a", 30, 1)),
        ("+I", (1, "a", 10, 2)),
        ("+I", (4, None, 5, 1)),
        ("+I", (5, "c", None, 1)),
        ("-U", (2, "b", 20, 1)),
        ("+U", (6, "b", 40, 1)),
        ("+I", (2, "b", 20, 2)),
        ("-U", (1, "a", 10, 2)),
        ("+U", (7, "a", 20, 2)),
    ]


@pytest.mark.parametrize(
    "where", ["rn <= 2", "rn < 3", "2 >= rn", "rn BETWEEN 1 AND 2", "v > 0 AND rn <= 2"]
)
def test_sql_top_n_without_rn_deletes_and_inserts(where: str) -> None:
    table = _t_env().sql_query(TOP2.format("id, v", where))
    plan = table.explain()
    assert "rankRange=[rankStart=1, rankEnd=2]" in plan and "select=[id, k, v])" in plan
    changes = _changes(table)
    assert ("-D", (1, 10)) in changes and ("+I", (7, 20)) in changes
    assert {k for k, _ in changes} == {"+I", "-D"}
    expected = {(3, 30), (7, 20), (6, 40), (2, 20), (4, 5), (5, None)}
    if where.startswith("v > 0"):  # the rest of the WHERE filters the ranked rows
        expected.remove((5, None))
    assert set(changelog_view((0 if k == "+I" else 3, r) for k, r in changes)) == expected


def test_sql_rn_equal_to_one_is_a_constant_column_of_a_top_1() -> None:
    table = _t_env().sql_query(TOP2.format("id, rn", "rn = 1"))
    plan = table.explain()
    assert (
        "rankRange=[rankStart=1, rankEnd=1]" in plan and "CAST(1 AS BIGINT NOT NULL) AS rn" in plan
    )
    assert _changes(table)[:4] == [
        ("+I", (1, 1)),
        ("+I", (2, 1)),
        ("-U", (1, 1)),
        ("+U", (3, 1)),
    ]
    assert table.get_schema().types[1] == DataTypes.BIGINT(False)


def _time_env() -> StreamTableEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess"})
    t_env = StreamTableEnvironment.create(env)
    rows = [
        ("a", 1, _ts(5)),
        ("b", 2, _ts(3)),
        ("a", 3, _ts(2)),
        ("a", 4, _ts(9)),
        ("b", 5, _ts(3)),
    ]
    row_type = Types.ROW_NAMED(
        ["k", "v", "ts"], [Types.STRING(), Types.INT(), Types.SQL_TIMESTAMP()]
    )
    schema = (
        Schema.new_builder()
        .column("k", DataTypes.STRING())
        .column("v", DataTypes.INT())
        .column("ts", DataTypes.TIMESTAMP(3))
        .column_by_expression("pt", "PROCTIME()")
        .watermark("ts", "ts - INTERVAL '1' SECOND")
        .build()
    )
    t_env.create_temporary_view(
        "src", t_env.from_data_stream(env.from_collection(rows, row_type), schema)
    )
    return t_env


DEDUP = (
    "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {}) AS rn"
    " FROM src) WHERE rn = 1"
)


@pytest.mark.parametrize(
    ("order", "node", "mode", "changes"),
    [
        (
            "pt",
            "Deduplicate(keep=[FirstRow], key=[k], order=[PROCTIME])",
            "I",
            [("+I", ("a", 1)), ("+I", ("b", 2))],
        ),
        (
            "pt DESC",
            "Deduplicate(keep=[LastRow], key=[k], order=[PROCTIME])",
            "I,UB,UA,D",
            [
                ("+I", ("a", 1)),
                ("+I", ("b", 2)),
                ("-U", ("a", 1)),
                ("+U", ("a", 3)),
                ("-U", ("a", 3)),
                ("+U", ("a", 4)),
                ("-U", ("b", 2)),
                ("+U", ("b", 5)),
            ],
        ),
        (
            "ts",
            "Deduplicate(keep=[FirstRow], key=[k], order=[ROWTIME])",
            "I,UB,UA,D",
            [("+I", ("a", 1)), ("+I", ("b", 2)), ("-U", ("a", 1)), ("+U", ("a", 3))],
        ),
        (
            "ts DESC",
            "Deduplicate(keep=[LastRow], key=[k], order=[ROWTIME])",
            "I,UB,UA,D",
            [
                ("+I", ("a", 1)),
                ("+I", ("b", 2)),
                ("-U", ("a", 1)),
                ("+U", ("a", 4)),
                ("-U", ("b", 2)),
                ("+U", ("b", 5)),
            ],
        ),
    ],
)
def test_sql_deduplication_on_time_attributes(
    order: str, node: str, mode: str, changes: list[Any]
) -> None:
    table = _time_env().sql_query(DEDUP.format(order))
    assert f"{node} changelogMode=[{mode}]" in table.explain()
    assert _changes(table) == changes


@pytest.mark.parametrize("seed", [5, 6])
def test_sql_top_n_over_an_aggregate_retracts_to_the_batch_result(seed: int) -> None:
    rng = random.Random(seed)
    rows = [(rng.choice("pqrstu"), rng.choice("xy"), rng.randrange(1, 50)) for _ in range(80)]
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    t_env.get_config().set("parallelism.default", "2")
    fields = [DataTypes.FIELD(n, DataTypes.STRING()) for n in ("item", "cat")]
    src = t_env.from_elements(rows, DataTypes.ROW([*fields, DataTypes.FIELD("n", DataTypes.INT())]))
    t_env.create_temporary_view("sales", src)
    table = t_env.sql_query(
        "SELECT cat, item, total, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY cat"
        " ORDER BY total DESC, item) AS rn FROM (SELECT cat, item, SUM(n) AS total FROM sales"
        " GROUP BY cat, item)) WHERE rn <= 2"
    )
    assert "Rank(strategy=[RetractStrategy]" in table.explain()
    changes = [(0 if k in ("+I", "+U") else 3, r) for k, r in _changes(table)]
    totals: Counter[tuple[str, str]] = Counter()
    for item, cat, n in rows:
        totals[(cat, item)] += n
    expected = Counter()
    for cat in "xy":
        best = sorted(((-t, i) for (c, i), t in totals.items() if c == cat))[:2]
        for rank, (t, i) in enumerate(best, 1):
            expected[(cat, i, -t, rank)] += 1
    assert changelog_view(changes) == expected


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT id, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) AS rn FROM t",
            "ROW_NUMBER() on a stream is supported as Top-N or deduplication only",
        ),
        (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY v) AS rn FROM t) WHERE rn >= 2",
            "needs the enclosing query to keep ranks up to a number",
        ),
        (
            "SELECT * FROM (SELECT *, RANK() OVER (ORDER BY v) AS r FROM t) WHERE r <= 2",
            "RANK() is not supported on a streaming table",
        ),
        (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k) AS rn FROM t)"
            " WHERE rn <= 2",
            "ROW_NUMBER() needs ORDER BY",
        ),
        (
            "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY v + 1) AS rn FROM t)"
            " WHERE rn <= 2",
            "ORDER BY of ROW_NUMBER() takes columns",
        ),
    ],
)
def test_row_number_outside_the_patterns_is_refused_with_its_place(sql: str, message: str) -> None:
    with pytest.raises(SqlValidationError) as caught:
        _t_env().sql_query(sql)
    assert message in str(caught.value)
    assert caught.value.line == 1 and caught.value.column > 1


def test_the_window_reads_columns_the_subquery_does_not_select() -> None:
    table = _t_env().sql_query(
        "SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn"
        " FROM t) WHERE rn = 1"
    )
    assert table.get_schema().names == ["id"]
    view = changelog_view((0 if k in ("+I", "+U") else 3, r) for k, r in _changes(table))
    assert view == Counter({(3,): 1, (6,): 1, (4,): 1, (5,): 1})


def test_the_rank_column_renamed_by_the_subquerys_alias_is_the_one_filtered() -> None:
    table = _t_env().sql_query(
        "SELECT a, d FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn"
        " FROM t) AS s(a, b, c, d) WHERE d <= 2 AND a > 1"
    )
    assert "rankEnd=2" in table.explain()
    view = changelog_view((0 if k in ("+I", "+U") else 3, r) for k, r in _changes(table))
    assert view == Counter({(3, 1): 1, (7, 2): 1, (6, 1): 1, (2, 2): 1, (4, 1): 1, (5, 1): 1})
