"""The window operator driven directly (no task, no I/O): firing on watermarks, output
timestamps, allowed lateness and the late side output, session merging, one accumulator per
window, processing-time windows on a manual clock, count windows and evictors, and windows
in flight through snapshot and restore at another parallelism."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cairn.api.window_functions import (
    ProcessAllWindowFunction,
    ProcessWindowFunction,
)
from cairn.common import Time
from cairn.datastream import (
    AggregateFunction,
    KeyedProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from cairn.datastream.window import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeSessionWindows,
    EventTimeTrigger,
    SlidingEventTimeWindows,
    TimeEvictor,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from cairn.datastream.window_state import WindowStateFormatError
from cairn.events import MAX_WATERMARK
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore

from ._operator_harness import OperatorHarness, snapshot_operator
from ._window_functions import Describe, WithKey, window_function

LATE = OutputTag("late")


def add(a: Any, b: Any) -> Any:
    return (a[0], a[1] + b[1])


def test_tumbling_reduce_fires_when_the_watermark_passes_the_end_stamped_with_it() -> None:
    f = window_function(
        lambda k: k.window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(add)
    )
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 1), ("b", 2), ("a", 3), ("a", 1500)], [10, 20, 999, 1500]))
    assert h.records() == []
    h.op.process_watermark(998)
    assert h.records() == []
    h.op.process_watermark(999)
    assert h.records() == [(("a", 4), 999), (("b", 2), 999)]
    h.batches.clear()
    h.op.process_watermark(MAX_WATERMARK)
    assert h.records() == [(("a", 1500), 1999)]


def test_allowed_lateness_refires_and_later_records_go_to_the_side_output() -> None:
    f = window_function(
        lambda k: (
            k.window(TumblingEventTimeWindows.of(1000))
            .allowed_lateness(500)
            .side_output_late_data(LATE)
            .process(Describe())
        )
    )
    h = OperatorHarness(f)
    h.op.side_outputs = {"late": h.side.append}
    h.op.process_batch(stamp([("a", 100)], [100]))
    h.op.process_watermark(1200)
    assert [r for r, _ in h.records()] == [("a", 0, 1000, [100], 1)]
    h.batches.clear()
    h.op.process_batch(stamp([("a", 200)], [200]))  # late but within lateness: fires again
    assert [r for r, _ in h.records()] == [("a", 0, 1000, [100, 200], 2)]
    h.batches.clear()
    h.op.process_watermark(1499)  # cleanup time 999 + 500: window and its state gone
    h.op.process_batch(stamp([("a", 300), ("a", 1600)], [300, 1600]))
    assert h.records() == [] and h.side == [[("a", 300)]]
    h.op.process_watermark(MAX_WATERMARK)
    assert [r for r, _ in h.records()] == [("a", 1000, 2000, [1600], 1)]


def test_session_windows_merge_contents_and_timers() -> None:
    f = window_function(
        lambda k: k.window(EventTimeSessionWindows.with_gap(100)).process(Describe())
    )
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 0), ("a", 250), ("b", 0)], [0, 250, 0]))
    h.op.process_batch(stamp([("a", 90)], [90]))  # [0,100) + [90,190) → [0,190)
    h.op.process_batch(stamp([("a", 150)], [150]))  # [150,250) bridges to [250,350): [0,350)
    h.op.process_watermark(200)
    assert [r for r, _ in h.records()] == [("b", 0, 100, [0], 1)]
    h.batches.clear()
    h.op.process_watermark(349)
    assert [r for r, _ in h.records()] == [("a", 0, 350, [0, 90, 150, 250], 1)]
    assert h.op.backend.next_event_timer_ms() is None, "merged windows' timers were deleted"


class Average(AggregateFunction[Any, Any, Any]):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator: Any) -> Any:
        return accumulator[0] / accumulator[1]

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


def test_sliding_aggregate_keeps_one_accumulator_per_window_through_a_rescale() -> None:
    f = window_function(
        lambda k: k.window(SlidingEventTimeWindows.of(2000, 1000)).aggregate(Average(), WithKey())
    )
    keys = [f"k{i}" for i in range(20)]
    h = OperatorHarness(f)
    h.op.process_batch(stamp([(k, 10) for k in keys] + [(k, 20) for k in keys], [500] * 40))
    state, files = snapshot_operator(h.op)  # writes the batch path's cached accumulators back first
    contents = h.op.backend.keys("_cairn_win/contents")
    assert len(contents) == 20
    outputs: list[Any] = []
    for index in range(2):
        restored = OperatorHarness(
            f, parallelism=2, index=index, restore=OperatorRestore(1, {0: state}, files)
        )
        restored.op.process_watermark(MAX_WATERMARK)
        outputs.extend(r for r, _ in restored.records())
    assert sorted(outputs) == sorted(
        [(k, -1000, 15.0) for k in keys] + [(k, 0, 15.0) for k in keys]
    )


def test_processing_time_windows_fire_on_the_manual_clock_without_timestamps() -> None:
    f = window_function(
        lambda k: k.window(TumblingProcessingTimeWindows.of(Time.seconds(1))).reduce(add)
    )
    h = OperatorHarness(f)  # the clock starts at 1000
    h.op.process_batch([("a", 1), ("a", 2)])
    assert h.op.next_timer_ms() == 1_999
    h.clock.advance(500)
    h.op.process_batch([("a", 4)])
    h.op.on_processing_time(1_999)
    assert h.records() == [(("a", 7), None)]


def test_count_windows_tumbling_and_sliding() -> None:
    tumbling = OperatorHarness(window_function(lambda k: k.count_window(2).reduce(add)))
    tumbling.op.process_batch([("a", i) for i in range(5)])
    assert [r for r, _ in tumbling.records()] == [("a", 1), ("a", 5)]
    sliding = OperatorHarness(window_function(lambda k: k.count_window(3, 2).apply(WithKey())))
    sliding.op.process_batch([("a", i) for i in range(7)])
    got = [r[2:] for r, _ in sliding.records()]
    assert got == [
        (("a", 0), ("a", 1)),
        (("a", 1), ("a", 2), ("a", 3)),
        (("a", 3), ("a", 4), ("a", 5)),
    ]


def test_a_custom_trigger_on_event_time_windows() -> None:
    f = window_function(
        lambda k: (
            k.window(TumblingEventTimeWindows.of(1000)).trigger(CountTrigger.of(2)).reduce(add)
        )
    )
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 1), ("a", 2), ("a", 3)], [1, 2, 3]))
    assert [r for r, _ in h.records()] == [("a", 3)]
    h.op.process_watermark(MAX_WATERMARK)
    assert [r for r, _ in h.records()] == [("a", 3)], "CountTrigger ignores event time"


class Everything(ProcessAllWindowFunction[Any, Any, Any]):
    def process(self, context: Any, elements: Any) -> Any:
        total = context.global_state().get_state(ValueStateDescriptor("total"))
        total.update((total.value() or 0) + len(list(elements)))
        yield context.window().start, sorted(v for _, v in elements), total.value()


def all_window_function(build: Any) -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    return build(env.from_collection([("a", 0)])).get_transformation().operator.function


def test_window_all_with_a_continuous_trigger_and_a_time_evictor() -> None:
    f = all_window_function(
        lambda s: (
            s.window_all(TumblingEventTimeWindows.of(10_000))
            .trigger(ContinuousEventTimeTrigger.of(1000))
            .evictor(TimeEvictor.of(1000))
            .process(Everything())
        )
    )
    h = OperatorHarness(f)  # (the harness keys by r[0]; window_all's own key is a constant)
    h.op.process_batch(stamp([("x", 1), ("x", 500)], [100, 500]))
    h.op.process_watermark(1000)  # early firing at 1000: everything so far
    assert [r for r, _ in h.records()] == [(0, [1, 500], 2)]
    h.batches.clear()
    h.op.process_batch(stamp([("x", 1700)], [1700]))
    h.op.process_watermark(2000)  # evicted before: older than the newest - 1 s
    assert [r for r, _ in h.records()] == [(0, [1700], 3)]
    h.batches.clear()
    for watermark in [*range(3000, 10_000, 1000), MAX_WATERMARK]:
        h.op.process_watermark(watermark)  # every second up to 9000, then the end, once
    assert [r for r, _ in h.records()] == [(0, [1700], n) for n in range(4, 12)]
    assert h.op.backend.next_event_timer_ms() is None


class Remember(ProcessWindowFunction[Any, Any, str, Any]):
    """Per-window list, map and aggregating state across firings, freed in ``clear``."""

    def process(self, key: str, context: Any, elements: Any) -> Any:
        store = context.window_state()
        seen = store.get_list_state(ListStateDescriptor("seen"))
        seen.add(len(list(elements)))
        by_size = store.get_map_state(MapStateDescriptor("by-size"))
        by_size.put(len(list(elements)), context.current_watermark())
        mean = store.get_aggregating_state(AggregatingStateDescriptor("mean", Average()))
        mean.add((key, len(list(elements))))
        yield list(seen), sorted(by_size.items()), mean.get()

    def clear(self, context: Any) -> None:
        store = context.window_state()
        store.get_list_state(ListStateDescriptor("seen")).clear()
        store.get_map_state(MapStateDescriptor("by-size")).clear()
        store.get_aggregating_state(AggregatingStateDescriptor("mean", Average())).clear()


def test_per_window_state_lives_until_the_window_is_cleaned_up() -> None:
    f = window_function(
        lambda k: (
            k.window(TumblingEventTimeWindows.of(1000)).allowed_lateness(1000).process(Remember())
        )
    )
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 1)], [1]))
    h.op.process_watermark(999)
    h.op.process_batch(stamp([("a", 2)], [2]))  # late, within lateness: fires again
    assert [r for r, _ in h.records()] == [
        ([1], [(1, 999)], 1.0),
        ([1, 2], [(1, 999), (2, 999)], 1.5),
    ]
    h.op.process_watermark(1999)
    assert h.op.backend.keys("_cairn_win/window-state/seen") == []
    assert h.op.backend.keys("_cairn_win/contents") == []


class SameAsDefault(EventTimeTrigger):
    """Flink's ``EventTimeTrigger`` by another type: takes the general (not inlined) path."""


