"""Event time end to end: out-of-order input with bounded disorder through event-time timers,
under repeated SIGKILL of workers (aligned and unaligned checkpoints), equal to the golden
output; side outputs; a source that ends early; an idle partition; stop-with-savepoint
without drain (open windows wait for the restored job) and with drain (they all fire)."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from cairn.checkpoint.errors import CheckpointFailedError
from cairn.common import Duration, WatermarkStrategy
from cairn.common.job_status import JobStatus
from cairn.datastream import KeyedProcessFunction, OutputTag, StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.events import MAX_WATERMARK
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.event_time_jobs import (
    DISORDER_MS,
    EventTime,
    OutOfOrderEvents,
    WindowCount,
    expected_windows,
    window_job,
    windows_of_prefixes,
)
from tests.integration.jobs import environment
from tests.integration.waits import committed_lines

RECORDS, KEYS = 60_000, 10

KILLS = {
    # timers registered before each kill must fire after it; the watermark restarts low.
    # (unaligned: rate, cost per record in µs; the window operator is the bottleneck, so
    # barriers overtake batches and watermarks that are persisted and replayed)
    "aligned": (
        False,
        "point=processing,attempt=0,records=15000,subtask=1,vertex=Window;"
        "point=after-barrier,attempt=1,subtask=0,vertex=Window;"
        "point=during-upload,attempt=2,subtask=1",
    ),
    "unaligned": (
        True,
        "point=processing,attempt=0,records=15000,subtask=0,vertex=Window;"
        "point=after-barrier,attempt=1,subtask=1,vertex=Window;"
        "point=processing,attempt=2,records=2000,subtask=1,vertex=events",
    ),
}


def _check(out: str) -> None:
    assert read_visible_lines(out + "/late") == [], "bounded disorder: nothing is late"
    assert sorted(read_visible_lines(out + "/windows")) == expected_windows(RECORDS, KEYS)


def test_event_time_windows_match_the_golden_output_in_process(tmp_path: Any) -> None:
    out = str(tmp_path)
    env = window_job({"cairn.executor": "inprocess"}, out, records=RECORDS, keys=KEYS, rate=None)
    client = env.execute_async("event-time")
    client.get_job_execution_result(timeout=240)
    _check(out)


@pytest.mark.spark
@pytest.mark.parametrize("mode", sorted(KILLS))
def test_event_time_timers_stay_exactly_once_under_sigkill(
    spark: Any, tmp_path: Any, mode: str
) -> None:
    unaligned, faults = KILLS[mode]
    out = str(tmp_path)
    env = window_job(
        {"cairn.executor": "spark", "cairn.testing.faults": faults},
        out,
        records=RECORDS,
        keys=KEYS,
        unaligned=unaligned,
        rate=None if unaligned else 20_000,
        cost_us=40 if unaligned else 0,
    )
    client = env.execute_async(f"event-time-{mode}")
    client.get_job_execution_result(timeout=300)
    # Exactly the scheduled kills (no other restart) and the golden output: this proves
    # what a failure-free run on Spark would, too.
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    if unaligned:
        stats = client.get_checkpoint_statistics()
        assert stats is not None
        persisted = [c.persisted_bytes for c in stats.history]
        assert any(p > 0 for p in persisted), f"no in-flight data was persisted: {persisted}"
    _check(out)


def _checkpointed_env(conf: dict[str, str]) -> StreamExecutionEnvironment:
    env = environment(conf)  # parallelism 2
    env.enable_checkpointing(200)
    return env


def _inprocess_env() -> StreamExecutionEnvironment:
    return _checkpointed_env({"cairn.executor": "inprocess"})


ODD = OutputTag("odd")


class Split(KeyedProcessFunction[Any, int, Any]):
    def process_element(self, value: int, ctx: Any) -> Any:
        if value % 2:
            yield ODD, (value, ctx.timestamp())
        else:
            yield value


def test_side_outputs_in_a_job_go_to_their_own_stream(executor_conf: dict[str, str]) -> None:
    env = _checkpointed_env(executor_conf)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Value())
    main = (
        env.from_collection(list(range(20)))
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda v: v % 3)
        .process(Split())
    )
    odd = main.get_side_output(ODD).map(lambda p: ("odd", p))
    results = list(main.map(lambda v: ("even", v)).union(odd).execute_and_collect())
    assert sorted(v for tag, v in results if tag == "even") == list(range(0, 20, 2))
    assert sorted(v for tag, v in results if tag == "odd") == [(v, v) for v in range(1, 20, 2)], (
        "side outputs keep their record's timestamp"
    )


class _Value(EventTime):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value)


def test_a_source_that_ends_early_neither_stalls_nor_rushes_the_watermark(tmp_path: Any) -> None:
    """A short bounded source unioned with a long, slower one: once the short one ended, the
    long one alone decides the watermark (nothing of it becomes late)."""
    env = _inprocess_env()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(DISORDER_MS)
    ).with_timestamp_assigner(EventTime())
    long_events = DataGeneratorSource(
        OutOfOrderEvents(KEYS), 20_000, RateLimiterStrategy.per_second(10_000)
    )
    short = _Offset(20_000)
    short_events = DataGeneratorSource(short, 500)
    longs = env.from_source(long_events, strategy, "long")
    shorts = env.from_source(short_events, strategy, "short")
    windows = longs.union(shorts).key_by(lambda r: r[0]).process(WindowCount())
    late = windows.get_side_output(OutputTag("late")).map(lambda r: ("late", r))
    results = list(windows.union(late).execute_and_collect())
    assert [r for r in results if isinstance(r, tuple)] == []
    expected = expected_windows(0, KEYS, range(20_000))
    shorts_expected = _short_windows(short, 500)
    assert sorted(results) == sorted(_merge(expected, shorts_expected))


class _Offset(OutOfOrderEvents):
    """Indexes shifted past the long source's, so both sources' windows stay apart in keys."""

    def __init__(self, offset: int) -> None:
        super().__init__(KEYS)
        self.offset = offset

    def __call__(self, index: int) -> tuple[str, int, int]:
        key, ts, i = super().__call__(index)
        return ("s" + key, ts, i + self.offset)


def _short_windows(gen: _Offset, n: int) -> list[str]:
    windows: dict[tuple[str, int], list[int]] = {}
    for i in range(n):
        key, ts, index = gen(i)
        w = windows.setdefault((key, ts - ts % 1000), [0, 0])
        w[0] += 1
        w[1] += index
    return [f"{k},{s},{c},{t}" for (k, s), (c, t) in windows.items()]


def _merge(*parts: list[str]) -> list[str]:
    return [line for part in parts for line in part]


def test_an_idle_partition_holds_back_no_watermark(executor_conf: dict[str, str]) -> None:
    """Only subtask 0 of the source has records after the filter; with idleness the other
    subtask stops holding the watermark back, so windows fire while the source still runs
    (the source is unbounded: without idleness no window would ever fire). On Spark the
    idleness crosses the network to the windows' subtasks."""
    env = _checkpointed_env(executor_conf)
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(DISORDER_MS))
        .with_timestamp_assigner(EventTime())
        .with_idleness(Duration.of_millis(300))
    )
    source = DataGeneratorSource(
        OutOfOrderEvents(KEYS), None, RateLimiterStrategy.per_second(5_000)
    )
    results = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "endless")
        .filter(lambda r: r[2] % 2 == 0)  # subtask i reads indexes i, i + 2, ...: 1 is idle
        .assign_timestamps_and_watermarks(strategy)
        .key_by(lambda r: r[0])
        .process(WindowCount())
        .execute_and_collect(limit=5)
    )
    assert len(results) == 5
    assert all(int(line.split(",")[2]) > 0 for line in results)


