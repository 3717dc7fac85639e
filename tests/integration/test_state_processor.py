"""The state processor on real local Spark: read back exactly the state a job stopped with,
bootstrap 1M keys and continue them in a streaming job, modify one operator's state and
restore it, read a rescaled savepoint, the backfill example, and clear errors on bad input.

The first job runs a per-key sequence (``SequenceCheck``: state ``last`` and ``sum``) into
the exactly-once file sink; after its ``RECORDS`` records its source goes on polling without
emitting, so once every line is committed, every later checkpoint holds the final state.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.checkpoint.errors import UnverifiedCheckpointError
from cairn.checkpoint.metadata import CompletedCheckpoint
from cairn.checkpoint.storage import load_checkpoint
from cairn.common import Configuration, Types
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.checkpoint_config import ExternalizedCheckpointRetention
from cairn.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from cairn.state_processor import (
    ListLayout,
    SavepointReader,
    SavepointWriter,
    StateProcessorError,
    UnknownOperatorError,
    UnknownStateError,
    ValueTypeError,
)
from cairn.testing.sequence_jobs import SequenceCheck, read_visible_lines
from tests.integration.jobs import check_to_files, generated
from tests.integration.waits import committed_lines

pytestmark = pytest.mark.spark

KEYS, PER_KEY = 500, 20
RECORDS = KEYS * PER_KEY
LAST = ValueStateDescriptor("last", Types.LONG())
SUM = ValueStateDescriptor("sum", Types.LONG())
REPO = Path(__file__).resolve().parents[2]


class SequenceThenIdle:
    """``(key, seq)`` for the first ``records`` indices, ``None`` (filtered out) after."""

    def __init__(self, keys: int, records: int) -> None:
        self.keys, self.records = keys, records

    def generate_batch(self, indices: range) -> list[Any]:
        k = self.keys
        return [(f"k{i % k:05d}", i // k + 1) if i < self.records else None for i in indices]

    def __call__(self, index: int) -> Any:
        return self.generate_batch(range(index, index + 1))[0]


def _not_none(record: Any) -> bool:
    return record is not None


class RunningSum(SequenceCheck):
    """The example's running sum (``uid("keyed-sum")``): emits ``(key, total)``."""

    def open(self, runtime_context: Any) -> None:
        self.total = runtime_context.get_state(SUM)

    def process_element(self, value: Any, ctx: Any) -> Iterator[Any]:
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


@pytest.fixture(scope="module")
def stopped_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[CompletedCheckpoint, dict]:
    """Run the sequence job at parallelism 2 (max parallelism 128) until all its output is
    committed, cancel it; its newest retained checkpoint, and each key's last output line."""
    tmp = tmp_path_factory.mktemp("stopped-job")
    out, chk = str(tmp / "out"), str(tmp / "chk")
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    cp = env.get_checkpoint_config()
    cp.set_checkpoint_storage("file://" + chk)
    cp.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    source = generated(
        env, SequenceThenIdle(KEYS, RECORDS), None, "sequence", rate=20_000, uid="sequence-source"
    )
    check_to_files(source.filter(_not_none), SequenceCheck(), "sequence-check", out)
    client = env.execute_async("state-processor-source-job")
    committed_lines(out, RECORDS, timeout=120)
    client.cancel()
    client.get_job_execution_result(timeout=60)
    reported: dict[str, tuple[int, int]] = {}
    for line in read_visible_lines(out):
        key, seq, total = line.split(",")
        assert not key.startswith("!"), line
        if int(seq) > reported.get(key, (0, 0))[0]:
            reported[key] = (int(seq), int(total))
    assert len(reported) == KEYS
    return load_checkpoint(str(Path(chk) / client.get_job_id())), reported


def test_reads_back_exactly_what_the_job_reported(spark: Any, stopped_job: Any) -> None:
    checkpoint, reported = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    assert {"file-sink", "sequence-check", "sequence-source"} <= set(reader.uids)
    last = dict(reader.read_keyed_state("sequence-check", LAST).collect())
    total = dict(reader.read_keyed_state("sequence-check", SUM).collect())
    assert {k: (last[k], total[k]) for k in last} == reported
    assert reader.keyed_state_kinds("sequence-check") == {"last": "value", "sum": "value"}
    # Untyped: pickles, which unpickle to the same values.
    from cairn.state_processor import unpickle

    raw = reader.read_keyed_state("sequence-check", ValueStateDescriptor("sum", None))
    assert {k: unpickle(v) for k, v in raw.collect()} == total


