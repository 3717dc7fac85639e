"""The state processor's pure parts: key-group slices, sections in the heap backend's format,
and the conversions between state values and Spark columns (no Spark session, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import types as T

from cairn.checkpoint.handles import KeyedStateHandle, StreamRange
from cairn.clock import ManualClock
from cairn.common.typeinfo import Types
from cairn.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from cairn.state.heap_backend import HeapKeyedStateBackend
from cairn.state.key_groups import KeyGroupRange, assign_to_key_group, key_group_range_for_subtask
from cairn.state_processor.columns import column_accepts, from_spark, spark_column, to_spark
from cairn.state_processor.errors import StateProcessorError, UnknownStateError, ValueTypeError
from cairn.state_processor.key_group_slices import plan_keyed_slices, route
from cairn.state_processor.sections import (
    SliceTables,
    StateSpec,
    decode_file,
    encode_slice,
    state_rows,
)


def _handles(max_parallelism: int, parallelism: int) -> list[KeyedStateHandle]:
    """One handle per old subtask, with a section for every key group it owned."""
    out = []
    for i in range(parallelism):
        kgs = key_group_range_for_subtask(max_parallelism, parallelism, i)
        sections = {kg: StreamRange(kg * 10, 10, kg) for kg in kgs}
        out.append(KeyedStateHandle(f"f{i}", kgs.start, kgs.end, sections, 0))
    return out


@pytest.mark.parametrize(
    ("max_parallelism", "written_at", "read_by"),
    [(128, 2, 3), (128, 2, 5), (128, 3, 2), (128, 1, 128), (256, 7, 4), (1, 1, 1)],
)
def test_every_key_group_is_in_exactly_one_slice(
    max_parallelism: int, written_at: int, read_by: int
) -> None:
    slices = plan_keyed_slices(_handles(max_parallelism, written_at), max_parallelism, read_by, "u")
    planned = [kg for s in slices for f in s.files for kg, _r in f.sections]
    assert sorted(planned) == list(range(max_parallelism))
    for s in slices:
        assert all(kg in s.key_groups for f in s.files for kg, _r in f.sections)


def test_a_key_group_in_two_files_is_refused() -> None:
    r = StreamRange(0, 1, 0)
    handles = [KeyedStateHandle("a", 0, 127, {5: r}, 1), KeyedStateHandle("b", 0, 127, {5: r}, 1)]
    with pytest.raises(StateProcessorError, match=r"uid 'op'.*key group 5.*'a' and 'b'"):
        plan_keyed_slices(handles, 128, 2, "op")


def test_slice_count_must_fit_max_parallelism() -> None:
    with pytest.raises(ValueError):
        plan_keyed_slices([], 4, 5, "op")


@pytest.mark.parametrize("key", ["user-1", 42, ("a", 1), 3.5])
def test_route_places_keys_as_the_engine_does(key: Any) -> None:
    kg, index = route(key, 128, 3)
    assert kg == assign_to_key_group(key, 128)
    assert kg in key_group_range_for_subtask(128, 3, index)


def _restore(data: bytes, ranges: dict[int, StreamRange]) -> HeapKeyedStateBackend:
    class Reader:
        def read_state_range(self, path: str, offset: int, length: int) -> bytes:
            return data[offset : offset + length]

    from cairn.checkpoint.handles import KeyedStateHandle as H

    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128, clock=ManualClock())
    backend.restore([H("mem", 0, 127, ranges, len(data))], Reader())
    return backend


def test_written_sections_restore_into_the_heap_backend() -> None:
    specs = [StateSpec("sum", "value"), StateSpec("seen", "map"), StateSpec("hist", "list")]
    tables = SliceTables(specs, "op")
    for key in ("a", "b"):
        kg = assign_to_key_group(key, 128)
        tables.add(0, kg, key, None, 10)
        tables.add(1, kg, key, "x", 1)
        tables.add(2, kg, key, None, [1, 2])
        tables.add(2, kg, key, None, [3])
    data, ranges = encode_slice(tables, {}, frozenset(s.name for s in specs))
    backend = _restore(data, ranges)
    total = backend.get_partitioned_state(ValueStateDescriptor("sum"))
    seen = backend.get_partitioned_state(MapStateDescriptor("seen"))
    hist = backend.get_partitioned_state(ListStateDescriptor("hist"))
    backend.set_current_key("b")
    assert (total.value(), dict(seen.items()), hist.get()) == (10, {"x": 1}, [1, 2, 3])


def test_rewriting_one_state_keeps_the_others_and_the_timers() -> None:
    kg = assign_to_key_group("a", 128)
    old_section = {
        "version": 1,
        "states": {"sum": ("value", False, {"a": 1}), "last": ("value", False, {"a": 7})},
        "timers": {"processing": [(1000, "a")]},
    }
    tables = SliceTables([StateSpec("sum", "value")], "op")
    tables.add(0, kg, "a", None, 10)
    data, ranges = encode_slice(tables, {kg: old_section}, frozenset({"sum"}))
    ((_kg, section),) = decode_file(data, ranges)
    assert section["states"]["sum"] == ("value", False, {"a": 10})
    assert section["states"]["last"] == ("value", False, {"a": 7})
    assert section["timers"] == {"processing": [(1000, "a")]}


def test_duplicate_keys_are_refused_with_uid_state_and_key() -> None:
    tables = SliceTables([StateSpec("sum", "value")], "keyed-sum")
    tables.add(0, 3, "a", None, 1)
    with pytest.raises(StateProcessorError, match=r"uid 'keyed-sum', state 'sum': key 'a'"):
        tables.add(0, 3, "a", None, 2)


def test_reading_a_state_as_another_kind_is_refused() -> None:
    sections = [(0, {"version": 1, "states": {"sum": ("value", False, {"a": 1})}, "timers": {}})]
    with pytest.raises(UnknownStateError, match=r"'sum' is value state.*map state"):
        list(state_rows(sections, "op", "sum", "map"))


def test_ttl_values_are_read_without_their_timestamps() -> None:
    sections = [
        (
            0,
            {
                "version": 1,
                "states": {"s": ("list", True, {"a": [(1, 99), (2, 99)]})},
                "timers": {},
            },
        )
    ]
    assert list(state_rows(sections, "op", "s", "list")) == [("a", 1), ("a", 2)]
    assert list(state_rows(sections, "op", "s", "list", exploded=False)) == [("a", [1, 2])]


def test_columns_follow_type_infos() -> None:
    row = Types.ROW_NAMED(["n", "s"], [Types.INT(), Types.STRING()])
    assert spark_column(row).data_type == T.StructType(
        [T.StructField("n", T.IntegerType()), T.StructField("s", T.StringType())]
    )
    assert spark_column(Types.MAP(Types.STRING(), Types.LIST(Types.DOUBLE()))).data_type == (
        T.MapType(T.StringType(), T.ArrayType(T.DoubleType()))
    )
    assert spark_column(Types.LOCAL_TIME()).pickled  # no Spark type: pickles
    assert spark_column(Types.LIST(Types.PICKLED_BYTE_ARRAY())).pickled


def test_values_round_trip_through_their_columns() -> None:
    col = spark_column(Types.TUPLE([Types.LONG(), Types.STRING()]))
    assert from_spark(to_spark((1, "a"), col, "value"), col) == (1, "a")
    pickled = spark_column(None)
    value = {"nested": [1, {2}]}
    assert from_spark(to_spark(value, pickled, "value"), pickled) == value


@pytest.mark.parametrize(
    ("value", "info"),
    [(2**40, Types.INT()), ("x", Types.LONG()), (True, Types.LONG()), (1.5, Types.STRING())],
)
def test_values_that_do_not_fit_are_refused(value: Any, info: Any) -> None:
    with pytest.raises(ValueTypeError, match="does not fit Spark type"):
        to_spark(value, spark_column(info), "value")


def test_column_acceptance() -> None:
    assert column_accepts(T.IntegerType(), T.LongType())  # range-checked per row
    assert not column_accepts(T.IntegerType(), T.StringType())
    assert column_accepts(T.ArrayType(T.DoubleType()), T.ArrayType(T.IntegerType()))


def test_storage_writes_state_files_and_publishes_metadata_once(tmp_path: Any) -> None:
    from cairn.checkpoint.errors import CorruptCheckpointError
    from cairn.checkpoint.metadata import CheckpointMetadata
    from cairn.checkpoint.storage import load_checkpoint, open_reader, open_writer, publish_metadata
    from cairn.ids import CheckpointId, JobId

    target = str(tmp_path / "sp")
    rel = open_writer(target, digests=True).write_state_file("keyed-kg0-1.state", b"state")
    assert "-sha256-" in rel
    assert open_reader(target, require_digests=True).read_state_file(rel) == b"state"
    md = CheckpointMetadata(JobId("j"), CheckpointId(1), 1, 2, 128, is_savepoint=True)
    assert publish_metadata(md, target).metadata == load_checkpoint(target).metadata == md
    with pytest.raises(FileExistsError, match="already contains"):
        publish_metadata(md, target)
    (tmp_path / "sp" / rel).write_bytes(b"changed")
    with pytest.raises(CorruptCheckpointError, match="SHA-256"):
        open_reader(target, require_digests=True).read_state_file(rel)


def test_state_of_the_rocksdb_backend_is_refused_with_the_operator_named() -> None:
    from cairn.checkpoint.handles import RocksDBKeyedStateHandle
    from cairn.state_processor.errors import StateProcessorError
    from cairn.state_processor.key_group_slices import heap_format_handles

    rocks = RocksDBKeyedStateHandle(0, 127, (), 0)
    with pytest.raises(StateProcessorError, match=r"'sums'.*RocksDB state backend"):
        heap_format_handles([rocks], "sums")
    assert heap_format_handles([], "sums") == []


def _db(start: int, end: int) -> Any:
    from cairn.checkpoint.handles import RocksDBKeyedStateHandle, RocksDBStateFile

    files = (RocksDBStateFile("MANIFEST-1", f"db-{start}/MANIFEST-1", 1, 0),)
    return RocksDBKeyedStateHandle(start, end, files, 1)


@pytest.mark.parametrize("num_slices", [None, 1, 2, 3, 7, 128])
def test_rocksdb_slices_read_every_key_group_once(num_slices: int | None) -> None:
    from cairn.state.rocksdb.rescale import overlap
    from cairn.state_processor.key_group_slices import plan_rocksdb_slices

    handles = [_db(86, 127), _db(0, 42), _db(43, 85)]  # written at parallelism 3
    slices = plan_rocksdb_slices(handles, 128, num_slices, "sums")
    read: list[int] = []
    for s in slices:
        for h in s.handles:  # what the task exports: its key groups of each database
            read.extend(
                overlap(s.key_groups, type(s.key_groups)(h.key_group_start, h.key_group_end))
            )
    assert sorted(read) == list(range(128))
    if num_slices is None:
        assert [len(s.handles) for s in slices] == [1, 1, 1]  # each downloaded once


def test_rocksdb_slices_refuse_overlapping_databases_naming_them() -> None:
    from cairn.state_processor.errors import StateProcessorError
    from cairn.state_processor.key_group_slices import plan_rocksdb_slices

    with pytest.raises(StateProcessorError, match=r"'sums'.*key groups 60..63.*db-60"):
        plan_rocksdb_slices([_db(0, 63), _db(60, 127)], 128, None, "sums")
    with pytest.raises(StateProcessorError, match="outside max parallelism 64"):
        plan_rocksdb_slices([_db(0, 127)], 64, None, "sums")


def test_an_operator_with_state_in_both_formats_is_refused() -> None:
    from cairn.checkpoint.handles import KeyedStateHandle
    from cairn.state_processor.errors import StateProcessorError
    from cairn.state_processor.key_group_slices import split_handles

    heap = KeyedStateHandle("a", 0, 63, {}, 0)
    assert split_handles([heap], "sums") == ([heap], [])
    with pytest.raises(StateProcessorError, match=r"'sums'.*partly in the heap format"):
        split_handles([heap, _db(64, 127)], "sums")