def _first_window(out: str) -> None:
    committed_lines(out + "/windows", timeout=120)  # a window fired


def test_stop_with_savepoint_fires_no_timers_and_a_restored_job_continues_exactly_once(
    tmp_path: Any,
) -> None:
    """Stop without drain (as in Flink): the tasks shut down without ending their input, so
    no final watermark fires the windows still open at the savepoint; the job restored from
    it fires each of them once. Before, the stop fired them all, and the restored job fired
    them again (duplicates and partial windows)."""
    out = str(tmp_path)
    conf = {"cairn.executor": "inprocess"}
    first = window_job(conf, out, records=RECORDS, keys=KEYS, rate=8_000).execute_async("a")
    _first_window(out)
    savepoint = first.stop_with_savepoint(False, out + "/savepoint").result(timeout=120)
    first.get_job_execution_result(timeout=120)
    before = read_visible_lines(out + "/windows")
    assert len(before) < len(expected_windows(RECORDS, KEYS)), "stopped before the end"
    restored = {**conf, "execution.savepoint.path": savepoint}
    window_job(restored, out, records=RECORDS, keys=KEYS, rate=None).execute("b")
    lines = read_visible_lines(out + "/windows")
    assert len(lines) == len(set(lines)), "a window fired twice"
    _check(out)


