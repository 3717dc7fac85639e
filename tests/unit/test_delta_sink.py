"""DeltaSink: one Delta version per checkpoint for every subtask's files, a replayed commit
is a no-op (the ``txn`` action), aborted attempts are never committed and are cleaned after
the restarted attempt's first commit, mismatched tables refused. Writers and the global
committer driven by hand as the engine drives them (writers' results gathered into one
``CheckpointCommittables`` per checkpoint; the engine's side is in the integration tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.api.connectors import CheckpointCommittables
from cairn.common import Row, Types
from cairn.common.exceptions import ConfigurationError
from cairn.datastream.connectors.base import SinkWriterContext
from cairn.datastream.connectors.delta import DeltaSink, table_file_paths
from cairn.datastream.connectors.delta_protocol import needs_commit, orphan_data_files
from cairn.ids import CheckpointId
from cairn.runtime.operators.sinks import END_OF_INPUT_CHECKPOINT

deltalake = pytest.importorskip("deltalake")

ROW = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.LONG()])


def sink(path: Path) -> DeltaSink:
    s = DeltaSink.for_row_data(str(path), ROW).with_app_id("app").build()
    s.check_job(None)
    return s


def ctx(subtask: int, attempt: int = 0, parallelism: int = 2) -> SinkWriterContext:
    return SinkWriterContext(subtask, parallelism, attempt, "job")  # type: ignore[arg-type]


def gathered(checkpoint: int, *results: list[object]) -> list[CheckpointCommittables]:
    """What the one committer subtask holds for ``checkpoint``: every writer's results."""
    flat = tuple(r for rs in results for r in rs)
    return [CheckpointCommittables("job", CheckpointId(checkpoint), flat)]  # type: ignore[arg-type]


def rows(path: Path) -> list[tuple[str, int]]:
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(t.column("k").to_pylist(), t.column("n").to_pylist(), strict=True))


def test_one_version_per_checkpoint_holds_every_subtasks_files(tmp_path: Path) -> None:
    s = sink(tmp_path / "t")
    assert s.global_committer
    w0, w1 = s.create_writer(ctx(0), []), s.create_writer(ctx(1), [])
    w0.write_batch([Row(k="a", n=1), Row(k="b", n=2)])
    w1.write(Row(k="c", n=3))
    c = gathered(1, w0.prepare_commit(CheckpointId(1)), w1.prepare_commit(CheckpointId(1)))
    assert rows(tmp_path / "t") == []  # written, not visible before the commit
    s.create_committer().commit(c)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert rows(tmp_path / "t") == [("a", 1), ("b", 2), ("c", 3)]
    assert table.version() == 1 and table.transaction_version("app") == 1
    # A replay of the same committables (after a restore) adds no version and no row.
    s.create_committer().commit(c)
    assert deltalake.DeltaTable(str(tmp_path / "t")).version() == 1
    assert rows(tmp_path / "t") == [("a", 1), ("b", 2), ("c", 3)]
    # A checkpoint without records makes no version.
    assert w0.prepare_commit(CheckpointId(2)) == []


def test_pending_checkpoints_commit_in_order_and_other_attempts_are_cleaned(
    tmp_path: Path,
) -> None:
    s = sink(tmp_path / "t")
    w0, w1 = s.create_writer(ctx(0), []), s.create_writer(ctx(1), [])
    w1.write(Row(k="x", n=1))
    c1 = gathered(1, w1.prepare_commit(CheckpointId(1)))  # checkpoint 1 failed: pending
    w0.write(Row(k="y", n=2))
    c2 = gathered(2, w0.prepare_commit(CheckpointId(2)), w1.prepare_commit(CheckpointId(2)))
    # An earlier attempt that wrote for checkpoint 2 and died: not part of this run's state.
    dead = s.create_writer(ctx(1, attempt=7), [])
    dead.write(Row(k="dead", n=9))
    dead.prepare_commit(CheckpointId(2))
    committer = s.create_committer()
    committer.commit(c2 + c1)  # checkpoint 2 completes: 1 and 2, as two versions, in order
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert rows(tmp_path / "t") == [("x", 1), ("y", 2)]
    assert table.version() == 2 and table.transaction_version("app") == 2
    # The restarted attempt 8 cleans what attempt 7 left after its first commit, and keeps
    # its own writers' files.
    live = s.create_writer(ctx(1, attempt=8), [])
    live.write(Row(k="live", n=5))
    c3 = gathered(3, live.prepare_commit(CheckpointId(3)))
    live.write(Row(k="later", n=6))
    live.prepare_commit(CheckpointId(4))
    restarted = s.create_committer()
    restarted.abort_leftovers(ctx(0, attempt=8))

    def unreferenced() -> list[str]:
        files = sorted(p.name for p in (tmp_path / "t").glob("*.parquet"))
        referenced = table_file_paths(deltalake.DeltaTable(str(tmp_path / "t")))
        return [f for f in files if f not in referenced]

    assert any("-a7-" in f for f in unreferenced())  # not before the first commit
    restarted.commit(c3)
    assert [f for f in unreferenced() if "-a8-" not in f] == []
    assert len(unreferenced()) == 1  # attempt 8's checkpoint 4, not committed yet


