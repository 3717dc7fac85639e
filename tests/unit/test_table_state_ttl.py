"""``table.exec.state.ttl`` (and ``TableConfig.set_idle_state_retention``): the state of an
idle key of a group aggregate, a regular join, a table aggregate, a limit or a
``ChangelogNormalize`` expires, as in Flink. Operators are driven with a manual clock (the
clock of state TTL); one job on the in-process executor waits the TTL out for real."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

from cairn.common import Types
from cairn.common.exceptions import ConfigurationError
from cairn.datastream import StreamExecutionEnvironment
from cairn.graph.transformations import OperatorKind
from cairn.ids import SubtaskIndex
from cairn.runtime.operators.base import OperatorRestore
from cairn.table import (
    EnvironmentSettings,
    StreamTableEnvironment,
    TableEnvironment,
    ValidationError,
)
from cairn.table.analysis import AggCall, Columns
from cairn.table.changelog_normalize import ChangelogNormalize
from cairn.table.join import JoinFunction
from cairn.table.operators import GroupAggFunction, LimitFunction, fields_key
from cairn.table.plan import Aggregate, Join, Limit, StreamScan, Union, Values
from cairn.table.plan_text import explain
from cairn.table.state_ttl import with_state_ttl
from cairn.table.translate import plan_uid
from cairn.table.types import DataTypes

from ._operator_harness import OperatorHarness, TwoInputHarness, snapshot_operator
from ._ttl_jobs import IdleSource, Signal

TTL = 100
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [("10 s", 10_000), ("1 min", 60_000), ("1h", 3_600_000), ("100 ms", 100), ("2500", 2500)],
)
def test_state_ttl_takes_flinks_durations(text: str, ms: int) -> None:
    config = TableEnvironment.create(EnvironmentSettings.in_streaming_mode()).get_config()
    assert config.get_idle_state_retention() == datetime.timedelta(0)  # default: no TTL
    config.set("table.exec.state.ttl", text)
    assert config.get_idle_state_retention() == datetime.timedelta(milliseconds=ms)
    assert config.get("table.exec.state.ttl") == text


def test_set_idle_state_retention_is_the_same_key() -> None:
    config = TableEnvironment.create(EnvironmentSettings.in_streaming_mode()).get_config()
    config.set_idle_state_retention(datetime.timedelta(days=1))
    assert config.get("table.exec.state.ttl") == "1 d"
    assert config.get_idle_state_retention() == datetime.timedelta(days=1)
    config.set_idle_state_retention(datetime.timedelta(0))
    assert config.get_idle_state_retention() == datetime.timedelta(0)


@pytest.mark.parametrize("bad", ["1 hx", "-1 s", "soon", ""])
def test_a_bad_duration_fails_in_flinks_words_naming_the_key(bad: str) -> None:
    config = TableEnvironment.create(EnvironmentSettings.in_streaming_mode()).get_config()
    with pytest.raises(ConfigurationError) as info:
        config.set("table.exec.state.ttl", bad)
    assert str(info.value).startswith(
        f"Could not parse value '{bad}' for key 'table.exec.state.ttl'. Expected a duration"
    )
    assert config.get("table.exec.state.ttl") is None  # nothing was set
    with pytest.raises(ConfigurationError, match=r"table\.exec\.state\.ttl"):
        config.set_idle_state_retention(-datetime.timedelta(seconds=1))


# -- the plan ----------------------------------------------------------------------------------


def _agg(input_node: Any, ttl: int | None = None) -> Aggregate:
    n = AggCall("count_star", -1, DataTypes.BIGINT(False))
    cols = Columns.of([("k", DataTypes.STRING()), ("n", n.data_type)])
    return Aggregate(input_node, (0,), (n,), cols, state_ttl_ms=ttl)


def test_the_config_fills_in_stateful_nodes_a_hint_did_not_set() -> None:
    scan = Values((("a", 1),), Columns.of([("k", DataTypes.STRING()), ("v", DataTypes.BIGINT())]))
    hinted = _agg(scan, ttl=5_000)
    join = Join(
        scan.columns,  # not checked here
        left=hinted,
        right=Limit(scan.columns, input=scan, count=3),
        left_keys=(0,),
        right_keys=(0,),
        right_ttl_ms=7,
    )
    filled = with_state_ttl(join, 60_000)
    assert isinstance(filled, Join) and isinstance(filled.left, Aggregate)
    assert (filled.left_ttl_ms, filled.right_ttl_ms) == (60_000, 7)
    assert filled.left.state_ttl_ms == 5_000  # the hint's
    assert isinstance(filled.right, Limit) and filled.right.state_ttl_ms == 60_000
    # TTL changes neither what explain prints (as Flink) nor the operators' uids (so a
    # savepoint restores into the job with another TTL)
    assert explain(filled) == explain(join)
    assert plan_uid(filled) == plan_uid(join)
    assert plan_uid(filled.left) == plan_uid(_agg(scan))
    # an upsert source's scan keeps state (ChangelogNormalize); other scans do not
    upsert = StreamScan(scan.columns, "u", None, insert_only=False, stateful=True)
    changelog = StreamScan(scan.columns, "c", None, insert_only=False)
    union = with_state_ttl(Union(scan.columns, (upsert, changelog)), 60_000)
    assert [s.state_ttl_ms for s in union.inputs] == [60_000, None]  # type: ignore[attr-defined]


# -- operators, on a manual clock ------------------------------------------------------------


def _count_sum() -> GroupAggFunction:
    calls = (
        AggCall("count_star", -1, DataTypes.BIGINT(False)),
        AggCall("sum", 1, DataTypes.BIGINT()),
    )
    return GroupAggFunction(calls, keys=(0,), state_ttl_ms=TTL)


def _group_harness(function: Any, backend_kind: str = "heap") -> OperatorHarness:
    return OperatorHarness(function, key_selector=fields_key((0,)), backend_kind=backend_kind)


def _out(h: Any) -> list[tuple[int, tuple[Any, ...]]]:
    return [r for r, _ in h.records()]


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
def test_an_idle_group_starts_from_scratch(backend_kind: str) -> None:
    h = _group_harness(_count_sum(), backend_kind)
    h.op.process_batch([(INSERT, ("a", 1)), (INSERT, ("b", 10))])
    h.clock.advance(TTL - 1)
    h.op.process_batch([(INSERT, ("a", 2))])  # written: a lives on for another TTL
    h.clock.advance(2)  # b was last written TTL + 1 ago
    h.op.process_batch([(INSERT, ("b", 20)), (INSERT, ("a", 3))])
    assert _out(h) == [
        (INSERT, ("a", 1, 1)),
        (INSERT, ("b", 1, 10)),
        (UPDATE_BEFORE, ("a", 1, 1)),
        (UPDATE_AFTER, ("a", 2, 3)),
        (INSERT, ("b", 1, 20)),  # b expired: a new group, not -U/+U of the old one
        (UPDATE_BEFORE, ("a", 2, 3)),
        (UPDATE_AFTER, ("a", 3, 6)),
    ]
    h.clock.advance(TTL)
    h.op.process_batch([(DELETE, ("a", 3))])  # a retraction of an expired group: ignored
    assert len(_out(h)) == 7


def test_without_ttl_a_group_keeps_counting() -> None:
    calls = (AggCall("count_star", -1, DataTypes.BIGINT(False)),)
    h = _group_harness(GroupAggFunction(calls, keys=(0,)))
    h.op.process_batch([(INSERT, ("a", 1))])
    h.clock.advance(10 * 365 * 86_400_000)
    h.op.process_batch([(INSERT, ("a", 2))])
    assert _out(h)[1:] == [(UPDATE_BEFORE, ("a", 1)), (UPDATE_AFTER, ("a", 2))]


def test_batch_mode_ignores_the_ttl() -> None:
    calls = (AggCall("count_star", -1, DataTypes.BIGINT(False)),)
    assert GroupAggFunction(calls, True, (0,), state_ttl_ms=TTL).state_ttl_ms is None


def _join_harness(function: JoinFunction) -> TwoInputHarness:
    return TwoInputHarness(
        OperatorKind.KEYED_CO_PROCESS, function, keyed=True, key_selector=lambda r: r[1][0]
    )


def test_a_joins_right_side_expires_on_its_own_ttl() -> None:
    h = _join_harness(JoinFunction(2, False, None, left_ttl_ms=10 * TTL, right_ttl_ms=TTL))
    h.side(1, [(INSERT, ("k", "r1"))])
    h.side(0, [(INSERT, ("k", "l1"))])
    h.clock.advance(TTL)  # r1 expired, l1 (longer TTL) did not
    h.side(0, [(INSERT, ("k", "l2"))])  # joins nothing
    h.side(1, [(INSERT, ("k", "r2"))])  # joins both left rows
    h.side(1, [(DELETE, ("k", "r1"))])  # a retraction of an expired row: ignored
    assert _out(h) == [
        (INSERT, ("k", "l1", "k", "r1")),
        (INSERT, ("k", "l1", "k", "r2")),
        (INSERT, ("k", "l2", "k", "r2")),
    ]


def test_an_outer_joins_left_row_expires() -> None:
    h = _join_harness(JoinFunction(2, True, None, left_ttl_ms=TTL, right_ttl_ms=TTL))
    h.side(0, [(INSERT, ("k", "l1"))])
    h.clock.advance(TTL)
    h.side(1, [(INSERT, ("k", "r1"))])  # l1 is gone: no -D of its padded row, no join
    h.side(0, [(INSERT, ("k", "l2"))])
    assert _out(h) == [(INSERT, ("k", "l1", None, None)), (INSERT, ("k", "l2", "k", "r1"))]


def test_changelog_normalize_forgets_an_idle_key() -> None:
    h = OperatorHarness(ChangelogNormalize(TTL))
    h.op.process_batch([("k", ("k", 1)), ("k", ("k", 2))])
    h.clock.advance(TTL)
    h.op.process_batch([("k", ("k", 3))])
    assert _out(h) == [
        (INSERT, ("k", 1)),
        (UPDATE_BEFORE, ("k", 1)),
        (UPDATE_AFTER, ("k", 2)),
        (INSERT, ("k", 3)),
    ]


def test_a_limits_count_expires_as_flinks() -> None:
    h = OperatorHarness(LimitFunction(1, TTL), key_selector=lambda r: 0)
    h.op.process_batch([(INSERT, ("a",)), (INSERT, ("b",))])
    h.clock.advance(TTL)
    h.op.process_batch([(INSERT, ("c",))])
    assert _out(h) == [(INSERT, ("a",)), (INSERT, ("c",))]


# -- a job on the in-process executor ----------------------------------------------------------

ROW = Types.ROW_NAMED(["k", "v"], [Types.STRING(), Types.INT()])


COUNTS = "SELECT k, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY k"


def _run_counts(
    tmp_path: Path,
    ttl: str | None,
    idle_ms: int,
    backend: str = "hashmap",
    query: str = COUNTS,
) -> list[str]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.configure({"cairn.executor": "inprocess", "state.backend.type": backend})
    t_env = StreamTableEnvironment.create(env)
    if ttl is not None:
        t_env.get_config().set("table.exec.state.ttl", ttl)
    signals = tmp_path / f"signals-{ttl}-{backend}-{len(query)}"
    signals.mkdir()
    batches = [[("a", 1)], [("a", 2)]]
    source = env.add_source(IdleSource(batches, str(signals), idle_ms), type_info=ROW)
    t_env.create_temporary_view("t", t_env.from_data_stream(source))
    counts = t_env.sql_query(query)
    out = t_env.to_changelog_stream(counts).map(Signal(str(signals)))
    return [f"{r.get_row_kind().short_string()}{tuple(r)}" for r in out.execute_and_collect()]


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_a_group_idle_longer_than_the_ttl_starts_again_in_a_job(
    tmp_path: Path, backend: str
) -> None:
    rows = _run_counts(tmp_path, "100 ms", idle_ms=150, backend=backend)
    assert rows == ["+I('a', 1, 1)", "+I('a', 1, 2)"]


def test_the_same_job_without_ttl_keeps_counting(tmp_path: Path) -> None:
    rows = _run_counts(tmp_path, None, idle_ms=150)
    assert rows == ["+I('a', 1, 1)", "-U('a', 1, 1)", "+U('a', 2, 3)"]


def test_a_long_ttl_keeps_the_group(tmp_path: Path) -> None:
    rows = _run_counts(tmp_path, "1 h", idle_ms=150)
    assert rows == ["+I('a', 1, 1)", "-U('a', 1, 1)", "+U('a', 2, 3)"]


def test_a_state_ttl_hint_overrides_the_configured_ttl(tmp_path: Path) -> None:
    hinted = COUNTS.replace("SELECT", "SELECT /*+ STATE_TTL('t' = '100 ms') */")
    rows = _run_counts(tmp_path, "1 h", idle_ms=150, query=hinted)
    assert rows == ["+I('a', 1, 1)", "+I('a', 1, 2)"]


# -- the STATE_TTL hint ----------------------------------------------------------------------


def _hint_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.create_temporary_view("orders", t_env.from_elements([(1, 2)], ["ok", "oc"]))
    t_env.create_temporary_view("customers", t_env.from_elements([(2, "x")], ["ck", "cn"]))
    t_env.create_temporary_view("items", t_env.from_elements([(1, 5)], ["ik", "iv"]))
    return t_env


def _ttls(node: Any) -> list[tuple[str, Any]]:
    """Each stateful node of the plan, top down, with its hinted TTL(s) in hours."""
    out: list[tuple[str, Any]] = []
    if isinstance(node, Join):
        hours = [
            None if t is None else t / 3_600_000 for t in (node.left_ttl_ms, node.right_ttl_ms)
        ]
        out.append(("Join", tuple(hours)))
    elif isinstance(node, Aggregate):
        out.append(
            ("Aggregate", None if node.state_ttl_ms is None else node.state_ttl_ms / 3_600_000)
        )
    for i in node.inputs:
        out.extend(_ttls(i))
    return out


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (  # table names as keys
            "SELECT /*+ STATE_TTL('orders' = '3d', 'customers' = '1d') */ * FROM orders"
            " LEFT JOIN customers ON orders.oc = customers.ck",
            [("Join", (72, 24))],
        ),
        (  # aliases; a cascade join's left input is a join, without a name
            "SELECT /*+ STATE_TTL('o' = '1 h', 'i' = '2 h', 'c' = '3 h') */ * FROM orders o"
            " JOIN customers c ON o.oc = c.ck JOIN items i ON o.ok = i.ik",
            [("Join", (None, 2)), ("Join", (1, 3))],
        ),
        (  # an aggregate over a join: the hint is the join's
            "SELECT /*+ STATE_TTL('o' = '1 h', 'c' = '2 h') */ ok, COUNT(*) FROM orders o"
            " JOIN customers c ON o.oc = c.ck GROUP BY ok",
            [("Aggregate", None), ("Join", (1, 2))],
        ),
        (  # each query block its own; HAVING above the aggregate
            "SELECT /*+ STATE_TTL('t' = '1 h') */ ok, COUNT(*) FROM (SELECT /*+"
            " STATE_TTL('orders' = '2 h') */ ok, COUNT(*) AS n FROM orders GROUP BY ok) t"
            " GROUP BY ok HAVING COUNT(*) > 0",
            [("Aggregate", 1), ("Aggregate", 2)],
        ),
        (  # not into a subquery
            "SELECT /*+ STATE_TTL('t' = '1 h') */ * FROM (SELECT ok, COUNT(*) AS n FROM orders"
            " GROUP BY ok) t",
            [("Aggregate", None)],
        ),
        (  # several hints and options: the last wins
            "SELECT /*+ STATE_TTL('orders' = '1 h', 'orders' = '2 h'), STATE_TTL('orders' ="
            " '3 h') */ ok, COUNT(*) FROM orders GROUP BY ok",
            [("Aggregate", 3)],
        ),
    ],
)
def test_state_ttl_hints_reach_the_nodes_flink_gives_them_to(query: str, expected: Any) -> None:
    assert _ttls(_hint_env().sql_query(query).plan) == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            "SELECT /*+ STATE_TTL('x' = '2d', 'orders' = '1d', 'y' = '1d') */ * FROM orders"
            " JOIN customers ON oc = ck",
            "The options of following hints cannot match the name of input tables or views:"
            " \n`x, y` in `STATE_TTL`",
        ),
        (
            "SELECT /*+ STATE_TTL('orders' = '2d') */ n FROM (SELECT ok, COUNT(*) AS n FROM"
            " orders GROUP BY ok) t",
            "cannot match the name of input tables or views: \n`orders` in `STATE_TTL`",
        ),
        (
            "SELECT /*+ STATE_TTL() */ ok, COUNT(*) FROM orders GROUP BY ok",
            "Invalid STATE_TTL hint, expecting at least one key-value options specified.",
        ),
        (
            "SELECT /*+ STATE_TTL('orders' = '1 hx') */ ok, COUNT(*) FROM orders GROUP BY ok",
            "Invalid STATE_TTL hint: Could not parse value '1 hx' for key 'orders'.",
        ),
    ],
)
def test_bad_state_ttl_hints_fail_as_flinks(query: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _hint_env().sql_query(query)
    assert message in str(info.value)


@pytest.mark.parametrize("backend_kind", ["heap", "rocksdb"])
def test_a_savepoint_without_ttl_restores_into_a_job_with_one(backend_kind: str) -> None:
    calls = (AggCall("count_star", -1, DataTypes.BIGINT(False)),)
    before = _group_harness(GroupAggFunction(calls, keys=(0,)), backend_kind)
    before.op.process_batch([(INSERT, ("a", 1))])
    state, files = snapshot_operator(before.op)
    restore = OperatorRestore(1, {SubtaskIndex(0): state}, files)
    after = OperatorHarness(
        GroupAggFunction(calls, keys=(0,), state_ttl_ms=TTL),
        key_selector=fields_key((0,)),
        backend_kind=backend_kind,
        restore=restore,
    )
    after.op.process_batch([(INSERT, ("a", 2))])  # the restored group counts on
    after.clock.advance(TTL)  # its TTL started at the restore
    after.op.process_batch([(INSERT, ("a", 3))])
    assert _out(after) == [
        (UPDATE_BEFORE, ("a", 1)),
        (UPDATE_AFTER, ("a", 2)),
        (INSERT, ("a", 1)),
    ]
