"""Bounded jobs run in both runtime modes by the BATCH tests: each builds its job on an
environment and returns the stream whose records the test collects."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from cairn.common import Time, Types, WatermarkStrategy
from cairn.common.watermark_strategy import TimestampAssigner
from cairn.datastream import (
    DataStream,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    OutputTag,
    ProcessWindowFunction,
    RuntimeExecutionMode,
    SourceFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from cairn.datastream.window import TumblingEventTimeWindows

Job = Callable[[StreamExecutionEnvironment], DataStream]

LINES = [
    "to be or not to be",
    "that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
] * 3

# (user, event time in ms, amount): out of order within a user, several seconds long.
EVENTS = [(f"u{i % 5}", (i * 7919) % 10_000, i % 13) for i in range(400)]

ODD = OutputTag("odd", Types.TUPLE([Types.STRING(), Types.INT()]))


def environment(mode: str, executor: str = "inprocess", **conf: str) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment({"cairn.executor": executor, **conf})
    env.set_runtime_mode(RuntimeExecutionMode[mode])
    env.set_parallelism(2)
    return env


def collect(job: Job, mode: str, executor: str = "inprocess", **conf: str) -> list[Any]:
    """The records ``job`` produces in ``mode``."""
    return list(job(environment(mode, executor, **conf)).execute_and_collect())


class _EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def events(env: StreamExecutionEnvironment, events: Iterable[Any] = EVENTS) -> DataStream:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_EventTime())
    return env.from_collection(list(events)).assign_timestamps_and_watermarks(strategy)


# ---------------------------------------------------------------------------- the jobs


def word_count(env: StreamExecutionEnvironment) -> DataStream:
    return (
        env.from_collection(LINES)
        .flat_map(lambda line: [(w, 1) for w in line.split()])
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )


def keyed_sum(env: StreamExecutionEnvironment) -> DataStream:
    return env.from_collection([(u, a) for u, _, a in EVENTS]).key_by(lambda e: e[0]).sum(1)


class _WindowTotal(ProcessWindowFunction[Any, Any, str, Any]):
    def process(self, key: str, context: Any, elements: Iterable[Any]) -> list[Any]:
        window = context.window()
        return [(key, window.start, window.end, sum(e[2] for e in elements))]


def tumbling_windows(env: StreamExecutionEnvironment) -> DataStream:
    return (
        events(env)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .process(_WindowTotal())
    )


def windowed_reduce(env: StreamExecutionEnvironment) -> DataStream:
    """The window operator's batch path (reduce with the default trigger)."""
    return (
        events(env)
        .map(lambda e: (e[0], e[2]))
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.seconds(2)))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
    )


class PerSecondTotals(KeyedProcessFunction[Any, Any, Any]):
    """State and event-time timers: a user's total per second, emitted when its second
    ends; odd totals also on a side output."""

    def open(self, runtime_context: Any) -> None:
        self.totals = runtime_context.get_map_state(MapStateDescriptor("totals", None, None))
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def process_element(self, value: Any, ctx: Any) -> None:
        second = value[1] // 1000
        self.totals.put(second, (self.totals.get(second) or 0) + value[2])
        self.seen.update((self.seen.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(second * 1000 + 999)

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        second = timestamp // 1000
        total = self.totals.get(second)
        self.totals.remove(second)
        yield (ctx.get_current_key(), second, total)
        if total % 2:
            yield ODD, (ctx.get_current_key(), total)


def process_with_timers(env: StreamExecutionEnvironment) -> DataStream:
    return events(env).key_by(lambda e: e[0]).process(PerSecondTotals())


def side_output(env: StreamExecutionEnvironment) -> DataStream:
    return process_with_timers(env).get_side_output(ODD)


class _Enrich(KeyedCoProcessFunction):
    """Connected keyed streams: amounts joined with the user's name, whichever comes first."""

    def open(self, runtime_context: Any) -> None:
        self.name = runtime_context.get_state(ValueStateDescriptor("name", None))
        self.early = runtime_context.get_list_state(ListStateDescriptor("early", None))

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        name = self.name.value()
        if name is None:
            self.early.add(value[2])
            return
        yield (name, value[2])

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        self.name.update(value[1])
        for amount in self.early.get() or []:
            yield (value[1], amount)
        self.early.clear()


def connected_and_union(env: StreamExecutionEnvironment) -> DataStream:
    names = env.from_collection([(f"u{i}", f"user-{i}") for i in range(5)])
    amounts = env.from_collection(EVENTS[:100]).union(env.from_collection(EVENTS[300:]))
    return (
        amounts.connect(names)
        .key_by(lambda e: e[0], lambda n: n[0])
        .process(_Enrich())
        .key_by(lambda p: p[0])
        .sum(1)
    )


JOBS: dict[str, Job] = {
    "word_count": word_count,
    "keyed_sum": keyed_sum,
    "tumbling_windows": tumbling_windows,
    "windowed_reduce": windowed_reduce,
    "process_with_timers": process_with_timers,
    "side_output": side_output,
    "connected_and_union": connected_and_union,
}

# Jobs whose STREAMING output is a rolling aggregate: BATCH emits each key's final value.
ROLLING = {"word_count", "keyed_sum", "connected_and_union"}


def final_per_key(records: Iterable[Any]) -> dict[Any, Any]:
    """A rolling aggregate's last value per key (the key is the record's first field)."""
    last: dict[Any, Any] = {}
    for r in records:
        last[r[0]] = r
    return last


class Endless(SourceFunction):
    """A legacy source: unbounded to the planner, which BATCH refuses before anything runs."""

    def run(self, ctx: Any) -> None:
        ctx.collect(1)

    def cancel(self) -> None:
        pass
