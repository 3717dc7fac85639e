"""Sliding and cumulating window aggregates kept by slices (``SlicingWindowAggFunction``):
the same rows, in the same order, as the per-window aggregate and as an independent
computation, over random out-of-order input with late rows; the per-window path for what
slices cannot merge exactly; slices across a snapshot restored at another parallelism."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.api.state import MapStateDescriptor
from cairn.common.typeinfo import Types
from cairn.events import MAX_WATERMARK
from cairn.ids import SubtaskIndex
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore
from cairn.state.key_groups import assign_to_key_group, subtask_for_key_group
from cairn.table.analysis import AggCall
from cairn.table.group_window import GroupWindowAggFunction
from cairn.table.operators import FieldsKeySelector
from cairn.table.slices import SliceAssigner, sliceable
from cairn.table.slicing_window import SLICES_STATE, SlicingWindowAggFunction
from cairn.table.timestamps import epoch_millis, timestamp_of_millis
from cairn.table.types import DataTypes
from cairn.table.udf import AggregateFunction, udaf
from cairn.table.window import Cumulate, GroupWindow, Slide

from ._operator_harness import OperatorHarness, snapshot_operator
from ._window_oracle import cumulating_windows, random_events, sliding_windows, window_outputs

BIGINT = DataTypes.BIGINT()
CALLS = [
    AggCall("count_star", -1, DataTypes.BIGINT(False)),
    AggCall("count", 2, DataTypes.BIGINT(False), BIGINT),
    AggCall("sum", 2, BIGINT, BIGINT),
    AggCall("max", 2, BIGINT, BIGINT),
    AggCall("min", 2, BIGINT, BIGINT),
    AggCall("avg", 2, BIGINT, BIGINT),
    AggCall("count", 2, DataTypes.BIGINT(False), BIGINT, distinct=True),
]


def _expected(values: list[Any]) -> tuple[Any, ...]:
    """What ``CALLS`` give over ``values`` (AVG of integers truncates, as Java)."""
    present = [v for v in values if v is not None]
    total = sum(present) if present else None
    avg = None
    if present:
        q = abs(sum(present)) // len(present)
        avg = q if sum(present) >= 0 else -q
    extremes = (max(present), min(present)) if present else (None, None)
    return (len(values), len(present), total, *extremes, avg, len(set(present)))


WINDOWS = [
    (Slide.over(10_000).every(2_000), sliding_windows(10_000, 2_000)),
    (Slide.over(10_000).every(4_000), sliding_windows(10_000, 4_000)),  # slices of gcd 2 s
    (Slide.over(7_000).every(3_000).offset(1_000), sliding_windows(7_000, 3_000, 1_000)),
    (Cumulate.over(9_000).every(3_000), cumulating_windows(9_000, 3_000)),
    (Cumulate.over(6_000).every(2_000).offset(500), cumulating_windows(6_000, 2_000, 500)),
]


def _harness(
    function: Any, restore: Any = None, parallelism: int = 1, index: int = 0, backend: str = "heap"
) -> Any:
    return OperatorHarness(
        function,
        key_selector=FieldsKeySelector((1,)),
        restore=restore,
        parallelism=parallelism,
        index=index,
        backend_kind=backend,
    )


def _function(kind: type, window: GroupWindow, batch: bool, calls: Any = None) -> Any:
    w = window.on("ts").alias("w")
    keys = (1,) if batch else None
    return kind(w, 0, calls or CALLS, ["start", "end", "rowtime"], keys=keys)


def _feed(h: Any, rows: list[tuple[int, str, Any]], batch: bool) -> None:
    records = [(0, (timestamp_of_millis(ts), key, value)) for ts, key, value in rows]
    h.op.process_batch(stamp(records, [r[0] for r in rows]) if batch else records)


def _run(function: Any, events: list[Any], batch: bool) -> list[list[Any]]:
    """Per watermark, the records it fires (in order)."""
    h = _harness(function)
    fired: list[list[Any]] = []
    for kind, payload in events:
        if kind == "rows":
            _feed(h, payload, batch)
        else:
            n = len(h.records())
            h.op.process_watermark(min(payload, MAX_WATERMARK))
            fired.append(h.records()[n:])
    return fired


def _as_oracle(fired: list[list[Any]]) -> list[list[Any]]:
    def plain(record: Any) -> Any:
        (kind, row), at = record
        key, start, end, rowtime, *results = row
        assert kind == 0 and at == _ms(rowtime) == _ms(end) - 1
        return (key, _ms(start), _ms(end), tuple(results))

    return [sorted(plain(r) for r in step) for step in fired]


def _ms(value: Any) -> int:
    return epoch_millis(value)


@pytest.mark.parametrize("batch", [False, True], ids=["rows", "batches"])
@pytest.mark.parametrize("case", range(len(WINDOWS)))
@pytest.mark.parametrize("seed", range(4))
def test_slices_fire_what_the_windows_fire(case: int, seed: int, batch: bool) -> None:
    window, windows = WINDOWS[case]
    assert sliceable(window.on("ts").alias("w"), CALLS)
    events = random_events(seed * 31 + case)
    sliced = _run(_function(SlicingWindowAggFunction, window, batch), events, batch)
    per_window = _run(_function(GroupWindowAggFunction, window, batch), events, batch)
    assert sliced == per_window, "the same records, timestamps and order as per window"
    expected = window_outputs(events, windows, _expected)
    assert _as_oracle(sliced) == expected
    assert sum(len(step) for step in expected) > 20, "the input fires windows"
    assert _late_rows(events, windows) > 5, "some rows are late for all their windows"


def _late_rows(events: list[Any], windows: Any) -> int:
    watermark, late = -(2**63), 0
    for kind, payload in events:
        if kind == "watermark":
            watermark = payload
            continue
        late += sum(all(e - 1 <= watermark for _, e in windows(ts)) for ts, _, _ in payload)
    return late


def test_a_slice_goes_when_its_last_window_fires() -> None:
    window = Slide.over(6_000).every(2_000)
    h = _harness(_function(SlicingWindowAggFunction, window, batch=False))
    _feed(h, [(500, "a", 1), (2500, "a", 2), (4500, "a", 3)], batch=False)
    assert _slice_ends(h) == [2000, 4000, 6000], "one entry per slice, not per window"
    h.op.process_watermark(5999)  # fires [0, 6000): slice [0, 2000) has no later window
    assert _slice_ends(h) == [4000, 6000]
    h.op.process_watermark(9999)
    assert _slice_ends(h) == []
    assert [r[1][4] for r, _ in h.records()] == [1, 2, 3, 2, 1]  # COUNT(*) per window


def _slice_ends(h: Any) -> list[int]:
    """The slices kept, over every key."""
    backend = h.op.backend
    descriptor = MapStateDescriptor(SLICES_STATE, Types.LONG(), Types.PICKLED_BYTE_ARRAY())
    state = backend.get_partitioned_state(descriptor)
    ends: list[int] = []
    for key in backend.keys(SLICES_STATE):
        backend.set_current_key(key)
        ends.extend(state.keys())
    return sorted(ends)


def test_cumulating_slices_fold_into_the_first_and_go_at_the_period_end() -> None:
    window = Cumulate.over(6_000).every(2_000)
    h = _harness(_function(SlicingWindowAggFunction, window, batch=False))
    _feed(h, [(100, "a", 1), (2100, "a", 2), (4100, "a", 3)], batch=False)
    h.op.process_watermark(1999)
    _feed(h, [(1000, "a", 10)], batch=False)  # late for [0, 2000), not for [0, 4000)
    h.op.process_watermark(MAX_WATERMARK)
    sums = [(r[1][2], r[1][6]) for r, _ in h.records()]
    end = timestamp_of_millis
    assert sums == [(end(2000), 1), (end(4000), 13), (end(6000), 16)]


def test_what_slices_cannot_merge_exactly_keeps_its_windows() -> None:
    hop = Slide.over(10_000).every(2_000).on("ts").alias("w")
    double = AggCall("sum", 2, DataTypes.DOUBLE(), DataTypes.DOUBLE())
    listagg = AggCall("listagg", 2, DataTypes.STRING(), DataTypes.STRING())
    last = AggCall("last_value", 2, BIGINT, BIGINT)
    decimal = AggCall("sum", 2, DataTypes.DECIMAL(10, 2), DataTypes.DECIMAL(10, 2))
    assert not sliceable(hop, [CALLS[0], double])
    assert not sliceable(hop, [listagg]) and not sliceable(hop, [last])
    assert sliceable(hop, [decimal])
    assert not sliceable(Slide.over(2_000).every(2_000).on("ts").alias("w"), CALLS)
    assert not sliceable(Slide.over(2_000).every(5_000).on("ts").alias("w"), CALLS)

    class Merging(AggregateFunction):
        def create_accumulator(self) -> list[int]:
            return [0]

        def accumulate(self, acc: list[int], v: int) -> None:
            acc[0] += v

        def merge(self, acc: list[int], others: Any) -> None:
            for o in others:
                acc[0] += o[0]

        def get_value(self, acc: list[int]) -> int:
            return acc[0]

    class NotMerging(Merging):
        merge = AggregateFunction.merge  # type: ignore[assignment]

    def user(f: AggregateFunction) -> AggCall:
        wrapper = udaf(f, result_type=BIGINT)
        return AggCall("udaf", -1, BIGINT, args=(2,), wrapper=wrapper)

    assert sliceable(hop, [user(Merging())])
    assert not sliceable(hop, [user(NotMerging())])


def test_a_user_aggregate_with_merge_fires_from_slices() -> None:
    class Total(AggregateFunction):
        def create_accumulator(self) -> list[int]:
            return [0]

        def accumulate(self, acc: list[int], v: int | None) -> None:
            acc[0] += v or 0

        def merge(self, acc: list[int], others: Any) -> None:
            for o in others:
                acc[0] += o[0]

        def get_value(self, acc: list[int]) -> int:
            return acc[0]

    call = AggCall("udaf", -1, BIGINT, args=(2,), wrapper=udaf(Total(), result_type=BIGINT))
    window, windows = WINDOWS[1]
    events = random_events(7)
    sliced = _run(_function(SlicingWindowAggFunction, window, False, [call]), events, False)
    expected = window_outputs(events, windows, lambda vs: (sum(v or 0 for v in vs),))
    assert _as_oracle(sliced) == expected


def test_slices_refuse_an_updating_input() -> None:
    h = _harness(_function(SlicingWindowAggFunction, WINDOWS[0][0], batch=False))
    with pytest.raises(ValueError, match="insert-only"):
        h.op.process_batch([(1, (timestamp_of_millis(0), "a", 1))])


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
@pytest.mark.parametrize("case", [0, 3])
def test_open_slices_restore_at_another_parallelism(case: int, backend: str) -> None:
    window, _ = WINDOWS[case]
    events = random_events(11, keys="abcdefgh")
    whole = _run(_function(SlicingWindowAggFunction, window, True), events, True)
    expected = sorted(r for step in whole for r, _ in step)
    half = len(events) // 2
    before = _harness(_function(SlicingWindowAggFunction, window, True), backend=backend)
    fired: list[Any] = []
    for kind, payload in events[:half]:
        if kind == "rows":
            _feed(before, payload, batch=True)
        else:
            before.op.process_watermark(payload)
    fired.extend(r for r, _ in before.records())
    state, files = snapshot_operator(before.op)
    restore = OperatorRestore(1, {SubtaskIndex(0): state}, files)
    subtasks = [
        _harness(_function(SlicingWindowAggFunction, window, True), restore, 2, i, backend)
        for i in range(2)
    ]
    for kind, payload in events[half:]:
        if kind == "watermark":
            for s in subtasks:
                s.op.process_watermark(min(payload, MAX_WATERMARK))
            continue
        for row in payload:
            owner = subtask_for_key_group(128, 2, assign_to_key_group((row[1],), 128))
            _feed(subtasks[owner], [row], batch=True)
    fired.extend(r for s in subtasks for r, _ in s.records())
    assert sorted(fired) == expected
    assert all(s.records() for s in subtasks), "both subtasks got restored slices"


def test_slice_assigner_of_a_sliding_window_whose_size_is_no_multiple_of_its_slide() -> None:
    slices = SliceAssigner.of(Slide.over(10_000).every(4_000))
    assert slices.slice_ms == 2_000
    # slice [2000, 4000) is in [-4000, 6000) and [0, 10000), not in [-8000, 2000)
    assert slices.first_window_end(4_000) == 6_000 and slices.last_window_end(4_000) == 10_000
    assert list(slices.slices_of(6_000)) == [-2_000, 0, 2_000, 4_000, 6_000]
    assert slices.first_open_window_end(4_000, 5_999) == 10_000


def test_a_sliced_window_aggregate_names_its_layout_and_changes_its_uid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A savepoint of the per-window layout must not restore into slices silently: the
    state layout says ``slices`` and the uid is not the one the per-window layout had."""
    import cairn.table.translate as translate
    from cairn.table import EnvironmentSettings, TableEnvironment
    from cairn.table.plan_uids import node_entries

    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.execute_sql(
        "CREATE TABLE t (ts TIMESTAMP(3), k BIGINT, d DOUBLE,"
        " WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen')"
    )
    hop = "TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))"
    group = "GROUP BY k, window_start, window_end"
    counted = t_env.sql_query(f"SELECT k, COUNT(*) AS n FROM {hop} {group}").plan
    summed = t_env.sql_query(f"SELECT k, SUM(d) AS s FROM {hop} {group}").plan
    layouts = [e.state for p in (counted, summed) for e in node_entries([p]) if e.state]
    assert layouts[0].endswith("slices=[2000]") and "slices" not in layouts[1]
    sliced_uid = translate.plan_uid(counted)
    monkeypatch.setattr(translate, "sliceable", lambda window, calls: False)
    assert translate.plan_uid(counted) != sliced_uid


