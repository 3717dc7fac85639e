"""FileSink: two-phase commit, idempotent replay, leftovers, rolling, buckets, Parquet."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import cloudpickle
import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cairn.checkpoint.handles import OperatorSubtaskState
from cairn.clock import ManualClock
from cairn.common.serialization import Encoder, SimpleStringSchema
from cairn.common.types import Row
from cairn.datastream.connectors.base import SinkWriterContext
from cairn.datastream.connectors.file_sink_config import java_to_strftime
from cairn.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSinkCommittable,
    OutputFileConfig,
    ParquetBulkWriters,
    RollingPolicy,
)
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind, OperatorSpec
from cairn.runtime.operators.base import OperatorContext, OperatorRestore
from cairn.runtime.operators.sinks import SinkOperator
from cairn.state.heap_backend import OperatorStateBackend
from cairn.testing.simple_state_files import DirectoryStateFiles
from tests.unit._task_services import StubServices


def ctx(
    subtask: int = 0, attempt: int = 0, parallelism: int = 1, job: str = "job"
) -> SinkWriterContext:
    return SinkWriterContext(subtask, parallelism, attempt, job)


def text_sink(base: Path | str, policy: RollingPolicy | None = None) -> FileSink:
    builder = FileSink.for_row_format(
        str(base), Encoder.simple_string_encoder()
    ).with_output_file_config(
        OutputFileConfig.builder().with_part_prefix("part").with_part_suffix(".txt").build()
    )
    if policy is not None:
        builder = builder.with_rolling_policy(policy)
    return builder.build()


def visible(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith("."))


def hidden(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob(".*") if p.is_file())


def visible_lines(base: Path) -> list[str]:
    return sorted(line for p in visible(base) for line in p.read_text().splitlines())


def test_encoders_and_string_schema() -> None:
    encoder = Encoder.simple_string_encoder("latin-1")
    assert encoder.encode("é") == b"\xe9\n"
    assert encoder.encode_batch([1, (2, "a")]) == b"1\n(2, 'a')\n"
    assert encoder.encode_batch([]) == b""
    schema = SimpleStringSchema()
    assert schema.deserialize(schema.serialize("naïve")) == "naïve"
    with pytest.raises(LookupError):
        SimpleStringSchema("no-such-charset")


def test_nothing_visible_before_commit_and_everything_after(tmp_path: Path) -> None:
    sink = cloudpickle.loads(cloudpickle.dumps(text_sink(tmp_path)))
    writer = sink.create_writer(ctx(subtask=2, attempt=3), [])
    writer.write_batch([f"r{i}" for i in range(5)])
    writer.write("r5")
    assert visible(tmp_path) == []
    committables = writer.prepare_commit(1)
    assert visible(tmp_path) == []
    [c] = committables
    assert re.fullmatch(r".*/\.part-[0-9a-f-]{36}-2-0\.txt\.inprogress\.job\.3", c.in_progress_path)
    assert re.fullmatch(r".*/part-[0-9a-f-]{36}-2-0\.txt", c.final_path)
    sink.create_committer().commit(pickle.loads(pickle.dumps(committables)))
    assert visible_lines(tmp_path) == [f"r{i}" for i in range(6)]
    assert hidden(tmp_path) == []
    assert writer.prepare_commit(2) == []  # nothing written since: no empty part file


def test_commit_is_idempotent_and_names_a_missing_file(tmp_path: Path) -> None:
    sink = text_sink(tmp_path)
    writer = sink.create_writer(ctx(), [])
    writer.write_batch(["a", "b"])
    committables = writer.prepare_commit(1)
    committer = sink.create_committer()
    committer.commit(committables)
    committer.commit(committables)  # replayed after a restore
    assert visible_lines(tmp_path) == ["a", "b"]
    ghost = FileSinkCommittable(
        str(tmp_path / ".part-x-0-0.txt.inprogress.0"), str(tmp_path / "part-x-0-0.txt")
    )
    with pytest.raises(FileNotFoundError, match=r"part-x-0-0\.txt"):
        committer.commit([ghost])


def test_commit_finishes_a_half_done_copy_rename(tmp_path: Path) -> None:
    # On object stores a rename is copy + delete; a crash in between leaves both files.
    sink = text_sink(tmp_path)
    writer = sink.create_writer(ctx(), [])
    writer.write("x")
    [c] = writer.prepare_commit(1)
    fs, in_progress = fsspec.core.url_to_fs(c.in_progress_path)
    fs.copy(in_progress, fsspec.core.url_to_fs(c.final_path)[1])
    sink.create_committer().commit([c])
    assert visible_lines(tmp_path) == ["x"] and hidden(tmp_path) == []


def test_abort_leftovers_removes_only_older_attempts(tmp_path: Path) -> None:
    sink = text_sink(tmp_path)
    old = sink.create_writer(ctx(attempt=0), [])
    old.write("lost")  # never pre-committed; the process "dies" (no close)
    new = sink.create_writer(ctx(attempt=1), [])
    new.write("kept")
    foreign = tmp_path / ".other-1-0-0.txt.inprogress.0"  # another prefix: not ours
    foreign.write_text("x")
    assert len(hidden(tmp_path)) == 3
    sink.create_committer().abort_leftovers(ctx(attempt=1))
    names = [p.name for p in hidden(tmp_path)]
    assert len(names) == 2 and foreign.name in names
    assert any(n.endswith(".inprogress.job.1") for n in names)
    sink.create_committer().commit(new.prepare_commit(1))
    assert visible_lines(tmp_path) == ["kept"]


def test_restore_in_a_new_run_removes_the_earlier_runs_leftovers(tmp_path: Path) -> None:
    # Run A: attempt 2 pre-committed r0..r2 into a checkpoint that completed (its commit never
    # ran), wrote r3 and r4 after it, and was killed. Run B restores that checkpoint with
    # --from-checkpoint: a new job id, and attempt numbers start at 0 again.
    sink = text_sink(tmp_path)
    writer_a = sink.create_writer(ctx(attempt=2, job="run-a"), [])
    writer_a.write_batch(["r0", "r1", "r2"])
    restored = writer_a.prepare_commit(7)
    writer_a.write_batch(["r3", "r4"])
    writer_a.flush(end_of_input=False)
    other_subtask = sink.create_writer(ctx(subtask=1, attempt=1, job="run-a"), [])
    other_subtask.write("lost-too")  # an older attempt of run A, in another subtask
    other_subtask.flush(end_of_input=False)
    legacy = tmp_path / ".part-x-0-0.txt.inprogress.5"  # named before job ids were in names
    legacy.write_text("old")
    assert len(hidden(tmp_path)) == 4
    # Run B, attempt 0: subtask 1 already writes while subtask 0 restores (other worker).
    writer_b1 = sink.create_writer(ctx(subtask=1, attempt=0, job="run-b"), [])
    writer_b1.write("b1")
    writer_b1.flush(end_of_input=False)
    committer = sink.create_committer()
    committer.commit(restored)  # the restored committables first, then the leftovers
    committer.abort_leftovers(ctx(attempt=0, job="run-b"))
    names = [p.name for p in hidden(tmp_path)]
    assert len(names) == 1 and names[0].endswith(".inprogress.run-b.0")  # only B's own file
    assert visible_lines(tmp_path) == ["r0", "r1", "r2"]  # the restored output, committed
    committer.commit(writer_b1.prepare_commit(8))
    assert visible_lines(tmp_path) == ["b1", "r0", "r1", "r2"] and hidden(tmp_path) == []


def _sink_operator(sink: FileSink, job: str, attempt: int) -> SinkOperator:
    node = OperatorNode(
        "file-sink", "sink", 1, OperatorKind.SINK.value,
        OperatorSpec(OperatorKind.SINK, sink), None, 1, 128, False,
    )  # fmt: skip
    op = SinkOperator(node)
    op.setup(
        OperatorContext(
            node=node,
            task_name="sink",
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            attempt=attempt,
            job_id=job,
            output=lambda records: None,
            operator_backend=OperatorStateBackend(),
            keyed_backend=None,
            clock_ms=lambda: 0,
            services=StubServices(),
            checkpointing=True,
        )
    )
    return op


def test_restoring_sink_operator_cleans_leftovers_of_an_earlier_run(tmp_path: Path) -> None:
    """Subtask 0 of the sink operator restoring in attempt 0 of a new job (what
    ``--from-checkpoint`` does) commits the restored committables and deletes the rest."""
    sink = text_sink(tmp_path / "out")
    files = DirectoryStateFiles(tmp_path / "chk-4", 4)
    # Run A, attempt 3: checkpoint 4 completes (its commit never runs), then more records.
    run_a = _sink_operator(sink, "run-a", 3)
    run_a.initialize_state(None)
    run_a.process_batch(["checkpointed"])
    run_a.prepare_snapshot_pre_barrier(4)
    snapshot = run_a.snapshot_state(4, 0)
    assert snapshot.operator is not None
    handle = snapshot.operator(files)
    assert handle is not None
    run_a.process_batch(["after-the-checkpoint"])
    run_a.writer.flush(False)  # the process dies here: nothing is closed
    assert len(hidden(tmp_path / "out")) == 2
    # Run B restores checkpoint 4 at attempt 0.
    restore = OperatorRestore(1, {0: OperatorSubtaskState(operator=(handle,))}, files)
    run_b = _sink_operator(sink, "run-b", 0)
    run_b.initialize_state(restore)
    assert visible_lines(tmp_path / "out") == ["checkpointed"]
    assert hidden(tmp_path / "out") == []  # the never-checkpointed file is gone


def test_crash_after_prepare_then_restore_gives_exact_output(tmp_path: Path) -> None:
    sink = text_sink(tmp_path)
    # attempt 0: checkpoint 1 covers r0..r9; r10..r14 were written after it, then a crash
    writer_a = sink.create_writer(ctx(attempt=0), [])
    writer_a.write_batch([f"r{i}" for i in range(10)])
    stored = pickle.dumps(writer_a.prepare_commit(1))  # part of completed checkpoint 1
    writer_a.write_batch([f"r{i}" for i in range(10, 15)])
    writer_a.flush(end_of_input=False)
    del writer_a
    assert visible(tmp_path) == []  # checkpoint 1 completed, but the commit never ran
    # attempt 1: commit restored committables, drop leftovers, replay from the checkpoint
    committer = sink.create_committer()
    committer.commit(pickle.loads(stored))
    committer.abort_leftovers(ctx(attempt=1))
    assert hidden(tmp_path) == []
    writer_b = sink.create_writer(ctx(attempt=1), [])
    writer_b.write_batch([f"r{i}" for i in range(10, 20)])
    committer.commit(writer_b.prepare_commit(2))
    assert visible_lines(tmp_path) == sorted(f"r{i}" for i in range(20))
    assert hidden(tmp_path) == []


def test_close_deletes_only_files_not_handed_to_a_checkpoint(tmp_path: Path) -> None:
    sink = text_sink(tmp_path)
    writer = sink.create_writer(ctx(), [])
    writer.write("prepared")
    committables = writer.prepare_commit(1)
    writer.write("open")
    writer.close()
    assert [p.name for p in hidden(tmp_path)] == [Path(committables[0].in_progress_path).name]
    sink.create_committer().commit(committables)
    assert visible_lines(tmp_path) == ["prepared"]


def test_default_rolling_policy_rolls_on_size_and_time(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_000)
    policy = RollingPolicy.default_rolling_policy(
        part_size=10, rollover_interval=60_000, inactivity_interval=5_000
    )
    sink = text_sink(tmp_path, policy)
    writer = sink.create_writer(ctx(), [], clock=clock)
    for i in range(6):
        writer.write(f"abcd{i}")  # 6 bytes each: a part rolls once it holds 10+ bytes
    assert len(writer.prepare_commit(1)) == 3
    writer.write("x")
    clock.advance(6_000)  # inactive for longer than 5 s
    writer.write("y")
    committables = writer.prepare_commit(2)
    assert len(committables) == 2
    sink.create_committer().commit(committables)
    numbers = sorted(int(re.findall(r"-(\d+)\.txt$", c.final_path)[0]) for c in committables)
    assert numbers == [3, 4]  # the part counter keeps increasing across checkpoints


def test_date_time_buckets(tmp_path: Path) -> None:
    assert java_to_strftime("yyyy-MM-dd--HH") == "%Y-%m-%d--%H"
    clock = ManualClock(1_700_000_000_000)  # 2023-11-14 22:13:20 UTC
    sink = (
        FileSink.for_row_format(str(tmp_path), Encoder.simple_string_encoder())
        .with_bucket_assigner(BucketAssigner.date_time_bucket_assigner("yyyy-MM-dd--HH", "UTC"))
        .build()
    )
    writer = sink.create_writer(ctx(), [], clock=clock)
    writer.write("first")
    clock.advance(3_600_000)
    writer.write("second")
    sink.create_committer().commit(writer.prepare_commit(1))
    assert sorted(p.parent.name for p in visible(tmp_path)) == ["2023-11-14--22", "2023-11-14--23"]


def test_parquet_bulk_output_is_readable_with_pyarrow(tmp_path: Path) -> None:
    schema = pa.schema([("key", pa.string()), ("count", pa.int64())])
    factory = ParquetBulkWriters.for_row_type(schema, row_group_size=3)
    sink = (
        FileSink.for_bulk_format(str(tmp_path), factory)
        .with_output_file_config(OutputFileConfig("part", ".parquet"))
        .build()
    )
    sink = cloudpickle.loads(cloudpickle.dumps(sink))
    committer = sink.create_committer()
    writer = sink.create_writer(ctx(), [])
    writer.write_batch([("a", 1), ("b", 2), ("c", 3), ("d", 4)])
    committer.commit(writer.prepare_commit(1))
    other = sink.create_writer(ctx(subtask=1, parallelism=2), [])
    other.write({"key": "e", "count": 5})
    other.write({"key": "f"})  # a missing field is null
    other.write_batch([Row(count=7, key="g"), Row("h", 8), ["i", 9]])
    committer.commit(other.prepare_commit(1))
    other.write({"key": "pending", "count": 0})  # an in-progress file must not break reads
    other.flush(end_of_input=False)
    table = pq.read_table(str(tmp_path))
    assert sorted(table.to_pylist(), key=lambda r: r["key"]) == [
        {"key": k, "count": c}
        for k, c in [
            ("a", 1),
            ("b", 2),
            ("c", 3),
            ("d", 4),
            ("e", 5),
            ("f", None),
            ("g", 7),
            ("h", 8),
            ("i", 9),
        ]
    ]
    with pytest.raises(TypeError):
        FileSink.for_bulk_format(str(tmp_path), factory).with_rolling_policy(
            RollingPolicy.default_rolling_policy()  # type: ignore[arg-type]
        )


def test_sink_on_fsspec_memory_filesystem() -> None:
    fs = fsspec.filesystem("memory")
    try:
        sink = text_sink("memory://fsink/out")
        writer = sink.create_writer(ctx(), [])
        writer.write_batch(["m1", "m2"])
        committables = writer.prepare_commit(1)
        assert [p for p in fs.find("/fsink/out") if "/part-" in p] == []
        sink.create_committer().commit(committables)
        sink.create_committer().commit(committables)
        [final] = fs.find("/fsink/out")
        assert fs.cat(final) == b"m1\nm2\n"
    finally:
        if fs.exists("/fsink"):
            fs.rm("/fsink", recursive=True)
