"""Keyed timers as Flink's ``InternalTimerServiceImpl`` fires them: in timestamp order across
keys, honouring timers that a firing timer registers or deletes (one-input and two-input
operators share the code); processing-time timers of a keyed ``ProcessFunction`` (the
``KeyedRecordOperator``), through a snapshot and on the in-process executor; the error of a
function that returns a value where an iterable of outputs is expected."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.datastream import KeyedProcessFunction, ProcessFunction, TimeDomain
from cairn.datastream.functions import FlatMapFunction, KeyedCoProcessFunction, SourceFunction
from cairn.graph.transformations import OperatorKind
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore
from cairn.testing.simple_state_files import MemoryStateFiles

from ._operator_harness import OperatorHarness, TwoInputHarness
from ._window_functions import window_function


class Chain(KeyedProcessFunction[str, Any, Any]):
    """Record ``(key, t)`` sets an event timer at ``t``; key ``a``'s timer at 10 sets another
    one at 12 and deletes its own at 15 (what a session window's merge does)."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value[1])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        key = ctx.get_current_key()
        if (key, timestamp) == ("a", 10):
            ctx.timer_service().register_event_time_timer(12)
            ctx.timer_service().delete_event_time_timer(15)
        yield key, timestamp


def test_event_timers_fire_in_timestamp_order_across_keys_including_those_timers_set() -> None:
    h = OperatorHarness(Chain())
    h.op.process_batch(stamp([("b", 30), ("c", 14), ("a", 10), ("a", 15), ("b", 11)], [0] * 5))
    h.op.process_watermark(100)
    # Before: every due timer was taken at once, so a's timer at 12 fired after 30 and its
    # deleted timer at 15 fired anyway.
    assert h.records() == [
        (("a", 10), 10),
        (("b", 11), 11),
        (("a", 12), 12),
        (("c", 14), 14),
        (("b", 30), 30),
    ]
    assert h.watermarks == [100] and len(h.batches) == 1, "one batch, then the watermark"


def test_a_timer_registered_past_the_watermark_waits_for_the_next_one() -> None:
    class Again(KeyedProcessFunction[str, Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_event_time_timer(5)

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            if timestamp == 5:
                ctx.timer_service().register_event_time_timer(20)
            yield timestamp

    h = OperatorHarness(Again())
    h.op.process_batch(stamp([("k", 0)], [0]))
    h.op.process_watermark(10)
    h.op.process_watermark(20)
    assert h.records() == [(5, 5), (20, 20)] and h.watermarks == [10, 20]


class CoChain(KeyedCoProcessFunction):
    def process_element1(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value[1])

    def process_element2(self, value: Any, ctx: Any) -> Any:
        ctx.timer_service().register_event_time_timer(value[1])

    on_timer = Chain.on_timer


def test_two_input_keyed_operators_fire_event_timers_in_the_same_order() -> None:
    h = TwoInputHarness(OperatorKind.KEYED_CO_PROCESS, CoChain(), keyed=True)
    h.side(0, stamp([("b", 30), ("a", 10), ("b", 11)], [0] * 3))
    h.side(1, stamp([("c", 14), ("a", 15)], [0] * 2))
    h.op.process_watermark(100)
    assert [r for r, _ in h.records()] == [("a", 10), ("b", 11), ("a", 12), ("c", 14), ("b", 30)]


def test_processing_time_timers_fire_in_order_and_deleted_ones_do_not() -> None:
    class Remind(KeyedProcessFunction[str, Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            ctx.timer_service().register_processing_time_timer(value[1])

        def on_timer(self, timestamp: int, ctx: Any) -> Any:
            if timestamp == 1_010:
                ctx.timer_service().delete_processing_time_timer(1_015)
            yield ctx.get_current_key(), timestamp, ctx.time_domain()

    h = OperatorHarness(Remind())
    h.op.process_batch([("k", 1_015), ("j", 1_020), ("k", 1_010), ("j", 1_090)])
    h.op.on_processing_time(1_050)
    assert [r for r, _ in h.records()] == [
        ("k", 1_010, TimeDomain.PROCESSING_TIME),
        ("j", 1_020, TimeDomain.PROCESSING_TIME),
    ]
    assert h.op.next_timer_ms() == 1_090


class Ticker(ProcessFunction[Any, Any]):
    """A plain ProcessFunction on a keyed stream: a processing-time timer 5 ms after each
    record; the timer says its key, time and domain."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        now = ctx.timer_service().current_processing_time()
        ctx.timer_service().register_processing_time_timer(now + 5)
        yield "seen", value

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        yield "tick", ctx.get_current_key(), timestamp, ctx.time_domain()


def test_a_keyed_process_function_of_the_record_operator_fires_processing_timers() -> None:
    h = OperatorHarness(Ticker(), kind=OperatorKind.PROCESS)
    assert type(h.op).__name__ == "KeyedRecordOperator"
    h.op.process_batch([("a", 1), ("b", 2)])
    assert h.op.next_timer_ms() == 1_005
    h.op.on_processing_time(1_004)
    assert [r for r, _ in h.records()] == [("seen", ("a", 1)), ("seen", ("b", 2))]
    h.batches.clear()
    h.op.on_processing_time(1_005)
    # Before: the timer was never taken off the queue, so the task saw it due on every loop.
    assert [r for r, _ in h.records()] == [
        ("tick", "a", 1_005, TimeDomain.PROCESSING_TIME),
        ("tick", "b", 1_005, TimeDomain.PROCESSING_TIME),
    ]
    assert h.op.next_timer_ms() is None


def test_processing_timers_of_the_record_operator_survive_a_snapshot() -> None:
    h = OperatorHarness(Ticker(), kind=OperatorKind.PROCESS)
    h.op.process_batch([("a", 1)])
    files = MemoryStateFiles(1)
    state = h.op.snapshot_state(1, 0).run(files)
    restore = OperatorRestore(1, {0: state}, files)
    again = OperatorHarness(Ticker(), kind=OperatorKind.PROCESS, restore=restore)
    assert again.op.next_timer_ms() == 1_005
    again.op.on_processing_time(2_000)
    assert [r for r, _ in again.records()] == [("tick", "a", 1_005, TimeDomain.PROCESSING_TIME)]


class SignallingTicker(Ticker):
    """``Ticker`` that also leaves a file per fired timer, so the source can keep the input
    open until every key's timer has fired (pending processing-time timers are dropped at
    the end of input, as in Flink): no sleep that a loaded machine could outrun."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        import os

        open(os.path.join(self.directory, str(ctx.get_current_key())), "w").close()
        yield from super().on_timer(timestamp, ctx)


def test_a_keyed_process_function_fires_processing_timers_on_the_inprocess_executor(
    inprocess_conf: dict[str, str], tmp_path: Any
) -> None:
    from cairn.common import Configuration
    from cairn.datastream import StreamExecutionEnvironment

    configuration = Configuration()
    for k, v in inprocess_conf.items():
        configuration.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(2)
    signals = str(tmp_path)

    class Pause(SourceFunction):
        """Emits three keys, then keeps the input open until their timers fired (60 s cap)."""

        def run(self, ctx: Any) -> None:
            import os
            import time

            for record in [("a", 1), ("b", 2), ("c", 3)]:
                ctx.collect(record)
            deadline = time.monotonic() + 60
            while len(os.listdir(signals)) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)

        def cancel(self) -> None:
            pass

    keyed = env.add_source(Pause()).key_by(lambda r: r[0])
    # KeyedStream.process takes a KeyedProcessFunction (as PyFlink); the runtime's
    # KeyedRecordOperator runs a keyed PROCESS node with a plain ProcessFunction.
    ticks = keyed._then("Process", OperatorKind.PROCESS, SignallingTicker(signals), None)
    out = list(ticks.execute_and_collect())
    assert sorted(r[1] for r in out if r[0] == "seen") == [("a", 1), ("b", 2), ("c", 3)]
    ticks_of = sorted((r[1], r[3]) for r in out if r[0] == "tick")
    assert ticks_of == [(k, TimeDomain.PROCESSING_TIME) for k in "abc"], out


class Counts(FlatMapFunction):
    def flat_map(self, value: Any) -> Any:
        return len(value)


def test_a_function_returning_a_non_iterable_is_named_with_what_it_returned() -> None:
    h = OperatorHarness(Counts(), kind=OperatorKind.FLAT_MAP, keyed=False)
    with pytest.raises(TypeError) as info:
        h.op.process_batch(["abc"])
    message = str(info.value)
    assert "Counts.flat_map() returned 3 (int), not an iterable" in message
    assert message.startswith("op: ")


def test_a_keyed_process_function_returning_a_value_is_named_too() -> None:
    class Echo(KeyedProcessFunction[str, Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            return value[1]

    h = OperatorHarness(Echo())
    with pytest.raises(TypeError, match=r"Echo\.process_element\(\) returned 7 \(int\)"):
        h.op.process_batch([("k", 7)])


def test_a_type_error_inside_the_functions_generator_is_its_own() -> None:
    class Broken(KeyedProcessFunction[str, Any, Any]):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield value[1] + "x"  # int + str: the user's bug

    h = OperatorHarness(Broken())
    with pytest.raises(TypeError, match="unsupported operand"):
        h.op.process_batch([("k", 7)])
    with pytest.raises(TypeError, match="unsupported operand"):
        h.op.process_batch(stamp([("k", 7)], [1]))


def test_one_watermark_jump_fires_every_interval_of_a_continuous_trigger() -> None:
    from cairn.datastream.window import ContinuousEventTimeTrigger, TumblingEventTimeWindows
    from cairn.events import MAX_WATERMARK

    f = window_function(
        lambda k: (
            k.window(TumblingEventTimeWindows.of(10_000))
            .trigger(ContinuousEventTimeTrigger.of(1000))
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
        )
    )
    h = OperatorHarness(f)
    h.op.process_batch(stamp([("a", 1), ("a", 2)], [100, 2500]))
    h.op.process_watermark(MAX_WATERMARK)
    # As Flink: each early firing registers the next one, which the same watermark passes,
    # so it fires before the window's end (before: the ones between were skipped).
    assert [t for _, t in h.records()] == [*range(1000, 10_000, 1000), 9999]
    assert {r for r, _ in h.records()} == {("a", 3)}
    assert h.op.backend.next_event_timer_ms() is None
