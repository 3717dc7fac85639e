"""The Kafka sink against a real broker, its writers and committer driven directly: the
exactly-once protocol across a crash between pre-commit and commit (records invisible until
committed, a zombie fenced, the aborted transaction sent again exactly once), a restore at
another parallelism (old ids settled, nothing left open), and the other guarantees' errors."""

from __future__ import annotations

import pickle
import time
import uuid
from typing import Any

import pytest

from cairn.common.serialization import SimpleStringSchema
from cairn.datastream.connectors.base import DeliveryGuarantee, SinkWriterContext
from cairn.datastream.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
from cairn.datastream.connectors.kafka.sink_output import KafkaSinkError

pytestmark = pytest.mark.timeout(180)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _sink(
    broker: Any,
    topic: str,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.EXACTLY_ONCE,
    prefix: str | None = None,
    **props: str,
) -> KafkaSink:
    builder = (
        KafkaSink.builder()
        .set_bootstrap_servers(broker.bootstrap_servers)
        .set_record_serializer(
            KafkaRecordSerializationSchema.builder()
            .set_topic(topic)
            .set_key_serialization_schema(_KeyOf())
            .set_value_serialization_schema(SimpleStringSchema())
            .build()
        )
        .set_delivery_guarantee(guarantee)
        .set_property("log_level", "0")
    )
    if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
        builder.set_transactional_id_prefix(prefix or _name("eo"))
        builder.set_property("transaction.timeout.ms", "60000")
    for k, v in props.items():
        builder.set_property(k, v)
    return builder.build()


class _KeyOf:
    """The key of ``"key:n"`` records, so each key's records share a partition."""

    def serialize(self, element: Any) -> bytes:
        return str(element).split(":")[0].encode()


def _ctx(subtask: int, parallelism: int, attempt: int, job: str = "job") -> SinkWriterContext:
    return SinkWriterContext(subtask, parallelism, attempt, job)


def _values(broker: Any, topic: str, expect: int = 0) -> list[str]:
    """What a read_committed consumer reads to the end of ``topic``, read again (up to 20 s)
    while it has fewer than ``expect`` records: a commit returns before the broker wrote its
    markers into the partitions, so a reader right after it may not see it yet."""
    deadline = time.monotonic() + 20
    while True:
        values = [r.value.decode() for r in broker.read_topic(topic, timeout_s=20)]
        if len(values) >= expect or time.monotonic() > deadline:
            return values
        time.sleep(0.1)


def test_crash_between_pre_commit_and_commit_commits_exactly_once(kafka_broker: Any) -> None:
    topic = _name("eo-out")
    kafka_broker.create_topic(topic, partitions=2)
    sink = _sink(kafka_broker, topic)
    committer = sink.create_committer()
    assert committer is not None

    w = sink.create_writer(_ctx(0, 1, attempt=0), [])
    w.write_batch([f"a:{i}" for i in range(5)])
    c1 = w.prepare_commit(1)
    assert _values(kafka_broker, topic) == []  # pre-committed: invisible
    committer.commit(c1)
    assert sorted(_values(kafka_broker, topic, 5)) == [f"a:{i}" for i in range(5)]

    w.write_batch([f"b:{i}" for i in range(4)])
    c2 = w.prepare_commit(2)
    state = w.snapshot_state(2)  # checkpoint 2 completes with this; the commit never runs
    w.write_batch(["lost:0", "lost:1"])  # after barrier 2: belongs to no checkpoint
    w.flush(False)
    # Crash: the old writer is left as it is (a zombie), its transactions open.

    # The runtime re-commits the restored committables (read back from the checkpoint)
    # before it creates the writers: a no-op, the writer restoring the state settles them.
    committer.commit(pickle.loads(pickle.dumps(c2)))
    restored = sink.create_writer(_ctx(0, 1, attempt=1), state)
    with pytest.raises(KafkaSinkError, match="could not be committed"):
        w.commit(c2[0])  # the zombie was fenced by the restored writer
    values = _values(kafka_broker, topic, 9)  # ends: nothing left open (Last Stable Offset)
    assert sorted(values) == sorted([f"a:{i}" for i in range(5)] + [f"b:{i}" for i in range(4)])

    restored.write_batch(["c:0"])
    committer.commit(restored.prepare_commit(3))
    again = sink.create_writer(_ctx(0, 1, attempt=2), state)  # restored twice: no redo
    values = _values(kafka_broker, topic, 10)
    assert values.count("b:0") == 1 and "c:0" in values and len(values) == 10
    for writer in (restored, again, w):
        writer.close()


