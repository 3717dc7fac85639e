"""IcebergSource on pyiceberg's SQL catalog (SQLite, local files): a bounded job reads a
snapshot; a streaming reader reads each new append snapshot once, resumes from its state
mid-file with nothing lost or repeated, skips a compaction and refuses an overwrite by
name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyiceberg")

import pyarrow as pa

from cairn.api.connectors import SourceReaderContext
from cairn.common import WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.connectors.iceberg_source import IcebergSource, IcebergSplit

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _catalog(tmp_path: Path) -> dict[str, str]:
    return {"type": "sql", "uri": f"sqlite:///{tmp_path}/catalog.db", "warehouse": str(tmp_path)}


def _table(catalog: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog

    cat = load_catalog("cairn", **catalog)
    cat.create_namespace_if_not_exists("db")
    return cat.create_table("db.t", schema=SCHEMA)


def _append(table: Any, ids: range) -> int:
    table.append(pa.table({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA))
    return int(table.current_snapshot().snapshot_id)


def _reader(source: IcebergSource, splits: list[Any] | None = None) -> Any:
    context = SourceReaderContext(0, 1, 0, "job")  # type: ignore[arg-type]
    return source.create_reader(source.create_splits(1) if splits is None else splits, context)


def _drain(reader: Any, batch: int = 7) -> list[int]:
    """Poll until the reader has nothing more (``[]`` twice) or ends."""
    got: list[int] = []
    empty = 0
    while empty < 2:
        records = reader.poll_batch(batch)
        if records is None:
            break
        empty = empty + 1 if not records else 0
        got += [r.id for r in records]
    return got


def test_a_bounded_job_reads_the_current_or_a_given_snapshot(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    table = _table(catalog)
    first = _append(table, range(0, 50))
    _append(table, range(50, 80))
    env = StreamExecutionEnvironment({"cairn.executor": "inprocess"})
    env.set_parallelism(2)
    source = IcebergSource.for_row_data("db.t", catalog).build()
    with env.from_source(
        source, WatermarkStrategy.no_watermarks(), "ice"
    ).execute_and_collect() as rows:
        got = sorted((r.id, r.name) for r in rows)
    assert got == [(i, f"n{i}") for i in range(80)]
    old = IcebergSource.for_row_data("db.t", catalog).snapshot_id(first).build()
    assert sorted(_drain(_reader(old))) == list(range(50))


def test_streaming_reads_each_append_once_and_resumes_from_its_state(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    table = _table(catalog)
    _append(table, range(0, 10))
    source = (
        IcebergSource.for_row_data("db.t", catalog).streaming(True).monitor_interval_ms(1).build()
    )
    reader = _reader(source)
    assert sorted(_drain(reader)) == list(range(10))  # the table scan
    second = _append(table, range(10, 30))
    _append(table, range(30, 45))
    got = [r.id for r in reader.poll_batch(5)]
    (state,) = reader.snapshot_state(1)
    assert state.snapshot_id == second and state.row_offset == 5 and not state.done
    # A restored reader goes on at the row after the last one returned.
    restored = _reader(source, [state])
    got += _drain(restored)
    assert sorted(got) == list(range(10, 45)) and len(got) == 35
    (state,) = restored.snapshot_state(2)
    assert state.done and state.snapshot_id == int(table.refresh().current_snapshot().snapshot_id)
    assert _drain(_reader(source, [state])) == []  # nothing new after the last read snapshot


def test_start_snapshot_id_reads_that_snapshots_rows_and_later(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    table = _table(catalog)
    _append(table, range(0, 5))
    start = _append(table, range(5, 9))
    _append(table, range(9, 12))
    source = IcebergSource.for_row_data("db.t", catalog).streaming(True).start_snapshot_id(start)
    assert sorted(_drain(_reader(source.build()))) == list(range(5, 12))
    with pytest.raises(ValueError, match="streaming"):
        IcebergSource.for_row_data("db.t", catalog).start_snapshot_id(start).build()


def test_an_empty_table_is_read_from_its_first_snapshot(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    table = _table(catalog)
    bounded = IcebergSource.for_row_data("db.t", catalog).build()
    assert _reader(bounded).poll_batch(10) in ([], None)
    streaming = IcebergSource.for_row_data("db.t", catalog).streaming(True)
    reader = _reader(streaming.monitor_interval_ms(1).build())
    assert _drain(reader) == []
    _append(table, range(3))
    assert sorted(_drain(reader)) == [0, 1, 2]


def test_an_overwrite_snapshot_fails_the_source_naming_it(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    table = _table(catalog)
    _append(table, range(4))
    source = (
        IcebergSource.for_row_data("db.t", catalog).streaming(True).monitor_interval_ms(1).build()
    )
    reader = _reader(source)
    assert sorted(_drain(reader)) == [0, 1, 2, 3]
    table.overwrite(pa.table({"id": [7], "name": ["x"]}, schema=SCHEMA))
    table.refresh()
    ids = [s.snapshot_id for s in table.snapshots()]
    with pytest.raises(ValueError) as e:
        _drain(reader)
    message = str(e.value)
    assert "'delete'" in message or "'overwrite'" in message
    assert "db.t" in message and any(str(i) in message for i in ids[1:])
    assert "\n" not in message


def test_state_is_the_split() -> None:
    assert IcebergSplit(3, False, True).done