def test_end_of_input_commits_without_a_txn(tmp_path: Path) -> None:
    s = sink(tmp_path / "t")
    w = s.create_writer(ctx(1), [])
    w.write(Row(k="tail", n=1))
    s.create_committer().commit(
        gathered(END_OF_INPUT_CHECKPOINT, w.prepare_commit(END_OF_INPUT_CHECKPOINT))
    )
    assert rows(tmp_path / "t") == [("tail", 1)]
    assert deltalake.DeltaTable(str(tmp_path / "t")).transaction_version("app") is None


def test_a_writer_closed_before_its_barrier_deletes_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cairn.datastream.connectors import delta

    monkeypatch.setattr(delta, "ROWS_PER_FILE", 2)
    s = sink(tmp_path / "t")
    w = s.create_writer(ctx(0), [])
    w.write_batch([Row(k=str(i), n=i) for i in range(3)])  # rolls a file before any barrier
    assert list((tmp_path / "t").glob("*.parquet"))
    w.close()
    assert not list((tmp_path / "t").glob("*.parquet"))


def test_a_table_with_other_columns_is_refused_in_one_line(tmp_path: Path) -> None:
    sink(tmp_path / "t")
    other = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.STRING()])
    with pytest.raises(ConfigurationError) as e:
        DeltaSink.for_row_data(str(tmp_path / "t"), other).build().check_job(None)
    assert "\n" not in str(e.value) and "(k string, n long)" in str(e.value)


def test_needs_rows_of_named_fields() -> None:
    with pytest.raises(TypeError, match="ROW_NAMED"):
        DeltaSink.for_row_data("/tmp/x", Types.STRING())  # type: ignore[arg-type]


def test_pure_decisions() -> None:
    assert needs_commit(None, 1) and needs_commit(3, 4) and not needs_commit(4, 4)
    assert orphan_data_files(["part-app-j-a0-s0-c1-0.parquet"], "other", "", []) == []


def test_upsert_keys_merge_a_changelog_once_per_checkpoint(tmp_path: Path) -> None:
    from cairn.common.types import RowKind

    def change(kind: RowKind, k: str, n: int) -> Row:
        r = Row(k=k, n=n)
        r.set_row_kind(kind)
        return r

    s = DeltaSink.for_row_data(str(tmp_path / "t"), ROW).with_app_id("app")
    s = s.with_upsert_keys("k").build()
    s.check_job(None)
    w0, w1 = s.create_writer(ctx(0), []), s.create_writer(ctx(1), [])
    w0.write_batch([change(RowKind.INSERT, "a", 1), change(RowKind.INSERT, "b", 1)])
    w0.write_batch([change(RowKind.UPDATE_BEFORE, "a", 1), change(RowKind.UPDATE_AFTER, "a", 2)])
    w1.write_batch([change(RowKind.INSERT, "c", 1)])
    c = gathered(1, w0.prepare_commit(CheckpointId(1)), w1.prepare_commit(CheckpointId(1)))
    s.create_committer().commit(c)
    assert rows(tmp_path / "t") == [("a", 2), ("b", 1), ("c", 1)]
    w0.write_batch([change(RowKind.DELETE, "b", 1), change(RowKind.UPDATE_AFTER, "a", 3)])
    w1.write(change(RowKind.UPDATE_AFTER, "c", 9))
    c = gathered(2, w0.prepare_commit(CheckpointId(2)), w1.prepare_commit(CheckpointId(2)))
    committer = s.create_committer()
    committer.commit(c)
    committer.commit(c)  # replayed: the txn says it is in
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert rows(tmp_path / "t") == [("a", 3), ("c", 9)]
    assert table.version() == 2 and table.transaction_version("app") == 2
    assert not list((tmp_path / "t" / "_cairn_staging").rglob("*.parquet"))


def test_upsert_keys_must_be_columns() -> None:
    with pytest.raises(ValueError, match="upsert keys"):
        DeltaSink.for_row_data("/tmp/x", ROW).with_upsert_keys("nope")