def test_the_next_transaction_holds_its_records_until_the_previous_ones_arrived(
    kafka_broker: Any,
) -> None:
    """The barrier does not wait for the broker; the next transaction (another producer)
    sends nothing while the pre-committed one's records are on their way, so a key's
    records keep their order across transactions."""
    topic = _name("eo-order")
    kafka_broker.create_topic(topic, partitions=1)
    sink = _sink(kafka_broker, topic, **{"linger.ms": "1000"})  # keeps the first in flight
    committer = sink.create_committer()
    assert committer is not None
    w = sink.create_writer(_ctx(0, 1, attempt=0), [])
    w.write_batch([f"k:{i}" for i in range(100)])
    c1 = w.prepare_commit(1)
    first = w._slots[c1[0].slot].producer
    w.write_batch([f"k:{i}" for i in range(100, 200)])
    assert w._open is not None and w._open != c1[0].slot
    second = w._slots[w._open].producer
    assert len(first) > 0 and len(second) == 0  # held, not queued behind another producer
    committer.commit(c1)
    w.commit(c1[0])  # delivered and committed: the held records may go
    w.flush(False)
    assert len(second) > 0  # sent now (lingering in its producer's queue)
    committer.commit(w.prepare_commit(2))
    w.close()
    assert _values(kafka_broker, topic, 200) == [f"k:{i}" for i in range(200)]


def test_restore_at_another_parallelism_settles_old_ids_and_leaves_nothing_open(
    kafka_broker: Any,
) -> None:
    topic = _name("eo-rescale")
    kafka_broker.create_topic(topic, partitions=3)
    prefix = _name("rescale")
    sink = _sink(kafka_broker, topic, prefix=prefix)
    committer = sink.create_committer()
    assert committer is not None
    old = [sink.create_writer(_ctx(i, 2, attempt=0), []) for i in range(2)]
    for i, w in enumerate(old):
        w.write_batch([f"k{i}:1", f"k{i}:2"])
        committer.commit(w.prepare_commit(1))
    states = []
    for i, w in enumerate(old):
        w.write_batch([f"k{i}:3"])
        w.prepare_commit(2)
        states.extend(w.snapshot_state(2))
        w.write_batch([f"k{i}:lost"])  # open, not pre-committed: must be aborted
        w.flush(False)
    # Restore at parallelism 1: the single writer receives both old writers' states.
    new = sink.create_writer(_ctx(0, 1, attempt=1), states)
    new.write_batch(["k0:4"])
    committer.commit(new.prepare_commit(3))
    values = _values(kafka_broker, topic, 7)  # reaches the end: no old transaction lingers
    assert sorted(values) == ["k0:1", "k0:2", "k0:3", "k0:4", "k1:1", "k1:2", "k1:3"]
    by_key = [v for v in values if v.startswith("k0:")]
    assert by_key == ["k0:1", "k0:2", "k0:3", "k0:4"]  # one partition per key, in order
    # Back at parallelism 2 from the same checkpoint: the old ids are settled, not redone.
    again = [sink.create_writer(_ctx(i, 2, attempt=2), [states[i]]) for i in range(2)]
    assert sorted(_values(kafka_broker, topic, len(values))) == sorted(values)
    for w in [*old, new, *again]:
        w.close()


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.NONE])
def test_at_least_once_and_none_deliver(kafka_broker: Any, guarantee: DeliveryGuarantee) -> None:
    topic = _name("alo")
    kafka_broker.create_topic(topic, partitions=2)
    sink = _sink(kafka_broker, topic, guarantee)
    assert sink.create_committer() is None
    w = sink.create_writer(_ctx(0, 1, attempt=0), [])
    w.write_batch([f"x:{i}" for i in range(1000)])
    w.flush(False)  # a barrier
    if guarantee is DeliveryGuarantee.AT_LEAST_ONCE:  # delivered before the barrier passes
        assert len(kafka_broker.read_topic(topic, read_committed=False)) == 1000
    w.flush(True)
    assert sorted(_values(kafka_broker, topic, 1000)) == sorted(f"x:{i}" for i in range(1000))
    w.close()


