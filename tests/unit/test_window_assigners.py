"""Window assigners' boundaries (Flink's formulas, offsets, negative timestamps), session
merging, trigger results and evictors, as pure functions with a manual clock."""

from __future__ import annotations

import pickle
import pickletools
from typing import Any

import pytest

from cairn.clock import ManualClock
from cairn.common import Duration, Time
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.state import ReducingStateDescriptor
from cairn.datastream.window import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeEvictor,
    TimestampedValue,
    TimeWindow,
    TriggerResult,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from cairn.datastream.window_triggers import CountEvictor


class Clock:
    """The assigners' context: processing time from a manual clock."""

    def __init__(self, now_ms: int) -> None:
        self.clock = ManualClock(now_ms)

    def get_current_processing_time(self) -> int:
        return self.clock.now_ms()


def starts(windows: Any) -> list[tuple[int, int]]:
    return [(w.start, w.end) for w in windows]


@pytest.mark.parametrize(
    ("ts", "offset", "expected"),
    [
        (0, 0, (0, 1000)),
        (999, 0, (0, 1000)),
        (1000, 0, (1000, 2000)),
        (-1, 0, (-1000, 0)),
        (-1000, 0, (-1000, 0)),
        (-1001, 0, (-2000, -1000)),
        (1200, 300, (300, 1300)),
        (250, 300, (-700, 300)),
        (1200, -300, (700, 1700)),
    ],
)
def test_tumbling_event_time_windows_follow_flinks_formula(
    ts: int, offset: int, expected: tuple[int, int]
) -> None:
    assigner = TumblingEventTimeWindows.of(Time.seconds(1), Time.milliseconds(offset))
    assert starts(assigner.assign_windows(None, ts, None)) == [expected]
    assert assigner.is_event_time() and isinstance(assigner.get_default_trigger(), EventTimeTrigger)


def test_sliding_windows_list_every_window_containing_the_timestamp_latest_first() -> None:
    assigner = SlidingEventTimeWindows.of(Duration.of_seconds(3), Duration.of_seconds(1))
    assert starts(assigner.assign_windows(None, 1500, None)) == [
        (1000, 4000),
        (0, 3000),
        (-1000, 2000),
    ]
    assert starts(assigner.assign_windows(None, -1, None)) == [
        (-1000, 2000),
        (-2000, 1000),
        (-3000, 0),
    ]
    uneven = SlidingEventTimeWindows.of(1000, 300, 100)  # ceil(1000 / 300) = 4 windows
    ws = uneven.assign_windows(None, 1000, None)
    assert starts(ws) == [(1000, 2000), (700, 1700), (400, 1400), (100, 1100)]


def test_processing_time_assigners_read_the_clock_not_the_timestamp() -> None:
    ctx = Clock(12_345)
    tumbling = TumblingProcessingTimeWindows.of(Time.seconds(10))
    assert starts(tumbling.assign_windows("x", 1, ctx)) == [(10_000, 20_000)]
    sliding = SlidingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(5))
    assert starts(sliding.assign_windows("x", 1, ctx)) == [(10_000, 20_000), (5_000, 15_000)]
    session = ProcessingTimeSessionWindows.with_gap(Time.seconds(1))
    assert starts(session.assign_windows("x", 1, ctx)) == [(12_345, 13_345)]
    assert not tumbling.is_event_time()
    assert isinstance(tumbling.get_default_trigger(), ProcessingTimeTrigger)


def test_session_windows_static_and_dynamic_gap_and_merging_rules() -> None:
    static = EventTimeSessionWindows.with_gap(Time.milliseconds(100))
    assert starts(static.assign_windows("x", 50, None)) == [(50, 150)]
    dynamic = EventTimeSessionWindows.with_dynamic_gap(lambda e: e[1])
    assert starts(dynamic.assign_windows(("k", 7), 50, None)) == [(50, 57)]
    merges: list[tuple[list[tuple[int, int]], tuple[int, int]]] = []
    windows = [TimeWindow(0, 10), TimeWindow(10, 20), TimeWindow(30, 40), TimeWindow(5, 12)]
    static.merge_windows(windows, lambda ms, r: merges.append((starts(ms), (r.start, r.end))))
    assert merges == [([(0, 10), (5, 12), (10, 20)], (0, 20))], "touching windows merge"
    with pytest.raises(ValueError, match="gap"):
        dynamic.assign_windows(("k", 0), 50, None)