def test_the_inlined_default_trigger_path_decides_as_the_trigger_does() -> None:
    rng = random.Random(7)
    steps: list[Any] = []
    for i in range(400):
        if rng.random() < 0.1:
            steps.append(("watermark", i * 10 - 300))
        else:
            steps.append((rng.choice("abc"), i * 10 - rng.randrange(0, 1500)))
    outputs = []
    for trigger in (EventTimeTrigger.create(), SameAsDefault()):
        f = window_function(
            lambda k, t=trigger: (
                k.window(SlidingEventTimeWindows.of(1000, 500))
                .trigger(t)
                .allowed_lateness(400)
                .side_output_late_data(LATE)
                .reduce(add)
            )
        )
        h = OperatorHarness(f)
        h.op.side_outputs = {"late": h.side.append}
        assert f._default_path is (type(trigger) is EventTimeTrigger)
        for what, t in steps:
            if what == "watermark":
                h.op.process_watermark(max(t, h.op.current_watermark))
            else:
                h.op.process_batch(stamp([(what, t)], [t]))
        h.op.process_watermark(MAX_WATERMARK)
        outputs.append((h.records(), h.side))
    assert outputs[0] == outputs[1]
    assert outputs[0][1], "some records were late beyond the allowed lateness"
    assert len(outputs[0][0]) > 100


