"""A windowed SQL job from Kafka into a ``filesystem`` sink on local Spark, exactly once when
a worker is SIGKILLed mid-run, with aligned and unaligned checkpoints on the heap and the
RocksDB state backends.

The events (JSON: key, value, event time) are produced at a paced rate while the job runs,
and the source is bounded at the offsets the whole input ends at, so the job cannot end
before the last one. Once a checkpoint completed and the sink committed windows, while
events still flow, the test SIGKILLs a worker: the job restores its open windows, the Kafka
offsets and the sink's pending files from the latest checkpoint. The committed files must
then hold each 1 s window's count and sum exactly once, as computed in Python from the same
events (no window lost, none doubled, no row of a window counted twice).

A retracting ``GROUP BY`` over the same kind of topic is stopped with a savepoint at
parallelism 2 while events still arrive, and restored at parallelism 3 to read the rest:
the restored job goes on from the counts it had (each key's first change is a ``-U`` of the
row the first job ended with, never a fresh ``+I``), every ``+U`` adds one event, and the
final rows are the batch aggregation of the whole input.
"""

from __future__ import annotations

import datetime
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cairn.table import StreamTableEnvironment
from cairn.testing.processes import wait_for
from cairn.testing.sequence_jobs import read_visible_lines
from tests.integration._table_sql_jobs import (
    PacedProducer,
    events_ddl,
    expected_totals,
    expected_windows,
)
from tests.integration.jobs import checkpointed_env
from tests.integration.kafka_jobs import new_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.timeout(240)]

EVENTS, KEYS, PARTITIONS = 12_000, 5, 2  # one partition per source subtask
RATE = 1_000  # events/s: 12 s of input, 5 s of event time (5 windows per key) a second

WINDOWED = (
    "INSERT INTO windows SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS total"
    " FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' SECOND))"
    " GROUP BY k, window_start, window_end"
)


def _window(line: str) -> tuple[str, str, str, int, int]:
    k, start, end, n, total = line.split(",")
    as_text = [str(datetime.datetime.fromisoformat(t.strip('"'))) for t in (start, end)]
    return k, as_text[0], as_text[1], int(n), int(total)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("checkpoints", ["aligned", "unaligned"])
def test_a_windowed_sql_job_into_files_stays_exactly_once_when_a_worker_is_killed(
    spark: Any, kafka_broker: Any, tmp_path: Path, checkpoints: str, backend: str
) -> None:
    topic = new_topic(kafka_broker, "tsql-windows", PARTITIONS)
    out = tmp_path / "out"
    conf = {
        "cairn.executor": "spark",
        "state.backend.type": backend,
        "state.backend.rocksdb.localdir": str(tmp_path / "rocksdb"),
    }
    env = checkpointed_env(
        conf,
        interval_ms=200,
        unaligned=checkpoints == "unaligned",
        checkpoint_dir=str(tmp_path / "chk"),
    )
    t_env = StreamTableEnvironment.create(env)
    t_env.execute_sql(events_ddl(kafka_broker, topic, PARTITIONS, EVENTS, f"g-{topic}"))
    t_env.execute_sql(
        "CREATE TABLE windows (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3),"
        f" n BIGINT, total BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}',"
        # small parts: row formats commit a part once rolled, at the next checkpoint
        " 'format' = 'csv', 'sink.rolling-policy.file-size' = '1kb')"
    )
    result = t_env.execute_sql(WINDOWED)
    master = result.get_job_client().job_master
    wait_for(lambda: len(master.worker_pids) == 2, 120, 0.05, "both workers running")
    producer = PacedProducer(kafka_broker, topic, PARTITIONS, KEYS, 0, EVENTS).start(RATE)

    def windows_committed() -> tuple[int, list[str]] | None:
        coordinator = master.coordinator
        latest = coordinator.latest_completed_id() if coordinator is not None else None
        lines = read_visible_lines(str(out)) if latest is not None else []
        return (latest, lines) if latest is not None and len(lines) >= 2 * KEYS else None

    checkpoint, committed = wait_for(windows_committed, 60, 0.05, "committed windows")
    assert not producer.done, "the input was all produced before the kill: produce slower"
    os.kill(master.worker_pids[1], signal.SIGKILL)
    killed_at = producer.produced
    result.wait(timeout_ms=180_000)
    producer.join()

    assert master.restarts == 1, "the kill must have failed the job once, and only once"
    stats = result.get_job_client().get_checkpoint_statistics()
    restored = stats.latest_restored
    assert restored is not None and restored.checkpoint_id >= checkpoint, "not a restore"
    # every checkpoint completed but the one pending at the kill, if any: the failover aborts
    # it (Flink's JOB_FAILOVER_REGION, in the failed count, not against the tolerance)
    assert stats.counts.failed <= 1, stats.latest_failed
    if stats.counts.failed:
        assert stats.latest_failed.failure_reason == "JOB_FAILOVER_REGION", stats.latest_failed
    expected = expected_windows(EVENTS, KEYS)
    assert 0 < len(committed) < sum(expected.values()) and killed_at < EVENTS
    got = Counter(_window(line) for line in read_visible_lines(str(out)))
    assert got == expected


