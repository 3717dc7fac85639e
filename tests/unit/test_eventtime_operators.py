"""Event time in operators: timers fired by watermarks (order, deletion, domain, timestamps),
side outputs, and event-time timers through snapshot, restore and rescale.

Operators are driven directly with a manual clock and manual watermarks (no task, no I/O)."""

from __future__ import annotations

from typing import Any

from cairn.datastream import KeyedProcessFunction, OutputTag, ProcessFunction, TimeDomain
from cairn.events import MAX_WATERMARK, MIN_WATERMARK
from cairn.graph.transformations import OperatorKind
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore

from ._operator_harness import OperatorHarness, snapshot_operator

LATE = OutputTag("late")


class Sessions(KeyedProcessFunction[str, Any, Any]):
    """Per key: registers an event-time timer at ``ts + 10``; the timer emits what it saw."""

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Any:
        key, _ = value
        ts = ctx.timestamp()
        assert ts is not None
        if ts <= ctx.timer_service().current_watermark():
            yield LATE, value
            return
        ctx.timer_service().register_event_time_timer(ts + 10)
        if value[1] == "cancel":
            ctx.timer_service().delete_event_time_timer(ts + 10)
        yield ("seen", key, ts)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext) -> Any:
        yield (
            "fired",
            ctx.get_current_key(),
            timestamp,
            ctx.time_domain(),
            ctx.timestamp(),
            ctx.timer_service().current_watermark(),
        )


def test_event_timers_fire_in_timestamp_order_when_the_watermark_passes_them() -> None:
    h = OperatorHarness(Sessions())
    h.op.process_batch(stamp([("b", "x"), ("a", "x"), ("a", "y")], [30, 20, 5]))
    assert h.records() == [
        (("seen", "b", 30), 30),
        (("seen", "a", 20), 20),
        (("seen", "a", 5), 5),
    ], "outputs keep their input's timestamp"
    h.batches.clear()
    h.op.process_watermark(14)
    assert h.records() == [] and h.watermarks == [14]
    h.op.process_watermark(30)
    fired = [r for r, _ in h.records()]
    assert fired == [
        ("fired", "a", 15, TimeDomain.EVENT_TIME, 15, 30),
        ("fired", "a", 30, TimeDomain.EVENT_TIME, 30, 30),
    ]
    assert [t for _, t in h.records()] == [15, 30], "timer output carries the timer's time"
    assert h.watermarks == [14, 30], "the watermark goes on after what it fired"
    h.batches.clear()
    h.op.process_watermark(40)
    assert [r[:3] for r, _ in h.records()] == [("fired", "b", 40)]
    h.batches.clear()
    h.op.process_watermark(MAX_WATERMARK)
    assert h.records() == [] and h.watermarks == [14, 30, 40, MAX_WATERMARK]


def test_deleted_timers_do_not_fire_and_timers_fire_once() -> None:
    h = OperatorHarness(Sessions())
    h.op.process_batch(stamp([("a", "cancel"), ("b", "x"), ("b", "x")], [0, 0, 0]))
    h.batches.clear()
    h.op.process_watermark(100)
    assert [r[:3] for r, _ in h.records()] == [("fired", "b", 10)]


def test_late_records_go_to_the_side_output_when_the_job_reads_it() -> None:
    h = OperatorHarness(Sessions())
    h.op.side_outputs = {"late": h.side.append}
    h.op.process_watermark(50)
    h.op.process_batch(stamp([("a", "on time"), ("a", "late")], [60, 50]))
    assert [r for r, _ in h.records()] == [("seen", "a", 60)]
    assert h.side == [[("a", "late")]] and h.side[0].timestamps == [50]  # type: ignore[attr-defined]


def test_a_tag_the_job_does_not_read_stays_in_the_main_output_as_in_pyflink() -> None:
    h = OperatorHarness(Sessions())
    h.op.process_watermark(50)
    h.op.process_batch(stamp([("a", "late")], [1]))
    assert [r for r, _ in h.records()] == [(LATE, ("a", "late"))]


def test_processing_time_timers_say_so_and_emit_without_timestamps() -> None:
    class Ping(KeyedProcessFunction[str, Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(
                ctx.timer_service().current_processing_time() + 5
            )
            return None

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            yield (ctx.get_current_key(), timestamp, ctx.time_domain())

    h = OperatorHarness(Ping())
    h.op.process_batch(stamp([("k", 1)], [123]))
    assert h.op.next_timer_ms() == 1_005
    h.op.on_processing_time(1_005)
    assert h.records() == [(("k", 1_005, TimeDomain.PROCESSING_TIME), None)]


def test_non_keyed_process_function_sees_timestamps_and_the_watermark_but_no_timers() -> None:
    class Stamp(ProcessFunction[Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value, ctx.timestamp(), ctx.timer_service().current_watermark()
            yield OutputTag("odd"), value

    h = OperatorHarness(Stamp(), kind=OperatorKind.PROCESS, keyed=False)
    h.op.side_outputs = {"odd": h.side.append}
    h.op.process_batch(["plain"])
    h.op.process_watermark(7)
    h.op.process_batch(stamp(["stamped"], [9]))
    assert h.records() == [(("plain", None, MIN_WATERMARK), None), (("stamped", 9, 7), 9)]
    assert h.side == [["plain"], ["stamped"]]


def test_event_timers_survive_snapshot_and_restore_at_another_parallelism() -> None:
    keys = [f"k{i}" for i in range(40)]
    source = OperatorHarness(Sessions())
    source.op.process_batch(stamp([(k, "x") for k in keys], list(range(40))))
    state, files = snapshot_operator(source.op)
    source.batches.clear()
    source.op.process_watermark(MAX_WATERMARK)
    expected = sorted(r[:3] for r, _ in source.records())
    assert len(expected) == 40
    fired: list[Any] = []
    for index in range(3):  # rescale 1 -> 3: each key group's timers go to its new owner
        h = OperatorHarness(
            Sessions(), parallelism=3, index=index, restore=OperatorRestore(1, {0: state}, files)
        )
        h.op.process_watermark(MAX_WATERMARK)
        fired.extend(r[:3] for r, _ in h.records())
    assert sorted(fired) == expected, "every timer fires once, after the restore"


def test_restored_timers_already_passed_fire_at_the_first_watermark_after_recovery() -> None:
    h = OperatorHarness(Sessions())
    h.op.process_batch(stamp([("a", "x")], [100]))
    state, files = snapshot_operator(h.op)
    again = OperatorHarness(Sessions(), restore=OperatorRestore(1, {0: state}, files))
    again.op.process_watermark(109)
    assert again.records() == []
    again.op.process_watermark(110)
    assert [r[:3] for r, _ in again.records()] == [("fired", "a", 110)]


def test_a_sink_function_sees_each_records_timestamp_and_the_watermark() -> None:
    from cairn.datastream import SinkFunction

    seen: list[Any] = []

    class Remember(SinkFunction):
        def invoke(self, value: Any, context: Any) -> None:
            seen.append((value, context.timestamp(), context.current_watermark()))

    h = OperatorHarness(Remember(), kind=OperatorKind.SINK_FUNCTION, keyed=False)
    h.op.process_batch(["plain"])
    h.op.process_watermark(3)
    h.op.process_batch(stamp(["stamped"], [5]))
    assert seen == [("plain", None, MIN_WATERMARK), ("stamped", 5, 3)]
