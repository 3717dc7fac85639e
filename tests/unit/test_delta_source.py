"""DeltaSource: a snapshot then appended versions, resumable from any state; a version that
rewrote rows refused; a job reads back what the Delta sink wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cairn.api.connectors import SourceReaderContext
from cairn.common import Row, Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.delta import DeltaSink
from cairn.datastream.connectors.delta_source import DeltaSource, DeltaSplit
from cairn.ids import CheckpointId

deltalake = pytest.importorskip("deltalake")

CTX = SourceReaderContext(0, 1, 0, "job")  # type: ignore[arg-type]


def append(path: Path, ns: list[int]) -> None:
    deltalake.write_deltalake(str(path), pa.table({"n": pa.array(ns, pa.int64())}), mode="append")


def drain(reader: Any, max_records: int = 3, polls: int = 100) -> list[int]:
    out: list[int] = []
    for _ in range(polls):
        batch = reader.poll_batch(max_records)
        if batch is None:
            break
        out += [r.n for r in batch]
    return out


def test_bounded_reads_the_snapshot_and_resumes_from_any_state(tmp_path: Path) -> None:
    append(tmp_path / "t", [1, 2, 3, 4])
    append(tmp_path / "t", [5, 6])
    source = DeltaSource.for_bounded_row_data(str(tmp_path / "t")).build()
    reader = source.create_reader(source.create_splits(1), CTX)
    first = [r.n for r in reader.poll_batch(1)]  # mid-file
    state = reader.snapshot_state(CheckpointId(1))
    rest = drain(source.create_reader(state, CTX))
    assert sorted(first + rest) == [1, 2, 3, 4, 5, 6] and len(first) == 1
    old = DeltaSource.for_bounded_row_data(str(tmp_path / "t")).version_as_of(0).build()
    assert sorted(drain(old.create_reader(old.create_splits(1), CTX))) == [1, 2, 3, 4]


def test_continuous_reads_appended_versions_and_refuses_rewrites(tmp_path: Path) -> None:
    append(tmp_path / "t", [1])
    source = (
        DeltaSource.for_continuous_row_data(str(tmp_path / "t"))
        .starting_version(1)
        .update_check_interval(0)
        .build()
    )
    reader = source.create_reader(source.create_splits(1), CTX)
    assert drain(reader, polls=5) == []  # version 1 is not there yet
    append(tmp_path / "t", [2, 3])
    append(tmp_path / "t", [4])
    assert drain(reader, polls=10) == [2, 3, 4]
    deltalake.DeltaTable(str(tmp_path / "t")).optimize.compact()  # version 3: skipped
    append(tmp_path / "t", [5])
    assert drain(reader, polls=10) == [5]
    deltalake.DeltaTable(str(tmp_path / "t")).delete("n = 2")
    with pytest.raises(ValueError, match="Delta version 5 removed 1 files"):
        drain(reader, polls=5)


def test_the_change_data_feed_gives_each_versions_changes_with_their_kinds(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "t")
    table = pa.table({"k": ["a", "b"], "n": pa.array([1, 2], pa.int64())})
    deltalake.write_deltalake(path, table, configuration={"delta.enableChangeDataFeed": "true"})
    source = (
        DeltaSource.for_continuous_row_data(path)
        .starting_version(1)
        .change_data_feed()
        .update_check_interval(0)
        .build()
    )
    reader = source.create_reader(source.create_splits(1), CTX)
    dt = deltalake.DeltaTable(path)
    dt.update({"n": "n + 10"}, predicate="k = 'a'")  # version 1: -U/+U
    dt.delete("k = 'b'")  # version 2: -D
    updates = pa.table({"k": ["c"], "n": pa.array([3], pa.int64())})
    dt.merge(
        updates, "t.k = s.k", source_alias="s", target_alias="t"
    ).when_not_matched_insert_all().execute()

    def changes(r: Any, polls: int) -> list[tuple[str, str, int]]:
        out = []
        for _ in range(polls):
            for row in r.poll_batch(1) or []:
                out.append((row.get_row_kind().short_string(), row.k, row.n))
        return out

    first = changes(reader, 1)  # one row a poll: in the middle of version 1
    state = reader.snapshot_state(CheckpointId(1))
    assert state == [DeltaSplit(1, False, 0, 1)]
    rest = changes(source.create_reader(state, CTX), 20)  # a restored reader goes on
    got = first + rest
    assert sorted(got[:2]) == [("+U", "a", 11), ("-U", "a", 1)]
    assert got[2:] == [("-D", "b", 2), ("+I", "c", 3)]
    with pytest.raises(ValueError, match="continuous"):
        DeltaSource.for_bounded_row_data(path).change_data_feed()


def test_a_job_reads_back_what_the_sink_wrote(tmp_path: Path) -> None:
    row = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(2)
    env.enable_checkpointing(50)
    (
        env.from_collection([Row(k=f"k{i % 3}", n=i) for i in range(500)], type_info=row).sink_to(
            DeltaSink.for_row_data(str(tmp_path / "t"), row).build()
        )
    )
    env.execute("write")
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(1)
    source = DeltaSource.for_bounded_row_data(str(tmp_path / "t")).build()
    from cairn.common.watermark_strategy import WatermarkStrategy

    got = env.from_source(source, WatermarkStrategy.no_watermarks(), "delta").execute_and_collect()
    with got:
        assert sorted(r.n for r in got) == list(range(500))
