"""Event-time jobs shared by the integration tests: out-of-order input with bounded disorder,
windows of 1 s per key computed with event-time timers, and their golden output."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from cairn.common import Duration, TimestampAssigner, WatermarkStrategy
from cairn.datastream import (
    DataStream,
    KeyedProcessFunction,
    OutputTag,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import MapStateDescriptor
from tests.integration.jobs import checkpointed_env, file_sink, generated

WINDOW_MS = 1_000
DISORDER_MS = 97  # a record is at most this much older than the largest timestamp before it
LATE = OutputTag("late")


class OutOfOrderEvents:
    """``(key, event time, index)`` for index ``i``: time ``10 i`` minus up to 96 ms of
    deterministic jitter, so a strided split of the indexes is out of order by < 97 ms."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int, int]:
        return (f"k{index % self.keys:03d}", 10 * index - (index * 7919) % DISORDER_MS, index)

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        return [self(i) for i in indices]


class EventTime(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


def event_time_strategy() -> WatermarkStrategy:
    """Watermarks ``DISORDER_MS`` behind the largest event time seen (``EventTime``)."""
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(DISORDER_MS)
    ).with_timestamp_assigner(EventTime())


class WindowCount(KeyedProcessFunction[str, Any, str]):
    """Per key and 1 s window: count and index sum in map state, emitted by an event-time
    timer at the window's end (``key,window start,count,sum``); late records go to ``LATE``.
    ``cost_us`` spins per record (backpressure: in-flight data for unaligned checkpoints)."""

    def __init__(self, cost_us: int = 0) -> None:
        self.cost_s = cost_us / 1e6

    def open(self, runtime_context: Any) -> None:
        self.windows = runtime_context.get_map_state(MapStateDescriptor("windows", None, None))

    def process_element(self, value: Any, ctx: Any) -> Any:
        if self.cost_s:
            end = time.perf_counter() + self.cost_s
            while time.perf_counter() < end:
                pass
        ts = ctx.timestamp()
        if ts <= ctx.timer_service().current_watermark():
            yield LATE, value
            return
        start = ts - ts % WINDOW_MS
        count, total = self.windows.get(start) or (0, 0)
        self.windows.put(start, (count + 1, total + value[2]))
        ctx.timer_service().register_event_time_timer(start + WINDOW_MS - 1)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        start = timestamp + 1 - WINDOW_MS
        count, total = self.windows.get(start)
        self.windows.remove(start)
        yield f"{ctx.get_current_key()},{start},{count},{total}"


def window_job(
    conf: dict[str, str],
    out_dir: str,
    *,
    records: int,
    keys: int,
    rate: int | None = 20_000,
    interval_ms: int = 300,
    unaligned: bool = False,
    restarts: int = 10,
    cost_us: int = 0,
    window: WindowCount | None = None,
) -> StreamExecutionEnvironment:
    """Out-of-order generator (bounded disorder) -> key_by -> WindowCount (or ``window``) ->
    exactly-once file sink, late records to a second file sink."""
    env = checkpointed_env(conf, interval_ms=interval_ms, unaligned=unaligned, restarts=restarts)
    windows = (
        out_of_order_events(env, keys, records, rate)
        .key_by(lambda r: r[0])
        .process(window if window is not None else WindowCount(cost_us))
        .name("Window")
        .uid("window-count")
    )
    to_files_with_late(windows, out_dir, "windows")
    return env


def out_of_order_events(
    env: StreamExecutionEnvironment,
    keys: int,
    records: int | None,
    rate: float | None,
    name: str = "events",
) -> DataStream:
    """``OutOfOrderEvents(keys)`` at ``rate`` records/s (``None``: unthrottled) as the stream
    ``name`` (also its uid), with ``event_time_strategy``'s timestamps and watermarks."""
    return generated(
        env, OutOfOrderEvents(keys), records, name, rate=rate, watermarks=event_time_strategy()
    )


def to_files_with_late(result: DataStream, out_dir: str, name: str) -> None:
    """``result`` into files under ``out_dir/name`` (uid ``<name>-sink``), and its late
    records (side output ``LATE``, as text) under ``out_dir/late`` (uid ``late-sink``)."""
    result.sink_to(file_sink(f"{out_dir}/{name}")).uid(f"{name}-sink")
    result.get_side_output(LATE).map(str).sink_to(file_sink(out_dir + "/late")).uid("late-sink")


def expected_windows(records: int, keys: int, indexes: Iterable[int] | None = None) -> list[str]:
    """The golden output of ``WindowCount`` over ``OutOfOrderEvents`` (sorted)."""
    gen = OutOfOrderEvents(keys)
    windows: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for i in indexes if indexes is not None else range(records):
        key, ts, index = gen(i)
        w = windows[(key, ts - ts % WINDOW_MS)]
        w[0] += 1
        w[1] += index
    return sorted(f"{k},{s},{c},{t}" for (k, s), (c, t) in windows.items())


def windows_of_prefixes(lines: list[str], keys: int, parallelism: int = 2) -> list[str]:
    """The golden output of a run whose source subtasks each read a prefix of their split.

    Split ``j`` of the generator reads the indexes ``j, j + parallelism, ...`` and a key is
    ``index % keys``: with ``keys`` a multiple of ``parallelism`` each key belongs to one
    split, so the counts in ``lines`` say how long each prefix was. ``lines`` equal to the
    result (sorted) means every window of those records fired once, whole.
    """
    assert keys % parallelism == 0
    read = [0] * parallelism
    for line in lines:
        key, _start, count, _sum = line.split(",")
        read[int(key[1:]) % parallelism] += int(count)
    indexes = [j + parallelism * n for j in range(parallelism) for n in range(read[j])]
    return expected_windows(0, keys, indexes)
