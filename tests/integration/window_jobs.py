"""A job with PyFlink's window API on out-of-order input (bounded disorder): tumbling
``aggregate`` with a ``ProcessWindowFunction``, sliding ``reduce`` with a ``WindowFunction``,
session windows with ``process``; and the golden output of each, computed in plain Python."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cairn.api.window_functions import ProcessWindowFunction, WindowFunction
from cairn.common import Time
from cairn.datastream import AggregateFunction, StreamExecutionEnvironment
from cairn.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from tests.integration.event_time_jobs import (
    LATE,
    OutOfOrderEvents,
    out_of_order_events,
    to_files_with_late,
)
from tests.integration.jobs import checkpointed_env, file_sink

SESSION_GAP_MS = 90


class CountSum(AggregateFunction[Any, Any, Any]):
    def create_accumulator(self) -> Any:
        return (0, 0)

    def add(self, value: Any, accumulator: Any) -> Any:
        return (accumulator[0] + 1, accumulator[1] + value[2])

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return (a[0] + b[0], a[1] + b[1])


class Tumbling(ProcessWindowFunction[Any, str, str, Any]):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        ((count, total),) = elements
        yield f"{key},{context.window().start},{count},{total}"


class Sliding(WindowFunction[Any, str, str, Any]):
    def apply(self, key: str, window: Any, inputs: Any) -> Any:
        ((_, _, largest),) = inputs
        return [f"{key},{window.start},{largest}"]


class Sessions(ProcessWindowFunction[Any, str, str, Any]):
    def process(self, key: str, context: Any, elements: Any) -> Any:
        indexes = sorted(e[2] for e in elements)
        w = context.window()
        yield f"{key},{w.start},{w.end},{len(indexes)},{sum(indexes)}"


def keep_largest(a: Any, b: Any) -> Any:
    return a if a[2] >= b[2] else b


def windows_job(
    conf: dict[str, str],
    out_dir: str,
    *,
    records: int,
    keys: int,
    rate: int | None = 20_000,
    interval_ms: int = 300,
    unaligned: bool = False,
    backend: str | None = None,
) -> StreamExecutionEnvironment:
    if backend is not None:
        conf = {**conf, "state.backend.type": backend}
    env = checkpointed_env(conf, interval_ms=interval_ms, unaligned=unaligned)
    keyed = out_of_order_events(env, keys, records, rate).key_by(lambda r: r[0])

    def sink(stream: Any, name: str) -> None:
        stream.sink_to(file_sink(f"{out_dir}/{name}")).uid(f"{name}-sink")

    tumbling = (
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(1)))
        .side_output_late_data(LATE)
        .aggregate(CountSum(), Tumbling())
        .name("Tumbling")
        .uid("tumbling")
    )
    to_files_with_late(tumbling, out_dir, "tumbling")
    sliding = (
        keyed.window(SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1)))
        .reduce(keep_largest, Sliding())
        .name("Sliding")
        .uid("sliding")
    )
    sink(sliding, "sliding")
    sessions = (
        keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(SESSION_GAP_MS)))
        .process(Sessions())
        .name("Sessions")
        .uid("sessions")
    )
    sink(sessions, "sessions")
    return env


def expected(records: int, keys: int) -> dict[str, list[str]]:
    """Golden output of every sink of ``windows_job`` (sorted lines)."""
    gen = OutOfOrderEvents(keys)
    events = [gen(i) for i in range(records)]
    tumbling: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    sliding: dict[tuple[str, int], int] = {}
    per_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for key, ts, index in events:
        start = ts - ts % 1000
        tumbling[(key, start)][0] += 1
        tumbling[(key, start)][1] += index
        for s in (start, start - 1000):
            sliding[(key, s)] = max(sliding.get((key, s), -1), index)
        per_key[key].append((ts, index))
    sessions: list[str] = []
    for key, items in per_key.items():
        items.sort()
        start, end, members = items[0][0], items[0][0] + SESSION_GAP_MS, [items[0][1]]
        for ts, index in items[1:]:
            if ts > end:
                sessions.append(f"{key},{start},{end},{len(members)},{sum(members)}")
                start, end, members = ts, ts + SESSION_GAP_MS, []
            end = max(end, ts + SESSION_GAP_MS)
            members.append(index)
        sessions.append(f"{key},{start},{end},{len(members)},{sum(members)}")
    return {
        "tumbling": sorted(f"{k},{s},{c},{t}" for (k, s), (c, t) in tumbling.items()),
        "sliding": sorted(f"{k},{s},{m}" for (k, s), m in sliding.items()),
        "sessions": sorted(sessions),
        "late": [],
    }