def test_oversized_record_fails_with_the_limits_named(kafka_broker: Any) -> None:
    topic = _name("small")
    kafka_broker.create_topic(topic, config={"max.message.bytes": "2000"})
    w = _sink(kafka_broker, topic, DeliveryGuarantee.AT_LEAST_ONCE).create_writer(_ctx(0, 1, 0), [])
    w.write_batch(["big:" + "x" * 5000])
    with pytest.raises(KafkaSinkError, match=r"MSG_SIZE_TOO_LARGE.*max\.message\.bytes"):
        w.flush(False)
    w.close()
    eo = _sink(kafka_broker, topic, **{"message.max.bytes": "3000"})
    writer = eo.create_writer(_ctx(0, 1, 0), [])
    with pytest.raises(KafkaSinkError, match=r"5007 bytes exceeds message\.max\.bytes \(3000\)"):
        writer.write_batch(["big:" + "x" * 5000])
    writer.close()


def test_missing_topic_and_unreachable_broker_are_clear_errors(kafka_broker: Any) -> None:
    with pytest.raises(KafkaSinkError, match=r"topic 'nowhere-.*' does not exist"):
        _sink(kafka_broker, _name("nowhere"), DeliveryGuarantee.AT_LEAST_ONCE).create_writer(
            _ctx(0, 1, 0), []
        )
    from cairn.testing.spark_cluster import free_port

    class Closed:
        bootstrap_servers = f"127.0.0.1:{free_port()}"

    with pytest.raises(KafkaSinkError, match=r"no broker of '127\.0\.0\.1:.*' answered"):
        _sink(Closed(), "t", DeliveryGuarantee.NONE).create_writer(_ctx(0, 1, 0), [])


def test_broker_refuses_a_timeout_above_its_maximum(kafka_broker: Any) -> None:
    topic = _name("tmo")
    kafka_broker.create_topic(topic)
    sink = _sink(kafka_broker, topic, **{"transaction.timeout.ms": "3600000"})
    with pytest.raises(KafkaSinkError, match=r"transaction\.max\.timeout\.ms"):
        sink.create_writer(_ctx(0, 1, 0), [])


def test_broker_restart_mid_transaction_costs_at_most_a_restart(kafka_broker: Any) -> None:
    """A broker killed and restarted under an open transaction: the commit either goes
    through or fails within a bounded time (librdkafka may lose the group coordinator and
    block send_offsets_to_transaction past its timeout: the sink abandons the call); the
    writer restored from the checkpoint then writes the checkpoint's records once."""
    topic = _name("eo-restart")
    kafka_broker.create_topic(topic, partitions=2)
    sink = _sink(kafka_broker, topic)
    committer = sink.create_committer()
    assert committer is not None
    w = sink.create_writer(_ctx(0, 1, attempt=0), [])
    w.write_batch(["a:0", "a:1"])
    committer.commit(w.prepare_commit(1))
    w.write_batch(["b:0"])
    c2 = w.prepare_commit(2)
    state2 = w.snapshot_state(2)
    committer.commit(c2)
    w.commit(c2[0])  # waits: the broker dies under the open transaction only
    w.write_batch(["c:0"])
    kafka_broker.kill()
    kafka_broker.restart()
    w.write_batch(["d:0"])
    started = time.monotonic()
    try:
        c3 = w.prepare_commit(3)  # the flush at the barrier may fail: checkpoint 3 fails
    except KafkaSinkError as exc:
        assert "Kafka sink" in str(exc)
        # The job restarts from checkpoint 2 and the source replays c:0 and d:0.
        restored = sink.create_writer(_ctx(0, 1, attempt=1), state2)
        restored.write_batch(["c:0", "d:0"])
        committer.commit(restored.prepare_commit(4))
        restored.close()  # waits for the commit
    else:
        state3 = w.snapshot_state(3)
        committer.commit(c3)  # checkpoint 3 completed
        try:
            w.commit(c3[0])  # waits for the commit thread's outcome
        except KafkaSinkError as exc:
            assert "did not return" in str(exc) or "Kafka sink" in str(exc)
            # The job restarts from checkpoint 3: its writer state sends c:0 and d:0 again.
            restored = sink.create_writer(_ctx(0, 1, attempt=1), state3)
            restored.close()
    assert time.monotonic() - started < 100, "the commit hung"
    assert sorted(_values(kafka_broker, topic, 5)) == ["a:0", "a:1", "b:0", "c:0", "d:0"]
    w.close()
