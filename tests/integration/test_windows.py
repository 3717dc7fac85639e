"""Event-time tumbling, sliding and session windows (PyFlink's window API) on out-of-order
input: golden output in-process, on local Spark, and exactly-once under repeated SIGKILL of
workers with aligned and unaligned checkpoints (heap and RocksDB state)."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.common import Configuration, Time, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.datagen import DataGeneratorSource, RateLimiterStrategy
from cairn.datastream.window import TumblingProcessingTimeWindows
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration.window_jobs import expected, windows_job

RECORDS, KEYS = 40_000, 10

KILLS = {
    # windows in flight (contents, accumulators, merged sessions, timers) must survive each kill
    "aligned": (
        False,
        "hashmap",
        "point=processing,attempt=0,records=8000,subtask=1,vertex=Sessions;"
        "point=after-barrier,attempt=1,subtask=0,vertex=Tumbling;"
        "point=during-upload,attempt=2,subtask=1",
    ),
    "unaligned-rocksdb": (
        True,
        "rocksdb",
        "point=processing,attempt=0,records=8000,subtask=0,vertex=Sliding;"
        "point=after-barrier,attempt=1,subtask=1,vertex=Sessions;"
        "point=processing,attempt=2,records=2000,subtask=1,vertex=events",
    ),
}


def _check(out: str) -> None:
    golden = expected(RECORDS, KEYS)
    for name, lines in golden.items():
        assert sorted(read_visible_lines(f"{out}/{name}")) == lines, name


@pytest.mark.slow
def test_window_api_matches_the_golden_output_in_process(tmp_path: Any) -> None:
    out = str(tmp_path)
    env = windows_job({"cairn.executor": "inprocess"}, out, records=RECORDS, keys=KEYS, rate=None)
    env.execute_async("windows").get_job_execution_result(timeout=240)
    _check(out)


@pytest.mark.spark
@pytest.mark.parametrize("mode", sorted(KILLS))
def test_windows_stay_exactly_once_under_sigkill(spark: Any, tmp_path: Any, mode: str) -> None:
    unaligned, backend, faults = KILLS[mode]
    out = str(tmp_path)
    env = windows_job(
        {"cairn.executor": "spark", "cairn.testing.faults": faults},
        out,
        records=RECORDS,
        keys=KEYS,
        unaligned=unaligned,
        backend=backend,
    )
    client = env.execute_async(f"windows-{mode}")
    client.get_job_execution_result(timeout=300)
    assert client.job_master.restarts == 3, "every scheduled kill must have happened"
    _check(out)


def _counting_job(records: int) -> Any:
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    limiter = RateLimiterStrategy.per_second(2_000)
    source = DataGeneratorSource(_ones, records, limiter)
    return env.from_source(source, WatermarkStrategy.no_watermarks(), "ones").key_by(_first)


def _ones(index: int) -> tuple[str, int]:
    return (f"k{index % 3}", 1)


def _first(record: Any) -> Any:
    return record[0]


def _add(a: Any, b: Any) -> Any:
    return (a[0], a[1] + b[1])


@pytest.mark.slow
def test_processing_time_and_count_windows_fire_in_a_running_job() -> None:
    """Processing-time windows fire on the task's clock while the source runs (windows still
    open at end of input need not fire, as in Flink); count windows fire every ``size``."""
    records = 3_000
    keyed = _counting_job(records)
    per_100ms = keyed.window(TumblingProcessingTimeWindows.of(Time.milliseconds(100))).reduce(_add)
    windows = list(per_100ms.execute_and_collect())
    assert len(windows) >= 5 and sum(n for _, n in windows) <= records, windows
    counted = _counting_job(records).count_window(100).reduce(_add)
    batches = list(counted.execute_and_collect())
    assert sorted(batches) == sorted([(f"k{i}", 100) for i in range(3)] * 10)
