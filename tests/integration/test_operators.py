"""Operators end to end: partitioners (also ``partition_custom`` across worker processes),
union, timers, CheckpointedFunction, print."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from cairn.common.restart_strategy import RestartStrategies
from cairn.datastream.functions import (
    CheckpointedFunction,
    KeyedProcessFunction,
    MapFunction,
    Partitioner,
    SourceFunction,
)
from cairn.datastream.state import ListStateDescriptor, ValueStateDescriptor
from tests.integration.jobs import environment


def test_partitioners_and_union_deliver_every_record(executor_conf: dict[str, str]) -> None:
    env = environment(executor_conf, parallelism=3)
    a = env.from_collection(list(range(0, 300)))
    b = env.from_collection(list(range(300, 600)))
    merged = a.rebalance().map(lambda x: x).union(b.shuffle().map(lambda x: x))
    out = list(merged.key_by(lambda x: x % 7).map(lambda x: x * 2).execute_and_collect())
    assert sorted(out) == [x * 2 for x in range(600)]


class _ByFirstLetter(Partitioner):
    def partition(self, key: str, num_partitions: int) -> int:
        return "abc".index(key[0]) % num_partitions


class _Subtask(MapFunction):
    def open(self, runtime_context: Any) -> None:
        self.index = runtime_context.get_index_of_this_subtask()

    def map(self, value: str) -> tuple[int, str]:
        return (self.index, value)


@pytest.mark.spark
def test_partition_custom_routes_records_between_spark_workers(spark: Any) -> None:
    env = environment({"cairn.executor": "spark", "cairn.workers": "3"}, parallelism=3)
    words = [f"{letter}{i}" for i in range(200) for letter in "abc"]
    routed = env.from_collection(words).partition_custom(_ByFirstLetter(), lambda w: w)
    out = list(routed.map(_Subtask()).execute_and_collect())
    # The source runs in worker 0; the words for subtasks 1 and 2 crossed the network.
    assert sorted(out) == sorted(("abc".index(w[0]), w) for w in words)


def test_broadcast_reaches_every_subtask(executor_conf: dict[str, str]) -> None:
    env = environment(executor_conf, parallelism=3)

    class Tag(MapFunction):
        def open(self, runtime_context: Any) -> None:
            self.index = runtime_context.get_index_of_this_subtask()

        def map(self, value: int) -> tuple[int, int]:
            return (self.index, value)

    out = list(env.from_collection([1, 2, 3]).broadcast().map(Tag()).execute_and_collect())
    assert Counter(v for _i, v in out) == {1: 3, 2: 3, 3: 3}
    assert {i for i, _v in out} == {0, 1, 2}


class _TimerCounter(KeyedProcessFunction):
    """Counts per key and emits the count from a processing-time timer; a timer that sees
    all ``per_key`` records of its key leaves a file named after the key in ``signals``."""

    def __init__(self, signals: str, per_key: int) -> None:
        self.signals = signals
        self.per_key = per_key

    def open(self, runtime_context: Any) -> None:
        self.count = runtime_context.get_state(ValueStateDescriptor("count", None))

    def process_element(self, value: tuple[str, int], ctx: Any) -> Any:
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_processing_time_timer(
            ctx.timer_service().current_processing_time() + 50
        )
        return None

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        import os

        count = self.count.value()
        if count == self.per_key:
            open(os.path.join(self.signals, str(ctx.get_current_key())), "w").close()
        yield (ctx.get_current_key(), count)


def test_processing_time_timers_fire_with_their_key(
    executor_conf: dict[str, str], tmp_path: Any
) -> None:
    env = environment(executor_conf)
    signals = str(tmp_path)

    class SlowSource(SourceFunction):
        def run(self, ctx: Any) -> None:
            import os
            import time

            for i in range(40):
                ctx.collect((f"k{i % 4}", i))
            # Pending processing-time timers are dropped at the end of input (as in Flink):
            # keep the input open until every key's last timer fired (60 s cap), no sleep
            # that a loaded machine could outrun.
            deadline = time.monotonic() + 60
            while len(os.listdir(signals)) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)

        def cancel(self) -> None:
            pass

    out = list(
        env.add_source(SlowSource())
        .key_by(lambda r: r[0])
        .process(_TimerCounter(signals, per_key=10))
        .execute_and_collect()
    )
    final = {}
    for key, count in out:
        final[key] = max(final.get(key, 0), count)
    assert final == {"k0": 10, "k1": 10, "k2": 10, "k3": 10}


class CountingSource(SourceFunction, CheckpointedFunction):
    """Seed 000's pattern: operator list state restored through initialize_state."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.running = True

    def initialize_state(self, context: Any) -> None:
        self.state = context.get_operator_state_store().get_list_state(
            ListStateDescriptor("offset", None)
        )
        restored = list(self.state.get()) if context.is_restored() else []
        self.offset = restored[0] if restored else 0
        self.was_restored = context.is_restored()

    def snapshot_state(self, context: Any) -> None:
        self.state.update([self.offset])

    def run(self, ctx: Any) -> None:
        import time

        lock = ctx.get_checkpoint_lock()
        while self.running and self.offset < self.total:
            with lock:
                ctx.collect(self.offset)
                self.offset += 1
            if self.offset % 500 == 0:
                time.sleep(0.01)

    def cancel(self) -> None:
        self.running = False


def test_checkpointed_source_function_resumes_exactly_once(tmp_path: Any) -> None:
    conf = {
        "cairn.executor": "inprocess",
        "cairn.testing.faults": "point=processing,attempt=0,records=3000,vertex=Map;"
        "point=after-barrier,attempt=1",
    }
    env = environment(conf, parallelism=1)
    env.enable_checkpointing(100)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 50))
    out = list(
        env.add_source(CountingSource(20_000)).map(lambda x: x).name("Map").execute_and_collect()
    )
    assert sorted(out) == list(range(20_000))


def test_print_writes_every_record(
    capfd: pytest.CaptureFixture[str], inprocess_conf: dict[str, str]
) -> None:
    env = environment(inprocess_conf, parallelism=2)
    env.from_collection(["alpha", "beta", "gamma"]).rebalance().map(str.upper).print()
    env.execute("print")
    out = capfd.readouterr().out
    for word in ("ALPHA", "BETA", "GAMMA"):
        assert word in out
    assert threading.active_count() < 50


def test_subtasks_sharing_a_worker_get_their_own_function_objects(
    executor_conf: dict[str, str],
) -> None:
    """Two subtasks of a keyed operator on one worker must not share the user's object."""
    env = environment({**executor_conf, "cairn.workers": "1"}, parallelism=2)

    class RunningSum(KeyedProcessFunction):
        def open(self, runtime_context: Any) -> None:
            self.total = runtime_context.get_state(ValueStateDescriptor("total", None))

        def process_element(self, value: int, ctx: Any) -> Any:
            self.total.update((self.total.value() or 0) + value)
            yield (ctx.get_current_key(), self.total.value())

    values = list(range(1, 201))
    out = list(
        env.from_collection(values)
        .key_by(lambda v: v % 5)
        .process(RunningSum())
        .execute_and_collect()
    )
    finals: dict[int, int] = {}
    for key, total in out:
        finals[key] = max(finals.get(key, 0), total)
    assert finals == {k: sum(v for v in values if v % 5 == k) for k in range(5)}