@pytest.mark.parametrize("num_partitions", [1, 3, 5, 128])
def test_rescaled_read_reads_every_key_group_once(
    spark: Any, stopped_job: Any, num_partitions: int
) -> None:
    checkpoint, _reported = stopped_job
    op = checkpoint.metadata.operators["sequence-check"]
    assert (op.parallelism, op.max_parallelism) == (2, 128)
    reader = SavepointReader.read(spark, checkpoint.directory)
    frame = reader.read_keyed_state("sequence-check", LAST, num_partitions=num_partitions)
    keys = [r.key for r in frame.collect()]
    assert frame.rdd.getNumPartitions() <= num_partitions
    assert len(keys) == len(set(keys)) == KEYS


def test_operator_state_of_the_source(spark: Any, stopped_job: Any) -> None:
    checkpoint, _ = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    handles = [
        h
        for s in checkpoint.metadata.operators["sequence-source"].subtasks.values()
        for h in s.operator
    ]
    name = next(iter(handles[0].states))
    splits = reader.read_list_state("sequence-source", ListStateDescriptor(name)).collect()
    assert len(splits) == sum(h.states[name][1] for h in handles) > 0
    with pytest.raises(UnknownStateError, match=f"'{name}': split state, not union"):
        reader.read_union_state("sequence-source", ListStateDescriptor(name))


def test_modify_one_operator_keeps_the_others_and_restores(
    spark: Any, stopped_job: Any, tmp_path: Path
) -> None:
    checkpoint, reported = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    sums = reader.read_keyed_state("sequence-check", SUM)
    tenfold = sums.selectExpr("key", "value * 10 as value")
    target = str(tmp_path / "modified")
    done = (
        SavepointWriter.from_existing_savepoint(spark, checkpoint.directory)
        .with_keyed_state("sequence-check", SUM, tenfold)
        .write(target)
    )
    old_ops, new_ops = checkpoint.metadata.operators, done.metadata.operators
    assert set(new_ops) == set(old_ops)
    for uid in ("sequence-source", "file-sink"):  # byte for byte, under new names
        old, new = old_ops[uid], new_ops[uid]
        assert (old.parallelism, old.max_parallelism) == (new.parallelism, new.max_parallelism)
        for i, sub in old.subtasks.items():
            for a, b in zip(sub.operator, new.subtasks[i].operator, strict=True):
                assert (a.states, a.section) == (b.states, b.section)
                assert (
                    Path(checkpoint.directory, a.path).read_bytes()
                    == Path(target, b.path).read_bytes()
                )
    # The metadata records the written descriptor's schema, and keeps the job's for "last".
    from cairn.checkpoint.handles import KeyedStateSchema

    schemas = [s.keyed_schema for s in new_ops["sequence-check"].subtasks.values() if s.keyed]
    assert schemas and all(
        sc
        == {"last": KeyedStateSchema("value", (None,)), "sum": KeyedStateSchema("value", ("Long",))}
        for sc in schemas
    )
    modified = SavepointReader.read(spark, target)
    assert dict(modified.read_keyed_state("sequence-check", LAST).collect()) == {
        k: seq for k, (seq, _t) in reported.items()
    }
    # A job restores it: the check continues every key's sequence from the modified sums.
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    conf.set_string("execution.savepoint.path", target)
    conf.set_string("execution.savepoint.ignore-unclaimed-state", "true")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(3)
    feed = [(k, seq + 1) for k, (seq, _t) in sorted(reported.items())]
    lines = (
        env.from_collection(feed)
        .key_by(lambda r: r[0])
        .process(SequenceCheck())
        .uid("sequence-check")
        .execute_and_collect("restore-modified", limit=len(feed))
    )
    expected = {f"{k},{seq + 1},{10 * t + seq + 1}" for k, (seq, t) in reported.items()}
    assert sorted(lines) == sorted(expected)


