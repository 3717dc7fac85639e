"""The latency probe of the benchmarks: the timed generator's schedule and the sink's
histogram and timeline (the user functions alone, called as the runtime calls them)."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

from bench.cairn_functions import (
    TIMELINE_WINDOW_NS,
    LatencySink,
    TimedKeyedValuesGenerator,
    latency_file,
)
from bench.measure import merge_latency

from cairn.datastream.connectors.datagen import KeyedValuesGenerator


class _Context:
    def get_index_of_this_subtask(self) -> int:
        return 1

    def get_attempt_number(self) -> int:
        return 0


def test_timed_records_carry_the_keys_of_keyed_values_and_their_due_times() -> None:
    gen = TimedKeyedValuesGenerator(num_keys=50, rate=1_000.0)  # one record per ms
    before = time.time_ns()
    first = gen.generate_batch(range(100, 110))
    after = time.time_ns()
    expected_keys = [k for k, _ in KeyedValuesGenerator(50).generate_batch(range(100, 110))]
    assert [r[0] for r in first] == expected_keys
    assert all(r[1] == 1 for r in first)
    stamps = [r[2] for r in first]
    assert [b - a for a, b in itertools.pairwise(stamps)] == [1_000_000] * 9
    # A batch is granted when its last record is due: no stamp is later than generation.
    assert before - 1_000 <= stamps[-1] <= after
    # The next batch comes early (at once, not 2 ms later): the schedule moves back so that
    # its records are not stamped after they were made.
    later = [r[2] for r in gen.generate_batch(range(110, 112))]
    assert later[1] - later[0] == 1_000_000 and later[1] <= time.time_ns()
    assert later[0] < stamps[0] + 10_000_000
    assert gen.generate_batch(range(5, 5)) == []


def test_the_schedule_moves_back_when_a_batch_comes_early_never_forward() -> None:
    gen = TimedKeyedValuesGenerator(num_keys=5, rate=1_000.0)
    late = gen.generate_batch(range(0, 1))[0][2]
    time.sleep(0.02)  # a slow batch does not move the schedule: its records are late
    assert gen.generate_batch(range(1, 2))[0][2] == late + 1_000_000


def test_the_sink_histograms_latencies_after_the_warm_up(tmp_path: Path) -> None:
    sink = LatencySink(str(tmp_path), warmup_s=1.0, mark_every=4)
    sink.open(_Context())
    now = time.time_ns()
    sink.invoke(("k", 1, now - 3_000_000_000), None)  # first record: starts the warm-up
    sink.invoke(("k", 1, now - 2_500_000_000), None)  # created inside the warm-up
    for _ in range(10):
        sink.invoke(("k", 1, time.time_ns() - 5_000_000), None)  # 5 ms late
    sink.invoke(("k", 1, time.time_ns() - 40_000_000), None)  # one at 40 ms
    sink.close()

    data = json.loads(Path(latency_file(str(tmp_path), 1, 0)).read_text())
    assert data["skipped"] == 2
    assert sum(data["counts"].values()) == 11
    assert 40_000_000 <= data["max_ns"] < 45_000_000
    assert data["timeline_window_ns"] == TIMELINE_WINDOW_NS
    assert max(v for _, v in data["timeline"]) == data["max_ns"]
    summary = merge_latency(str(tmp_path))
    assert summary is not None and summary.count == 11 and summary.skipped == 2
    assert 5.0 <= summary.p50_ms < 6.0
    assert 40.0 <= summary.p99_ms == summary.max_ms < 45.0
    progress = (tmp_path / "progress-1-0.log").read_text().split("\n")
    assert progress[-2].endswith(" 13 end")
