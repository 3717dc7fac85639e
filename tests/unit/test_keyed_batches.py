"""Key groups carried on hash edges (``KeyGroupedBatch``): the writer sends each record's key
group with it, through debloated buffers, pickling and a switch to stamped batches; keyed
head operators use it instead of hashing the key again; only heads that say so get them."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from cairn.common import Configuration, TimestampAssigner, WatermarkStrategy
from cairn.datastream import StreamExecutionEnvironment
from cairn.datastream.state import ValueStateDescriptor
from cairn.datastream.window_operator import WindowOperatorFunction
from cairn.graph.job_graph import OperatorNode
from cairn.graph.transformations import OperatorKind, OperatorSpec, PartitionKind
from cairn.runtime.channels import InputChannel, LocalOutputChannel
from cairn.runtime.eventtime.stamped import StampedBatch, stamp
from cairn.runtime.keyed_batch import KeyGroupedBatch, with_key_groups
from cairn.runtime.operators import takes_key_groups
from cairn.runtime.record_writer import RecordWriter
from cairn.state import HeapKeyedStateBackend, KeyGroupRangeError, key_group_range_for_subtask
from cairn.state.key_groups import assign_to_key_group, subtask_for_key_group
from tests.unit._operator_harness import OperatorHarness


def _writer(
    n: int, batch_size: int = 4, carry: bool = True
) -> tuple[list[InputChannel], RecordWriter]:
    inputs = [InputChannel(i) for i in range(n)]
    outputs = [LocalOutputChannel(c, capacity=1000) for c in inputs]
    writer = RecordWriter(
        outputs,
        PartitionKind.HASH,
        key_selector=lambda r: r[0],
        max_parallelism=128,
        batch_size=batch_size,
        carry_key_groups=carry,
    )
    return inputs, writer


def _batches(channel: InputChannel) -> list[Any]:
    out = list(channel.queue)
    channel.queue.clear()
    return out


def _check_key_groups(batch: KeyGroupedBatch, channel: int, n: int) -> None:
    assert type(batch) is KeyGroupedBatch and len(batch.key_groups) == len(batch)
    for (key, _), kg in zip(batch, batch.key_groups, strict=True):
        assert kg == assign_to_key_group(key, 128)
        assert subtask_for_key_group(128, n, kg) == channel


def test_a_hash_writer_sends_every_record_with_the_key_group_that_chose_its_channel() -> None:
    inputs, writer = _writer(3, carry=False)  # a writer not told to: plain lists
    writer.emit([(f"k{i}", i) for i in range(30)])
    writer.flush_all()
    assert {type(b) for channel in inputs for b in _batches(channel)} == {list}
    inputs, writer = _writer(3)
    records = [(f"key{i % 37}", i) for i in range(500)]
    writer.emit(records[:250])
    inputs[0].local_sender.batch_size = 3  # type: ignore[union-attr]  # debloated
    writer.emit(records[250:])
    writer.flush_all()
    seen = []
    for index, channel in enumerate(inputs):
        batches = _batches(channel)
        assert batches, "every channel got records"
        for batch in batches:
            _check_key_groups(batch, index, 3)
            seen.extend(batch)
        if index == 0:
            assert 3 in {len(b) for b in batches}, "debloated buffers (of 3) keep key groups"
    assert sorted(seen, key=lambda r: r[1]) == records
    copy = pickle.loads(pickle.dumps(batches[0], protocol=5))
    assert type(copy) is KeyGroupedBatch and copy.key_groups == batches[0].key_groups


@pytest.mark.parametrize("carry", [True, False])
def test_a_stamped_batch_switches_the_writer_to_stamped_batches_losing_nothing(
    carry: bool,
) -> None:
    inputs, writer = _writer(2, batch_size=1000, carry=carry)
    keys = [f"key{i}" for i in range(20)]
    writer.emit([(k, 1) for k in keys])  # pending, plain
    writer.emit(stamp([(k, 2) for k in keys], [20] * len(keys)))
    writer.flush_all()
    inputs[0].local_sender.batch_size = 3  # type: ignore[union-attr]  # debloated
    writer.emit(stamp([(k, 3) for k in keys], [30] * len(keys)))
    writer.flush_all()
    got: dict[str, list[tuple[int, int | None]]] = {}
    for index, channel in enumerate(inputs):
        for batch in _batches(channel):
            assert type(batch) is StampedBatch
            key_groups = getattr(batch, "key_groups", None)
            if carry:  # the key groups stay with the records, also in debloated buffers
                assert key_groups is not None and len(key_groups) == len(batch)
                for (key, _), kg in zip(batch, key_groups, strict=True):
                    assert kg == assign_to_key_group(key, 128)
                    assert subtask_for_key_group(128, 2, kg) == index
            else:
                assert key_groups is None
            for (key, v), ts in zip(batch, batch.timestamps, strict=True):
                got.setdefault(key, []).append((v, ts))
    assert got == {k: [(1, None), (2, 20), (3, 30)] for k in keys}


class _Count:
    """Counts per key in keyed state: ``process_element`` (keyed process) and ``map``."""

    def open(self, runtime_context: Any) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", None))

    def _count(self, value: Any) -> Any:
        self.n.update((self.n.value() or 0) + 1)
        return value[0], self.n.value()

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield self._count(value)

    def map(self, value: Any) -> Any:
        return self._count(value)


@pytest.mark.parametrize(
    ("kind", "function"),
    [
        (OperatorKind.KEYED_PROCESS, _Count),
        (OperatorKind.REDUCE, lambda: lambda a, b: (a[0], a[1] + b[1])),
        (OperatorKind.MAP, _Count),
    ],
)
@pytest.mark.parametrize("stamped", [False, True], ids=["plain", "stamped"])
def test_keyed_operators_take_the_key_group_from_the_batch(
    kind: OperatorKind, function: Any, stamped: bool
) -> None:
    owned = key_group_range_for_subtask(128, 2, 0)
    keys = [k for k in (f"k{i}" for i in range(200)) if assign_to_key_group(k, 128) in owned]
    records = [(keys[i % 5], i) for i in range(20)]

    def batch(rs: list[Any], key_groups: list[int] | None) -> list[Any]:
        if stamped:
            b = stamp(rs, [r[1] for r in rs])
            if key_groups is not None:
                b.key_groups = key_groups
            return b
        return rs if key_groups is None else with_key_groups(rs, key_groups)

    plain, grouped = (
        OperatorHarness(function(), 2, 0, kind=kind),
        OperatorHarness(function(), 2, 0, kind=kind),
    )
    plain.op.process_batch(batch(records, None))
    grouped.op.process_batch(batch(records, [assign_to_key_group(k, 128) for k, _ in records]))
    assert grouped.records() == plain.records() != []
    foreign = next(kg for kg in range(128) if kg not in owned)
    with pytest.raises(KeyGroupRangeError, match=f"key group {foreign}"):
        # the batch's key group is used, not the key's hash: this one is not ours
        grouped.op.process_batch(batch([records[0]], [foreign]))


def _node(kind: OperatorKind, keyed: bool, function: Any = None) -> OperatorNode:
    spec = OperatorSpec(kind, function or (lambda r: r), (lambda r: r) if keyed else None)
    return OperatorNode("op", "op", 1, kind.value, spec, None, 1, 128, keyed)


def test_only_heads_that_use_key_groups_are_sent_them() -> None:
    window = WindowOperatorFunction(None)  # type: ignore[arg-type]  # keys whole batches
    takes = {
        (kind, keyed, f is not None): takes_key_groups(_node(kind, keyed, f))
        for kind, keyed, f in [
            (OperatorKind.KEYED_PROCESS, True, None),
            (OperatorKind.REDUCE, True, None),
            (OperatorKind.MAP, True, None),
            (OperatorKind.FILTER, True, None),
            (OperatorKind.KEYED_PROCESS, True, window),
            (OperatorKind.MAP, False, None),
            (OperatorKind.KEYED_CO_PROCESS, True, None),
            (OperatorKind.SINK_FUNCTION, False, None),
        ]
    }
    assert [k for k, v in takes.items() if v] == [
        (OperatorKind.KEYED_PROCESS, True, False),
        (OperatorKind.REDUCE, True, False),
        (OperatorKind.MAP, True, False),
        (OperatorKind.FILTER, True, False),
    ]


class _Second(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return int(value[1])


@pytest.mark.parametrize("event_time", [False, True], ids=["plain", "event-time"])
def test_a_job_s_keyed_operator_gets_the_key_groups_of_its_records(
    monkeypatch: pytest.MonkeyPatch, event_time: bool
) -> None:
    """Through the job builder and the task builder (in-process executor, two subtasks): every
    record reaches the running sum with its key group, with timestamps too."""
    passed: list[int | None] = []
    original = HeapKeyedStateBackend.set_current_key

    def observed(self: Any, key: Any, key_group: int | None = None) -> None:
        passed.append(key_group)
        original(self, key, key_group)

    monkeypatch.setattr(HeapKeyedStateBackend, "set_current_key", observed)
    conf = Configuration()
    conf.set_string("cairn.executor", "inprocess")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    words = [f"w{i % 50}" for i in range(2_000)]
    stream = env.from_collection([(w, 1) for w in words])
    if event_time:
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(_Second())
        stream = stream.assign_timestamps_and_watermarks(strategy)
    sums = (
        stream.key_by(lambda r: r[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    )
    with sums:
        final = {w: n for w, n in sums}
    assert final == {f"w{i}": 40 for i in range(50)}
    assert len(passed) == len(words) and None not in passed
