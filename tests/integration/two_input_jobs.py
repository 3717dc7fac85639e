"""Two-input jobs shared by the integration tests, with their golden outputs: a keyed
co-process join of two out-of-order streams in 1 s event-time windows, and a broadcast-rules
job whose windows take the rule in force at their start from broadcast state.

Every output line carries ``n``, the line's place among its key's lines (kept in keyed
state), so a run's per-key order can be compared with the golden one whatever files the lines
landed in."""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from cairn.datastream import (
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    StreamExecutionEnvironment,
)
from cairn.datastream.state import MapStateDescriptor, ValueStateDescriptor
from tests.integration.event_time_jobs import (
    DISORDER_MS,
    LATE,
    WINDOW_MS,
    OutOfOrderEvents,
    event_time_strategy,
    out_of_order_events,
    to_files_with_late,
)
from tests.integration.jobs import checkpointed_env, generated

RULE_EVERY_MS = 500  # a rule per 500 ms of event time: every window starts at one
RULES = MapStateDescriptor("rules", None, None)


class Payments:
    """``(key, event time, index)``: time ``20 i`` minus < 97 ms of jitter (half the rate of
    ``OutOfOrderEvents`` over the same span of event time)."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int, int]:
        return (f"k{index % self.keys:03d}", 20 * index - (index * 104729) % DISORDER_MS, index)

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        return [self(i) for i in indices]


class RuleUpdates:
    """``("rule", event time, multiplier)``: rule ``i`` holds from ``500 i`` ms on (rule 0
    also before, for the few events jitter puts at negative times)."""

    def __call__(self, index: int) -> tuple[str, int, int]:
        return ("rule", RULE_EVERY_MS * index, index % 7 + 1)

    def generate_batch(self, indices: range) -> list[tuple[str, int, int]]:
        return [self(i) for i in indices]


def _spin(cost_s: float) -> None:
    end = time.perf_counter() + cost_s
    while time.perf_counter() < end:
        pass


class _Windows:
    """Per key, 1 s windows in map state, emitted in order by event-time timers."""

    def __init__(self, cost_us: int) -> None:
        self.cost_s = cost_us / 1e6

    def open(self, runtime_context: Any) -> None:
        self.windows = runtime_context.get_map_state(MapStateDescriptor("windows", None, None))
        self.emitted = runtime_context.get_state(ValueStateDescriptor("emitted", None))

    def add(self, value: Any, ctx: Any, slot: int) -> Any:
        if self.cost_s:
            _spin(self.cost_s)
        ts = ctx.timestamp()
        if ts <= ctx.timer_service().current_watermark():
            yield LATE, value
            return
        start = ts - ts % WINDOW_MS
        acc = list(self.windows.get(start) or (0, 0, 0, 0))
        acc[slot] += 1
        acc[slot + 1] += value[2]
        self.windows.put(start, tuple(acc))
        ctx.timer_service().register_event_time_timer(start + WINDOW_MS - 1)

    def take(self, timestamp: int) -> tuple[int, int, tuple[int, ...]]:
        start = timestamp + 1 - WINDOW_MS
        acc = self.windows.get(start)
        self.windows.remove(start)
        n = (self.emitted.value() or 0) + 1
        self.emitted.update(n)
        return n, start, acc


class WindowJoin(_Windows, KeyedCoProcessFunction):
    """Orders (first input) and payments (second) per key and window:
    ``key,n,start,orders,order index sum,payments,payment index sum``."""

    def process_element1(self, value: Any, ctx: Any) -> Any:
        yield from self.add(value, ctx, 0)

    def process_element2(self, value: Any, ctx: Any) -> Any:
        yield from self.add(value, ctx, 2)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        n, start, acc = self.take(timestamp)
        yield f"{ctx.get_current_key()},{n},{start},{acc[0]},{acc[1]},{acc[2]},{acc[3]}"


class ApplyRules(_Windows, KeyedBroadcastProcessFunction):
    """Events per key and window, their index sum times the rule in force at the window's
    start (read-only broadcast state): ``key,n,start,count,sum*multiplier``."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield from self.add(value, ctx, 0)

    def process_broadcast_element(self, value: Any, ctx: Any) -> Any:
        ctx.get_broadcast_state(RULES).put(value[1], value[2])

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        n, start, acc = self.take(timestamp)
        # The watermark (min of both inputs) passed the window: its rule has arrived.
        multiplier = ctx.get_broadcast_state(RULES).get(max(start, 0))
        yield f"{ctx.get_current_key()},{n},{start},{acc[0]},{acc[1] * multiplier}"