def test_bootstrap_a_million_keys_and_continue_them(spark: Any, tmp_path: Path) -> None:
    n = 1_000_000
    frame = spark.range(n).selectExpr("concat('k', id) as key", "id * 2 as value")
    target = str(tmp_path / "bootstrap")
    done = (
        SavepointWriter.new_savepoint(spark, max_parallelism=128)
        .with_keyed_state("keyed-sum", SUM, frame, parallelism=4)
        .write(target)
    )
    op = done.metadata.operators["keyed-sum"]
    assert (op.parallelism, op.max_parallelism, len(op.subtasks)) == (4, 128, 4)
    kgs = sorted(kg for s in op.subtasks.values() for h in s.keyed for kg in h.sections)
    assert kgs == list(range(128))
    assert SavepointReader.read(spark, target).read_keyed_state("keyed-sum", SUM).count() == n
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    conf.set_string("execution.savepoint.path", target)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(3)
    sample = [*range(0, n, 997), n - 1]
    feed = [(f"k{i}", 5) for i in sample] + [(f"k{i}", 1) for i in sample] + [("new", 7)]
    totals: dict[str, list[int]] = {}
    for key, total in (
        env.from_collection(feed)
        .key_by(lambda r: r[0])
        .process(RunningSum())
        .uid("keyed-sum")
        .execute_and_collect("continue-bootstrap", limit=len(feed))
    ):
        totals.setdefault(key, []).append(total)
    assert totals.pop("new") == [7]
    assert totals == {f"k{i}": [2 * i + 5, 2 * i + 6] for i in sample}


def test_the_backfill_example(tmp_path: Path, spark: Any) -> None:
    spec = importlib.util.spec_from_file_location(
        "backfill_keyed_sum", REPO / "examples" / "backfill_keyed_sum.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(tmp_path)]) == {
        "alice": [1000, 1005, 1015],
        "bob": [2100],
        "carol": [3],
    }


# ------------------------------------------------------------------------------ bad input


def test_unknown_uid_and_wrong_state_name(spark: Any, stopped_job: Any) -> None:
    checkpoint, _ = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    with pytest.raises(UnknownOperatorError, match=r"uid 'nope'.*'sequence-check'"):
        reader.read_keyed_state("nope", SUM)
    with pytest.raises(
        UnknownStateError,
        match=r"uid 'sequence-check' has no keyed state "
        r"'total'; it has 'last' \(value\), 'sum' \(value\)",
    ):
        reader.read_keyed_state("sequence-check", ValueStateDescriptor("total", Types.LONG()))


def test_descriptor_type_mismatch(spark: Any, stopped_job: Any, tmp_path: Path) -> None:
    checkpoint, _ = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    with pytest.raises(UnknownStateError, match=r"'sum' is value state.*describes map state"):
        reader.read_keyed_state("sequence-check", MapStateDescriptor("sum", None, None))
    with pytest.raises(
        Exception,
        match=r"uid 'sequence-check', state 'sum', key 'k0.*"
        r"does not fit Spark type bigint",
    ):
        reader.read_keyed_state("sequence-check", SUM, key_type=Types.LONG()).collect()
    strings = spark.createDataFrame([("a", "1")], "key string, value string")
    with pytest.raises(ValueTypeError, match=r"uid 'op', state 'sum': column 'value' is string"):
        SavepointWriter.new_savepoint(spark).with_keyed_state("op", SUM, strings)
    with pytest.raises(ValueTypeError, match=r"must hold pickled values"):
        SavepointWriter.new_savepoint(spark).with_keyed_state(
            "op", ValueStateDescriptor("sum", None), strings
        )
    twice = spark.createDataFrame([("a", 1), ("a", 2)], "key string, value long")
    with pytest.raises(Exception, match=r"uid 'op', state 'sum': key 'a' occurs in more than"):
        SavepointWriter.new_savepoint(spark).with_keyed_state("op", SUM, twice).write(
            str(tmp_path / "twice")
        )
    assert not (tmp_path / "twice" / "_metadata").exists()