class _LegacyWindows(KeyedProcessFunction[Any, Any, Any]):
    """Writes a window's contents the way Cairn did before window namespaces."""

    def open(self, runtime_context: Any) -> None:
        self.contents = runtime_context.get_map_state(
            MapStateDescriptor("_cairn_w/contents", None, None)
        )

    def process_element(self, value: Any, ctx: Any) -> Any:
        self.contents.put(TimeWindow(0, 1000), value)
        return []


def test_window_state_of_the_format_before_namespaces_is_refused_not_dropped() -> None:
    legacy = OperatorHarness(_LegacyWindows())
    legacy.op.process_batch(stamp([("a", 1)], [10]))
    state, files = snapshot_operator(legacy.op)
    f = window_function(lambda k: k.window(TumblingEventTimeWindows.of(1000)).reduce(add))
    with pytest.raises(WindowStateFormatError, match=r"_cairn_w/contents.*--drain"):
        OperatorHarness(f, restore=OperatorRestore(1, {0: state}, files))


def test_windows_are_stored_under_their_start_and_end_not_as_objects() -> None:
    f = window_function(lambda k: k.window(TumblingEventTimeWindows.of(1000)).reduce(add))
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 1), ("a", 2)], [10, 1500]))
    snapshot_operator(h.op)  # writes the batch path's accumulators back
    backend = h.op.backend
    backend.set_current_key("a")
    contents = backend.get_partitioned_state(MapStateDescriptor("_cairn_win/contents", None, None))
    assert sorted(contents.items()) == [((0, 1000), ("a", 1)), ((1000, 2000), ("a", 2))]
    h.op.process_watermark(MAX_WATERMARK)
    assert sorted(r for r, _ in h.records()) == [("a", 1), ("a", 2)]