def test_event_time_assigners_refuse_records_without_timestamps() -> None:
    with pytest.raises(ValueError, match="assign_timestamps_and_watermarks"):
        TumblingEventTimeWindows.of(1000).assign_windows("x", None, None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda: TumblingEventTimeWindows.of(0),
        lambda: TumblingEventTimeWindows.of(1000, 1000),
        lambda: SlidingEventTimeWindows.of(1000, 0),
        lambda: EventTimeSessionWindows.with_gap(0),
        lambda: CountTrigger.of(0),
        lambda: CountTumblingWindowAssigner.of(0),
        lambda: CountSlidingWindowAssigner.of(3, -1),
        lambda: TumblingEventTimeWindows.of("1s"),
    ],
)
def test_bad_window_parameters_fail_at_definition(make: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        make()


class TriggerCtx:
    """A trigger context over dicts: timers set and state per window, manual watermark."""

    def __init__(self, watermark: int = -(2**63), now: int = 0) -> None:
        self.watermark, self.now = watermark, now
        self.event_timers: set[int] = set()
        self.proc_timers: set[int] = set()
        self.state: dict[str, Any] = {}

    def get_current_watermark(self) -> int:
        return self.watermark

    def get_current_processing_time(self) -> int:
        return self.now

    def register_event_time_timer(self, t: int) -> None:
        self.event_timers.add(t)

    def delete_event_time_timer(self, t: int) -> None:
        self.event_timers.discard(t)

    def register_processing_time_timer(self, t: int) -> None:
        self.proc_timers.add(t)

    def delete_processing_time_timer(self, t: int) -> None:
        self.proc_timers.discard(t)

    def get_partitioned_state(self, d: ReducingStateDescriptor) -> Any:
        ctx = self

        class S:
            def get(self) -> Any:
                return ctx.state.get(d.get_name())

            def add(self, v: Any) -> None:
                cur = self.get()
                ctx.state[d.get_name()] = v if cur is None else d.reduce(cur, v)

            def clear(self) -> None:
                ctx.state.pop(d.get_name(), None)

        return S()


def test_event_time_trigger_fires_at_the_end_and_at_once_for_late_windows() -> None:
    w = TimeWindow(0, 1000)
    ctx = TriggerCtx(watermark=500)
    t = EventTimeTrigger.create()
    assert t.on_element("x", 10, w, ctx) is TriggerResult.CONTINUE and ctx.event_timers == {999}
    assert t.on_event_time(998, w, ctx) is TriggerResult.CONTINUE
    assert t.on_event_time(999, w, ctx) is TriggerResult.FIRE
    ctx.watermark = 999
    assert t.on_element("x", 10, w, ctx) is TriggerResult.FIRE, "within allowed lateness"
    t.clear(w, ctx)
    assert ctx.event_timers == set()


def test_count_trigger_and_purging_trigger() -> None:
    ctx = TriggerCtx()
    t = PurgingTrigger.of(CountTrigger.of(3))
    results = [t.on_element(i, 0, GlobalWindow.get(), ctx) for i in range(7)]
    fire = TriggerResult.FIRE_AND_PURGE
    assert [r is fire for r in results] == [False, False, True, False, False, True, False]
    assert isinstance(
        GlobalWindows.create().get_default_trigger().on_element(1, 0, None, ctx), TriggerResult
    )


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_end() -> None:
    w = TimeWindow(0, 10_000)
    ctx = TriggerCtx(watermark=0)
    t = ContinuousEventTimeTrigger.of(Time.seconds(3))
    assert t.on_element("x", 1_500, w, ctx) is TriggerResult.CONTINUE
    assert ctx.event_timers == {3_000, 9_999}
    assert t.on_event_time(3_000, w, ctx) is TriggerResult.FIRE and 6_000 in ctx.event_timers
    assert t.on_event_time(6_000, w, ctx) is TriggerResult.FIRE and 9_000 in ctx.event_timers
    assert t.on_event_time(9_000, w, ctx) is TriggerResult.FIRE and 9_999 in ctx.event_timers
    assert t.on_event_time(9_999, w, ctx) is TriggerResult.FIRE


def test_continuous_processing_time_trigger_fires_every_interval_of_the_clock() -> None:
    w = TimeWindow(0, 10_000)
    ctx = TriggerCtx(now=1_500)
    t = ContinuousProcessingTimeTrigger.of(Time.seconds(3))
    assert t.on_element("x", 0, w, ctx) is TriggerResult.CONTINUE
    assert ctx.proc_timers == {3_000} and not ctx.event_timers
    ctx.now = 2_000
    t.on_element("y", 0, w, ctx)  # a fire time is set already: nothing new
    assert ctx.proc_timers == {3_000}
    assert t.on_processing_time(2_999, w, ctx) is TriggerResult.CONTINUE  # not its fire time
    assert t.on_processing_time(3_000, w, ctx) is TriggerResult.FIRE and 6_000 in ctx.proc_timers
    assert t.on_event_time(6_000, w, ctx) is TriggerResult.CONTINUE
    assert t.on_processing_time(9_000, w, ctx) is TriggerResult.CONTINUE  # 6000 is next
    t.clear(w, ctx)
    assert 6_000 not in ctx.proc_timers and ctx.state == {}


def test_evictors_keep_the_newest_elements() -> None:
    values = [TimestampedValue(i, i * 100) for i in range(10)]
    kept = list(values)
    CountEvictor.of(3).evict_before(kept, len(kept), None, None)
    assert [v.get_value() for v in kept] == [7, 8, 9]
    kept = list(values)
    TimeEvictor.of(Time.milliseconds(250)).evict_before(kept, len(kept), None, None)
    assert [v.get_value() for v in kept] == [7, 8, 9]
    kept = list(values)
    CountEvictor.of(3, do_evict_after=True).evict_before(kept, len(kept), None, None)
    assert len(kept) == 10


def test_windowed_stream_refuses_bad_parts_at_definition() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
    sessions = keyed.window(EventTimeSessionWindows.with_gap(10))

    class NoMerge(EventTimeTrigger):
        def can_merge(self) -> bool:
            return False

    with pytest.raises(TypeError, match="merging"):
        sessions.trigger(NoMerge())
    with pytest.raises(ValueError, match="lateness"):
        sessions.allowed_lateness(-1)
    with pytest.raises(TypeError, match="ProcessWindowFunction"):
        sessions.process(lambda *a: a)
    with pytest.raises(TypeError, match="WindowAssigner"):
        keyed.window("tumbling")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="ProcessAllWindowFunction"):
        env.from_collection([1]).window_all(GlobalWindows.create()).process(lambda *a: a)


