"""The window operator's batch path (``window_batch``) against the per-record path on the same
input: multi-record batches with out-of-order, late-within-lateness and late records,
tumbling and sliding windows, ``aggregate`` and ``reduce`` whose results depend on the order
of the adds, the late side output, records without a timestamp, and a snapshot taken
mid-window restored into either path (at another parallelism too)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from cairn.datastream import AggregateFunction, OutputTag, window_batch
from cairn.datastream.window import (
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from cairn.datastream.window_batch import WindowBatchPath
from cairn.datastream.window_triggers import CountTrigger
from cairn.events import MAX_WATERMARK
from cairn.runtime.eventtime.stamped import stamp
from cairn.runtime.operators.base import OperatorRestore
from cairn.state.key_groups import KeyGroupAssigner

from ._operator_harness import OperatorHarness, snapshot_operator
from ._window_functions import Describe, WithKey, window_function

LATE = OutputTag("late")


class InOrder(AggregateFunction[Any, Any, Any]):
    """Keeps every value in the order added: any reordering of the adds shows."""

    def create_accumulator(self) -> Any:
        return ()

    def add(self, value: Any, accumulator: Any) -> Any:
        return (*accumulator, value[1])

    def get_result(self, accumulator: Any) -> Any:
        return accumulator

    def merge(self, a: Any, b: Any) -> Any:
        return a + b


def ordered_reduce(a: Any, b: Any) -> Any:
    return (a[0], a[1] * 31 + b[1])


BUILDS = {
    "tumbling-aggregate": lambda k: (
        k.window(TumblingEventTimeWindows.of(1000, 100))
        .allowed_lateness(300)
        .side_output_late_data(LATE)
        .aggregate(InOrder())
    ),
    "tumbling-reduce-no-lateness": lambda k: (
        k.window(TumblingEventTimeWindows.of(500))
        .side_output_late_data(LATE)
        .reduce(ordered_reduce)
    ),
    "sliding-aggregate": lambda k: (
        k.window(SlidingEventTimeWindows.of(1000, 400))
        .allowed_lateness(450)
        .side_output_late_data(LATE)
        .aggregate(InOrder())
    ),
    "sliding-reduce-no-tag": lambda k: (
        k.window(SlidingEventTimeWindows.of(900, 300)).allowed_lateness(200).reduce(ordered_reduce)
    ),
}


def steps(seed: int) -> list[Any]:
    """Batches of 1-40 records (keys a-e, timestamps up to 1.5 s behind) and watermarks."""
    rng = random.Random(seed)
    out: list[Any] = []
    now = 0
    for _ in range(120):
        if rng.random() < 0.25:
            out.append(("watermark", now - rng.randrange(0, 600)))
            continue
        batch = []
        for _ in range(rng.randrange(1, 40)):
            now += rng.randrange(0, 15)
            batch.append(
                ((rng.choice("abcde"), rng.randrange(1, 100)), now - rng.randrange(0, 1500))
            )
        out.append(("batch", batch))
    return out


def harness(f: Any, batch_path: bool, **kwargs: Any) -> OperatorHarness:
    h = OperatorHarness(f, **kwargs)
    h.op.side_outputs = {"late": h.side.append}
    assert isinstance(h.op._keyed_batch, WindowBatchPath)
    if not batch_path:
        h.op._keyed_batch = None  # per record: ``process_element`` (the inlined default path)
    return h


def run(h: OperatorHarness, todo: list[Any]) -> None:
    for what, arg in todo:
        if what == "watermark":
            h.op.process_watermark(max(arg, h.op.current_watermark))
        else:
            h.op.process_batch(stamp([r for r, _ in arg], [t for _, t in arg]))


@pytest.mark.parametrize("name", sorted(BUILDS))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_batch_path_gives_what_the_per_record_path_gives(
    name: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if seed == 3:  # write the cache back after every batch too
        monkeypatch.setattr(window_batch, "MAX_CACHED", 0)
    todo = steps(seed)
    results = []
    for batch_path in (True, False):
        h = harness(window_function(BUILDS[name]), batch_path)
        run(h, todo)
        h.op.process_watermark(MAX_WATERMARK)
        results.append((h.records(), h.side))
    assert results[0] == results[1]
    records, side = results[0]
    assert len(records) > 50
    if "no-tag" not in name:
        assert side, "some records were late beyond the allowed lateness"


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_a_snapshot_mid_window_restores_into_either_path(name: str) -> None:
    todo = steps(11)
    half = len(todo) // 2
    f = window_function(BUILDS[name])
    outputs = []
    for first in (True, False):
        source = harness(f, first)
        run(source, todo[:half])
        state, files = snapshot_operator(source.op)
        assert source.op.backend.keys("_cairn_win/contents"), "windows in flight"
        for second in (True, False):
            got: list[Any] = []
            for index in range(2):
                restored = harness(
                    f,
                    second,
                    parallelism=2,
                    index=index,
                    restore=OperatorRestore(1, {0: state}, files),
                )
                run(restored, _owned(restored, todo[half:]))
                restored.op.process_watermark(MAX_WATERMARK)
                got.append((restored.records(), restored.side))
            outputs.append(got)
    assert all(o == outputs[0] for o in outputs)


def _owned(h: OperatorHarness, todo: list[Any]) -> list[Any]:
    """``todo`` with only the records whose key group this subtask owns."""
    backend = h.op.backend
    assigner = KeyGroupAssigner(backend.max_parallelism)
    owned = []
    for what, arg in todo:
        if what == "watermark":
            owned.append((what, arg))
            continue
        mine = [x for x in arg if assigner.key_group(x[0][0]) in backend.key_group_range]
        if mine:
            owned.append((what, mine))
    return owned


def test_records_without_timestamps_fail_as_on_the_per_record_path() -> None:
    errors = []
    for batch_path in (True, False):
        h = harness(window_function(BUILDS["tumbling-aggregate"]), batch_path)
        with pytest.raises(Exception) as e:
            h.op.process_batch(stamp([("a", 1), ("a", 2)], [5, None]))
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def test_a_batch_without_timestamps_sees_the_cached_accumulators() -> None:
    h = harness(window_function(BUILDS["tumbling-aggregate"]), True)
    h.op.process_batch(stamp([("a", 1)], [5]))
    with pytest.raises(Exception, match="timestamp"):
        h.op.process_batch([("a", 2)])  # plain list: the per-record path, after a write-back
    assert h.op.backend.keys("_cairn_win/contents") == ["a"]


def test_only_the_common_case_takes_the_batch_path() -> None:
    f = window_function(lambda k: k.window(TumblingEventTimeWindows.of(1000)).apply(WithKey()))
    assert OperatorHarness(f).op._keyed_batch is None, "no incremental aggregation"
    f = window_function(
        lambda k: (
            k.window(TumblingProcessingTimeWindows.of(1000))
            .trigger(CountTrigger.of(2))
            .reduce(ordered_reduce)
        )
    )
    assert OperatorHarness(f).op._keyed_batch is None, "not the default trigger"


PROCESSING = {
    "tumbling-aggregate": lambda k: k.window(TumblingProcessingTimeWindows.of(1000, 100)).aggregate(
        InOrder()
    ),
    "tumbling-reduce": lambda k: k.window(TumblingProcessingTimeWindows.of(500)).reduce(
        ordered_reduce
    ),
    "sliding-aggregate": lambda k: k.window(SlidingProcessingTimeWindows.of(1000, 400)).aggregate(
        InOrder()
    ),
    "sliding-reduce-process": lambda k: k.window(SlidingProcessingTimeWindows.of(900, 300)).reduce(
        ordered_reduce, window_function=Describe()
    ),
}


@pytest.mark.parametrize("name", sorted(PROCESSING))
@pytest.mark.parametrize("seed", [1, 2])
def test_processing_time_batches_give_what_the_per_record_path_gives(
    name: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clock moves between batches (not within one: a batch is processed at one
    instant); its timers fire as it passes them; plain and stamped batches alike."""
    if seed == 2:
        monkeypatch.setattr(window_batch, "MAX_CACHED", 0)
    rng = random.Random(seed)
    todo: list[Any] = []
    for _ in range(150):
        records = [
            (rng.choice("abcde"), rng.randrange(1, 100)) for _ in range(rng.randrange(1, 30))
        ]
        todo.append((rng.randrange(0, 120), records, rng.random() < 0.3))
    results = []
    for batch_path in (True, False):
        h = OperatorHarness(window_function(PROCESSING[name]))
        assert isinstance(h.op._keyed_batch, WindowBatchPath)
        if not batch_path:
            h.op._keyed_batch = None
        for advance, records, stamped in todo:
            h.clock.advance(advance)
            h.op.on_processing_time(h.clock.now_ms())
            h.op.process_batch(stamp(records, [7] * len(records)) if stamped else records)
        h.clock.advance(5_000)
        h.op.on_processing_time(h.clock.now_ms())
        assert h.op.next_timer_ms() is None
        results.append(h.records())
    assert results[0] == results[1]
    assert len(results[0]) > 40  # ~9 s of processing time, five keys


def test_processing_time_snapshot_mid_window_restores_into_either_path() -> None:
    f = window_function(PROCESSING["tumbling-aggregate"])
    outputs = []
    for first in (True, False):
        for second in (True, False):
            source = OperatorHarness(f)
            if not first:
                source.op._keyed_batch = None
            source.op.process_batch([("a", 1), ("b", 2)])
            source.clock.advance(300)
            source.op.process_batch([("a", 3)])
            state, files = snapshot_operator(source.op)
            restored = OperatorHarness(f, restore=OperatorRestore(1, {0: state}, files))
            if not second:
                restored.op._keyed_batch = None
            restored.clock.advance(500)
            restored.op.process_batch([("a", 4), ("b", 5)])
            restored.clock.advance(2_000)
            restored.op.on_processing_time(restored.clock.now_ms())
            outputs.append(restored.records())
    assert all(o == outputs[0] for o in outputs)
    # windows [100, 1100) and [1100, 2100) (offset 100, the clock starts at 1000): "a" adds
    # 4 after the restore to the 3 it got before the snapshot
    assert sorted(r for r, _ in outputs[0]) == [(1,), (2,), (3, 4), (5,)]