def join_job(
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
    parallelism: int = 2,
) -> StreamExecutionEnvironment:
    """orders + payments (out of order) -> connect -> key_by both -> WindowJoin -> file sink."""
    env = checkpointed_env(
        conf,
        parallelism=parallelism,
        interval_ms=interval_ms,
        unaligned=unaligned,
        restarts=restarts,
    )
    orders = out_of_order_events(env, keys, records, rate, "orders")
    half = rate // 2 if rate else None
    payments = generated(
        env, Payments(keys), records // 2, "payments", rate=half, watermarks=event_time_strategy()
    )
    joined = (
        orders.connect(payments)
        .key_by(lambda r: r[0], lambda r: r[0])
        .process(WindowJoin(cost_us))
        .name("Join")
        .uid("join")
    )
    to_files_with_late(joined, out_dir, "out")
    return env


def rules_job(
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
    parallelism: int = 2,
    checkpoint_dir: str | None = None,
) -> StreamExecutionEnvironment:
    """events -> key_by -> connect(rules.broadcast(RULES)) -> ApplyRules -> file sink."""
    env = checkpointed_env(
        conf,
        parallelism=parallelism,
        interval_ms=interval_ms,
        unaligned=unaligned,
        checkpoint_dir=checkpoint_dir,
        retain=checkpoint_dir is not None,
        restarts=restarts,
    )
    # Rules cover the events' span of event time, at the events' pace.
    n_rules = records * 10 // RULE_EVERY_MS + 2
    rule_rate = max(1, rate * n_rules // records) if rate else None
    events = out_of_order_events(env, keys, records, rate)
    rules = generated(
        env, RuleUpdates(), n_rules, "rules", rate=rule_rate, watermarks=event_time_strategy()
    )
    applied = (
        events.key_by(lambda r: r[0])
        .connect(rules.broadcast(RULES))
        .process(ApplyRules(cost_us))
        .name("Rules")
        .uid("apply-rules")
    )
    to_files_with_late(applied, out_dir, "out")
    return env


def _numbered(rows: dict[tuple[str, int], str]) -> list[str]:
    """``key,n,start,...`` lines, ``n`` counting each key's windows in start order."""
    out: list[str] = []
    n: dict[str, int] = defaultdict(int)
    for key, start in sorted(rows):
        n[key] += 1
        out.append(f"{key},{n[key]},{start},{rows[(key, start)]}")
    return sorted(out)


def expected_join(records: int, keys: int) -> list[str]:
    """The golden output of ``join_job`` (sorted)."""
    acc: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for gen, count, slot in (
        (OutOfOrderEvents(keys), records, 0),
        (Payments(keys), records // 2, 2),
    ):
        for i in range(count):
            key, ts, index = gen(i)
            a = acc[(key, ts - ts % WINDOW_MS)]
            a[slot] += 1
            a[slot + 1] += index
    return _numbered({k: ",".join(map(str, a)) for k, a in acc.items()})


def expected_rules(records: int, keys: int) -> list[str]:
    """The golden output of ``rules_job`` (sorted)."""
    acc: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    gen = OutOfOrderEvents(keys)
    for i in range(records):
        key, ts, index = gen(i)
        a = acc[(key, ts - ts % WINDOW_MS)]
        a[0] += 1
        a[1] += index
    rules = RuleUpdates()
    return _numbered(
        {
            (k, s): f"{c},{t * rules(max(s, 0) // RULE_EVERY_MS)[2]}"
            for (k, s), (c, t) in acc.items()
        }
    )


def per_key_order_problems(lines: list[str]) -> list[str]:
    """Keys whose lines, ordered by ``n``, do not count 1, 2, ... with ascending starts."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for line in lines:
        key, n, start = line.split(",")[:3]
        by_key[key].append((int(n), int(start)))
    problems = []
    for key, rows in by_key.items():
        rows.sort()
        if [n for n, _ in rows] != list(range(1, len(rows) + 1)) or [s for _, s in rows] != sorted(
            s for _, s in rows
        ):
            problems.append(key)
    return problems