def test_window_operator_names_are_stable_across_processes() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
    sessions = keyed.window(EventTimeSessionWindows.with_dynamic_gap(lambda e: 5))
    name = sessions.reduce(lambda a, b: a).get_name()
    assert name == "Window(EventTimeSessionWindows, EventTimeTrigger, reduce)"
    counted = env.from_collection([1]).count_window_all(3, 1).reduce(lambda a, b: a)
    assert (
        counted.get_name()
        == "AllWindow(CountSlidingWindowAssigner, CountTrigger, CountEvictor, reduce)"
    )
    assert counted.get_transformation().parallelism == 1


# TimeWindow(0, 1000) pickled before TimeWindow had __reduce__ (the slots dataclass default:
# an empty NEWOBJ then its field values as state), as checkpoints of that time hold it.
_OLD_PICKLE = (
    b"\x80\x05\x957\x00\x00\x00\x00\x00\x00\x00\x8c\x17cairn.datastream.window\x94"
    b"\x8c\nTimeWindow\x94\x93\x94)\x81\x94]\x94(K\x00M\xe8\x03eb."
)


def test_time_windows_pickle_by_their_bounds_and_older_pickles_still_load() -> None:
    window = TimeWindow(-1000, 2**40)
    data = pickle.dumps(window, protocol=5)
    restored = pickle.loads(data)
    assert restored == window and hash(restored) == hash(window)
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    assert "REDUCE" in ops and "BUILD" not in ops  # TimeWindow(start, end): no state to set
    old = pickle.loads(_OLD_PICKLE)
    assert old == TimeWindow(0, 1000) and old.max_timestamp() == 999
    assert {old: 1}[TimeWindow(0, 1000)] == 1