GROUPED = "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM events GROUP BY k"
RESCALED_EVENTS, RESCALED_PARTITIONS = 6_000, 6  # 3 partitions a subtask, then 2


def _apply(view: dict[str, tuple[int, int]], rows: Any) -> list[tuple[str, str]]:
    """Apply a changelog to ``view`` checking each change; every key's change kinds."""
    kinds = []
    for r in rows:
        kind, key, value = r.get_row_kind().short_string(), r.k, (r.n, r.total)
        kinds.append((key, kind))
        if kind == "+I":
            assert key not in view, f"a second +I for {key}: its count started afresh"
        elif kind == "-U":
            assert view.get(key) == value, f"-U {value} for {key} retracts {view.get(key)}"
            continue
        else:
            assert kind == "+U" and key in view, f"{kind} {value} for {key}"
            assert value[0] == view[key][0] + 1, f"{key} skipped or repeated an event"
        view[key] = value
    return kinds


def test_a_sql_group_by_restores_from_a_savepoint_at_another_parallelism(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    topic = new_topic(kafka_broker, "tsql-rescale", RESCALED_PARTITIONS)
    ddl = events_ddl(kafka_broker, topic, RESCALED_PARTITIONS, RESCALED_EVENTS, f"g-{topic}")
    conf = {"cairn.executor": "spark"}

    def run(parallelism: int, extra: dict[str, str]) -> Any:
        env = checkpointed_env(
            {**conf, **extra}, parallelism=parallelism, checkpoint_dir=str(tmp_path / "chk")
        )
        t_env = StreamTableEnvironment.create(env)
        t_env.execute_sql(ddl)
        return t_env.execute_sql(GROUPED)

    first = run(2, {})
    client = first.get_job_client()
    wait_for(lambda: len(client.job_master.worker_pids) == 2, 120, 0.05, "both workers running")
    producer = PacedProducer(kafka_broker, topic, RESCALED_PARTITIONS, KEYS, 0, RESCALED_EVENTS)
    producer.start(RATE)
    view: dict[str, tuple[int, int]] = {}
    stop = None
    for row in first.collect():  # changes arrive as checkpoints complete
        _apply(view, [row])
        if stop is None and sum(n for n, _ in view.values()) >= RESCALED_EVENTS // 4:
            stop = client.stop_with_savepoint(False, str(tmp_path / "savepoint"))
    assert stop is not None, "the first job ended before it was stopped"
    savepoint = stop.result(timeout=120)
    assert sum(n for n, _ in view.values()) < RESCALED_EVENTS, "stop earlier: nothing left"

    second = run(3, {"execution.savepoint.path": savepoint})
    before = dict(view)
    kinds = _apply(view, second.collect())
    producer.join()
    restored = second.get_job_client().get_checkpoint_statistics().latest_restored
    assert restored is not None and restored.is_savepoint
    firsts = {key: kind for key, kind in reversed(kinds)}
    assert firsts == {key: "-U" for key in before}, "a restored count started afresh"
    assert view == expected_totals(RESCALED_EVENTS, KEYS)