def _sessions(events: list[tuple[str, int]], gap: int) -> list[Any]:
    """Session windows of ``events`` computed in plain Python (touching windows merge)."""
    out = []
    for key in sorted({k for k, _ in events}):
        times = sorted(t for k, t in events if k == key)
        start, end, members = times[0], times[0] + gap, [times[0]]
        for t in times[1:]:
            if t > end:
                out.append((key, start, end, members, 1))
                start, members = t, []
            end = max(end, t + gap)
            members.append(t)
        out.append((key, start, end, members, 1))
    return sorted(out)


def test_sessions_are_read_from_the_state_where_the_in_memory_copy_lacks_a_key() -> None:
    """The operator reads a key's sessions from an in-memory copy of their namespaces; it
    starts empty when the operator opens (after a restore) and holds few keys (here 2, so
    most reads of interleaved keys go to the state): the sessions are those of one run."""
    rng = random.Random(5)
    events = [(f"k{rng.randrange(6)}", rng.randrange(0, 4000)) for _ in range(600)]
    f = window_function(
        lambda k: k.window(EventTimeSessionWindows.with_gap(30)).process(Describe())
    )
    first = OperatorHarness(f)
    f._sessions._max_keys = 2
    half = len(events) // 2
    for key, t in events[:half]:
        first.op.process_batch(stamp([(key, t)], [t]))
    state, files = snapshot_operator(first.op)
    restored = OperatorHarness(f, restore=OperatorRestore(1, {0: state}, files))
    f._sessions._max_keys = 2
    for key, t in events[half:]:
        restored.op.process_batch(stamp([(key, t)], [t]))
    restored.op.process_watermark(MAX_WATERMARK)
    assert sorted(r for r, _ in restored.records()) == _sessions(events, 30)


def test_a_session_merges_with_the_group_merge_windows_gives_it() -> None:
    """The one-pass session merge agrees with ``TimeWindow.merge_windows`` (sort everything)
    on random insertions, touching windows included."""
    from cairn.datastream.window import TimeWindow
    from cairn.datastream.window_operator import _time_window_group

    rng = random.Random(7)
    for _ in range(200):
        sessions: set[tuple[int, int]] = set()
        for _ in range(40):
            start = rng.randrange(0, 300)
            window = TimeWindow(start, start + rng.randrange(1, 25))
            existing = {TimeWindow(s, e) for s, e in sessions}
            cover, members = next(
                (c, m) for c, m in TimeWindow.merge_windows([*existing, window]) if window in m
            )
            expected = sorted({m for m in members if m in existing})
            merged, got = _time_window_group(window, sessions)
            assert (merged, got) == (expected, cover)
            sessions -= {(m.start, m.end) for m in merged}
            sessions.add((got.start, got.end))