def test_corrupt_state_file_names_uid_and_file(
    spark: Any, stopped_job: Any, tmp_path: Path
) -> None:
    checkpoint, _ = stopped_job
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint.directory, copy)
    sub = checkpoint.metadata.operators["sequence-check"].subtasks[0]
    # The last section: the driver's early check reads only the first one of each file, so
    # a Spark task is the one that finds this.
    path, r = sub.keyed[0].path, sub.keyed[0].sections[max(sub.keyed[0].sections)]
    with open(copy / path, "r+b") as f:
        f.seek(r.offset + r.length // 2)
        byte = f.read(1)
        f.seek(r.offset + r.length // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    reader = SavepointReader.read(spark, str(copy))
    with pytest.raises(Exception, match=rf"uid 'sequence-check'.*{path}.*CRC-32"):
        reader.read_keyed_state("sequence-check", LAST, num_partitions=2).collect()
    before = sorted(os.listdir(copy))
    with pytest.raises(FileExistsError, match="already contains a savepoint"):
        SavepointWriter.new_savepoint(spark).with_keyed_state(
            "op", SUM, spark.createDataFrame([("a", 1)], "key string, value long")
        ).write(str(copy))
    assert sorted(os.listdir(copy)) == before  # refused before any task wrote a file


def test_signed_savepoint(spark: Any, tmp_path: Path) -> None:
    key = "a-signing-key-of-some-length"
    frame = spark.createDataFrame([("a", 1), ("b", 2)], "key string, value long")
    target = str(tmp_path / "signed")
    done = (
        SavepointWriter.new_savepoint(spark, signing_key=key)
        .with_keyed_state("op", SUM, frame, parallelism=2)
        .write(target)
    )
    paths = [h.path for s in done.metadata.operators["op"].subtasks.values() for h in s.keyed]
    assert paths and all("-sha256-" in p for p in paths)
    reader = SavepointReader.read(spark, target, signing_key=key)
    assert sorted(reader.read_keyed_state("op", SUM).collect()) == [("a", 1), ("b", 2)]
    with pytest.raises(UnverifiedCheckpointError):
        SavepointReader.read(spark, target, signing_key="another-key-of-some-length")
    # A state file changed after signing is refused before it is decoded.
    with open(Path(target) / paths[0], "ab") as f:
        f.write(b"x")
    with pytest.raises(Exception, match=r"uid 'op'.*SHA-256"):
        reader.read_keyed_state("op", SUM).collect()
    # Modify with the key: the kept state is verified, the new savepoint signed.
    with pytest.raises(Exception, match="SHA-256"):
        SavepointWriter.from_existing_savepoint(spark, target, signing_key=key).with_keyed_state(
            "op", LAST, frame
        ).write(str(tmp_path / "from-tampered"))


def test_bad_list_layout_and_descriptor(spark: Any, stopped_job: Any) -> None:
    checkpoint, _ = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    with pytest.raises(StateProcessorError, match="not a keyed state descriptor"):
        reader.read_keyed_state("sequence-check", "sum")  # type: ignore[arg-type]
    frame = reader.read_keyed_state(
        "sequence-check", ValueStateDescriptor("last", Types.LONG()), list_layout=ListLayout.ARRAYS
    )
    assert frame.count() == KEYS  # the layout only matters for list state


@pytest.mark.s3
def test_on_s3_with_storage_options(spark: Any, seaweed: Any) -> None:
    from cairn.common.storage_options import s3_storage_options

    options = s3_storage_options({**seaweed.flink_config(), "s3.path.style.access": True})
    frame = spark.range(1000).selectExpr("concat('k', id) as key", "id as value")
    first, second = seaweed.url("state-processor", "sp-1"), seaweed.url("state-processor", "sp-2")
    SavepointWriter.new_savepoint(spark, storage_options=options).with_keyed_state(
        "op", SUM, frame, parallelism=2
    ).write(first)
    reader = SavepointReader.read(spark, first, storage_options=options)
    doubled = reader.read_keyed_state("op", SUM).selectExpr("key", "value * 2 as value")
    SavepointWriter.from_existing_savepoint(spark, first, storage_options=options).with_keyed_state(
        "op", LAST, doubled
    ).write(second)
    both = SavepointReader.read(spark, second, storage_options=options)
    assert dict(both.read_keyed_state("op", SUM).collect()) == {f"k{i}": i for i in range(1000)}
    assert dict(both.read_keyed_state("op", LAST).collect()) == {
        f"k{i}": 2 * i for i in range(1000)
    }


def test_operator_without_keyed_state(spark: Any, stopped_job: Any) -> None:
    checkpoint, _ = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    with pytest.raises(UnknownStateError, match=r"uid 'sequence-source' has no keyed state"):
        reader.read_keyed_state("sequence-source", SUM)


def test_the_benchmark_runs(tmp_path: Path) -> None:
    from bench.state_processor import run

    result = run(2000, 2, str(tmp_path))
    assert result["keys"] == 2000 and result["bootstrap_keys_per_s"] > 0
    assert result["read_keys_per_s"] > 0 and result["savepoint_bytes"] > 0


def test_list_and_map_state_round_trip(spark: Any, tmp_path: Path) -> None:
    hist = ListStateDescriptor("hist", Types.LONG())
    seen = MapStateDescriptor("seen", Types.STRING(), Types.DOUBLE())
    elements = spark.createDataFrame([("a", 1), ("a", 2), ("b", 3)], "key string, value long")
    arrays = spark.createDataFrame([("c", [4, 5])], "key string, value array<long>")
    entries = spark.createDataFrame(
        [("a", "x", 1.5), ("a", "y", 2.0), ("b", "x", 3.0)],
        "key string, user_key string, value double",
    )
    target = str(tmp_path / "lists")
    first = str(tmp_path / "first")
    SavepointWriter.new_savepoint(spark).with_keyed_state("op", hist, elements).write(first)
    (
        SavepointWriter.from_existing_savepoint(spark, first)
        .with_keyed_state("other", hist, arrays)
        .with_keyed_state("op", seen, entries)
        .write(target)
    )
    reader = SavepointReader.read(spark, target)
    exploded = reader.read_keyed_state("op", hist).collect()
    assert sorted(exploded) == [("a", 1), ("a", 2), ("b", 3)]
    as_arrays = reader.read_keyed_state("op", hist, list_layout=ListLayout.ARRAYS).collect()
    assert sorted((k, sorted(v)) for k, v in as_arrays) == [("a", [1, 2]), ("b", [3])]
    assert reader.read_keyed_state("other", hist).collect() == [("c", 4), ("c", 5)]
    assert sorted(reader.read_keyed_state("op", seen).collect()) == [
        ("a", "x", 1.5),
        ("a", "y", 2.0),
        ("b", "x", 3.0),
    ]
    assert reader.read_keyed_state("op", seen).columns == ["key", "user_key", "value"]


def test_a_given_schema_names_and_types_the_columns(spark: Any, stopped_job: Any) -> None:
    from pyspark.sql import types as T

    checkpoint, reported = stopped_job
    reader = SavepointReader.read(spark, checkpoint.directory)
    schema = T.StructType(
        [T.StructField("user", T.StringType()), T.StructField("total", T.IntegerType())]
    )
    frame = reader.read_keyed_state("sequence-check", SUM, schema=schema)
    assert frame.columns == ["user", "total"]
    assert dict(frame.collect()) == {k: t for k, (_s, t) in reported.items()}
    with pytest.raises(StateProcessorError, match=r"schema has 1 fields, the state has 2"):
        reader.read_keyed_state("sequence-check", SUM, schema=T.StructType(schema.fields[:1]))


def test_a_job_with_a_signing_key_restores_a_signed_bootstrap(spark: Any, tmp_path: Path) -> None:
    key = "a-signing-key-of-some-length"
    frame = spark.createDataFrame([("a", 10), ("b", 20)], "key string, value long")
    target = str(tmp_path / "signed")
    SavepointWriter.new_savepoint(spark, signing_key=key).with_keyed_state(
        "keyed-sum", SUM, frame
    ).write(target)
    unsigned = str(tmp_path / "unsigned")
    SavepointWriter.new_savepoint(spark).with_keyed_state("keyed-sum", SUM, frame).write(unsigned)

    def run(path: str) -> list[Any]:
        conf = Configuration()
        conf.set_string("cairn.executor", "inprocess")
        conf.set_string("cairn.checkpoint.signing-key", key)
        conf.set_string("execution.savepoint.path", path)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(2)
        return sorted(
            env.from_collection([("a", 1), ("b", 2)])
            .key_by(lambda r: r[0])
            .process(RunningSum())
            .uid("keyed-sum")
            .execute_and_collect("signed-restore", limit=2)
        )

    assert run(target) == [("a", 11), ("b", 22)]
    with pytest.raises(Exception, match="not signed"):
        run(unsigned)


def test_writing_over_the_base_is_refused(spark: Any, stopped_job: Any) -> None:
    checkpoint, _ = stopped_job
    writer = SavepointWriter.from_existing_savepoint(spark, checkpoint.directory)
    with pytest.raises(StateProcessorError, match="over its own base"):
        writer.remove_operator("file-sink").write("file://" + checkpoint.directory)
