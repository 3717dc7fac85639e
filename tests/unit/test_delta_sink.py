"""DeltaSink: one Delta version per checkpoint for every subtask's files, a replayed commit
is a no-op (the ``txn`` action), failed checkpoints ride along, aborted attempts are never
committed and are cleaned, mismatched tables refused. Writers and committers driven by hand
as the sink operator drives them (the engine's side is in the integration tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.common import Row, Types
from cairn.common.exceptions import ConfigurationError
from cairn.datastream.connectors.base import SinkWriterContext
from cairn.datastream.connectors.delta import DeltaSink, table_file_paths
from cairn.datastream.connectors.delta_protocol import (
    manifests_to_commit,
    needs_commit,
    orphan_data_files,
)
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


def rows(path: Path) -> list[tuple[str, int]]:
    t = deltalake.DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(t.column("k").to_pylist(), t.column("n").to_pylist(), strict=True))


def test_one_version_per_checkpoint_holds_every_subtasks_files(tmp_path: Path) -> None:
    s = sink(tmp_path / "t")
    w0, w1 = s.create_writer(ctx(0), []), s.create_writer(ctx(1), [])
    w0.write_batch([Row(k="a", n=1), Row(k="b", n=2)])
    w1.write(Row(k="c", n=3))
    c0, c1 = w0.prepare_commit(CheckpointId(1)), w1.prepare_commit(CheckpointId(1))
    s.create_committer().commit(c1)  # subtask 1's committer: its files wait in the manifest
    assert rows(tmp_path / "t") == []
    s.create_committer().commit(c0)
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert rows(tmp_path / "t") == [("a", 1), ("b", 2), ("c", 3)]
    assert table.version() == 1 and table.transaction_version("app") == 1
    # A replay of the same committables (after a restore) adds no version and no row.
    s.create_committer().commit(c0 + c1)
    assert deltalake.DeltaTable(str(tmp_path / "t")).version() == 1
    assert rows(tmp_path / "t") == [("a", 1), ("b", 2), ("c", 3)]


def test_a_failed_checkpoint_is_committed_with_the_next_and_other_attempts_never(
    tmp_path: Path,
) -> None:
    s = sink(tmp_path / "t")
    w0, w1 = s.create_writer(ctx(0), []), s.create_writer(ctx(1), [])
    w1.write(Row(k="x", n=1))
    w1.prepare_commit(CheckpointId(1))  # checkpoint 1 fails: subtask 0 never got there
    w0.write(Row(k="y", n=2))
    c0 = w0.prepare_commit(CheckpointId(2))
    w1.prepare_commit(CheckpointId(2))
    # An earlier attempt that staged checkpoint 2 and died: not part of this run's state.
    dead = s.create_writer(ctx(1, attempt=7), [])
    dead.write(Row(k="dead", n=9))
    dead.prepare_commit(CheckpointId(2))
    s.create_committer().commit(c0)
    assert rows(tmp_path / "t") == [("x", 1), ("y", 2)]
    assert deltalake.DeltaTable(str(tmp_path / "t")).version() == 1
    # The restarted attempt 8 cleans what attempt 7 left, keeps its own writer's files.
    live = s.create_writer(ctx(1, attempt=8), [])
    live.write(Row(k="live", n=5))
    live.prepare_commit(CheckpointId(3))
    s.create_committer().abort_leftovers(ctx(0, attempt=8))
    files = sorted(p.name for p in (tmp_path / "t").glob("*.parquet"))
    referenced = table_file_paths(deltalake.DeltaTable(str(tmp_path / "t")))
    assert [f for f in files if f not in referenced] == [f for f in files if "-a8-" in f] != []
    assert not any((tmp_path / "t" / "_cairn_staging" / "app").glob("job-a7/*"))


def test_end_of_input_commits_each_subtasks_files_itself(tmp_path: Path) -> None:
    s = sink(tmp_path / "t")
    w = s.create_writer(ctx(1), [])
    w.write(Row(k="tail", n=1))
    s.create_committer().commit(w.prepare_commit(END_OF_INPUT_CHECKPOINT))
    assert rows(tmp_path / "t") == [("tail", 1)]


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
    names = [f"c{c:020d}-s{s}.json" for c in (1, 2, 3) for s in (0, 1)]
    assert manifests_to_commit(names, 2) == names[:4]
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
    c0 = w0.prepare_commit(CheckpointId(1))
    w1.prepare_commit(CheckpointId(1))
    s.create_committer().commit(c0)
    assert rows(tmp_path / "t") == [("a", 2), ("b", 1), ("c", 1)]
    w0.write_batch([change(RowKind.DELETE, "b", 1), change(RowKind.UPDATE_AFTER, "a", 3)])
    w1.write(change(RowKind.UPDATE_AFTER, "c", 9))
    c0 = w0.prepare_commit(CheckpointId(2))
    w1.prepare_commit(CheckpointId(2))
    committer = s.create_committer()
    committer.commit(c0)
    committer.commit(c0)  # replayed: the txn says it is in
    table = deltalake.DeltaTable(str(tmp_path / "t"))
    assert rows(tmp_path / "t") == [("a", 3), ("c", 9)]
    assert table.version() == 2 and table.transaction_version("app") == 2
    assert not list((tmp_path / "t" / "_cairn_staging").rglob("*.parquet"))


def test_upsert_keys_must_be_columns() -> None:
    with pytest.raises(ValueError, match="upsert keys"):
        DeltaSink.for_row_data("/tmp/x", ROW).with_upsert_keys("nope")
