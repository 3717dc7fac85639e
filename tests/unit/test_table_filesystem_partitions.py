"""A partitioned ``filesystem`` table: Hive-style directories without the partition columns in
the files, read back from the paths, and the ``success-file`` partition commit by each trigger
(the writer's decisions on a manual clock and watermarks; the committer's file after the part
files are visible; uncommitted partitions carried in the writer's state across a restore)."""

from __future__ import annotations

import datetime
import random
from pathlib import Path

import pytest

from cairn.clock import ManualClock
from cairn.common.serialization import Encoder
from cairn.datastream.connectors.base import SinkWriterContext
from cairn.datastream.connectors.file_sink import BucketCommittable, FileSink
from cairn.table import EnvironmentSettings, TableEnvironment, ValidationError
from cairn.table.filesystem_partitions import (
    PartitionBuckets,
    PartitionCommit,
    partition_path,
    partition_time_ms,
    partition_values,
)


def _t_env() -> TableEnvironment:
    t_env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    t_env.get_config().set("cairn.executor", "inprocess")
    return t_env


def test_partition_paths_escape_as_flink_and_read_back() -> None:
    assert partition_path(("dt", "hm"), ("2024-01-02", "10:05"), "D") == "dt=2024-01-02/hm=10%3A05"
    assert partition_path(("a",), (None,), "__DEFAULT_PARTITION__") == "a=__DEFAULT_PARTITION__"
    assert partition_path(("a",), ("",), "X") == "a=X"
    assert partition_path(("a",), ("x/y=z%",), "X") == "a=x%2Fy%3Dz%25"
    rnd = random.Random(3)
    alphabet = "ab:/=%?#*[]^{}\\'\" \t-_."
    for _ in range(200):
        value = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 8)))
        path = partition_path(("k", "j"), (value, "x"), "D")
        assert path.count("/") == 1  # no value makes a directory of its own
        assert partition_values(f"/base/{path}/part-0", ("k", "j")) == (value, "x")


def test_partition_times_by_the_default_extractor() -> None:
    day = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)
    at_10_05 = int((day + datetime.timedelta(hours=10, minutes=5)).timestamp() * 1000)
    assert partition_time_ms("$dt $hm:00", ("dt", "hm"), ("2024-01-02", "10:05")) == at_10_05
    assert partition_time_ms(None, ("dt",), ("2024-01-02",)) == int(day.timestamp() * 1000)
    with pytest.raises(ValueError, match="not yyyy-MM-dd"):
        partition_time_ms(None, ("dt",), ("tuesday",))


def _sink(base: Path, commit: PartitionCommit) -> FileSink:
    return (
        FileSink.for_row_format(str(base), Encoder.simple_string_encoder())
        .with_bucket_assigner(PartitionBuckets((1,), ("dt",)))
        .with_bucket_commit(commit)
        .build()
    )


def _context(subtask: int = 0) -> SinkWriterContext:
    return SinkWriterContext(subtask, 2, 0, "job")


def test_process_time_commits_a_partition_after_its_delay_and_the_files(tmp_path: Path) -> None:
    commit = PartitionCommit("process-time", 1000, ("dt",), None)
    sink = _sink(tmp_path, commit)
    clock = ManualClock(10_000)
    writer = sink.create_writer(_context(), [], clock)
    committer = sink.create_committer()
    writer.write((1, "d1"))
    first = writer.prepare_commit(1)
    assert not [c for c in first if isinstance(c, BucketCommittable)]  # not due yet
    committer.commit(first)
    assert (tmp_path / "dt=d1").is_dir() and not (tmp_path / "dt=d1" / "_SUCCESS").exists()
    clock.advance(600)
    writer.write((2, "d2"))  # a second partition, created later
    clock.advance(500)  # d1 is 1100 ms old, d2 500 ms
    second = writer.prepare_commit(2)
    due = [c.directory for c in second if isinstance(c, BucketCommittable)]
    assert [d.rstrip("/").rsplit("/", 1)[-1] for d in due] == ["dt=d1"]
    committer.commit(second)
    assert (tmp_path / "dt=d1" / "_SUCCESS").exists()
    assert not (tmp_path / "dt=d2" / "_SUCCESS").exists()
    # d2 is still to commit: it is in the writer's state, and a restored writer (any
    # subtask: rescaled) commits it when due
    state = writer.snapshot_state(2)
    writer.close()
    again = sink.create_writer(_context(subtask=1), state, clock)
    clock.advance(600)
    third = again.prepare_commit(3)
    committer.commit(third)
    assert (tmp_path / "dt=d2" / "_SUCCESS").exists()
    assert [p.name for p in (tmp_path / "dt=d2").iterdir() if p.name.startswith("part-")]


