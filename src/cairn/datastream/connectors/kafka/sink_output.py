"""The Kafka sink's sending, shared by its writers, and the NONE / AT_LEAST_ONCE writer.

Invariant: a record is serialized once and queued on a librdkafka producer (waiting while
its queue is full); the first failed delivery is remembered and fails the next write or
flush, naming the servers, the topic and librdkafka's words; a flush either delivers
everything or fails after its deadline. AT_LEAST_ONCE flushes at every barrier; NONE only
at the end of input.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cairn.api.connectors import SinkWriter, SinkWriterContext
from cairn.datastream.connectors.kafka.sink_transactions import StoredRecord

if TYPE_CHECKING:
    from cairn.datastream.connectors.kafka.sink_config import KafkaSinkConfig

__all__ = ["DeliveringWriter", "KafkaSinkError", "producer_config"]

CONNECT_TIMEOUT_S = 15.0  # first contact with the cluster (metadata)
_METADATA_TTL_S = 30.0  # partitions of a topic, for a partitioner


class KafkaSinkError(RuntimeError):
    """The Kafka sink could not write or commit; the message names the servers, the topic
    or transaction, and librdkafka's own words."""


def words(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    name = getattr(err, "name", None)
    text = getattr(err, "str", None)
    if callable(name) and callable(text):
        return f"{text()} ({name()})"
    return str(exc) or type(exc).__name__


def producer_config(sink: KafkaSinkConfig, extra: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = dict(sink.producer_properties)
    config["bootstrap.servers"] = sink.bootstrap_servers
    config.update(extra)
    return config


class Output:
    """One producer's sends: serializes records, queues them (waiting while librdkafka's
    queue is full), remembers the first failed delivery, and flushes with a deadline."""

    def __init__(self, sink: KafkaSinkConfig, context: SinkWriterContext) -> None:
        self.sink = sink
        self.error: str | None = None
        self._partitions: dict[str, tuple[float, list[int]]] = {}
        self._metadata_source: Any = None
        sink.serializer.open(context.subtask_index, context.parallelism)
        self.max_bytes = int(sink.producer_properties.get("message.max.bytes", 1_000_000))

    def on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None and self.error is None:
            self.error = (
                f"delivery to topic {msg.topic()!r} partition {msg.partition()} failed: "
                f"{err.str()} ({err.name()})"
            )
            if err.name() == "MSG_SIZE_TOO_LARGE":
                self.error += (
                    f" - a message of {len(msg.value() or b'') + len(msg.key() or b'')} bytes "
                    "exceeds the broker's or topic's limit (message.max.bytes / "
                    "max.message.bytes)"
                )

    def check(self) -> None:
        if self.error is not None:
            raise KafkaSinkError(f"Kafka sink ({self.sink.bootstrap_servers}): {self.error}")

    def partitions_of(self, topic: str) -> list[int]:
        now = time.monotonic()
        cached = self._partitions.get(topic)
        if cached is not None and now - cached[0] < _METADATA_TTL_S:
            return cached[1]
        meta = self._metadata_source.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
        info = meta.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            raise KafkaSinkError(
                f"Kafka sink ({self.sink.bootstrap_servers}): topic {topic!r} does not exist"
                + (f" ({info.error})" if info is not None and info.error is not None else "")
            )
        partitions = sorted(info.partitions)
        self._partitions[topic] = (now, partitions)
        return partitions

    def send(self, producer: Any, records: Sequence[Any], keep: list[StoredRecord] | None) -> None:
        serialize = self.sink.serializer.serialize
        partitions_of = self.partitions_of
        self._metadata_source = producer
        timestamps = getattr(records, "timestamps", None)
        produce = producer.produce
        slow = self.produce
        stamp = getattr(self.sink.serializer, "timestamp_selector", None)
        for n, element in enumerate(records):
            topic, key, value, partition = serialize(element, partitions_of)
            ts = timestamps[n] if timestamps is not None else None
            if stamp is not None:
                ts = _stamped(stamp(element), ts)
            if partition is None and ts is None:
                try:  # the common case without keyword arguments: ~0.3 us less per record
                    produce(topic, value, key)
                except Exception:  # queue full (retried), or an error to be named
                    slow(produce, producer, topic, partition, key, value, ts)
            else:
                slow(produce, producer, topic, partition, key, value, ts)
            if keep is not None:
                keep.append((topic, partition, key, value, ts))
        producer.poll(0)
        self.check()

    def hold(self, producer: Any, records: Sequence[Any], keep: list[StoredRecord]) -> None:
        """Serialize ``records`` into ``keep`` without sending them (``resend`` sends them
        later, in this order); ``producer`` answers metadata for a partitioner."""
        serialize = self.sink.serializer.serialize
        self._metadata_source = producer
        timestamps = getattr(records, "timestamps", None)
        stamp = getattr(self.sink.serializer, "timestamp_selector", None)
        for n, element in enumerate(records):
            topic, key, value, partition = serialize(element, self.partitions_of)
            ts = timestamps[n] if timestamps is not None else None
            if stamp is not None:
                ts = _stamped(stamp(element), ts)
            keep.append((topic, partition, key, value, ts))

    def resend(self, producer: Any, stored: Sequence[StoredRecord]) -> None:
        """Send records kept by ``hold`` (or a writer state), in order."""
        produce = producer.produce
        for topic, partition, key, value, ts in stored:
            if partition is None and ts is None:
                try:
                    produce(topic, value, key)
                    continue
                except Exception:  # queue full (retried), or an error to be named
                    pass
            self.produce(produce, producer, topic, partition, key, value, ts)
        producer.poll(0)
        self.check()

    def produce(
        self,
        produce: Callable[..., None],
        producer: Any,
        topic: str,
        partition: int | None,
        key: bytes | None,
        value: bytes | None,
        ts: int | None,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if ts is not None and ts >= 0:
            kwargs["timestamp"] = ts
        while True:
            try:
                produce(topic, value, key, **kwargs)
                return
            except BufferError:  # librdkafka's queue is full: let it drain
                producer.poll(0.05)
                self.check()
            except Exception as exc:
                raise self.failure(exc, topic, key, value) from exc

    def failure(self, exc: BaseException, topic: str, key: Any, value: Any) -> KafkaSinkError:
        size = len(value or b"") + len(key or b"")
        said = words(exc)
        if "MSG_SIZE_TOO_LARGE" in said:
            said += (
                f": the message of {size} bytes exceeds message.max.bytes ({self.max_bytes}); "
                "raise it with set_property('message.max.bytes', ...) and the topic's "
                "max.message.bytes, or make the record smaller"
            )
        return KafkaSinkError(
            f"Kafka sink ({self.sink.bootstrap_servers}): cannot send a message to topic "
            f"{topic!r}: {said}"
        )

    def flush(self, producer: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        left = producer.flush(min(1.0, timeout_s))
        while left > 0 and time.monotonic() < deadline:
            self.check()
            left = producer.flush(1.0)
        self.check()
        if left > 0:
            raise KafkaSinkError(
                f"Kafka sink ({self.sink.bootstrap_servers}): {left} messages not delivered "
                f"within {timeout_s:.0f} s ({what}); is the cluster reachable?"
            )


def check_reachable(sink: KafkaSinkConfig, producer: Any, topic: str | None) -> None:
    """Fail at the start, with the servers named, when no broker answers."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        meta = producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaSinkError(
            f"Kafka sink: no broker of {sink.bootstrap_servers!r} answered within "
            f"{CONNECT_TIMEOUT_S:.0f} s: {words(exc)}"
        ) from exc
    info = meta.topics.get(topic) if topic is not None else None
    error = info.error if info is not None else None
    if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
        raise KafkaSinkError(
            f"Kafka sink ({sink.bootstrap_servers}): topic {topic!r} does not exist "
            "(and the broker does not create topics on first use)"
        )


class DeliveringWriter(SinkWriter):
    """NONE and AT_LEAST_ONCE: records go out as they come; AT_LEAST_ONCE waits for every
    delivery report at each barrier."""

    def __init__(self, sink: KafkaSinkConfig, context: SinkWriterContext) -> None:
        from confluent_kafka import Producer

        from cairn.api.connectors import DeliveryGuarantee

        self._sink = sink
        self._out = Output(sink, context)
        self._flush_at_barrier = sink.guarantee is DeliveryGuarantee.AT_LEAST_ONCE
        self._producer: Any = Producer(
            producer_config(
                sink,
                {"on_delivery": self._out.on_delivery, "delivery.report.only.error": True},
            )
        )
        check_reachable(sink, self._producer, sink.serializer.topic)

    def write(self, record: Any) -> None:
        self._out.send(self._producer, (record,), None)

    def write_batch(self, records: Sequence[Any]) -> None:
        self._out.send(self._producer, records, None)

    def flush(self, end_of_input: bool) -> None:
        if self._flush_at_barrier or end_of_input:
            self._out.flush(self._producer, 300.0, "flush at a checkpoint")
        else:
            self._producer.poll(0)
            self._out.check()

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(0)


def watched(action: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """``action()`` on a helper thread, abandoned after ``timeout_s``.

    librdkafka's ``send_offsets_to_transaction`` may block past its own timeout when the
    group coordinator went away and came back (a broker restart; librdkafka issues 5456 and
    5511, open in 2.16): the task would hang with its checkpoint. Abandoned, the call keeps
    its producer alive on that thread; the job restarts with new producers, whose fence
    aborts the transaction.
    """
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, action()))
        except BaseException as exc:
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="kafka-sink-call", daemon=True).start()
    if not done.wait(timeout_s):
        raise KafkaSinkError(
            f"Kafka sink: {what} did not return within {timeout_s:.0f} s (librdkafka loses "
            "the group coordinator after a broker restart: issues 5456/5511); the job "
            "restarts with new producers"
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def call(action: Callable[[float], Any], timeout_s: float, what: str) -> Any:
    """A blocking transactional call, retried while librdkafka says it may be."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return action(max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            err = exc.args[0]
            if err.retriable() and time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise KafkaSinkError(f"Kafka sink: {what} failed: {words(exc)}") from exc


def _stamped(selected: int | None, record_timestamp: int | None) -> int | None:
    """A message's timestamp: the selector's, else the record's."""
    return record_timestamp if selected is None else int(selected)