@pytest.mark.parametrize("case", [1, 3])
def test_processing_time_slices_fire_what_the_windows_fire(case: int) -> None:
    """On the operator's clock: rows go to the slice of now, windows fire on processing-time
    timers — as the per-window aggregate does."""

    def run(kind: type) -> list[Any]:
        w = WINDOWS[case][0].on("ts").alias("w")
        h = _harness(kind(w, 0, CALLS, ["start", "end"], processing_time=True))
        fired = []
        for step in range(60):
            h.clock.advance(700 + step * 37 % 900)
            h.op.process_batch([(0, (None, "ab"[step % 2], step)), (0, (None, "c", None))])
            n = len(h.records())
            h.op.on_processing_time(h.clock.now_ms())
            fired.append([r for r, _ in h.records()[n:]])
        return fired

    sliced = run(SlicingWindowAggFunction)
    assert sliced == run(GroupWindowAggFunction)
    assert sum(map(len, sliced)) > 40


@pytest.mark.parametrize("batch", [False, True], ids=["rows", "batches"])
def test_filtered_aggregates_fire_from_slices_as_per_window(batch: bool) -> None:
    """``AGG(x) FILTER (WHERE c)`` over slices: only rows whose ``c`` is TRUE count."""
    calls = [
        AggCall("count_star", -1, DataTypes.BIGINT(False), filter_arg=3),
        AggCall("sum", 2, BIGINT, BIGINT, filter_arg=3),
        AggCall("max", 2, BIGINT, BIGINT, distinct=True, filter_arg=3),
    ]
    events = random_events(5)

    def run(kind: type) -> list[Any]:
        w = WINDOWS[2][0].on("ts").alias("w")
        h = _harness(kind(w, 0, calls, ["end"], keys=(1,) if batch else None))
        for kind_, payload in events:
            if kind_ == "watermark":
                h.op.process_watermark(min(payload, MAX_WATERMARK))
                continue
            records = [
                (0, (timestamp_of_millis(ts), key, v, None if v is None else v % 3 == 0))
                for ts, key, v in payload
            ]
            stamps = [ts for ts, _, _ in payload]
            h.op.process_batch(stamp(records, stamps) if batch else records)
        return h.records()

    sliced = run(SlicingWindowAggFunction)
    assert sliced == run(GroupWindowAggFunction)
    counts = [r[1][2] for r, _ in sliced]
    assert len(counts) > 20 and 0 in counts, "windows whose rows the filter all left out"