@pytest.mark.parametrize("unaligned", [False, True], ids=["aligned", "unaligned"])
def test_stop_with_drain_fires_every_open_window_before_the_savepoint(
    tmp_path: Any, unaligned: bool
) -> None:
    """Flink's ``stop --drain``: the sources send the final watermark ahead of the savepoint's
    barrier, so every window still open fires, its output is committed with the savepoint,
    and the job ends FINISHED. The output is the golden one of exactly the records read:
    each window once and whole (without drain the open ones would be missing). Restored from
    the drained savepoint (Flink's warning), the job reads every other record exactly once,
    but windows open at the stop fire a second time with the rest of their records. With
    unaligned checkpoints on the savepoint is still aligned: its barrier follows the final
    watermark."""
    out = str(tmp_path)
    conf = {"cairn.executor": "inprocess"}
    env = window_job(conf, out, records=RECORDS, keys=KEYS, rate=8_000, unaligned=unaligned)
    client = env.execute_async("a")
    _first_window(out)
    savepoint = client.stop_with_savepoint(True, out + "/savepoint").result(timeout=120)
    assert savepoint == out + "/savepoint" and os.path.exists(savepoint + "/_metadata")
    assert client.get_job_status() is JobStatus.FINISHED
    lines = read_visible_lines(out + "/windows")
    assert len(lines) < len(expected_windows(RECORDS, KEYS)), "stopped before the end"
    assert sorted(lines) == windows_of_prefixes(lines, KEYS)
    assert read_visible_lines(out + "/late") == []
    restored = {**conf, "execution.savepoint.path": savepoint}
    window_job(restored, out, records=RECORDS, keys=KEYS, rate=None).execute("b")
    after = read_visible_lines(out + "/windows")
    assert sum(int(line.split(",")[2]) for line in after) == RECORDS, "each record once"
    windows = [line.rsplit(",", 2)[0] for line in after]
    assert len(set(windows)) < len(windows), "drained windows fire again after a restore"


class _SlowOnDrain(WindowCount):
    """Window counts whose first timer at the final watermark takes longer than the
    checkpoint timeout (once: ``marker`` is created then), so the savepoint of the first
    drained stop expires. (The function reaches each attempt pickled by value: the marker
    is a file.)"""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        at_the_end = ctx.timer_service().current_watermark() == MAX_WATERMARK
        if at_the_end and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            time.sleep(2.5)
        return super().on_timer(timestamp, ctx)


@pytest.mark.slow
def test_a_failed_drained_stop_restarts_from_the_latest_checkpoint_exactly_once(
    tmp_path: Any,
) -> None:
    """The final watermark of a drained stop cannot be taken back: when its savepoint fails
    (here it expires), the sources do not resume as after a failed stop without drain; the
    attempt fails and the job restarts from its latest checkpoint. What the drain fired was
    never committed, so the job, run on to its end, has the golden output, each window once."""
    out, marker = str(tmp_path), str(tmp_path / "slowed")
    conf = {"cairn.executor": "inprocess", "execution.checkpointing.timeout": "1500 ms"}
    window = _SlowOnDrain(marker)
    env = window_job(conf, out, records=RECORDS, keys=KEYS, rate=8_000, window=window)
    client = env.execute_async("a")
    _first_window(out)
    stop = client.stop_with_savepoint(True, out + "/savepoint")
    with pytest.raises(CheckpointFailedError, match="CHECKPOINT_EXPIRED"):
        stop.result(timeout=120)
    client.get_job_execution_result(timeout=240)
    assert os.path.exists(marker), "the drain reached the window operator"
    assert client.job_master.restarts == 1 and client.get_job_status() is JobStatus.FINISHED
    assert not os.path.exists(out + "/savepoint/_metadata")
    _check(out)