def test_partition_time_commits_when_the_watermark_passes(tmp_path: Path) -> None:
    commit = PartitionCommit("partition-time", 60_000, ("dt",), "$dt 00:00:00")
    sink = _sink(tmp_path, commit)
    writer = sink.create_writer(_context(), [], ManualClock(0))
    committer = sink.create_committer()
    writer.write((1, "2024-01-02"))
    writer.write((2, "2024-01-03"))
    day2 = partition_time_ms(None, ("dt",), ("2024-01-02",))
    writer.write_watermark(day2 + 59_999)
    committer.commit(writer.prepare_commit(1))
    assert not list(tmp_path.rglob("_SUCCESS"))
    writer.write_watermark(day2 + 60_000)
    committer.commit(writer.prepare_commit(2))
    assert [p.parent.name for p in tmp_path.rglob("_SUCCESS")] == ["dt=2024-01-02"]
    # at the end of input every partition is committed
    writer.flush(True)
    committer.commit(writer.prepare_commit(3))
    assert sorted(p.parent.name for p in tmp_path.rglob("_SUCCESS")) == [
        "dt=2024-01-02",
        "dt=2024-01-03",
    ]
    assert writer.snapshot_state(3) == []


def test_a_partitioned_table_in_sql(tmp_path: Path) -> None:
    t_env = _t_env()
    out = tmp_path / "out"
    t_env.execute_sql(
        f"""CREATE TABLE logs (id BIGINT, dt STRING, msg STRING, hm STRING)
        PARTITIONED BY (dt, hm) WITH ('connector' = 'filesystem', 'path' = '{out.as_uri()}',
        'format' = 'csv', 'sink.partition-commit.policy.kind' = 'success-file',
        'sink.partition-commit.trigger' = 'partition-time',
        'partition.time-extractor.timestamp-pattern' = '$dt $hm:00',
        'sink.partition-commit.delay' = '1 min')"""
    )
    rows = [
        (1, "2024-01-02", "x", "10:05"),
        (2, "2024-01-02", "y", "10:06"),
        (3, "2024-01-02", "z", "10:05"),
        (4, None, "w", "10:05"),
    ]
    values = ", ".join(
        f"({i}, {'CAST(NULL AS STRING)' if d is None else repr(d)}, '{m}', '{h}')"
        for i, d, m, h in rows
    )
    t_env.execute_sql(f"INSERT INTO logs VALUES {values}").wait()
    written: dict[str, list[str]] = {}
    for part in out.rglob("part-*"):
        written.setdefault(str(part.parent.relative_to(out)), []).extend(
            part.read_text().splitlines()
        )
    assert {k: sorted(v) for k, v in written.items()} == {
        "dt=2024-01-02/hm=10%3A05": ["1,x", "3,z"],
        "dt=2024-01-02/hm=10%3A06": ["2,y"],
        "dt=__DEFAULT_PARTITION__/hm=10%3A05": ["4,w"],
    }
    assert sorted(str(p.parent.relative_to(out)) for p in out.rglob("_SUCCESS")) == sorted(written)
    back = sorted((tuple(r) for r in t_env.execute_sql("SELECT * FROM logs").collect()), key=str)
    assert back == sorted(rows, key=str)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("PARTITIONED BY (nope)", "Partition column 'nope' not defined"),
        (
            "PARTITIONED BY (a) WITH ('sink.partition-commit.policy.kind' = 'metastore',",
            "metastore",
        ),
        ("PARTITIONED BY (a) WITH ('sink.partition-commit.trigger' = 'never',", "never"),
    ],
)
def test_bad_partitioning_is_refused(tmp_path: Path, extra: str, message: str) -> None:
    t_env = _t_env()
    with_clause = "WITH (" if "WITH" not in extra else ""
    sql = (
        f"CREATE TABLE p (a STRING, b INT) {extra} {with_clause}"
        f"'connector' = 'filesystem', 'path' = '{tmp_path.as_uri()}', 'format' = 'csv')"
    )
    with pytest.raises(ValidationError, match=message):
        t_env.execute_sql(sql)


def test_only_the_filesystem_connector_is_partitioned() -> None:
    t_env = _t_env()
    with pytest.raises(ValidationError, match="does not take a partitioned table"):
        t_env.execute_sql(
            "CREATE TABLE p (a STRING, b INT) PARTITIONED BY (a) WITH ('connector' = 'print')"
        )
